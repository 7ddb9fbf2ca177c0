"""No module of the project's Python sources is over 1,200 lines: past that a module holds more
than one concern (``scheduling/cpu_services.py`` was 1,332 lines before it became
``scheduling/cpu/`` split by concern), and one concern is what a reader should find in a file.

Checked: every ``*.py`` under the repository but the virtualenv and other hidden folders,
``node_modules``, ``migrations/`` (generated, and never edited by hand) and ``tests/``. Test
modules are left out on purpose: several are tables of cases transcribed from upstream's own
test suites (``tests/kube/test_resources.py`` ports component-helpers' and the quota
evaluator's tables), and their length follows upstream's tables, not a design choice here;
splitting one would only scatter cases a reader compares against a single upstream file.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 1200
SKIPPED_FOLDERS = {"migrations", "node_modules", "__pycache__"}


def source_modules() -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        here = Path(folder)
        subfolders[:] = [name for name in subfolders if not name.startswith(".") and name not in SKIPPED_FOLDERS
                         and not (here == ROOT and name == "tests")]
        found += [here / name for name in files if name.endswith(".py")]
    return found


def test_no_module_is_over_1200_lines():
    modules = source_modules()
    assert any(path.relative_to(ROOT).as_posix() == "scheduling/cpu/store.py" for path in modules)  # the walk sees the apps
    too_long = {}
    for path in modules:
        with path.open(encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        if lines > LIMIT:
            too_long[path.relative_to(ROOT).as_posix()] = lines
    assert too_long == {}, f"over {LIMIT} lines (split them by concern): {too_long}"
