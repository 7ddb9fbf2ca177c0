"""InterPodAffinity against upstream's test tables, plus the two-phase/naive oracle property.

Ported from ``pkg/scheduler/framework/plugins/interpodaffinity``: ``filtering_test.go``
(TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes) and ``scoring_test.go``
(TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight).  A PreFilter
Skip shows up here as every node passing, a PreScore Skip as every node scoring 0, and PreScore
errors as ``ValueError``, per the contract.

Skipped, with why: TestPreFilterDisabled (cycle-state plumbing), TestPreFilterStateAddRemovePod
and TestPreFilterStateClone (AddPod/RemovePod cycle-state extensions used by preemption),
TestGetTPMapMatchingIncomingAffinityAntiAffinity (asserts the internal PreFilter maps; their
effect is covered by the filter tables), and the queueing-hint tests in plugin_test.go.

"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.args import InterPodAffinityArgs
from scheduling.cluster import ClusterState, PodInfo
from scheduling.framework import filter_nodes, score_nodes
from scheduling.plugins.interpodaffinity import naive_scores
from tests.scheduling.wrappers import REQUIRED, make_pod, node_with_labels, pod_on

UNSCHED = "Unschedulable"
UNRES = "UnschedulableAndUnresolvable"
AFFINITY = (UNRES, ["node(s) didn't match pod affinity rules"])
ANTI = (UNSCHED, ["node(s) didn't match pod anti-affinity rules"])
EXISTING = (UNSCHED, ["node(s) didn't satisfy existing pods anti-affinity rules"])
PARSE_ERROR = (
    'parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must be an empty '
    "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
    "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
FUZZ = settings(database=None, deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])


def ns_obj(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}}


NAMESPACES = [
    ns_obj("subteam1.team1", {"team": "team1"}),
    ns_obj("subteam2.team1", {"team": "team1"}),
    ns_obj("subteam1.team2", {"team": "team2"}),
    ns_obj("subteam2.team2", {"team": "team2"}),
]


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        out["values"] = list(values)
    return out


def term(*exprs: dict[str, Any], topology: str = "", namespaces: list[str] | None = None, ns_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"labelSelector": {"matchExpressions": list(exprs)}, "topologyKey": topology}
    if namespaces is not None:
        out["namespaces"] = namespaces
    if ns_selector is not None:
        out["namespaceSelector"] = ns_selector
    return out


def with_terms(namespace: str, node: str, labels: dict[str, str], affinity: list[Any] | None, anti: list[Any] | None) -> dict[str, Any]:
    """``createPodWithAffinityTerms``."""
    pod = make_pod().namespace(namespace).labels(labels)
    if node:
        pod.node(node)
    pod.affinity({
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti},
    })
    return pod.obj()


POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
EXISTING_POD = make_pod().labels(POD_LABEL).node("node1").obj()
NODE1 = node_with_labels("node1", {"region": "r1", "zone": "z11"})
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
SVC_IN = expr("service", "In", "securityscan", "value2")

SINGLE = [
    ("A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods", {}, [], None),
    ("satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
     make_pod().labels(POD_LABEL2).pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED).obj(), [EXISTING_POD], None),
    ("satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
     make_pod().labels(POD_LABEL2).pod_affinity_not_in("service", "region", ["securityscan3", "value3"], REQUIRED).obj(), [EXISTING_POD], None),
    ("Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
     with_terms("", "", POD_LABEL2, [term(SVC_IN, namespaces=["DiffNameSpace"])], None),
     [make_pod().namespace("ns").label("service", "securityscan").node("node1").obj()], AFFINITY),
    ("Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
     make_pod().labels(POD_LABEL).pod_affinity_in("service", "", ["antivirusscan", "value2"], REQUIRED).obj(), [EXISTING_POD], AFFINITY),
    ("satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution ",
     with_terms("", "", POD_LABEL2, [
         term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
         term(expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue"), topology="region"),
     ], None), [EXISTING_POD], None),
    ("The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
     with_terms("", "", POD_LABEL2, [
         term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
         term(expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue"), topology="region"),
     ], None), [EXISTING_POD], AFFINITY),
    ("satisfies the PodAffinity and PodAntiAffinity with the existing pod",
     make_pod().labels(POD_LABEL2).pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
     .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED).obj(), [EXISTING_POD], None),
    ("satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
     make_pod().labels(POD_LABEL2).pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
     .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED).obj(),
     [make_pod().node("node1").labels(POD_LABEL).pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED).obj()], None),
    ("satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
     make_pod().labels(POD_LABEL2).pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
     .pod_anti_affinity_in("service", "zone", ["securityscan", "value2"], REQUIRED).obj(), [EXISTING_POD], ANTI),
    ("satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
     make_pod().labels(POD_LABEL).pod_affinity_in("service", "region", ["securityscan", "value2"], REQUIRED)
     .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED).obj(),
     [make_pod().labels(POD_LABEL).node("node1").pod_anti_affinity_in("service", "zone", ["securityscan", "value2"], REQUIRED).obj()], EXISTING),
    ("pod matches its own Label in PodAffinity and that matches the existing pod Labels",
     make_pod().labels(POD_LABEL).pod_affinity_not_in("service", "region", ["securityscan", "value2"], REQUIRED).obj(),
     [make_pod().label("service", "securityscan").node("node2").obj()], AFFINITY),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
     make_pod().labels(POD_LABEL).obj(),
     [make_pod().node("node1").labels(POD_LABEL).pod_anti_affinity_in("service", "zone", ["securityscan", "value2"], REQUIRED).obj()], EXISTING),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
     make_pod().labels(POD_LABEL).obj(),
     [make_pod().node("node1").labels(POD_LABEL).pod_anti_affinity_not_in("service", "zone", ["securityscan", "value2"], REQUIRED).obj()], None),
    ("satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
     make_pod().labels(POD_LABEL).pod_anti_affinity_exists("service", "region", REQUIRED).pod_anti_affinity_exists("security", "region", REQUIRED).obj(),
     [make_pod().node("node1").labels(POD_LABEL2).pod_anti_affinity_exists("security", "zone", REQUIRED).obj()], ANTI),
    ("PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
     make_pod().labels(POD_LABEL).pod_anti_affinity_exists("service", "zone", REQUIRED).pod_anti_affinity_exists("security", "zone", REQUIRED).obj(),
     [make_pod().node("node1").labels(POD_LABEL2).pod_anti_affinity_exists("security", "zone", REQUIRED).obj()], ANTI),
    ("PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
     make_pod().labels(POD_LABEL2).pod_anti_affinity_exists("security", "zone", REQUIRED).obj(),
     [make_pod().node("node1").labels(POD_LABEL).pod_anti_affinity_exists("service", "zone", REQUIRED).pod_anti_affinity_exists("security", "zone", REQUIRED).obj()], EXISTING),
    ("PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
     make_pod().labels({"abc": "", "xyz": ""}).pod_anti_affinity_exists("abc", "zone", REQUIRED).pod_anti_affinity_exists("def", "zone", REQUIRED).obj(),
     [make_pod().node("node1").labels({"def": "", "xyz": ""}).pod_anti_affinity_exists("abc", "zone", REQUIRED).pod_anti_affinity_exists("def", "zone", REQUIRED).obj()], ANTI),
    ("PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
     make_pod().labels({"def": "", "xyz": ""}).pod_anti_affinity_exists("abc", "zone", REQUIRED).pod_anti_affinity_exists("def", "zone", REQUIRED).obj(),
     [make_pod().node("node1").labels({"abc": "", "xyz": ""}).pod_anti_affinity_exists("abc", "zone", REQUIRED).pod_anti_affinity_exists("def", "zone", REQUIRED).obj()], ANTI),
    ("PodAffinity fails PreFilter with an invalid affinity label syntax",
     make_pod().labels(POD_LABEL).pod_affinity_in("service", "region", ["{{.bad-value.}}"], REQUIRED)
     .pod_affinity_in("service", "node", ["antivirusscan", "value2"], REQUIRED).obj(), [], "parse"),
    ("PodAntiAffinity fails PreFilter with an invalid antiaffinity label syntax",
     make_pod().labels(POD_LABEL).pod_affinity_in("service", "region", ["foo"], REQUIRED)
     .pod_affinity_in("service", "node", ["{{.bad-value.}}"], REQUIRED).obj(), [], "parse"),
    ("affinity with NamespaceSelector",
     with_terms("", "", POD_LABEL2, [term(SVC_IN, topology="region", ns_selector=TEAM1)], None),
     [pod_on("node1", POD_LABEL, "subteam1.team1")], None),
    ("affinity with non-matching NamespaceSelector",
     with_terms("", "", POD_LABEL2, [term(SVC_IN, topology="region", ns_selector=TEAM1)], None),
     [pod_on("node1", POD_LABEL, "subteam1.team2")], AFFINITY),
    ("anti-affinity with matching NamespaceSelector",
     with_terms("subteam1.team1", "", POD_LABEL2, None, [term(SVC_IN, topology="zone", ns_selector=TEAM1)]),
     [pod_on("node1", POD_LABEL, "subteam2.team1")], ANTI),
    ("anti-affinity with matching all NamespaceSelector",
     with_terms("subteam1.team1", "", POD_LABEL2, None, [term(SVC_IN, topology="zone", ns_selector={})]),
     [pod_on("node1", POD_LABEL, "subteam2.team1")], ANTI),
    ("anti-affinity with non-matching NamespaceSelector",
     with_terms("subteam1.team1", "", POD_LABEL2, None, [term(SVC_IN, topology="zone", ns_selector=TEAM1)]),
     [pod_on("node1", POD_LABEL, "subteam1.team2")], None),
]


@pytest.mark.parametrize(("pod", "pods", "want"), [pytest.param(*case[1:], id=case[0]) for case in SINGLE])
def test_required_affinity_single_node(pod: dict[str, Any], pods: list[dict[str, Any]], want: Any) -> None:
    result = filter_nodes("InterPodAffinity", pod, [NODE1], pods, namespaces=NAMESPACES)["node1"]
    if want is None:
        assert result.ok, result
    elif want == "parse":
        assert (result.ok, result.code, result.reasons) == (False, UNRES, [PARSE_ERROR])
    else:
        assert (result.ok, result.code, result.reasons) == (False, *want)


REGION_CHINA = {"region": "China"}
REGION_CHINA_AZ1 = {"region": "China", "az": "az1"}
REGION_INDIA = {"region": "India"}


def nodes(*specs: tuple[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [node_with_labels(name, labels) for name, labels in specs]


AB_R1_Z1 = nodes(("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}), ("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}))
AB_R1_Z12 = nodes(("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}), ("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}))
CHINA_INDIA = nodes(("nodeA", REGION_CHINA), ("nodeB", REGION_CHINA_AZ1), ("nodeC", REGION_INDIA))

MULTI = [
    ("A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",
     make_pod().pod_affinity_in("foo", "region", ["bar"], REQUIRED).obj(),
     [make_pod().name("p1").node("node1").labels({"foo": "bar"}).obj()],
     nodes(("node1", REGION_CHINA), ("node2", REGION_CHINA_AZ1), ("node3", REGION_INDIA)), [None, None, AFFINITY]),
    (("The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection "
      "should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere."),
     make_pod().labels({"foo": "bar", "service": "securityscan"}).pod_affinity_in("foo", "zone", ["bar"], REQUIRED).pod_affinity_in("service", "zone", ["securityscan"], REQUIRED).obj(),
     [make_pod().name("p1").node("nodeA").labels({"foo": "bar"}).obj()],
     nodes(("nodeA", {"zone": "az1", "hostname": "h1"}), ("nodeB", {"zone": "az2", "hostname": "h2"})), [None, None]),
    ("The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
     make_pod().labels({"foo": "bar", "service": "securityscan"}).pod_affinity_in("foo", "zone", ["bar"], REQUIRED).pod_affinity_in("service", "zone", ["securityscan"], REQUIRED).obj(),
     [make_pod().name("p1").node("nodeA").labels({"foo": "bar"}).obj()],
     nodes(("nodeA", {"zoneLabel": "az1", "hostname": "h1"}), ("nodeB", {"zoneLabel": "az2", "hostname": "h2"})), [AFFINITY, AFFINITY]),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
     make_pod().pod_anti_affinity_in("foo", "region", ["abc"], REQUIRED).obj(),
     [make_pod().node("nodeA").labels({"foo": "abc"}).obj()],
     nodes(("nodeA", {"region": "r1", "hostname": "nodeA"}), ("nodeB", {"region": "r1", "hostname": "nodeB"})), [ANTI, ANTI]),
    ("This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
     make_pod().pod_anti_affinity_in("foo", "region", ["abc"], REQUIRED).pod_anti_affinity_in("service", "zone", ["securityscan"], REQUIRED).obj(),
     [make_pod().node("nodeA").labels({"foo": "abc", "service": "securityscan"}).obj()],
     AB_R1_Z12, [ANTI, ANTI]),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
     make_pod().pod_anti_affinity_in("foo", "region", ["abc"], REQUIRED).obj(),
     [make_pod().node("nodeA").labels({"foo": "abc"}).obj()], CHINA_INDIA, [ANTI, ANTI, None]),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
     make_pod().namespace("NS1").labels({"foo": "123"}).pod_anti_affinity_in("foo", "region", ["bar"], REQUIRED).obj(),
     [make_pod().node("nodeA").namespace("NS1").labels({"foo": "bar"}).obj(),
      make_pod().node("nodeC").namespace("NS2").pod_anti_affinity_in("foo", "region", ["123"], REQUIRED).obj()],
     CHINA_INDIA, [ANTI, ANTI, None]),
    ("Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
     make_pod().label("foo", "").obj(),
     [make_pod().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED).obj()], AB_R1_Z1, [None, None]),
    ("Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
     make_pod().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED).obj(),
     [make_pod().node("nodeA").labels({"foo": ""}).obj()], AB_R1_Z1, [None, None]),
    ("Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's terms on all nodes",
     make_pod().label("foo", "").label("bar", "").obj(),
     [make_pod().node("nodeA").pod_anti_affinity_exists("foo", "zone", REQUIRED).obj(),
      make_pod().node("nodeA").pod_anti_affinity_exists("bar", "region", REQUIRED).obj()], AB_R1_Z12, [EXISTING, EXISTING]),
    ("Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one anti-affinity rule of existingPod",
     make_pod().pod_anti_affinity_exists("foo", "zone", REQUIRED).pod_anti_affinity_exists("bar", "region", REQUIRED).obj(),
     [make_pod().node("nodeA").labels({"foo": ""}).obj(), make_pod().node("nodeB").labels({"bar": ""}).obj()], AB_R1_Z12, [ANTI, ANTI]),
    ("Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
     make_pod().label("foo", "").label("bar", "").obj(),
     [make_pod().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED).pod_anti_affinity_exists("bar", "zone", REQUIRED).obj()],
     AB_R1_Z12, [EXISTING, None]),
    ("Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
     make_pod().pod_anti_affinity_exists("foo", "invalid-node-label", REQUIRED).pod_anti_affinity_exists("bar", "zone", REQUIRED).obj(),
     [make_pod().name("podA").node("nodeA").labels({"foo": "", "bar": ""}).obj()], AB_R1_Z12, [ANTI, None]),
    ("Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
     make_pod().label("foo", "").label("bar", "").obj(),
     [make_pod().node("nodeA").pod_anti_affinity_exists("foo", "region", REQUIRED).pod_anti_affinity_exists("bar", "zone", REQUIRED).obj()],
     AB_R1_Z12, [EXISTING, EXISTING]),
    ("Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
     make_pod().pod_anti_affinity_exists("foo", "region", REQUIRED).pod_anti_affinity_exists("bar", "zone", REQUIRED).obj(),
     [make_pod().node("nodeA").labels({"foo": "", "bar": ""}).obj()], AB_R1_Z12, [ANTI, ANTI]),
    ("Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches incoming pod, so incoming pod can only be scheduled to nodeC",
     make_pod().label("foo", "").label("bar", "").obj(),
     [make_pod().node("nodeA").pod_anti_affinity_exists("foo", "zone", REQUIRED).pod_anti_affinity_exists("labelA", "zone", REQUIRED).obj(),
      make_pod().node("nodeB").pod_anti_affinity_exists("bar", "zone", REQUIRED).pod_anti_affinity_exists("labelB", "zone", REQUIRED).obj()],
     nodes(("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}), ("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}), ("nodeC", {"region": "r1", "zone": "z3", "hostname": "nodeC"})),
     [EXISTING, EXISTING, None]),
    ("Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
     make_pod().pod_affinity_exists("foo", "region", REQUIRED).pod_affinity_exists("bar", "zone", REQUIRED).obj(),
     [make_pod().name("pod1").labels({"foo": "", "bar": ""}).node("nodeA").obj()], AB_R1_Z1, [None, None]),
    ("Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match, and the match logic should be satisfied on the same pod",
     make_pod().pod_affinity_exists("foo", "region", REQUIRED).pod_affinity_exists("bar", "zone", REQUIRED).obj(),
     [make_pod().node("nodeA").name("pod1").labels({"foo": ""}).obj(), make_pod().node("nodeB").name("pod2").labels({"bar": ""}).obj()],
     AB_R1_Z12, [AFFINITY, AFFINITY]),
]


@pytest.mark.parametrize(("pod", "pods", "nodes_", "want"), [pytest.param(*case[1:], id=case[0]) for case in MULTI])
def test_required_affinity_multiple_nodes(pod: dict[str, Any], pods: list[Any], nodes_: list[Any], want: list[Any]) -> None:
    result = filter_nodes("InterPodAffinity", pod, nodes_, pods, namespaces=[ns_obj("NS1")])
    for node, expected in zip(nodes_, want, strict=True):
        got = result[node["metadata"]["name"]]
        if expected is None:
            assert got.ok, (node["metadata"]["name"], got)
        else:
            assert (got.ok, got.code, got.reasons) == (False, *expected), node["metadata"]["name"]


# ------------------------------------------------------------------------ scoring


def weighted(weight: int, *exprs: dict[str, Any], topology: str, namespaces: list[str] | None = None, ns_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": term(*exprs, topology=topology, namespaces=namespaces, ns_selector=ns_selector)}


S1 = {"security": "S1"}
S2 = {"security": "S2"}
CHINA, INDIA, AZ1, AZ2 = REGION_CHINA, REGION_INDIA, {"az": "az1"}, {"az": "az2"}
STAY_S1_REGION = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(5, expr("security", "In", "S1"), topology="region")]}}
STAY_S2_REGION = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(6, expr("security", "In", "S2"), topology="region")]}}
AFFINITY3 = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    weighted(8, expr("security", "NotIn", "S1"), expr("security", "In", "S2"), topology="region"),
    weighted(2, expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
]}}
HARD_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    term(expr("security", "In", "S1", "value2"), topology="region"),
    term(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
]}}
AWAY_S1_AZ = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(5, expr("security", "In", "S1"), topology="az")]}}
AWAY_S2_AZ = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(5, expr("security", "In", "S2"), topology="az")]}}
STAY_S1_AWAY_S2 = {
    "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(8, expr("security", "In", "S1"), topology="region")]},
    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(5, expr("security", "In", "S2"), topology="az")]},
}
AFFINITY_NS = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    weighted(5, expr("security", "In", "S1"), topology="region", namespaces=["subteam2.team2"], ns_selector=TEAM1)]}}
ANTI_NS = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    weighted(5, expr("security", "In", "S1"), topology="region", namespaces=["subteam2.team2"], ns_selector=TEAM1)]}}
INVALID_AFFINITY = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(8, expr("security", "In", "{{.bad-value.}}"), topology="region")]}}
INVALID_ANTI = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(5, expr("security", "In", "{{.bad-value.}}"), topology="az")]}}


def spod(labels: dict[str, str] | None = None, affinity: dict[str, Any] | None = None, namespace: str = "") -> dict[str, Any]:
    pod = make_pod().namespace(namespace)
    if labels:
        pod.labels(labels)
    if affinity is not None:
        pod.affinity(affinity)
    return pod.obj()


def on(node: str, labels: dict[str, str] | None = None, affinity: dict[str, Any] | None = None, namespace: str = "") -> dict[str, Any]:
    return pod_on(node, labels, namespace, affinity)


N3 = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
NS_PODS = [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team2"), on("node2", S1, namespace="subteam2.team1")]
NS_PODS_2 = [on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam1.team1"), on("node1", S1, namespace="subteam2.team2"), on("node2", S1, namespace="subteam2.team1")]

# (name, pod, pods, nodes, expected | "error", ignorePreferredTermsOfExistingPods)
PREFERRED_CASES = [
    ("all nodes are same priority as Affinity is nil", spod(S1), [], N3, [0, 0, 0], False),
    ("Affinity: pod that matches topology key & pods in nodes will get high score comparing to otherswhich doesn't match either pods in nodes or in topology key",
     spod(S1, STAY_S1_REGION), [on("node1", S1), on("node2", S2), on("node3", S1)], N3, [100, 0, 0], False),
    ("All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score",
     spod(None, STAY_S1_REGION), [on("node1", S1)], nodes(("node1", CHINA), ("node2", REGION_CHINA_AZ1), ("node3", INDIA)), [100, 100, 0], False),
    ("Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score",
     spod(S1, STAY_S2_REGION), [on("node1", S2), on("node1", S2), on("node2", S2), on("node3", S2), on("node4", S2), on("node5", S2)],
     nodes(("node1", CHINA), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)), [100, 0, 100, 100, 0], False),
    ("Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures ",
     spod(S1, AFFINITY3), [on("node1", S1), on("node2", S2), on("node3", S1)], N3, [20, 100, 0], False),
    ("Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
     spod(S2), [on("node1", S1, STAY_S1_REGION), on("node2", S2, STAY_S2_REGION)], N3, [0, 100, 0], False),
    ("Affinity symmetry with namespace selector",
     spod(S1, namespace="subteam1.team1"), [on("node1", S1, AFFINITY_NS), on("node2", S2, STAY_S2_REGION)], N3, [100, 0, 0], False),
    ("AntiAffinity symmetry with namespace selector",
     spod(S1, namespace="subteam1.team1"), [on("node1", S1, ANTI_NS), on("node2", S2, STAY_S2_REGION)], N3, [0, 100, 100], False),
    ("Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
     spod(S1), [on("node1", S1, HARD_AFFINITY), on("node2", S2, HARD_AFFINITY)], N3, [100, 100, 0], False),
    ("Anti Affinity: pod that does not match existing pods in node will get high score ",
     spod(S1, AWAY_S1_AZ), [on("node1", S1), on("node2", S2)], nodes(("node1", AZ1), ("node2", CHINA)), [0, 100], False),
    ("Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others ",
     spod(S1, AWAY_S1_AZ), [on("node1", S1), on("node2", S1)], nodes(("node1", AZ1), ("node2", CHINA)), [0, 100], False),
    ("Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score",
     spod(S1, AWAY_S1_AZ), [on("node1", S1), on("node1", S1), on("node2", S2)], nodes(("node1", AZ1), ("node2", INDIA)), [0, 100], False),
    ("Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
     spod(S2), [on("node1", S1, AWAY_S2_AZ), on("node2", S2, AWAY_S1_AZ)], nodes(("node1", AZ1), ("node2", AZ2)), [0, 100], False),
    ("Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity",
     spod(S1, STAY_S1_AWAY_S2), [on("node1", S1), on("node2", S1)], nodes(("node1", CHINA), ("node2", AZ1)), [100, 0], False),
    ("Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels",
     spod(S1, STAY_S1_AWAY_S2), [on("node1", S1), on("node1", S1), on("node2", S1), on("node3", S1), on("node3", S1), on("node4", S1), on("node5", S1)],
     nodes(("node1", REGION_CHINA_AZ1), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)), [100, 0, 100, 100, 0], False),
    ("Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & symmetry",
     spod(S1, STAY_S1_AWAY_S2), [on("node1", S1), on("node2", S2), on("node3", None, STAY_S1_AWAY_S2), on("node4", None, AWAY_S1_AZ)],
     nodes(("node1", CHINA), ("node2", AZ1), ("node3", INDIA), ("node4", AZ2)), [100, 0, 100, 0], False),
    ("Avoid panic when partial nodes in a topology don't have pods with affinity",
     spod(S1), [on("node1", S1), on("node2", None, STAY_S1_AWAY_S2)], nodes(("node1", CHINA), ("node2", CHINA)), [0, 0], False),
    ("invalid Affinity fails PreScore", spod(None, INVALID_AFFINITY), [], nodes(("node1", CHINA), ("node2", CHINA)), "error", False),
    ("invalid AntiAffinity fails PreScore", spod(None, INVALID_ANTI), [], nodes(("node1", CHINA), ("node2", CHINA)), "error", False),
    ("Affinity with pods matching NamespaceSelector", spod(S1, AFFINITY_NS, "subteam1.team1"), NS_PODS, nodes(("node1", CHINA), ("node2", INDIA)), [100, 0], False),
    ("Affinity with pods matching both NamespaceSelector and Namespaces fields", spod(S1, AFFINITY_NS, "subteam1.team1"), NS_PODS_2, nodes(("node1", CHINA), ("node2", INDIA)), [100, 0], False),
    ("Affinity with pods matching NamespaceSelector", spod(S1, ANTI_NS, "subteam1.team1"), NS_PODS, nodes(("node1", CHINA), ("node2", INDIA)), [0, 100], False),
    ("Affinity with pods matching both NamespaceSelector and Namespaces fields", spod(S1, ANTI_NS, "subteam1.team1"), NS_PODS_2, nodes(("node1", CHINA), ("node2", INDIA)), [0, 100], False),
    ("Ignore preferred terms of existing pods", spod(S2), [on("node1", S1, STAY_S1_AWAY_S2), on("node2", S2, STAY_S2_REGION)],
     nodes(("node1", CHINA), ("node2", INDIA)), [0, 0], True),
    ("Do not ignore preferred terms of existing pods", spod(S2), [on("node1", S1, STAY_S1_AWAY_S2), on("node2", S2, STAY_S2_REGION)],
     nodes(("node1", CHINA), ("node2", INDIA)), [0, 100], False),
    ("No nodes to score", spod(S2), [], [], [], False),
]


@pytest.mark.parametrize(("pod", "pods", "nodes_", "want", "ignore"), [pytest.param(*case[1:], id=case[0]) for case in PREFERRED_CASES])
def test_preferred_affinity(pod: Any, pods: Any, nodes_: Any, want: Any, ignore: bool) -> None:
    args = {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": ignore}
    if want == "error":
        with pytest.raises(ValueError, match=r'Invalid value: "\{\{\.bad-value\.\}\}"'):
            score_nodes("InterPodAffinity", pod, nodes_, pods, args, NAMESPACES)
        return
    result = score_nodes("InterPodAffinity", pod, nodes_, pods, args, NAMESPACES)
    assert [result[n["metadata"]["name"]] for n in nodes_] == want


HARD_POD_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    term(expr("service", "In", "S1"), topology="region", namespaces=["", "subteam2.team2"], ns_selector=TEAM1)]}}
HARD_PODS = [on("node1", None, HARD_POD_AFFINITY), on("node2", None, HARD_POD_AFFINITY)]
SERVICE_S1 = {"service": "S1"}
HARD_CASES = [
    ("with default weight", spod(SERVICE_S1), 1, [100, 100, 0]),
    ("with zero weight", spod(SERVICE_S1), 0, [0, 0, 0]),
    ("with no matching namespace", spod(SERVICE_S1, namespace="subteam1.team2"), 1, [0, 0, 0]),
    ("with matching NamespaceSelector", spod(SERVICE_S1, namespace="subteam1.team1"), 1, [100, 100, 0]),
    ("with matching Namespaces", spod(SERVICE_S1, namespace="subteam2.team2"), 1, [100, 100, 0]),
]


@pytest.mark.parametrize(("pod", "weight", "want"), [pytest.param(*case[1:], id=case[0]) for case in HARD_CASES])
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(pod: Any, weight: int, want: list[int]) -> None:
    result = score_nodes("InterPodAffinity", pod, N3, HARD_PODS, {"hardPodAffinityWeight": weight}, NAMESPACES)
    assert [result[n["metadata"]["name"]] for n in N3] == want


def test_partial_args_take_v1_defaults() -> None:
    # hardPodAffinityWeight absent -> 1, as v1 defaults it
    result = score_nodes("InterPodAffinity", spod(SERVICE_S1), N3, HARD_PODS, {}, NAMESPACES)
    assert [result[n["metadata"]["name"]] for n in N3] == [100, 100, 0]


# ------------------------------------------------------------------------ two-phase == naive

KEYS = ("zone", "rack", "host")
APPS = ("a", "b", "c")


def _random_term(rnd: random.Random) -> dict[str, Any]:
    app = rnd.choice(APPS)
    selector: dict[str, Any] = {"matchLabels": {"app": app}} if rnd.random() < 0.7 else {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": [app]}]}
    out: dict[str, Any] = {"labelSelector": selector, "topologyKey": rnd.choice(KEYS)}
    if rnd.random() < 0.2:
        out["namespaceSelector"] = {} if rnd.random() < 0.5 else {"matchLabels": {"team": rnd.choice(("t1", "t2"))}}
    return out


def _random_affinity(rnd: random.Random) -> dict[str, Any] | None:
    if rnd.random() < 0.4:
        return None
    affinity: dict[str, Any] = {}
    for section in ("podAffinity", "podAntiAffinity"):
        block: dict[str, Any] = {}
        if rnd.random() < 0.5:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rnd.randint(1, 100), "podAffinityTerm": _random_term(rnd)} for _ in range(rnd.randint(1, 2))
            ]
        if section == "podAffinity" and rnd.random() < 0.3:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = [_random_term(rnd)]
        if block:
            affinity[section] = block
    return affinity or None


def _random_cluster(seed: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    node_list = []
    for i in range(rnd.randint(1, 8)):
        labels = {k: f"{k}{rnd.randint(0, 2)}" for k in KEYS if rnd.random() < 0.85}
        node_list.append(node_with_labels(f"n{i}", labels))
    namespaces = [ns_obj("ns1", {"team": "t1"}), ns_obj("ns2", {"team": "t2"})]
    pods = []
    for _ in range(rnd.randint(0, 25)):
        pods.append(on(f"n{rnd.randrange(len(node_list) + 1)}", {"app": rnd.choice(APPS)}, _random_affinity(rnd), rnd.choice(("ns1", "ns2"))))
    pod = spod({"app": rnd.choice(APPS)}, _random_affinity(rnd), rnd.choice(("ns1", "ns2")))
    return pod, node_list, pods, namespaces


@FUZZ
@given(seed=st.integers(0, 2**32 - 1), hard=st.integers(0, 5), ignore=st.booleans())
def test_two_phase_scores_equal_naive(seed: int, hard: int, ignore: bool) -> None:
    pod, node_list, pods, namespaces = _random_cluster(seed)
    args = {"hardPodAffinityWeight": hard, "ignorePreferredTermsOfExistingPods": ignore}
    two_phase = score_nodes("InterPodAffinity", pod, node_list, pods, args, namespaces)
    cluster = ClusterState.build(node_list, pods, namespaces)
    naive = naive_scores(cluster, PodInfo(pod), cluster.nodes, InterPodAffinityArgs.parse(args))
    assert [two_phase[n.name] for n in cluster.nodes] == naive
