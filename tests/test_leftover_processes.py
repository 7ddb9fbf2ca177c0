"""The suite's own hygiene: processes an interrupted run left on the test database are found by
the database their ``DATABASE_URL`` names, and ended before the next run makes it again."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.faults.processes import end_processes, processes_using_database, wait_until


def sleeper(database_url: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)


def test_processes_are_found_by_the_database_they_use_and_ended(capfd):
    name = f"test_leftover_{os.getpid()}"
    ours = sleeper(f"postgres://postgres@127.0.0.1:5432/{name}")
    with_options = sleeper(f"postgres://postgres@127.0.0.1:5432/{name}?sslmode=disable")
    other = sleeper(f"postgres://postgres@127.0.0.1:5432/{name}_cli_m1")
    try:
        wait_until(lambda: len(processes_using_database(name)) == 2, timeout=10, what="the sleepers to start")
        assert sorted(processes_using_database(name)) == sorted([ours.pid, with_options.pid])
        end_processes(processes_using_database(name), why="a test")
        assert ours.wait(10) == -9 and with_options.wait(10) == -9
        assert f"killed process {ours.pid}" in capfd.readouterr().err
        time.sleep(0.2)
        assert other.poll() is None, "a process of another database is left alone"
        assert processes_using_database(name) == []
    finally:
        for proc in (ours, with_options, other):
            proc.kill()
            proc.wait()
