"""The scheduler and the federation scheduler match node selector terms and tolerations through
``kube.nodeaffinity`` and ``kube.taints`` (issue #33, "Kubernetes rules in one place").

Each app used to carry its own copy (``scheduling/selectors.py``; ``federation/scheduler/terms.py``
and ``taints.py``), and the copies disagreed on input Kubernetes cannot even decode: the behaviour
cases below are ones where the scheduler and the federation scheduler answered differently (or one
of them crashed), and each failed before.  The structural test fails if an app grows its own
operator table or toleration matcher again.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from federation.scheduler import ClusterInfo, SchedulingUnit, schedule, taint_text, tolerates, validate_unit
from scheduling.framework import filter_nodes
from scheduling.status import ArgsError

ROOT = Path(__file__).resolve().parents[2]
APPS = ("scheduling", "federation")
#: What only ``kube/`` may define: the rules themselves.
KUBE_ONLY_DEFINITIONS = {"Toleration", "NodeSelectorTerm", "NodeSelector", "PreferredTerm", "FieldRequirement",
                         "tolerates", "tolerates_taint", "taint_text", "taint_to_string", "parse_tolerations"}


def _app_sources() -> list[Path]:
    return [path for app in APPS for path in sorted((ROOT / app).rglob("*.py")) if "migrations" not in path.parts]


def _operator_table(node: ast.AST) -> bool:
    """A literal holding both ``"In"`` and ``"Exists"``: a selector operator table."""
    if isinstance(node, ast.Dict):
        items = node.keys
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = node.elts
    else:
        return False
    strings = {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
    return {"In", "Exists"} <= strings


def test_the_apps_define_no_operator_table_and_no_toleration_matching_of_their_own() -> None:
    found = []
    for path in _app_sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if _operator_table(node):
                found.append(f"{where}: an operator table (kube.nodeaffinity / kube.labels have them)")
            elif isinstance(node, ast.Constant) and node.value == "Equal":
                found.append(f"{where}: a toleration operator (kube.taints.EQUAL)")
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in KUBE_ONLY_DEFINITIONS:
                found.append(f"{where}: defines {node.name}")
    assert found == []


def test_the_apps_use_kube_functions() -> None:
    import federation.scheduler.filters as federation_filters
    import kube.nodeaffinity
    import kube.taints
    import scheduling.args
    import scheduling.plugins.nodeaffinity as scheduler_plugin

    assert importlib.util.find_spec("federation.scheduler.taints") is None
    assert tolerates is kube.taints.tolerates_taint and taint_text is kube.taints.taint_to_string
    assert federation_filters.find_untolerated_taint is scheduler_plugin.find_untolerated_taint is kube.taints.find_untolerated_taint
    assert scheduling.args.parse_node_selector is kube.nodeaffinity.parse_node_selector


# ------------------------------------------------------------------ where the copies disagreed

GT_8 = {"key": "cores", "operator": "Gt", "values": "8"}  # a string where a list belongs


def _node(labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": labels or {}}, "spec": {"taints": taints or []}}


def _pod(affinity: dict[str, Any] | None = None, tolerations: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": []}
    if affinity is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [affinity]}}}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def _scheduler_passes(plugin: str, pod: dict[str, Any], node: dict[str, Any]) -> bool:
    return filter_nodes(plugin, pod, [node], [])["n1"].ok


def _federation_reasons(cluster: ClusterInfo, **unit: Any) -> list[str]:
    result = schedule(SchedulingUnit("w", **unit), [cluster])
    return result.filtered.get(cluster.name, [])


@pytest.mark.parametrize("values", [[4], "8"], ids=["a number", "a string for the list"])
def test_values_kubernetes_cannot_decode_match_nothing_on_both_sides(values: Any) -> None:
    """The scheduler read ``[4]`` as ``["4"]`` and federation ``"8"`` as ``["8"]``; now neither matches."""
    expr = dict(GT_8, values=values)
    assert not _scheduler_passes("NodeAffinity", _pod({"matchExpressions": [expr]}), _node({"cores": "9"}))
    reasons = _federation_reasons(ClusterInfo("c1", labels={"cores": "9"}), cluster_affinity={"required": [{"matchExpressions": [expr]}]})
    assert len(reasons) == 1 and reasons[0].startswith("ClusterAffinity: invalid required cluster affinity: values")


def test_error_indices_point_into_the_values_as_written_on_both_sides() -> None:
    """Federation validated the values sorted, so ``["zz", "5"]`` blamed ``values[1]``."""
    expr = {"key": "cores", "operator": "Gt", "values": ["zz", "5"]}
    args = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}
    with pytest.raises(ArgsError) as info:
        filter_nodes("NodeAffinity", _pod(), [_node()], [], args)
    assert "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]" in info.value.fields
    errors = validate_unit(SchedulingUnit("w", cluster_affinity={"required": [{"matchExpressions": [expr]}]}))
    assert 'values[0]: Invalid value: "zz"' in errors["cluster_affinity.required[0]"]


@pytest.mark.parametrize("toleration", ["gpu", {"key": "gpu", "operator": "Equal", "value": 1, "effect": "NoSchedule"}],
                         ids=["not an object", "a number for the value"])
def test_a_toleration_kubernetes_cannot_decode_tolerates_nothing_on_both_sides(toleration: Any) -> None:
    """The scheduler read ``"gpu"`` as ``{}`` (tolerating every value-less taint) and ``value: 1`` as
    ``"1"``; federation crashed on the first and compared ``1`` with ``"1"``."""
    taint = {"key": "gpu", "value": "1", "effect": "NoSchedule"} if isinstance(toleration, dict) else {"key": "gpu", "effect": "NoSchedule"}
    assert not _scheduler_passes("TaintToleration", _pod(tolerations=[toleration]), _node(taints=[taint]))
    assert _federation_reasons(ClusterInfo("c1", taints=[taint]), tolerations=[toleration]) == [
        f"TaintToleration: untolerated taint {taint_text(taint)}"
    ]
    assert tolerates(toleration, taint) is False


def test_a_taint_without_an_effect_prints_as_upstream() -> None:
    assert taint_text({"key": "k"}) == "k"
    assert taint_text({"key": "k", "value": "v"}) == "k=v:"


def test_federation_looks_at_match_fields_only_once_the_labels_match() -> None:
    """KubeAdmiral's ``MatchClusterSelectorTerms`` skips a term whose labels do not match before
    parsing its fields, so a bad field there is no error; federation compiled both eagerly."""
    broken_fields = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c1"]}]}
    cluster = ClusterInfo("c1", labels={"tier": "silver"})
    assert _federation_reasons(cluster, cluster_affinity={"required": [broken_fields, by_name]}) == []
    gold = ClusterInfo("c1", labels={"tier": "gold"})
    assert _federation_reasons(gold, cluster_affinity={"required": [broken_fields, by_name]}) == [
        "ClusterAffinity: invalid required cluster affinity: unexpected number of value (2) for cluster field selector operator \"In\""
    ]


def test_federation_quotes_operators_as_go_does() -> None:
    errors = validate_unit(SchedulingUnit("w", cluster_affinity={"required": [
        {"matchExpressions": [{"key": "k", "operator": "Sometimes", "values": ["x"]}]}]}))
    assert errors["cluster_affinity.required[0]"] == '"Sometimes" is not a valid cluster selector operator'
