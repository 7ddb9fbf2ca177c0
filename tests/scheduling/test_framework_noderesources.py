"""NodeResourcesFit and NodeResourcesBalancedAllocation against upstream's test tables.

Ported from ``pkg/scheduler/framework/plugins/noderesources``: ``fit_test.go`` (TestEnoughRequests,
TestNotEnoughRequests, TestStorageRequests, TestRestartableInitContainers, TestFitScore),
``least_allocated_test.go``, ``most_allocated_test.go``, ``requested_to_capacity_ratio_test.go``
(incl. TestBrokenLinearFunction, TestResourceBinPackingSingleExtended/MultipleExtended) and
``balanced_allocation_test.go``.  Case names are upstream's, as pytest ids.

Skipped, with why:

* DRA-backed extended resources ("extended resource backed by DRA", "... nil draManager",
  "extended resource was backed by Device Plugin (Allocatable: 0)", TestFitScore's and
  TestNodeResourcesBalancedAllocation's "... with Extended resources"/"include DRA resource ..."
  cases): DRA is out of scope, scalar resources are always checked against allocatable.
* "not allow pod with restartable init containers if sidecar containers is disabled": the
  SidecarContainers gate is on by default (GA) and gates are at their defaults.
* TestPreFilterDisabled, TestEventsToRegister, Test_isSchedulableAfter*, TestBalancedAllocationSignPod:
  cycle-state plumbing, queueing hints and pod signatures, which have no counterpart here.
* "... if PreScore is not called" cases run anyway: here PreScore always runs, and upstream
  expects the same scores either way, so they are kept with upstream's expectations.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.framework import filter_nodes, score_nodes
from scheduling.helpers import ShapePoint, broken_linear
from scheduling.status import ArgsError
from tests.scheduling.wrappers import make_node, make_pod

UNSCHED = "Unschedulable"
UNRES = "UnschedulableAndUnresolvable"
EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_A = "kubernetes.io/something"
K8S_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"
DRA_RES = "extended.resource.dra.io/something"
EXTENDED = "abc.com/xyz"
DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
EXTENDED_SET = DEFAULT_RESOURCES + [{"name": EXTENDED, "weight": 1}]


def err(name: str) -> str:
    return f"Insufficient {name}"


# ------------------------------------------------------------------------ fit filter helpers


def resource_pod(*usages: dict[str, str], init: list[dict[str, str]] | None = None, overhead: dict[str, str] | None = None, pod_level: dict[str, str] | None = None) -> dict[str, Any]:
    """``newResourcePod`` (+ ``newResourceInitPod``/``newResourceOverheadPod``/``newPodLevelResourcesPod``)."""
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "resources": {"requests": u}} for i, u in enumerate(usages)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "resources": {"requests": u}} for i, u in enumerate(init)]
    if overhead:
        spec["overhead"] = overhead
    if pod_level:
        spec["resources"] = {"requests": pod_level}
    return {"metadata": {"name": "pod"}, "spec": spec}


def r(cpu: int = 0, mem: int = 0, eph: int = 0, scalars: dict[str, int] | None = None) -> dict[str, str]:
    """``framework.Resource{MilliCPU, Memory, EphemeralStorage, ScalarResources}`` as container requests."""
    requests = {"cpu": f"{cpu}m", "memory": str(mem), "pods": "0", "ephemeral-storage": str(eph)}
    for name, value in (scalars or {}).items():
        requests[name] = str(value)
    return requests


def allocatable(cpu: int, mem: int, pods: int, ext_a: int, storage: int, huge: int) -> dict[str, str]:
    """``makeAllocatableResources``."""
    return {"cpu": f"{cpu}m", "memory": str(mem), "pods": str(pods), EXT_A: str(ext_a), "ephemeral-storage": str(storage), HUGE_A: str(huge)}


def fit_node(alloc: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "node"}, "status": {"capacity": alloc, "allocatable": alloc}}


def existing(*usages: dict[str, str]) -> list[dict[str, Any]]:
    """``framework.NewNodeInfo(newResourcePod(...))``: one existing pod on the node."""
    pod = resource_pod(*usages)
    pod["spec"]["nodeName"] = "node"
    return [pod]


def assert_filter(result: Any, want: tuple[str, list[str]] | None) -> None:
    if want is None:
        assert result.ok, result
        assert result.reasons == [] and result.code == ""
    else:
        assert not result.ok
        assert (result.code, result.reasons) == want


# ------------------------------------------------------------------------ TestEnoughRequests

ENOUGH = [
    ({}, existing(r(10, 20)), None, None, "no resources requested always fits"),
    (resource_pod(r(1, 1)), existing(r(10, 20)), None, (UNSCHED, [err("cpu"), err("memory")]), "too many resources fails"),
    (resource_pod(r(1, 1), init=[r(3, 1)]), existing(r(8, 19)), None, (UNSCHED, [err("cpu")]), "too many resources fails due to init container cpu"),
    (resource_pod(r(1, 1), init=[r(3, 1), r(2, 1)]), existing(r(8, 19)), None, (UNSCHED, [err("cpu")]), "too many resources fails due to highest init container cpu"),
    (resource_pod(r(1, 1), init=[r(1, 3)]), existing(r(9, 19)), None, (UNSCHED, [err("memory")]), "too many resources fails due to init container memory"),
    (resource_pod(r(1, 1), init=[r(1, 3), r(1, 2)]), existing(r(9, 19)), None, (UNSCHED, [err("memory")]), "too many resources fails due to highest init container memory"),
    (resource_pod(r(1, 1), init=[r(1, 1)]), existing(r(9, 19)), None, None, "init container fits because it's the max, not sum, of containers and init containers"),
    (resource_pod(r(1, 1), init=[r(1, 1), r(1, 1)]), existing(r(9, 19)), None, None, "multiple init containers fit because it's the max, not sum, of containers and init containers"),
    (resource_pod(r(1, 1)), existing(r(5, 5)), None, None, "both resources fit"),
    (resource_pod(r(2, 1)), existing(r(9, 5)), None, (UNSCHED, [err("cpu")]), "one resource memory fits"),
    (resource_pod(r(1, 2)), existing(r(5, 19)), None, (UNSCHED, [err("memory")]), "one resource cpu fits"),
    (resource_pod(r(5, 1)), existing(r(5, 19)), None, None, "equal edge case"),
    (resource_pod(r(4, 1), init=[r(5, 1)]), existing(r(5, 19)), None, None, "equal edge case for init container"),
    (resource_pod(r(scalars={EXT_A: 1})), existing(r()), None, None, "extended resource fits"),
    (resource_pod(r(), init=[r(scalars={EXT_A: 1})]), existing(r()), None, None, "extended resource fits for init container"),
    (resource_pod(r(1, 1, scalars={EXT_A: 10})), existing(r(scalars={EXT_A: 0})), None, (UNRES, [err(EXT_A)]), "extended resource capacity enforced"),
    (resource_pod(r(), init=[r(1, 1, scalars={EXT_A: 10})]), existing(r(scalars={EXT_A: 0})), None, (UNRES, [err(EXT_A)]), "extended resource capacity enforced for init container"),
    (resource_pod(r(1, 1, scalars={EXT_A: 1})), existing(r(scalars={EXT_A: 5})), None, (UNSCHED, [err(EXT_A)]), "extended resource allocatable enforced"),
    (resource_pod(r(), init=[r(1, 1, scalars={EXT_A: 1})]), existing(r(scalars={EXT_A: 5})), None, (UNSCHED, [err(EXT_A)]), "extended resource allocatable enforced for init container"),
    (resource_pod(r(1, 1, scalars={EXT_A: 3}), r(1, 1, scalars={EXT_A: 3})), existing(r(scalars={EXT_A: 2})), None, (UNRES, [err(EXT_A)]), "extended resource allocatable enforced for multiple containers"),
    (resource_pod(r(), init=[r(1, 1, scalars={EXT_A: 3}), r(1, 1, scalars={EXT_A: 3})]), existing(r(scalars={EXT_A: 2})), None, None, "extended resource allocatable admits multiple init containers"),
    (resource_pod(r(), init=[r(1, 1, scalars={EXT_A: 6}), r(1, 1, scalars={EXT_A: 3})]), existing(r(scalars={EXT_A: 2})), None, (UNRES, [err(EXT_A)]), "extended resource allocatable enforced for multiple init containers"),
    (resource_pod(r(1, 1, scalars={EXT_B: 1})), existing(r()), None, (UNRES, [err(EXT_B)]), "extended resource allocatable enforced for unknown resource"),
    (resource_pod(r(), init=[r(1, 1, scalars={EXT_B: 1})]), existing(r()), None, (UNRES, [err(EXT_B)]), "extended resource allocatable enforced for unknown resource for init container"),
    (resource_pod(r(1, 1, scalars={K8S_A: 10})), existing(r()), None, (UNRES, [err(K8S_A)]), "kubernetes.io resource capacity enforced"),
    (resource_pod(r(), init=[r(1, 1, scalars={K8S_B: 10})]), existing(r()), None, (UNRES, [err(K8S_B)]), "kubernetes.io resource capacity enforced for init container"),
    (resource_pod(r(1, 1, scalars={HUGE_A: 10})), existing(r(scalars={HUGE_A: 0})), None, (UNRES, [err(HUGE_A)]), "hugepages resource capacity enforced"),
    (resource_pod(r(), init=[r(1, 1, scalars={HUGE_A: 10})]), existing(r(scalars={HUGE_A: 0})), None, (UNRES, [err(HUGE_A)]), "hugepages resource capacity enforced for init container"),
    (resource_pod(r(1, 1, scalars={HUGE_A: 3}), r(1, 1, scalars={HUGE_A: 3})), existing(r(scalars={HUGE_A: 2})), None, (UNRES, [err(HUGE_A)]), "hugepages resource allocatable enforced for multiple containers"),
    (resource_pod(r(1, 1, scalars={EXT_B: 1})), existing(r()), {"ignoredResources": ["example.com/bbb"]}, None, "skip checking ignored extended resource"),
    (resource_pod(r(1, 1), overhead={"cpu": "3m", "memory": "13"}), existing(r(5, 5)), None, None, "resources + pod overhead fits"),
    (resource_pod(r(1, 1), overhead={"cpu": "1m", "memory": "15"}), existing(r(5, 5)), None, (UNSCHED, [err("memory")]), "requests + overhead does not fit for memory"),
    (resource_pod(r(1, 1, scalars={EXT_B: 1, K8S_A: 1})), existing(r()), {"ignoredResourceGroups": ["example.com"]}, (UNRES, [err(K8S_A)]), "skip checking ignored extended resource via resource groups"),
    (resource_pod(r(1, 1, scalars={EXT_A: 0})), existing(r(scalars={EXT_A: 6})), None, None, "skip checking extended resource request with quantity zero via resource groups"),
    (resource_pod(r(scalars={EXT_A: 1})), existing(r(20, 30, scalars={EXT_A: 1})), None, None, "skip checking resource request with quantity zero"),
    (resource_pod(r(1, 1), pod_level={"cpu": "1m", "memory": "2"}), existing(r(5, 5)), None, None, "both pod-level and container-level resources fit"),
    (resource_pod(r(1, 1), pod_level={"cpu": "7m", "memory": "2"}), existing(r(5, 5)), None, (UNSCHED, [err("cpu")]), "pod-level cpu resource not fit"),
    (resource_pod(r(1, 1), pod_level={"cpu": "3m", "memory": "2"}), existing(r(5, 19)), None, (UNSCHED, [err("memory")]), "pod-level memory resource not fit"),
    (resource_pod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: "5"}), [], None, None, "pod-level hugepages resource fit"),
    (resource_pod(r(1, 1, scalars={HUGE_A: 3}), pod_level={"cpu": "3m", "memory": "2", HUGE_A: "5"}), [], None, None, "both pod-level and container-level hugepages resource fit"),
    (resource_pod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: "10"}), [], None, (UNRES, [err(HUGE_A)]), "pod-level hugepages resource not fit"),
    (resource_pod(r(1, 1), init=[r(1, 1)], pod_level={"cpu": "3m", "memory": "2"}), existing(r(5, 19)), None, (UNSCHED, [err("memory")]), "one pod-level cpu resource fits and all init and non-init containers resources fit"),
    (resource_pod(r(scalars={EXT_A: 1})), existing(r()), None, None, "extended resource backed by device plugin"),
    (resource_pod(r(1, 1, scalars={DRA_RES: 1})), existing(r()), None, (UNRES, [err(DRA_RES)]), "extended resource backed by DRA not enabled"),
    (resource_pod(r(1, 1, scalars={EXT_B: 1})), existing(r()), None, (UNRES, [err(EXT_B)]), "extended resource NOT backed by DRA"),
    (resource_pod(r(scalars={EXT_A: 1})), existing(r(scalars={EXT_A: 0})), None, None, "extended resource was backed by Device Plugin (Allocatable: 0), global cache"),
]


@pytest.mark.parametrize(("pod", "pods", "args", "want"), [pytest.param(*case[:4], id=case[4]) for case in ENOUGH])
def test_enough_requests(pod: dict[str, Any], pods: list[dict[str, Any]], args: dict[str, Any] | None, want: Any) -> None:
    node = fit_node(allocatable(10, 20, 32, 5, 20, 5))
    assert_filter(filter_nodes("NodeResourcesFit", pod, [node], pods, args)["node"], want)


NOT_ENOUGH = [
    ({}, existing(r(10, 20)), "even without specified resources, predicate fails when there's no space for additional pod"),
    (resource_pod(r(1, 1)), existing(r(5, 5)), "even if both resources fit, predicate fails when there's no space for additional pod"),
    (resource_pod(r(5, 1)), existing(r(5, 19)), "even for equal edge case, predicate fails when there's no space for additional pod"),
    (resource_pod(r(5, 1), init=[r(5, 1)]), existing(r(5, 19)), "even for equal edge case, predicate fails when there's no space for additional pod due to init container"),
]


@pytest.mark.parametrize(("pod", "pods"), [pytest.param(*case[:2], id=case[2]) for case in NOT_ENOUGH])
def test_not_enough_requests(pod: dict[str, Any], pods: list[dict[str, Any]]) -> None:
    node = fit_node(allocatable(10, 20, 1, 0, 0, 0))
    assert_filter(filter_nodes("NodeResourcesFit", pod, [node], pods)["node"], (UNSCHED, ["Too many pods"]))


STORAGE = [
    (resource_pod(r(1, 1)), existing(r(2, 10)), None, "empty storage requested, and pod fits"),
    (resource_pod(r(eph=25)), existing(r(2, 2)), (UNRES, [err("ephemeral-storage")]), "storage ephemeral local storage request exceeds allocatable"),
    (resource_pod(r(eph=5)), existing(r(2, 2, eph=10)), None, "ephemeral local storage is sufficient"),
    (resource_pod(r(eph=10)), existing(r(2, 2)), None, "pod fits"),
]


@pytest.mark.parametrize(("pod", "pods", "want"), [pytest.param(*case[:3], id=case[3]) for case in STORAGE])
def test_storage_requests(pod: dict[str, Any], pods: list[dict[str, Any]], want: Any) -> None:
    node = fit_node(allocatable(10, 20, 32, 5, 20, 5))
    assert_filter(filter_nodes("NodeResourcesFit", pod, [node], pods)["node"], want)


def _sidecar_pod(request: dict[str, str] | None, sidecar: dict[str, str] | None) -> dict[str, Any]:
    regular: dict[str, Any] = {"name": "regular"}
    if request is not None:
        regular["resources"] = {"requests": request}
    init: dict[str, Any] = {"name": "restartable-init", "restartPolicy": "Always"}
    if sidecar is not None:
        init["resources"] = {"requests": sidecar}
    return {"metadata": {"name": "pod"}, "spec": {"containers": [regular], "initContainers": [init]}}


RESTARTABLE = [
    ({"metadata": {"name": "pod"}, "spec": {"containers": [{"name": "regular"}]}}, None, "allow pod without restartable init containers if sidecar containers is disabled"),
    ({"metadata": {"name": "pod"}, "spec": {"containers": [{"name": "regular"}]}}, None, "allow pod without restartable init containers if sidecar containers is enabled"),
    (_sidecar_pod(None, None), None, "allow pod with restartable init containers if sidecar containers is enabled"),
    (_sidecar_pod({"cpu": "1m"}, {"cpu": "1m"}), None, "allow pod if the total requested resources do not exceed the node's allocatable resources"),
    (_sidecar_pod({"cpu": "1m"}, {"cpu": "2m"}), (UNRES, [err("cpu")]), "not allow pod if the total requested resources do exceed the node's allocatable resources"),
]


@pytest.mark.parametrize(("pod", "want"), [pytest.param(*case[:2], id=case[2]) for case in RESTARTABLE])
def test_restartable_init_containers(pod: dict[str, Any], want: Any) -> None:
    node = fit_node(allocatable(2, 0, 1, 0, 0, 0))
    assert_filter(filter_nodes("NodeResourcesFit", pod, [node], [])["node"], want)


# ------------------------------------------------------------------------ scores

NODES_4_6 = [
    make_node().name("node1").capacity({"cpu": "4000", "memory": "10000"}).obj(),
    make_node().name("node2").capacity({"cpu": "6000", "memory": "10000"}).obj(),
]
PODS_2_1 = [
    make_pod().node("node1").req({"cpu": "2000", "memory": "4000"}).obj(),
    make_pod().node("node2").req({"cpu": "1000", "memory": "2000"}).obj(),
]


def rtcr(shape: list[tuple[int, int]], resources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    strategy: dict[str, Any] = {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in shape]}}
    strategy["resources"] = resources if resources is not None else DEFAULT_RESOURCES
    return {"scoringStrategy": strategy}


def strategy(kind: str, resources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind}
    if resources is not None:
        out["resources"] = resources
    return {"scoringStrategy": out}


FIT_SCORE = [
    ("test case for ScoringStrategy RequestedToCapacityRatio case1", {"cpu": "3000", "memory": "5000"}, NODES_4_6, PODS_2_1, rtcr([(0, 10), (100, 0)]), [10, 32]),
    ("test case for ScoringStrategy RequestedToCapacityRatio case2", {"cpu": "3000", "memory": "5000"}, NODES_4_6, PODS_2_1, rtcr([(0, 0), (100, 10)]), [95, 68]),
    ("test case for ScoringStrategy MostAllocated", {"cpu": "1000", "memory": "2000"}, NODES_4_6, PODS_2_1, strategy("MostAllocated", DEFAULT_RESOURCES), [67, 36]),
    ("test case for ScoringStrategy LeastAllocated", {"cpu": "1000", "memory": "2000"}, NODES_4_6, PODS_2_1, strategy("LeastAllocated", DEFAULT_RESOURCES), [32, 63]),
    ("test case for ScoringStrategy RequestedToCapacityRatio case1 if PreScore is not called", {"cpu": "3000", "memory": "5000"}, NODES_4_6, PODS_2_1, rtcr([(0, 10), (100, 0)]), [10, 32]),
    ("test case for ScoringStrategy MostAllocated if PreScore is not called", {"cpu": "1000", "memory": "2000"}, NODES_4_6, PODS_2_1, strategy("MostAllocated", DEFAULT_RESOURCES), [67, 36]),
    ("test case for ScoringStrategy LeastAllocated if PreScore is not called", {"cpu": "1000", "memory": "2000"}, NODES_4_6, PODS_2_1, strategy("LeastAllocated", DEFAULT_RESOURCES), [32, 63]),
]

_SIDECAR_NODES = [
    make_node().name("node1").capacity({"cpu": "4000", "memory": "10000"}).obj(),
    make_node().name("node2").capacity({"cpu": "4000", "memory": "10000"}).obj(),
]
_SIDECAR_PODS = [
    make_pod().node("node1").req({"cpu": "1000", "memory": "2000"}).sidecar_req({"cpu": "1000", "memory": "2000"}).obj(),
    make_pod().node("node2").req({"cpu": "1000", "memory": "2000"}).obj(),
]
FIT_SCORE += [
    ("test case for ScoringStrategy MostAllocated with sidecar container", {"cpu": "1000", "memory": "2000"}, _SIDECAR_NODES, _SIDECAR_PODS, strategy("MostAllocated", DEFAULT_RESOURCES), [67, 45]),
    ("test case for ScoringStrategy LeastAllocated with sidecar container", {"cpu": "1000", "memory": "2000"}, _SIDECAR_NODES, _SIDECAR_PODS, strategy("LeastAllocated", DEFAULT_RESOURCES), [32, 55]),
]


def _scores(result: dict[str, int], nodes: list[dict[str, Any]]) -> list[int]:
    return [result[n["metadata"]["name"]] for n in nodes]


@pytest.mark.parametrize(("request_", "nodes", "pods", "args", "want"), [pytest.param(*case[1:], id=case[0]) for case in FIT_SCORE])
def test_fit_score(request_: dict[str, str], nodes: list[dict[str, Any]], pods: list[dict[str, Any]], args: dict[str, Any], want: list[int]) -> None:
    pod = make_pod().req(request_).obj()
    assert _scores(score_nodes("NodeResourcesFit", pod, nodes, pods, args), nodes) == want


def cap(name: str, cpu: str, mem: str, ext: str | None = None) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": mem}
    if ext is not None:
        resources[EXTENDED] = ext
    return make_node().name(name).capacity(resources).obj()


def twice(*reqs: dict[str, str]) -> dict[str, Any]:
    pod = make_pod()
    for q in reqs:
        pod.req(q)
    return pod.obj()


TWO_REQ = twice({"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
NO_PODS: list[dict[str, Any]] = []
_BARE_PODS = [make_pod().node("node1").obj(), make_pod().node("node1").obj(), make_pod().node("node2").obj(), make_pod().node("node2").obj()]
_CPU_PODS_4 = [
    make_pod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
    make_pod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
    make_pod().node("node2").req({"cpu": "3000", "memory": "0"}).obj(),
    make_pod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj(),
]
_CPU_PODS_2 = [
    make_pod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
    make_pod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj(),
]
WEIGHTED = [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]
EXT_FIRST = [{"name": EXTENDED, "weight": 2}, {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]

# (name, pod, nodes, existing, resources, expected scores | ("error", fields))
LEAST = [
    ("nothing scheduled, nothing requested", make_pod().obj(), [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], NO_PODS, DEFAULT_RESOURCES, [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_REQ, [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], NO_PODS, DEFAULT_RESOURCES, [37, 50]),
    ("Resources not set, pods scheduled with error", TWO_REQ, [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], NO_PODS, [], ("error", [])),
    ("no resources requested, pods scheduled", make_pod().obj(), [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], _BARE_PODS, DEFAULT_RESOURCES, [100, 100]),
    ("no resources requested, pods scheduled with resources", make_pod().obj(), [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")], _CPU_PODS_4, DEFAULT_RESOURCES, [70, 57]),
    ("resources requested, pods scheduled with resources", TWO_REQ, [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")], _CPU_PODS_2, DEFAULT_RESOURCES, [57, 45]),
    ("resources requested, pods scheduled with resources, differently sized nodes", TWO_REQ, [cap("node1", "10000", "20000"), cap("node2", "10000", "50000")], _CPU_PODS_2, DEFAULT_RESOURCES, [57, 60]),
    ("requested resources exceed node capacity", make_pod().req({"cpu": "3000", "memory": "0"}).obj(), [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], _CPU_PODS_2, DEFAULT_RESOURCES, [50, 25]),
    ("zero node resources, pods scheduled with resources", make_pod().obj(), [make_node().name("node1").obj(), make_node().name("node2").obj()], _CPU_PODS_2, DEFAULT_RESOURCES, [0, 0]),
    ("nothing scheduled, resources requested with different weight on CPU and memory, differently sized nodes", TWO_REQ, [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], NO_PODS, WEIGHTED, [41, 50]),
    ("resource with negative weight", TWO_REQ, [cap("node1", "4000", "10000")], NO_PODS, [{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}], ("error", ["scoringStrategy.resources[0].weight"])),
    ("resource with zero weight", TWO_REQ, [cap("node1", "4000", "10000")], NO_PODS, [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 0}], ("error", ["scoringStrategy.resources[1].weight"])),
    ("resource weight larger than MaxNodeScore", TWO_REQ, [cap("node1", "4000", "10000")], NO_PODS, [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 101}], ("error", ["scoringStrategy.resources[1].weight"])),
    ("bypass extended resource if the pod does not request", TWO_REQ, [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", "4")], NO_PODS, EXTENDED_SET, [50, 50]),
    ("honor extended resource if the pod requests", make_pod().req({"cpu": "3000", "memory": "5000", EXTENDED: "2"}).obj(), [cap("node1", "6000", "10000", "4"), cap("node2", "6000", "10000", "10")], NO_PODS, EXTENDED_SET, [50, 60]),
    ("if the node doesn't have a resource", make_pod().req({"cpu": "3000", "memory": "4000"}).obj(), [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", "4")], NO_PODS, EXT_FIRST, [55, 55]),
]

MOST = [
    ("nothing scheduled, nothing requested", make_pod().obj(), [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], NO_PODS, DEFAULT_RESOURCES, [0, 0]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_REQ, [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], NO_PODS, DEFAULT_RESOURCES, [62, 50]),
    ("Resources not set, pods scheduled with error", TWO_REQ, [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], NO_PODS, [], ("error", [])),
    ("no resources requested, pods scheduled with resources", make_pod().obj(), [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")], _CPU_PODS_4, DEFAULT_RESOURCES, [30, 42]),
    ("resources requested, pods scheduled with resources", TWO_REQ, [cap("node1", "10000", "20000"), cap("node2", "10000", "20000")], _CPU_PODS_2, DEFAULT_RESOURCES, [42, 55]),
    ("resources requested equal node capacity", twice({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}), [cap("node1", "5000", "10000"), cap("node2", "10000", "9000")], NO_PODS, DEFAULT_RESOURCES, [95, 75]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_REQ, [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], NO_PODS, WEIGHTED, [58, 50]),
    ("no resources requested, pods scheduled, nonzero request for resource", make_pod().container("container").obj(), [cap("node1", "250m", "1000Mi"), cap("node2", "250m", "1000Mi")], [make_pod().node("node1").container("container").obj(), make_pod().node("node1").container("container").obj()], DEFAULT_RESOURCES, [80, 30]),
    ("resource with negative weight", TWO_REQ, [cap("node2", "4000", "10000")], NO_PODS, [{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}], ("error", ["scoringStrategy.resources[0].weight"])),
    ("resource with zero weight", TWO_REQ, [cap("node2", "4000", "10000")], NO_PODS, [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 0}], ("error", ["scoringStrategy.resources[1].weight"])),
    ("resource weight larger than MaxNodeScore", TWO_REQ, [cap("node2", "4000", "10000")], NO_PODS, [{"name": "memory", "weight": 101}], ("error", ["scoringStrategy.resources[0].weight"])),
    ("bypass extended resource if the pod does not request", TWO_REQ, [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", "4")], NO_PODS, EXTENDED_SET, [50, 50]),
    ("honor extended resource if the pod request", make_pod().node("node1").req({"cpu": "3000", "memory": "5000", EXTENDED: "2"}).obj(), [cap("node1", "6000", "10000", "4"), cap("node2", "6000", "10000", "10")], NO_PODS, EXTENDED_SET, [50, 40]),
    ("if the node doesn't have a resource", make_pod().node("node1").req({"cpu": "3000", "memory": "4000"}).obj(), [cap("node1", "6000", "10000"), cap("node2", "6000", "10000", "4")], NO_PODS, EXT_FIRST, [45, 45]),
]


def _run_strategy(kind: str, pod: dict[str, Any], nodes: list[dict[str, Any]], pods: list[dict[str, Any]], resources: list[dict[str, Any]], want: Any) -> None:
    args = strategy(kind, resources)
    if isinstance(want, tuple):
        with pytest.raises(ValueError) as excinfo:
            score_nodes("NodeResourcesFit", pod, nodes, pods, args)
        if want[1]:
            assert isinstance(excinfo.value, ArgsError)
            assert excinfo.value.fields == want[1]
        return
    assert _scores(score_nodes("NodeResourcesFit", pod, nodes, pods, args), nodes) == want


@pytest.mark.parametrize(("pod", "nodes", "pods", "resources", "want"), [pytest.param(*case[1:], id=case[0]) for case in LEAST])
def test_least_allocated_scoring_strategy(pod: Any, nodes: Any, pods: Any, resources: Any, want: Any) -> None:
    _run_strategy("LeastAllocated", pod, nodes, pods, resources, want)


@pytest.mark.parametrize(("pod", "nodes", "pods", "resources", "want"), [pytest.param(*case[1:], id=case[0]) for case in MOST])
def test_most_allocated_scoring_strategy(pod: Any, nodes: Any, pods: Any, resources: Any, want: Any) -> None:
    _run_strategy("MostAllocated", pod, nodes, pods, resources, want)


# ------------------------------------------------------------------------ RequestedToCapacityRatio

_TWO_BARE = [make_pod().node("node1").obj(), make_pod().node("node1").obj()]
RTCR = [
    ("nothing scheduled, nothing requested (default - least requested nodes have priority)", make_pod().obj(), [cap("node1", "4000", "10000"), cap("node2", "4000", "10000")], _TWO_BARE, [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes (default - least requested nodes have priority)", TWO_REQ, [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], _TWO_BARE, [38, 50]),
    ("no resources requested, pods scheduled with resources (default - least requested nodes have priority)", make_pod().obj(), [cap("node1", "4000", "10000"), cap("node2", "6000", "10000")], [make_pod().node("node1").req({"cpu": "3000", "memory": "5000"}).obj(), make_pod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], [38, 50]),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "want"), [pytest.param(*case[1:], id=case[0]) for case in RTCR])
def test_requested_to_capacity_ratio_scoring_strategy(pod: Any, nodes: Any, pods: Any, want: list[int]) -> None:
    args = rtcr([(0, 10), (100, 0)])
    assert _scores(score_nodes("NodeResourcesFit", pod, nodes, pods, args), nodes) == want


BROKEN_LINEAR = [
    ([(10, 1), (90, 9)], [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9), (99, 9), (100, 9), (110, 9)]),
    ([(0, 2), (40, 10), (100, 0)], [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    ([(0, 2), (40, 2), (100, 2)], [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
]


@pytest.mark.parametrize(("points", "assertions"), [pytest.param(p, a, id=f"case_{i}") for i, (p, a) in enumerate(BROKEN_LINEAR)])
def test_broken_linear_function(points: list[tuple[int, int]], assertions: list[tuple[int, int]]) -> None:
    shape = [ShapePoint(u, s) for u, s in points]
    for p, expected in assertions:
        assert broken_linear(shape, p) == expected, (points, p)


def ext_node(name: str, extended: dict[str, str]) -> dict[str, Any]:
    """``makeNode(name, 4000, 10000*1024*1024, extended)``: cpu in millicores."""
    return make_node().name(name).capacity({"cpu": "4000m", "memory": str(10000 * 1024 * 1024), **extended}).obj()


FOO = "intel.com/foo"
BAR = "intel.com/bar"
SINGLE_NODES = [ext_node("node1", {FOO: "8"}), ext_node("node2", {FOO: "4"})]
SINGLE = [
    ("nothing scheduled, nothing requested", make_pod().obj(), [], [0, 0]),
    ("resources requested, pods scheduled with less resources", make_pod().req({FOO: "2"}).obj(), [make_pod().obj()], [2, 5]),
    ("resources requested, pods scheduled with resources, on node with existing pod running ", make_pod().req({FOO: "2"}).obj(), [make_pod().req({FOO: "2"}).node("node2").obj()], [2, 10]),
    ("resources requested, pods scheduled with more resources", make_pod().req({FOO: "4"}).obj(), [make_pod().obj()], [5, 10]),
]


@pytest.mark.parametrize(("pod", "pods", "want"), [pytest.param(*case[1:], id=case[0]) for case in SINGLE])
def test_resource_bin_packing_single_extended(pod: Any, pods: Any, want: list[int]) -> None:
    args = rtcr([(0, 0), (100, 1)], [{"name": FOO, "weight": 1}])
    assert _scores(score_nodes("NodeResourcesFit", pod, SINGLE_NODES, pods, args), SINGLE_NODES) == want


MULTI_NODES = [ext_node("node1", {FOO: "8", BAR: "4"}), ext_node("node2", {FOO: "4", BAR: "8"})]
MULTI = [
    ("nothing scheduled, nothing requested", make_pod().obj(), [], [0, 0]),
    ("resources requested, pods scheduled with less resources", make_pod().req({FOO: "2", BAR: "2"}).obj(), [make_pod().obj()], [4, 3]),
    ("resources requested, pods scheduled with resources, on node with existing pod running ", make_pod().req({FOO: "2", BAR: "2"}).obj(), [make_pod().req({FOO: "4", BAR: "2"}).node("node2").obj()], [4, 7]),
    ("resources requested, pods scheduled with more resources", make_pod().req({FOO: "4", BAR: "2"}).obj(), [make_pod().obj()], [5, 5]),
]


@pytest.mark.parametrize(("pod", "pods", "want"), [pytest.param(*case[1:], id=case[0]) for case in MULTI])
def test_resource_bin_packing_multiple_extended(pod: Any, pods: Any, want: list[int]) -> None:
    args = rtcr([(0, 0), (100, 1)], [{"name": FOO, "weight": 3}, {"name": BAR, "weight": 5}])
    assert _scores(score_nodes("NodeResourcesFit", pod, MULTI_NODES, pods, args), MULTI_NODES) == want


# ------------------------------------------------------------------------ BalancedAllocation


def bnode(name: str, milli_cpu: int, memory: int, scalars: dict[str, int] | None = None) -> dict[str, Any]:
    """``makeNode(name, milliCPU, memory, extended)``."""
    resources = {"cpu": f"{milli_cpu}m", "memory": str(memory), **{k: str(v) for k, v in (scalars or {}).items()}}
    return make_node().name(name).capacity(resources).obj()


def spec_pod(node: str, *containers: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {}, "spec": {"nodeName": node, "containers": [{"resources": {"requests": c}} for c in containers]}}


CPU_AND_MEMORY_AND_GPU = spec_pod("node1", {"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000", "nvidia.com/gpu": "3"})
CPU_ONLY = spec_pod("node1", {"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})
CPU_ONLY_2 = spec_pod("node2", {"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})
CPU_AND_MEMORY = spec_pod("node2", {"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
GPU8 = {"nvidia.com/gpu": 8}
WITH_GPU = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]

BALANCED = [
    ("nothing scheduled, nothing requested, skip in PreScore", make_pod().obj(), [bnode("node1", 4000, 10000), bnode("node2", 4000, 10000)], [], DEFAULT_RESOURCES, [0, 0]),
    ("nothing scheduled, resources requested, differently sized nodes", CPU_AND_MEMORY, [bnode("node1", 4000, 10000), bnode("node2", 6000, 10000)], [], DEFAULT_RESOURCES, [87, 100]),
    ("resources requested, pods scheduled with resources", CPU_AND_MEMORY, [bnode("node1", 10000, 20000), bnode("node2", 10000, 20000)], [CPU_ONLY, CPU_AND_MEMORY], DEFAULT_RESOURCES, [82, 95]),
    ("resources requested, pods scheduled with resources, differently sized nodes", CPU_AND_MEMORY, [bnode("node1", 10000, 20000), bnode("node2", 10000, 50000)], [CPU_ONLY, CPU_AND_MEMORY], DEFAULT_RESOURCES, [82, 80]),
    ("requested resources at node capacity", CPU_ONLY, [bnode("node1", 6000, 10000), bnode("node2", 6000, 10000)], [CPU_ONLY, CPU_AND_MEMORY], DEFAULT_RESOURCES, [50, 75]),
    ("include scalar resource on a node for balanced resource allocation", make_pod().req({"memory": "0", "nvidia.com/gpu": "1"}).obj(), [bnode("node1", 3500, 40000, GPU8), bnode("node2", 3500, 40000, GPU8)], [CPU_AND_MEMORY, CPU_AND_MEMORY_AND_GPU], WITH_GPU, [70, 65]),
    ("node without the scalar resource should skip the scalar resource", CPU_AND_MEMORY, [bnode("node1", 3500, 40000, GPU8), bnode("node2", 3500, 40000)], [], WITH_GPU, [63, 63]),
    ("resources requested, pods scheduled with resources if PreScore not called", CPU_AND_MEMORY, [bnode("node1", 10000, 20000), bnode("node2", 10000, 20000)], [CPU_ONLY, CPU_AND_MEMORY], DEFAULT_RESOURCES, [82, 95]),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "resources", "want"), [pytest.param(*case[1:], id=case[0]) for case in BALANCED])
def test_node_resources_balanced_allocation(pod: Any, nodes: Any, pods: Any, resources: Any, want: list[int]) -> None:
    result = score_nodes("NodeResourcesBalancedAllocation", pod, nodes, pods, {"resources": resources})
    assert _scores(result, nodes) == want


def test_balanced_allocation_has_no_filter() -> None:
    nodes = [bnode("node1", 1, 1)]
    assert filter_nodes("NodeResourcesBalancedAllocation", CPU_AND_MEMORY, nodes, [])["node1"].ok
