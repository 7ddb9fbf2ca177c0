"""An idle Meridian writes nothing but samples (#32, goal 8).

Starts the one-command product (``manage.py meridian_run``: embedded SQLite and Redis, the demo
fleet, web, worker and beat, as ``make run`` does) in a temporary directory, lets the start-up
work settle, then leaves it alone and counts what it writes. Prints, per table that changed,
the rows it gained or lost in the idle window and that rate over a day, and the database's used
pages before and after; the goal beside them: no table but the samples' grows (the simulated
fleet's own churn — pods coming and going, nodes' usage — changes rows in place or replaces
them; it does not pile them up), no Job row for housekeeping that did nothing, no audit entry
nobody made.

    python bench/bench_idle.py [--settle 300] [--seconds 600]
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from http_load import free_port  # noqa: E402
#: Tables that are samples by design: kept and pruned by their own retention (``docs/``).
SAMPLE_TABLES = ("federation_waterlevelsample", "federation_waterlevelrollup", "quotas_cashsample")
#: Tables whose rows answer for work the (simulated) fleet's churn caused, deleted after a
#: retention: they grow for that long, then stay level (hours, the setting that says so).
RETAINED = {"core_job": (1, "MERIDIAN_SYSTEM_JOB_RETENTION_HOURS: the system's own runs"),
            "fleet_pod": (24, "MERIDIAN_FINISHED_POD_RETENTION_HOURS: pods gone from their cluster")}
#: Tables with a row per object of the (simulated) fleet — a node, its config, its CPUs, a
#: pod's CPU allocation: they follow the fleet's size, which the simulator changes now and then.
MIRRORS = ("fleet_node", "nodeconfig_nodeconfig", "scheduling_nodecpu", "scheduling_cpuallocation", "fleet_workload")


#: The admin ``meridian_run`` creates for a benchmark.
USERNAME, PASSWORD = "bench", "bench-idle-password"


def start(var_dir: Path, port: int, *options: str) -> subprocess.Popen:
    """``manage.py meridian_run`` (as ``make run``) in ``var_dir``, embedded database and Redis,
    in a session of its own (``stop`` ends every process it started)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "MERIDIAN_ENV")}
    env |= {"MERIDIAN_VAR_DIR": str(var_dir), "MERIDIAN_ADMIN_USERNAME": USERNAME, "MERIDIAN_ADMIN_PASSWORD": PASSWORD,
            "PYTHONUNBUFFERED": "1"}
    log = open(var_dir / "run.log", "ab")  # noqa: SIM115 - the process' log for its life
    return subprocess.Popen([sys.executable, "manage.py", "meridian_run", "--port", str(port), *options], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"meridian_run exited with {proc.returncode} before it served")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit("meridian_run did not serve within 10 minutes")


def snapshot(database: Path) -> tuple[dict[str, int], int]:
    """Rows per table and the pages in use (page count less the free list), read-only beside
    the running processes (the database is in WAL mode)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        rows = {table: conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] for table in tables}
        used = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = used * conn.execute("PRAGMA page_size").fetchone()[0]
    return rows, size


def report(before: dict[str, int], after: dict[str, int], sizes: tuple[int, int], seconds: float) -> None:
    per_day = 86_400 / seconds
    changed = {t: after.get(t, 0) - before.get(t, 0) for t in sorted(set(before) | set(after))}
    changed = {t: d for t, d in changed.items() if d}
    print(f"idle for {seconds:.0f} s; tables whose row count changed (rows in the window, per day):")
    for table, delta in changed.items():
        kind = "sample" if table in SAMPLE_TABLES else "GROWS" if delta > 0 else "shrinks"
        if table in RETAINED and delta > 0:
            hours, setting = RETAINED[table]
            kind = f"level after {hours} h at ≤{delta * per_day * hours / 24:,.0f} more rows ({setting})"
        elif table in MIRRORS:
            kind = "follows the fleet"
        print(f"  {table:44} {delta:+8,d}  {delta * per_day:+12,.0f}/day  {kind}")
    if not changed:
        print("  none")
    growing = [t for t, d in changed.items() if d > 0 and t not in (*SAMPLE_TABLES, *RETAINED, *MIRRORS)]
    print(f"the fleet: nodes {before.get('fleet_node', 0):,} → {after.get('fleet_node', 0):,}, pods (rows, finished ones "
          f"included) {before.get('fleet_pod', 0):,} → {after.get('fleet_pod', 0):,}")
    print(f"database pages in use: {sizes[0] / 1e6:.2f} MB → {sizes[1] / 1e6:.2f} MB")
    print(f"tables that grow without bound, samples aside: {len(growing)} ({', '.join(growing) or 'none'}); goal 0")
    print(f"audit entries written while idle: {changed.get('core_objectchange', 0):+d} (goal +0)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--settle", type=float, default=300, help="seconds after start-up before counting")
    parser.add_argument("--seconds", type=float, default=600, help="the idle window")
    args = parser.parse_args()
    var_dir = Path(tempfile.mkdtemp(prefix="meridian-idle-"))
    port = free_port()
    proc = start(var_dir, port)
    try:
        wait_ready(port, proc)
        time.sleep(args.settle)
        database = var_dir / "meridian.sqlite3"
        before, size_before = snapshot(database)
        started = time.monotonic()
        time.sleep(args.seconds)
        after, size_after = snapshot(database)
        if proc.poll() is not None:
            raise SystemExit(f"meridian_run exited with {proc.returncode} during the idle window")
        report(before, after, (size_before, size_after), time.monotonic() - started)
    finally:
        stop(proc)
    print(f"(the run's log: {var_dir / 'run.log'})")


if __name__ == "__main__":
    main()
