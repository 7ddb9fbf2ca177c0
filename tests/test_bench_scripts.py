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


def _bench(name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module(name)


def test_the_node_config_bench_matches_fewer_nodes_than_its_sample(monkeypatch, capsys):
    """It timed the unindexed matcher on 1,000 nodes whatever ``--nodes`` said (IndexError below)."""
    bench = _bench("bench_nodeconfig", monkeypatch)
    bench.bench_matching(300, 40)
    out = capsys.readouterr().out
    assert "full matching: 300 nodes × 40 targets" in out and "extrapolated from 300" in out


@pytest.mark.django_db(transaction=True)
def test_the_kube_sync_bench_watches_a_cluster_smaller_than_its_changes(monkeypatch, capsys):
    """It changed nodes n00000..n00404 whatever ``--nodes`` said (DoesNotExist below 405)."""
    bench = _bench("bench_kube_sync", monkeypatch)
    bench.watched(30, 0.1)
    assert "watched: label change visible after" in capsys.readouterr().out
