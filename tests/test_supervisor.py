"""The supervisor of ``make run`` and ``meridian_worker``: a process that exits is started again
with backoff and the restart shown, the others go on; a signal stops them all; a supervisor
killed with -9 leaves nothing behind. Real processes throughout."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core.supervisor import Program, Supervisor, describe_exit
from tests.faults.processes import wait_until

ROOT = Path(__file__).resolve().parent.parent


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not alive: its parent has not waited for it yet.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def signal_me_when(predicate, sig: int = signal.SIGTERM) -> None:
    """Supervisor.run installs signal handlers, which only the main thread may: it runs there,
    and a helper thread signals this process once ``predicate`` holds (or after 20 s anyway)."""

    def later():
        try:
            wait_until(predicate, timeout=20, interval=0.05)
        finally:
            os.kill(os.getpid(), sig)

    threading.Thread(target=later, daemon=True).start()


def test_a_process_that_exits_is_restarted_with_growing_backoff_and_the_others_go_on(tmp_path):
    counter = tmp_path / "starts"
    out = io.StringIO()
    flaky = Program("flaky", python(f"""
        import pathlib
        p = pathlib.Path({str(counter)!r}); p.write_text(str(int(p.read_text() or 0) + 1) if p.exists() else "1")
        raise SystemExit(3)
    """))
    steady = Program("steady", python("import time, os; print('steady', os.getpid(), flush=True); time.sleep(60)"))
    supervisor = Supervisor([flaky, steady], out=out, min_backoff=0.2, max_backoff=0.8, stable_after=30)

    # read as the child rewrites it: an empty read (between truncate and write) is not yet 4; it
    # raised in the helper thread, which then signalled at once and cut the run short (a CI flake)
    signal_me_when(lambda: counter.exists() and int(counter.read_text() or 0) >= 4)
    code = supervisor.run()

    text = out.getvalue()
    assert "flaky exited with code 3" in text
    delays = [line.split("restarting in ")[1].split(" s ")[0] for line in text.splitlines() if "flaky exited" in line]
    assert delays[:3] == ["0.2", "0.4", "0.8"], text
    assert text.count("steady started") == 1 and text.count("steady | steady ") == 1, \
        "the steady process was started once and never stopped by the other's exits"
    assert "steady stopped (signal SIGTERM)" in text
    assert code == 0


def test_backoff_doubles_up_to_its_cap_and_is_reset_after_a_stable_run():
    clock = [0.0]
    supervisor = Supervisor([Program("p", ["true"])], out=io.StringIO(), min_backoff=1, max_backoff=4, stable_after=10,
                            clock=lambda: clock[0])
    child = supervisor.children[0]

    class Exited:
        pid = 0
        stdout = None

        def poll(self):
            return 1

    delays = []
    for ran in (0.5, 0.5, 0.5, 0.5, 12, 0.5):
        child.proc, child.started = Exited(), clock[0]
        clock[0] += ran
        supervisor._tend()
        delays.append(child.due - clock[0])
        clock[0] = child.due
        child.proc = None
    assert delays == [1, 2, 4, 4, 1, 2]


def test_sigkill_of_the_supervisor_leaves_no_child_behind(tmp_path):
    pids = tmp_path / "pids"
    script = tmp_path / "supervise.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from core.supervisor import Program, Supervisor
        child = [sys.executable, "-c", "import os, time; open({str(pids)!r}, 'a').write(str(os.getpid()) + chr(10)); time.sleep(120)"]
        Supervisor([Program("a", child), Program("b", child)]).run()
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        children = wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2 and pids.read_text().split(),
                              timeout=10, interval=0.05, what="both children started")
        children = [int(pid) for pid in children]
        assert all(alive(pid) for pid in children)
        proc.kill()
        proc.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in children), timeout=10, interval=0.05, what="both children gone")
    finally:
        proc.kill()


def test_a_child_that_ignores_sigterm_is_killed_after_the_stop_timeout():
    out = io.StringIO()
    stubborn = Program("stubborn", python("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """))
    supervisor = Supervisor([stubborn], out=out, stop_timeout=0.5)

    signal_me_when(lambda: "| ready" in out.getvalue(), signal.SIGINT)
    started = time.monotonic()
    code = supervisor.run()
    assert time.monotonic() - started < 10
    assert "stubborn did not stop in time: killing it" in out.getvalue()
    assert "stubborn stopped (signal SIGKILL)" in out.getvalue()
    assert code == 1


@pytest.mark.parametrize(("code", "text"), [(0, "code 0"), (3, "code 3"), (-9, "signal SIGKILL"), (-15, "signal SIGTERM")])
def test_exit_codes_are_described_as_an_operator_reads_them(code, text):
    assert describe_exit(code) == text
