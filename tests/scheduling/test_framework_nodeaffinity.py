"""NodeAffinity and TaintToleration against upstream's test tables.

Ported from ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go`` (TestNodeAffinity,
TestNodeAffinityPriority) and ``.../tainttoleration/taint_toleration_test.go``
(TestTaintTolerationScore, TestTaintTolerationFilter).  PreFilter results are folded into the
per-node verdict as the contract says: a Skip passes the node, a rejection ("pod affinity terms
conflict") fails it with PreFilter's reason; a PreFilterResult narrowing to node names is not
exposed, the Filter verdict on each node is.

Skipped, with why: Test_isSchedulableAfterNodeChange / TestIsSchedulableAfterNodeChange /
Test_isSchedulableAfterPodChange (queueing hints have no counterpart here).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.framework import filter_nodes, score_nodes
from tests.scheduling.wrappers import make_node, make_pod, node_with_labels

UNRES = "UnschedulableAndUnresolvable"
POD = (UNRES, ["node(s) didn't match Pod's node affinity/selector"])
ENFORCED = (UNRES, ["node(s) didn't match scheduler-enforced node affinity"])
CONFLICT = (UNRES, ["pod affinity terms conflict"])


def req(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def exprs(*reqs: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(reqs)}


def fields(*reqs: dict[str, Any]) -> dict[str, Any]:
    return {"matchFields": list(reqs)}


def affinity_pod(affinity: dict[str, Any] | None = None, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    pod = make_pod()
    if node_selector is not None:
        pod.node_selector(node_selector)
    if affinity is not None:
        pod.affinity(affinity)
    return pod.obj()


NAME = "metadata.name"
ADDED_NODE2 = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [fields(req(NAME, "In", "node2"))]}}}

# (name, pod, node name, labels, args, want)
FILTER = [
    ("missing labels", affinity_pod(node_selector={"foo": "bar"}), "", None, None, POD),
    ("same labels", affinity_pod(node_selector={"foo": "bar"}), "", {"foo": "bar"}, None, None),
    ("node labels are superset", affinity_pod(node_selector={"foo": "bar"}), "", {"foo": "bar", "baz": "blah"}, None, None),
    ("node labels are subset", affinity_pod(node_selector={"foo": "bar", "baz": "blah"}), "", {"foo": "bar"}, None, POD),
    ("Pod with matchExpressions using In operator that matches the existing node", affinity_pod(required(exprs(req("foo", "In", "bar", "value2")))), "", {"foo": "bar"}, None, None),
    ("Pod with matchExpressions using Gt operator that matches the existing node", affinity_pod(required(exprs(req("kernel-version", "Gt", "0204")))), "", {"kernel-version": "0206"}, None, None),
    ("Pod with matchExpressions using NotIn operator that matches the existing node", affinity_pod(required(exprs(req("mem-type", "NotIn", "DDR", "DDR2")))), "", {"mem-type": "DDR3"}, None, None),
    ("Pod with matchExpressions using Exists operator that matches the existing node", affinity_pod(required(exprs(req("GPU", "Exists")))), "", {"GPU": "NVIDIA-GRID-K1"}, None, None),
    ("Pod with affinity that don't match node's labels won't schedule onto the node", affinity_pod(required(exprs(req("foo", "In", "value1", "value2")))), "", {"foo": "bar"}, None, POD),
    ("Pod with empty MatchExpressions is not a valid value will match no objects and won't schedule onto the node", affinity_pod(required(exprs())), "", {"foo": "bar"}, None, POD),
    ("Pod with no Affinity will schedule onto a node", affinity_pod(), "", {"foo": "bar"}, None, None),
    ("Pod with Affinity but nil NodeSelector will schedule onto a node", affinity_pod({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}}), "", {"foo": "bar"}, None, None),
    ("Pod with multiple matchExpressions ANDed that matches the existing node", affinity_pod(required(exprs(req("GPU", "Exists"), req("GPU", "NotIn", "AMD", "INTER")))), "", {"GPU": "NVIDIA-GRID-K1"}, None, None),
    ("Pod with multiple matchExpressions ANDed that doesn't match the existing node", affinity_pod(required(exprs(req("GPU", "Exists"), req("GPU", "In", "AMD", "INTER")))), "", {"GPU": "NVIDIA-GRID-K1"}, None, POD),
    ("Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels and will schedule onto the node",
     affinity_pod(required(exprs(req("foo", "In", "bar", "value2")), exprs(req("diffkey", "In", "wrong", "value2")))), "", {"foo": "bar"}, None, None),
    ("Pod with an Affinity and a PodSpec.NodeSelector(the old thing that we are deprecating) both are satisfied, will schedule onto the node",
     affinity_pod(required(exprs(req("foo", "Exists"))), {"foo": "bar"}), "", {"foo": "bar"}, None, None),
    ("Pod with an Affinity matches node's labels but the PodSpec.NodeSelector(the old thing that we are deprecating) is not satisfied, won't schedule onto the node",
     affinity_pod(required(exprs(req("foo", "Exists"))), {"foo": "bar"}), "", {"foo": "barrrrrr"}, None, POD),
    ("Pod with an invalid value in Affinity term won't be scheduled onto the node", affinity_pod(required(exprs(req("foo", "NotIn", "invalid value: ___@#$%^")))), "", {"foo": "bar"}, None, POD),
    ("Pod with matchFields using In operator that matches the existing node", affinity_pod(required(fields(req(NAME, "In", "node1")))), "node1", None, None, None),
    ("Pod with matchFields using In operator that does not match the existing node", affinity_pod(required(fields(req(NAME, "In", "node1")))), "node2", None, None, POD),
    ("Pod with two terms: matchFields does not match, but matchExpressions matches",
     affinity_pod(required(fields(req(NAME, "In", "node1"), req(NAME, "In", "node2")), exprs(req("foo", "In", "bar")))), "node2", {"foo": "bar"}, None, None),
    ("Pod with one term: matchFields does not match, but matchExpressions matches",
     affinity_pod(required({**fields(req(NAME, "In", "node1")), **exprs(req("foo", "In", "bar"))})), "node2", {"foo": "bar"}, None, POD),
    ("Pod with one term: both matchFields and matchExpressions match",
     affinity_pod(required({**fields(req(NAME, "In", "node1")), **exprs(req("foo", "In", "bar"))})), "node1", {"foo": "bar"}, None, None),
    ("Pod with two terms: both matchFields and matchExpressions do not match",
     affinity_pod(required(fields(req(NAME, "In", "node1")), exprs(req("foo", "In", "not-match-to-bar")))), "node2", {"foo": "bar"}, None, POD),
    ("Pod with two terms of node.Name affinity", affinity_pod(required(fields(req(NAME, "In", "node1")), fields(req(NAME, "In", "node2")))), "node2", None, None, None),
    ("Pod with two conflicting mach field requirements", affinity_pod(required(fields(req(NAME, "In", "node1"), req(NAME, "In", "node2")))), "node2", {"foo": "bar"}, None, CONFLICT),
    ("Matches added affinity and Pod's node affinity", affinity_pod(required(exprs(req("zone", "In", "foo")))), "node2", {"zone": "foo"}, ADDED_NODE2, None),
    ("Matches added affinity but not Pod's node affinity", affinity_pod(required(exprs(req("zone", "In", "bar")))), "node2", {"zone": "foo"}, ADDED_NODE2, POD),
    ("Doesn't match added affinity", affinity_pod(), "node2", {"zone": "foo"},
     {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [exprs(req("zone", "In", "bar"))]}}}, ENFORCED),
    ("Matches node selector correctly even if PreFilter is not called", affinity_pod(node_selector={"foo": "bar"}), "", {"foo": "bar", "baz": "blah"}, None, None),
    ("Matches node affinity correctly even if PreFilter is not called",
     affinity_pod(required(exprs(req("GPU", "Exists"), req("GPU", "NotIn", "AMD", "INTER")))), "", {"GPU": "NVIDIA-GRID-K1"}, None, None),
]


@pytest.mark.parametrize(("pod", "node_name", "labels", "args", "want"), [pytest.param(*case[1:], id=case[0]) for case in FILTER])
def test_node_affinity(pod: Any, node_name: str, labels: Any, args: Any, want: Any) -> None:
    node = node_with_labels(node_name, labels)
    result = filter_nodes("NodeAffinity", pod, [node], [], args)[node_name]
    if want is None:
        assert result.ok, result
    else:
        assert (result.ok, result.code, result.reasons) == (False, *want)


def preferred(*terms: tuple[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": exprs(*rs)} for w, rs in terms]}}


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = preferred((2, [req("foo", "In", "bar")]))
AFFINITY2 = preferred((2, [req("foo", "In", "bar")]), (4, [req("key", "In", "value")]), (5, [req("foo", "In", "bar"), req("key", "In", "value"), req("az", "In", "az1")]))
BROKEN = preferred((2, [req("invalid key", "In", "bar")]))
BROKEN_MESSAGE = (
    "[0].matchExpressions[0].key: Invalid value: \"invalid key\": name part must consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def labelled(*specs: tuple[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [node_with_labels(name, labels) for name, labels in specs]


PRIORITY = [
    ("all nodes are same priority as NodeAffinity is nil", affinity_pod(), labelled(("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)), None, [0, 0, 0]),
    ("Skip is returned in PreScore when NodeAffinity is nil", affinity_pod(), labelled(("node1", LABEL1)), None, [0]),
    ("PreScore returns error when an incoming Pod has a broken affinity", affinity_pod(BROKEN), labelled(("node1", LABEL1)), None, "error"),
    ("no node matches preferred scheduling requirements in NodeAffinity of pod so all nodes' priority is zero", affinity_pod(AFFINITY1),
     labelled(("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)), None, [0, 0, 0]),
    ("only node1 matches the preferred scheduling requirements of pod", affinity_pod(AFFINITY1), labelled(("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)), None, [100, 0, 0]),
    ("all nodes matches the preferred scheduling requirements of pod but with different priorities ", affinity_pod(AFFINITY2),
     labelled(("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)), None, [18, 100, 36]),
    ("added affinity", affinity_pod(), labelled(("node1", LABEL1), ("node2", LABEL2)), {"addedAffinity": AFFINITY1["nodeAffinity"]}, [100, 0]),
    ("added affinity and pod has default affinity", affinity_pod(AFFINITY1), labelled(("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL5)),
     {"addedAffinity": preferred((3, [req("key", "In", "value")]))["nodeAffinity"]}, [40, 60, 100]),
    ("calculate the priorities correctly even if PreScore is not called", affinity_pod(AFFINITY2),
     labelled(("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)), None, [18, 100, 36]),
]


@pytest.mark.parametrize(("pod", "nodes", "args", "want"), [pytest.param(*case[1:], id=case[0]) for case in PRIORITY])
def test_node_affinity_priority(pod: Any, nodes: Any, args: Any, want: Any) -> None:
    if want == "error":
        with pytest.raises(ValueError) as excinfo:
            score_nodes("NodeAffinity", pod, nodes, [], args)
        assert str(excinfo.value) == BROKEN_MESSAGE
        return
    result = score_nodes("NodeAffinity", pod, nodes, [], args)
    assert [result[n["metadata"]["name"]] for n in nodes] == want


# ------------------------------------------------------------------------ TaintToleration


def tainted(name: str, *taints: dict[str, str]) -> dict[str, Any]:
    return make_node().name(name).taints(list(taints)).obj()


def tolerating(*tolerations: dict[str, str]) -> dict[str, Any]:
    pod = make_pod().name("pod1")
    for t in tolerations:
        pod.toleration(**t)
    return pod.obj()


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str, value: str = "", effect: str = "", operator: str = "") -> dict[str, str]:
    return {"key": key} | {k: v for k, v in (("operator", operator), ("value", value), ("effect", effect)) if v}


PNS = "PreferNoSchedule"
SCORE = [
    ("node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
     tolerating(tol("foo", "bar", PNS, "Equal")), [tainted("nodeA", taint("foo", "bar", PNS)), tainted("nodeB", taint("foo", "blah", PNS))], [100, 0]),
    ("the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many tolerable taints a node has",
     tolerating(tol("cpu-type", "arm64", PNS, "Equal"), tol("disk-type", "ssd", PNS, "Equal")),
     [tainted("nodeA"), tainted("nodeB", taint("cpu-type", "arm64", PNS)), tainted("nodeC", taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS))], [100, 100, 100]),
    ("the more intolerable taints a node has, the lower score it gets.",
     tolerating(tol("foo", "bar", PNS, "Equal")),
     [tainted("nodeA"), tainted("nodeB", taint("cpu-type", "arm64", PNS)), tainted("nodeC", taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS))], [100, 50, 0]),
    ("only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority function",
     tolerating(tol("cpu-type", "arm64", "NoSchedule", "Equal"), tol("disk-type", "ssd", "NoSchedule", "Equal")),
     [tainted("nodeA"), tainted("nodeB", taint("cpu-type", "arm64", "NoSchedule")), tainted("nodeC", taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS))], [100, 100, 0]),
    ("Default behaviour No taints and tolerations, lands on node with no taints",
     tolerating(), [tainted("nodeA"), tainted("nodeB", taint("cpu-type", "arm64", PNS))], [100, 0]),
]


@pytest.mark.parametrize(("pod", "nodes", "want"), [pytest.param(*case[1:], id=case[0]) for case in SCORE])
def test_taint_toleration_score(pod: Any, nodes: Any, want: list[int]) -> None:
    result = score_nodes("TaintToleration", pod, nodes, [])
    assert [result[n["metadata"]["name"]] for n in nodes] == want


def untolerated(key: str, value: str) -> tuple[str, list[str]]:
    return (UNRES, [f"node(s) had untolerated taint {{{key}: {value}}}"])


FILTER_TAINTS = [
    ("A pod having no tolerations can't be scheduled onto a node with nonempty taints", tolerating(), [taint("dedicated", "user1", "NoSchedule")], untolerated("dedicated", "user1")),
    ("A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule", tolerating(tol("dedicated", "user1", "NoSchedule")), [taint("dedicated", "user1", "NoSchedule")], None),
    ("A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule", tolerating(tol("dedicated", "user2", "NoSchedule", "Equal")), [taint("dedicated", "user1", "NoSchedule")], untolerated("dedicated", "user1")),
    ("A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints on the node", tolerating(tol("foo", "", "NoSchedule", "Exists")), [taint("foo", "bar", "NoSchedule")], None),
    ("A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, pod can be scheduled onto the node",
     tolerating(tol("dedicated", "user2", "NoSchedule", "Equal"), tol("foo", "", "NoSchedule", "Exists")), [taint("dedicated", "user2", "NoSchedule"), taint("foo", "bar", "NoSchedule")], None),
    ("A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't match, can't be scheduled onto the node",
     tolerating(tol("foo", "bar", PNS, "Equal")), [taint("foo", "bar", "NoSchedule")], untolerated("foo", "bar")),
    ("The pod has a toleration that keys and values match the taint on the node, the effect of toleration is empty, and the effect of taint is NoSchedule. Pod can be scheduled onto the node",
     tolerating(tol("foo", "bar", "", "Equal")), [taint("foo", "bar", "NoSchedule")], None),
    ("The pod has a toleration that key and value don't match the taint on the node, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
     tolerating(tol("dedicated", "user2", "NoSchedule", "Equal")), [taint("dedicated", "user1", PNS)], None),
    ("The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node", tolerating(), [taint("dedicated", "user1", PNS)], None),
]


@pytest.mark.parametrize(("pod", "taints", "want"), [pytest.param(*case[1:], id=case[0]) for case in FILTER_TAINTS])
def test_taint_toleration_filter(pod: Any, taints: Any, want: Any) -> None:
    result = filter_nodes("TaintToleration", pod, [tainted("nodeA", *taints)], [])["nodeA"]
    if want is None:
        assert result.ok, result
    else:
        assert (result.ok, result.code, result.reasons) == (False, *want)


def test_no_execute_taints_filter_too() -> None:
    """``DoNotScheduleTaintsFilterFunc`` keeps NoExecute as well as NoSchedule."""
    result = filter_nodes("TaintToleration", tolerating(), [tainted("nodeA", taint("k", "v", "NoExecute"))], [])["nodeA"]
    assert result.reasons == ["node(s) had untolerated taint {k: v}"]
