"""The README's production commands are the ones the fault suite runs (``tests/faults``): a
fault test that starts Meridian differently from the README proves something else."""

from __future__ import annotations

from pathlib import Path

from tests.faults.processes import BEAT_COMMAND, MIGRATE_COMMAND, WEB_COMMAND, WORKER_COMMAND

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def production_section() -> str:
    start = README.index("### Production")
    return README[start : README.index("\n### ", start + 1)]


def test_the_fault_suite_runs_the_readme_production_commands():
    section = production_section()
    for command in (WEB_COMMAND, WORKER_COMMAND, BEAT_COMMAND, MIGRATE_COMMAND):
        assert f"`{' '.join(command)}`" in section, command
