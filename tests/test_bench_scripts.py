"""The benchmarks in ``bench/`` are run by hand (``make bench``), not by the suite: at least
every name they import must exist, so a rename elsewhere cannot leave one broken unnoticed
(three imported ``bench_fleet.setup`` after it moved to ``django_setup.setup_django``)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))


def imported_names(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every ``from module import name`` in the script, nested ones too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.lineno, node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module != "__future__"
            for alias in node.names if alias.name != "*"]


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_name_a_benchmark_imports_exists(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    missing = []
    for line, module_name, name in imported_names(script):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing.append(f"line {line}: module {module_name} ({exc})")
            continue
        if not hasattr(module, name) and importlib.util.find_spec(f"{module_name}.{name}") is None:
            missing.append(f"line {line}: {module_name}.{name}")
    assert not missing, f"{script.name} imports what does not exist: {missing}"
