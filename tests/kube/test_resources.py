"""kube.resources against component-helpers/resource/helpers_test.go and the quota evaluator's pods_test.go."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube import resources
from kube.quantity import Quantity, QuantityError, parse_quantity
from kube.resources import (
    PodSpecError,
    UnsupportedWorkloadError,
    pod_limits,
    pod_requests,
    quota_usage,
    register_workload_kind,
    workload_components,
    workload_kind,
    workload_pod_template,
    workload_replicas,
    workload_usage,
)

FUZZ = settings(database=None, deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def present(**fields: Any) -> dict[str, Any]:
    """The fields that are set: a test object leaves out what upstream's case leaves nil."""
    return {name: value for name, value in fields.items() if value is not None}


def container(name: str = "", requests: dict | None = None, limits: dict | None = None, sidecar: bool = False) -> dict:
    result: dict[str, Any] = {"name": name, "resources": present(requests=requests, limits=limits)}
    if sidecar:
        result["restartPolicy"] = "Always"
    return result


def status(name: str = "", requests: dict | None = None, limits: dict | None = None, allocated: dict | None = None) -> dict:
    resources = present(requests=requests, limits=limits)
    return {"name": name, **present(resources=resources or None, allocatedResources=allocated)}


def make_pod(
    containers: list | None = None,
    init: list | None = None,
    overhead: dict | None = None,
    pod_resources: dict | None = None,
    statuses: list | None = None,
    init_statuses: list | None = None,
    conditions: list | None = None,
) -> dict:
    spec = {"containers": containers or [], **present(initContainers=init, overhead=overhead, resources=pod_resources)}
    pod_status = present(containerStatuses=statuses, initContainerStatuses=init_statuses, conditions=conditions)
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec, "status": pod_status}


def ql(values: dict[str, str]) -> dict[str, Quantity]:
    return {name: parse_quantity(text) for name, text in values.items()}


def cpu(text: str) -> dict[str, str]:
    return {"cpu": text}


# ---------------------------------------------------------------------------------------
# TestPodRequestsAndLimits / WithoutOverhead


def upstream_get_pod(
    cpu_request="", cpu_limit="", memory_request="", memory_limit="", cpu_overhead="", memory_overhead=""
) -> dict:
    """helpers_test.go getPod: one container and one identical init container."""
    requests = {k: v for k, v in (("cpu", cpu_request), ("memory", memory_request)) if v}
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v}
    overhead = {k: v for k, v in (("cpu", cpu_overhead), ("memory", memory_overhead)) if v}
    return make_pod([container("foo", requests, limits)], init=[container("init-foo", requests, limits)], overhead=overhead)


@pytest.mark.parametrize(
    ("pod", "requests", "limits"),
    [
        pytest.param(upstream_get_pod(cpu_limit="9"), {}, {"cpu": "9"}, id="just-limit-no-overhead"),
        pytest.param(
            upstream_get_pod(cpu_overhead="5", memory_overhead="5"), {"cpu": "5", "memory": "5"}, {}, id="just-overhead"
        ),
        pytest.param(
            upstream_get_pod(cpu_request="1", memory_request="10", cpu_overhead="5", memory_overhead="5"),
            {"cpu": "6", "memory": "15"},
            {},
            id="req-and-overhead",
        ),
        pytest.param(
            upstream_get_pod("1", "2", "10", "12", "5", "5"),
            {"cpu": "6", "memory": "15"},
            {"cpu": "7", "memory": "17"},
            id="all-req-lim-and-overhead",
        ),
        pytest.param(
            upstream_get_pod(cpu_request="1", cpu_limit="2", memory_request="10", cpu_overhead="5", memory_overhead="5"),
            {"cpu": "6", "memory": "15"},
            {"cpu": "7"},
            id="req-some-lim-and-overhead",
        ),
    ],
)
def test_pod_requests_and_limits(pod: dict, requests: dict, limits: dict) -> None:
    assert pod_requests(pod) == ql(requests)
    assert pod_limits(pod) == ql(limits)


TWO_CONTAINERS = [
    container("foobar", {"cpu": "1", "memory": "5"}, {"cpu": "2", "memory": "10"}),
    container("foobar2", {"cpu": "4", "memory": "12"}, {"cpu": "8", "memory": "24"}),
]
INITS = [
    container("small-init", {"cpu": "1", "memory": "5"}, {"cpu": "1", "memory": "5"}),
    container("big-init", {"cpu": "40", "memory": "120"}, {"cpu": "80", "memory": "240"}),
]


@pytest.mark.parametrize(
    ("pod", "requests", "limits"),
    [
        pytest.param(
            make_pod(TWO_CONTAINERS), {"cpu": "5", "memory": "17"}, {"cpu": "10", "memory": "34"}, id="two containers no overhead"
        ),
        pytest.param(
            make_pod(TWO_CONTAINERS, overhead={"cpu": "3", "memory": "8"}),
            {"cpu": "5", "memory": "17"},
            {"cpu": "10", "memory": "34"},
            id="overhead excluded",
        ),
        pytest.param(
            make_pod(TWO_CONTAINERS, init=INITS, overhead={"cpu": "3", "memory": "8"}),
            {"cpu": "40", "memory": "120"},
            {"cpu": "80", "memory": "240"},
            id="massive init",
        ),
    ],
)
def test_pod_requests_and_limits_without_overhead(pod: dict, requests: dict, limits: dict) -> None:
    assert pod_requests(pod, exclude_overhead=True) == ql(requests)
    assert pod_limits(pod, exclude_overhead=True) == ql(limits)


# ---------------------------------------------------------------------------------------
# TestPodResourceRequests and TestPodResourceLimits

STATUS = {"use_status_resources": True}
SPEC = {"use_status_resources": False}


def mem(text: str) -> dict[str, str]:
    return {"memory": text}


def on(field: str, name: str, amount: str, sidecar: bool = False) -> dict:
    """A container with ``amount`` CPUs in its ``field`` ("requests" or "limits")."""
    return container(name, sidecar=sidecar, **{field: cpu(amount)})


def leading_cases(field: str) -> list:
    """The first cases of upstream's TestPodResourceRequests and TestPodResourceLimits, one table on either field."""
    containers, init = [on(field, "", "2"), on(field, "", "3")], [on(field, "", "2")]
    return [
        pytest.param(make_pod([on(field, "", "1")], init=[on(field, "", "4")]), {}, cpu("4"), id="larger init container"),
        pytest.param(make_pod(containers, init=init), {}, cpu("5"), id="larger containers"),
        pytest.param(
            make_pod(containers, init=init, overhead=cpu("1")), {"exclude_overhead": True}, cpu("5"), id="pod overhead excluded"
        ),
    ]


def sidecar_cases(field: str) -> list:
    """Upstream's restartable init container cases, the same in TestPodResourceRequests and TestPodResourceLimits."""
    regular = [on(field, "container-1", "1")]
    sidecars = [on(field, f"restartable-init-{n}", str(n), sidecar=True) for n in (1, 2, 3)]
    init = on(field, "init-1", "5")
    return [
        pytest.param(make_pod(regular, init=sidecars[:1]), {}, cpu("2"), id="restartable init container"),
        pytest.param(make_pod(regular, init=[init, *sidecars]), {}, cpu("7"), id="multiple restartable init containers"),
        pytest.param(
            make_pod(regular, init=[init, *sidecars[:2], on(field, "init-2", "5"), sidecars[2]]),
            {},
            cpu("8"),
            id="multiple restartable and regular init containers",
        ),
        pytest.param(
            make_pod(
                [on(field, "container-1", "100")], init=[on(field, "restartable-init-1", "10", True), on(field, "init-1", "200")]
            ),
            {},
            cpu("210"),
            id="restartable-init, init and regular",
        ),
    ]


def resized_pod(field: str, spec: dict, reported: dict, sidecar: bool = False, conditions: list | None = None) -> dict:
    """Upstream's resized pod: container-1 (restartable-init-1 with ``sidecar``) has ``spec`` in its ``field``
    and its status reports ``reported``."""
    name = "restartable-init-1" if sidecar else "container-1"
    own, reports = [container(name, sidecar=sidecar, **{field: spec})], [status(name, **{field: reported})]
    if sidecar:
        return make_pod(init=own, init_statuses=reports, conditions=conditions)
    return make_pod(own, statuses=reports, conditions=conditions)


def resize_cases(prefix: str, sidecar: bool) -> list:
    """TestPodResourceRequests' resize cases, which upstream runs on a container and on a restartable init container."""

    def pod(conditions: list | None = None) -> dict:
        return resized_pod("requests", cpu("4"), cpu("2"), sidecar=sidecar, conditions=conditions)

    return [
        pytest.param(pod(INFEASIBLE), STATUS, cpu("2"), id=f"{prefix}, infeasible"),
        pytest.param(pod(), STATUS, cpu("4"), id=f"{prefix}, no resize status"),
        pytest.param(pod(INFEASIBLE), SPEC, cpu("4"), id=f"{prefix}, infeasible, but don't use status"),
    ]


def scaled_cases(suffix: str, sidecar: bool) -> list:
    """TestPodResourceLimits' resize cases, which upstream runs on a container and on a restartable init container."""

    def pod(spec: str, reported: str) -> dict:
        return resized_pod("limits", mem(spec), mem(reported), sidecar=sidecar)

    return [
        pytest.param(pod("2Gi", "1Gi"), STATUS, mem("2Gi"), id=f"pod scaled up{suffix}"),
        pytest.param(pod("1Gi", "2Gi"), STATUS, mem("2Gi"), id=f"pod scaled down{suffix}"),
        pytest.param(pod("1Gi", "2Gi"), SPEC, mem("1Gi"), id=f"pod scaled down{suffix}, don't use status"),
    ]


REQUEST_CASES = [
    *leading_cases("requests"),
    pytest.param(
        make_pod(
            [container(requests=cpu("2")), container(requests=cpu("3"))],
            init=[container(requests=cpu("2"), limits=cpu("2"))],
            overhead={"cpu": "1", "memory": "1Gi"},
        ),
        {},
        {"cpu": "6", "memory": "1Gi"},
        id="pod overhead included",
    ),
    *resize_cases("resized", sidecar=False),
    pytest.param(
        make_pod(
            [container("container-1", cpu("6"))],
            statuses=[status("container-1", cpu("2"), allocated=cpu("4"))],
            conditions=INFEASIBLE,
        ),
        STATUS,
        cpu("4"),
        id="resized, infeasible & in-progress",
    ),
    pytest.param(
        make_pod(
            [container("container-1", {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"})],
            statuses=[
                status(
                    "container-1",
                    {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                    allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                )
            ],
        ),
        STATUS,
        {"cpu": "30m", "memory": "30M", "ephemeral-storage": "30G"},
        id="resized: per-resource 3-way maximum",
    ),
    *resize_cases("resized, restartable init container", sidecar=True),
    *sidecar_cases("requests"),
    pytest.param(
        make_pod(
            [container("c1", cpu("1")), container("c2", cpu("2"))],
            statuses=[status("c1", allocated=cpu("2")), status("c2", allocated=cpu("1"))],
        ),
        STATUS,
        cpu("3"),
        id="aggregate request resolves max of sums instead of sum of maxes",
    ),
]


@pytest.mark.parametrize(("pod", "options", "expected"), REQUEST_CASES)
def test_pod_resource_requests(pod: dict, options: dict, expected: dict) -> None:
    assert pod_requests(pod, **options) == ql(expected)


LIMIT_CASES = [
    *leading_cases("limits"),
    pytest.param(
        make_pod(
            [container(limits=cpu("2")), container(limits=cpu("3"))],
            init=[container(limits=cpu("2"))],
            overhead={"cpu": "1", "memory": "1Gi"},
        ),
        {},
        {"cpu": "6"},
        id="pod overhead included only in set limits",
    ),
    pytest.param(make_pod([container()], init=[]), {}, {}, id="no limited containers"),
    pytest.param(
        make_pod([container(limits={"cpu": "2", "memory": "2Gi"}), container()], init=[]),
        {},
        {"cpu": "2", "memory": "2Gi"},
        id="one limited and one unlimited container",
    ),
    pytest.param(
        make_pod(
            [container(limits={"cpu": "1", "memory": "1Gi"})], init=[container(limits={"cpu": "2", "memory": "2Gi"}), container()]
        ),
        {},
        {"cpu": "2", "memory": "2Gi"},
        id="one limited and one unlimited init container",
    ),
    *sidecar_cases("limits"),
    *scaled_cases("", sidecar=False),
    *scaled_cases(" with restartable init containers", sidecar=True),
    pytest.param(
        make_pod(
            [container("c1", limits=cpu("1")), container("c2", limits=cpu("2"))],
            statuses=[status("c1", limits=cpu("2")), status("c2", limits=cpu("1"))],
        ),
        STATUS,
        cpu("3"),
        id="aggregate limit resolves max of sums instead of sum of maxes",
    ),
    pytest.param(
        make_pod([container("c1", limits=cpu("10"))], statuses=[status("c1", limits=cpu("6"))], conditions=INFEASIBLE),
        STATUS,
        cpu("6"),
        id="container limits aggregation with infeasible resize",
    ),
]


@pytest.mark.parametrize(("pod", "options", "expected"), LIMIT_CASES)
def test_pod_resource_limits(pod: dict, options: dict, expected: dict) -> None:
    assert pod_limits(pod, **options) == ql(expected)


def test_infeasible_resize_without_status_requests_counts_nothing_from_spec() -> None:
    pod = make_pod([container("c1", cpu("10"), cpu("10"))], statuses=[status("c1", limits=cpu("6"))], conditions=INFEASIBLE)
    assert pod_requests(pod, use_status_resources=True) == {}
    assert pod_requests(pod) == ql(cpu("10"))


def test_first_resize_condition_decides() -> None:
    conditions = [{"type": "PodResizePending", "reason": "Deferred"}, *INFEASIBLE]
    pod = make_pod([container("c1", cpu("4"))], statuses=[status("c1", cpu("2"))], conditions=conditions)
    assert pod_requests(pod, use_status_resources=True) == ql(cpu("4"))


# ---------------------------------------------------------------------------------------
# TestAggregateContainerRequestsAndLimits, through the public functions


def one_field_cases(field: str) -> list:
    """TestAggregateContainerRequestsAndLimits' cases on one field, which upstream runs on requests and on limits."""

    def total(amount: str) -> tuple[dict, dict]:
        return (cpu(amount), {}) if field == "requests" else ({}, cpu(amount))

    nine = on(field, "", "9")
    return [
        pytest.param(make_pod([nine]), {}, *total("9"), id=f"one container with {field}"),
        pytest.param(make_pod([nine, nine]), {}, *total("18"), id=f"two containers with {field}"),
        pytest.param(make_pod([nine], init=[nine]), {}, *total("9"), id=f"regular and init {field}"),
        pytest.param(
            make_pod([nine], init=[on(field, "", "8", sidecar=True), on(field, "", "6")]),
            {},
            *total("17"),
            id=f"regular, init and sidecar {field}",
        ),
    ]


AGGREGATE_CASES = [
    *one_field_cases("limits"),
    *one_field_cases("requests"),
    pytest.param(
        make_pod([container("container-1")], statuses=[status("container-1", cpu("2"))]),
        {"use_status_resources": True},
        {"cpu": "2"},
        {},
        id="empty requests, status with requests",
    ),
    pytest.param(
        make_pod(init=[container("container-1", sidecar=True)], init_statuses=[status("container-1", cpu("2"))]),
        {"use_status_resources": True},
        {"cpu": "2"},
        {},
        id="sidecar with empty requests, status with requests",
    ),
    pytest.param(
        make_pod(
            [container("c1", cpu("1"), cpu("2"))],
            statuses=[status("c1", cpu("5"), cpu("7"), allocated=cpu("6"))],
        ),
        {"use_status_resources": True},
        {"cpu": "6"},
        {"cpu": "7"},
        id="container status aggregation",
    ),
    pytest.param(
        make_pod([container("c1", cpu("1"), cpu("2"))], statuses=[status("c1", cpu("5"), cpu("8"), allocated=cpu("6"))]),
        {"use_status_resources": True},
        {"cpu": "6"},
        {"cpu": "8"},
        id="container status aggregation, larger actuated limit",
    ),
]


@pytest.mark.parametrize(("pod", "options", "requests", "limits"), AGGREGATE_CASES)
def test_aggregate_container_requests_and_limits(pod: dict, options: dict, requests: dict, limits: dict) -> None:
    assert pod_requests(pod, **options) == ql(requests)
    assert pod_limits(pod, **options) == ql(limits)


def test_pod_level_status_resources_are_ignored() -> None:
    """InPlacePodLevelResourcesVerticalScaling is alpha and off: status.resources of the pod are not read."""
    pod = make_pod([container("c1", cpu("1"), cpu("2"))], pod_resources={})
    pod["status"]["allocatedResources"] = cpu("4")
    pod["status"]["resources"] = {"requests": cpu("3"), "limits": cpu("5")}
    assert pod_requests(pod, use_status_resources=True) == ql(cpu("1"))
    assert pod_limits(pod, use_status_resources=True) == ql(cpu("2"))


# ---------------------------------------------------------------------------------------
# TestPodLevelResourceRequests and pod-level limits


def hp(size: str) -> str:
    return "hugepages-" + size


def hugepages(pages: dict[str, str], **requests: str) -> dict[str, dict[str, str]]:
    """Requests and limits with the hugepages limited to what is requested, as the API requires."""
    return {"limits": pages, "requests": {**requests, **pages}}


def mem_cpu(memory: str, cpus: str) -> dict[str, str]:
    return {"memory": memory, "cpu": cpus}


def asks(memory: str, cpus: str, sidecar: bool = False) -> dict:
    return container(requests=mem_cpu(memory, cpus), sidecar=sidecar)


SIDECAR_AND_INIT = [asks("5Mi", "4m", sidecar=True), asks("6Mi", "8m")]


POD_LEVEL_REQUEST_CASES = [
    pytest.param(make_pod(), {}, {}, id="nil"),
    pytest.param(
        make_pod(pod_resources={"requests": mem("2Mi")}), {"skip_pod_level_resources": True}, {}, id="pod level memory skipped"
    ),
    pytest.param(make_pod(pod_resources={"requests": mem("2Mi")}), {}, {"memory": "2Mi"}, id="pod level memory"),
    pytest.param(
        make_pod([container(requests=cpu("2m"))], pod_resources={"requests": mem("2Mi")}),
        {},
        {"memory": "2Mi", "cpu": "2m"},
        id="pod memory, container cpu",
    ),
    pytest.param(
        make_pod([container(requests={"storage": "3Mi"})], pod_resources={"requests": {"storage": "2Mi"}}),
        {},
        {"storage": "3Mi"},
        id="unsupported resource at both levels",
    ),
    pytest.param(
        make_pod([container(requests=mem("3Mi"))], pod_resources={"requests": {"storage": "2Mi"}}),
        {},
        {"memory": "3Mi"},
        id="unsupported at pod level",
    ),
    pytest.param(make_pod([asks("3Mi", "2m")]), {}, mem_cpu("3Mi", "2m"), id="only container level"),
    pytest.param(
        make_pod([asks("3Mi", "2m")], pod_resources={"requests": mem_cpu("6Mi", "8m")}),
        {},
        mem_cpu("6Mi", "8m"),
        id="both levels",
    ),
    pytest.param(make_pod([asks("3Mi", "2m")], init=[asks("5Mi", "4m")]), {}, mem_cpu("5Mi", "4m"), id="container and init"),
    pytest.param(
        make_pod([asks("3Mi", "2m")], init=[asks("5Mi", "4m")]),
        {"skip_pod_level_resources": True},
        mem_cpu("5Mi", "4m"),
        id="container and init, skipping pod level",
    ),
    pytest.param(
        make_pod([asks("3Mi", "2m")], init=[asks("5Mi", "4m", sidecar=True)]),
        {},
        mem_cpu("8Mi", "6m"),
        id="container and sidecar",
    ),
    pytest.param(
        make_pod([asks("3Mi", "2m")], init=SIDECAR_AND_INIT), {}, mem_cpu("11Mi", "12m"), id="container, sidecar and init"
    ),
    pytest.param(
        make_pod([asks("3Mi", "2m")], init=SIDECAR_AND_INIT, pod_resources={"requests": mem_cpu("15Mi", "18m")}),
        {},
        mem_cpu("15Mi", "18m"),
        id="pod level over container, sidecar and init",
    ),
    pytest.param(
        make_pod(pod_resources=hugepages({hp("2Mi"): "2Mi"}, memory="10Mi")),
        {},
        {"memory": "10Mi", hp("2Mi"): "2Mi"},
        id="hugepages single size",
    ),
    pytest.param(
        make_pod(pod_resources=hugepages({hp("2Mi"): "2Mi", hp("1Gi"): "1Gi"}, cpu="1")),
        {},
        {"cpu": "1", hp("2Mi"): "2Mi", hp("1Gi"): "1Gi"},
        id="hugepages multiple sizes",
    ),
    pytest.param(
        make_pod([container(**hugepages({hp("2Mi"): "6Mi"}))], pod_resources=hugepages({hp("2Mi"): "10Mi"}, cpu="1")),
        {},
        {"cpu": "1", hp("2Mi"): "10Mi"},
        id="hugepages at both levels",
    ),
    pytest.param(
        make_pod(
            [container(**hugepages({hp("1Gi"): "2Gi"}, cpu="1"))],
            pod_resources=hugepages({hp("2Mi"): "10Mi", hp("1Gi"): "2Gi"}, cpu="1"),
        ),
        {},
        {"cpu": "1", hp("2Mi"): "10Mi", hp("1Gi"): "2Gi"},
        id="hugepages multiple sizes at both levels",
    ),
    pytest.param(
        make_pod(
            [container(**hugepages({hp("1Gi"): "1Gi"}, memory="4Mi"))], pod_resources=hugepages({hp("2Mi"): "10Mi"}, cpu="1")
        ),
        {},
        {"cpu": "1", "memory": "4Mi", hp("2Mi"): "10Mi", hp("1Gi"): "1Gi"},
        id="hugepage sizes split between levels",
    ),
]
for _status_requests, _allocated in [
    ({"cpu": "1100m", "memory": "110Mi"}, {"cpu": "1100m", "memory": "110Mi"}),
    ({"cpu": "1100m"}, {"cpu": "1100m"}),
    ({"cpu": "1", "memory": "100Mi"}, {"cpu": "1", "memory": "100Mi"}),
    ({"cpu": "1", "memory": "100Mi"}, {"cpu": "1100m", "memory": "110Mi"}),
    ({"cpu": "1", "memory": "100Mi"}, {"cpu": "1050m", "memory": "105Mi"}),
]:
    _pod = make_pod(pod_resources={"requests": {"cpu": "1", "memory": "100Mi"}}, overhead={"cpu": "100m", "memory": "10Mi"})
    _pod["status"] = {"resources": {"requests": _status_requests}, "allocatedResources": _allocated}
    POD_LEVEL_REQUEST_CASES.append(
        pytest.param(
            _pod,
            {"use_status_resources": True},
            {"cpu": "1100m", "memory": "110Mi"},
            id=f"pod status {_status_requests} {_allocated}",
        )
    )


@pytest.mark.parametrize(("pod", "options", "expected"), POD_LEVEL_REQUEST_CASES)
def test_pod_level_resource_requests(pod: dict, options: dict, expected: dict) -> None:
    assert pod_requests(pod, **options) == ql(expected)


@pytest.mark.parametrize(
    ("pod_resources", "applies"),
    [
        pytest.param(None, False, id="nil resources struct"),
        pytest.param({}, False, id="empty resources struct"),
        pytest.param({"requests": {"ephemeral-storage": "1Mi"}}, False, id="only unsupported requests"),
        pytest.param({"limits": {"ephemeral-storage": "1Mi"}}, False, id="only unsupported limits"),
        pytest.param({"requests": {"ephemeral-storage": "1Mi", "cpu": "1m"}}, True, id="supported requests"),
        pytest.param({"limits": {"ephemeral-storage": "1Mi", "cpu": "1m"}}, True, id="supported limits"),
        pytest.param({"requests": {"memory": "100Mi"}}, True, id="requests alone enable pod-level limits"),
    ],
)
def test_pod_level_limits_apply_when_pod_level_resources_are_set(pod_resources: dict | None, applies: bool) -> None:
    pod = make_pod([container(limits={"cpu": "5", "ephemeral-storage": "9Mi"})], pod_resources=pod_resources)
    limits = pod_limits(pod)
    pod_level_limits = (pod_resources or {}).get("limits", {})
    expected = {"cpu": pod_level_limits.get("cpu", "5") if applies else "5", "ephemeral-storage": "9Mi"}
    assert limits == ql(expected)


def test_pod_level_requests_need_a_supported_request() -> None:
    pod = make_pod([container(requests=cpu("5"))], pod_resources={"limits": cpu("1")})
    assert pod_requests(pod) == ql(cpu("5"))
    assert pod_limits(pod) == ql(cpu("1"))


def test_dra_statuses_are_ignored() -> None:
    """DRA node-allocatable claims are alpha and off, so upstream's flag-disabled results apply."""
    pod = make_pod([container("c1", cpu("100m"), cpu("100m"))])
    pod["status"]["nodeAllocatableResourceClaimStatuses"] = [
        {"resourceClaimName": "claim", "containers": ["c1"], "mapping": [{"name": "cpu", "quantity": "50m"}]}
    ]
    assert pod_requests(pod) == ql(cpu("100m"))
    assert pod_limits(pod) == ql(cpu("100m"))
    pod["spec"]["resources"] = {"limits": cpu("2"), "requests": cpu("2")}
    pod["spec"]["containers"] = [container("c1", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})]
    assert pod_requests(pod) == ql({"cpu": "2", "memory": "1Gi"})
    assert pod_limits(pod) == ql({"cpu": "2", "memory": "1Gi"})


def test_format_of_ties_and_sums_follows_upstream() -> None:
    pod = make_pod([container(requests=mem("1Gi")), container(requests=mem("1Gi"))], init=[container(requests=mem("2147483648"))])
    assert str(pod_requests(pod)["memory"]) == "2Gi"
    pod = make_pod([container(requests=cpu("0")), container(requests=cpu("1Ki"))])
    assert pod_requests(pod)["cpu"].format == "BinarySI"


# ---------------------------------------------------------------------------------------
# quota_usage: TestPodEvaluatorUsage and TestPodEvaluatorUsageResourceResize

ONE_POD = {"pods": "1", "count/pods": "1"}


def usage_case(pod: dict, usage: dict[str, str], case_id: str):
    return pytest.param(pod, {**ONE_POD, **usage}, id=case_id)


def deleted(pod: dict, seconds_ago: int, grace: int = 30) -> dict:
    pod = copy.deepcopy(pod)
    pod["metadata"] = {
        "deletionTimestamp": (NOW - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z"),
        "deletionGracePeriodSeconds": grace,
    }
    pod["status"]["reason"] = "NodeLost"
    return pod


DONGLE = "example.com/dongle"
IMPLICIT = "deviceclass.resource.kubernetes.io/dongle"
QUOTA_CASES = [
    usage_case(
        make_pod(init=[container(requests=cpu("1m"), limits=cpu("2m"))]),
        {"requests.cpu": "1m", "limits.cpu": "2m", "cpu": "1m"},
        "init container CPU",
    ),
    usage_case(
        make_pod(init=[container(requests=mem("1m"), limits=mem("2m"))]),
        {"requests.memory": "1m", "limits.memory": "2m", "memory": "1m"},
        "init container MEM",
    ),
    usage_case(
        make_pod(init=[container(requests={"ephemeral-storage": "32Mi"}, limits={"ephemeral-storage": "64Mi"})]),
        {"ephemeral-storage": "32Mi", "requests.ephemeral-storage": "32Mi", "limits.ephemeral-storage": "64Mi"},
        "init container local ephemeral storage",
    ),
    usage_case(
        make_pod(init=[container(requests={hp("2Mi"): "100Mi"})]),
        {hp("2Mi"): "100Mi", "requests." + hp("2Mi"): "100Mi"},
        "init container hugepages",
    ),
    usage_case(
        make_pod(init=[container(requests={DONGLE: "3"}, limits={DONGLE: "3"})]),
        {"requests." + DONGLE: "3"},
        "init container extended resources",
    ),
    usage_case(
        make_pod(init=[container(requests={IMPLICIT: "3"}, limits={IMPLICIT: "3"})]),
        {"requests." + IMPLICIT: "3"},
        "init container implicit extended resources",
    ),
    usage_case(
        make_pod([container(requests=cpu("1m"), limits=cpu("2m"))]),
        {"requests.cpu": "1m", "limits.cpu": "2m", "cpu": "1m"},
        "container CPU",
    ),
    usage_case(
        make_pod([container(requests=mem("1m"), limits=mem("2m"))]),
        {"requests.memory": "1m", "limits.memory": "2m", "memory": "1m"},
        "container MEM",
    ),
    usage_case(
        make_pod([container(requests={"ephemeral-storage": "32Mi"}, limits={"ephemeral-storage": "64Mi"})]),
        {"ephemeral-storage": "32Mi", "requests.ephemeral-storage": "32Mi", "limits.ephemeral-storage": "64Mi"},
        "container local ephemeral storage",
    ),
    usage_case(
        make_pod([container(requests={hp("2Mi"): "100Mi"})]),
        {hp("2Mi"): "100Mi", "requests." + hp("2Mi"): "100Mi"},
        "container hugepages",
    ),
    usage_case(
        make_pod([container(requests={DONGLE: "3"}, limits={DONGLE: "3"})]),
        {"requests." + DONGLE: "3"},
        "container extended resources",
    ),
    usage_case(
        make_pod([container(requests={IMPLICIT: "3"}, limits={IMPLICIT: "3"})]),
        {"requests." + IMPLICIT: "3"},
        "container implicit extended resources",
    ),
    pytest.param(
        {**make_pod([container(requests={DONGLE: "3"}, limits={DONGLE: "3"})]), "status": {"phase": "Succeeded"}},
        {"count/pods": "1"},
        id="terminated generic count still appears",
    ),
    pytest.param(
        {**make_pod([container(requests=cpu("1"), limits=cpu("1"))]), "status": {"phase": "Failed"}},
        {"count/pods": "1"},
        id="failed pod",
    ),
    usage_case(
        make_pod(
            [
                container(
                    requests={"cpu": "1", "memory": "50M", DONGLE: "1"}, limits={"cpu": "2", "memory": "100M", DONGLE: "1"}
                ),
                container(requests={"cpu": "2", "memory": "25M", DONGLE: "2"}, limits={"cpu": "5", "memory": "50M", DONGLE: "2"}),
            ],
            init=[
                container(
                    requests={"cpu": "4", "memory": "100M", DONGLE: "4"}, limits={"cpu": "8", "memory": "200M", DONGLE: "4"}
                ),
                container(
                    requests={"cpu": "1", "memory": "50M", DONGLE: "2"}, limits={"cpu": "2", "memory": "100M", DONGLE: "2"}
                ),
            ],
        ),
        {
            "requests.cpu": "4",
            "requests.memory": "100M",
            "limits.cpu": "8",
            "limits.memory": "200M",
            "cpu": "4",
            "memory": "100M",
            "requests." + DONGLE: "4",
        },
        "init container maximums override sum of containers",
    ),
    pytest.param(
        deleted(
            make_pod([container(requests={"cpu": "1", "memory": "50M"}, limits={"cpu": "2", "memory": "100M"})]), seconds_ago=60
        ),
        {"count/pods": "1"},
        id="pod deletion timestamp exceeded",
    ),
    usage_case(
        deleted(make_pod([container(requests=cpu("1"), limits=cpu("2"))]), seconds_ago=0),
        {"requests.cpu": "1", "limits.cpu": "2", "cpu": "1"},
        "pod deletion timestamp not exceeded",
    ),
    usage_case(
        deleted(make_pod([container(requests=cpu("1"), limits=cpu("2"))]), seconds_ago=30),
        {"requests.cpu": "1", "limits.cpu": "2", "cpu": "1"},
        "pod deletion exactly at the end of the grace period",
    ),
    usage_case(
        make_pod([container(requests=cpu("1"), limits=cpu("2"))], overhead=cpu("1")),
        {"requests.cpu": "2", "limits.cpu": "3", "cpu": "2"},
        "count pod overhead as usage",
    ),
    usage_case(
        make_pod(pod_resources={"requests": cpu("1m"), "limits": cpu("2m")}),
        {"requests.cpu": "1m", "limits.cpu": "2m", "cpu": "1m"},
        "pod-level CPU",
    ),
    usage_case(
        make_pod(pod_resources={"requests": mem("1Mi"), "limits": mem("2Mi")}),
        {"requests.memory": "1Mi", "limits.memory": "2Mi", "memory": "1Mi"},
        "pod-level Memory",
    ),
    usage_case(
        make_pod(
            [container(requests={"ephemeral-storage": "32Mi"}, limits={"ephemeral-storage": "64Mi"})],
            pod_resources={"requests": mem("1Mi"), "limits": mem("2Mi")},
        ),
        {
            "ephemeral-storage": "32Mi",
            "requests.ephemeral-storage": "32Mi",
            "limits.ephemeral-storage": "64Mi",
            "requests.memory": "1Mi",
            "limits.memory": "2Mi",
            "memory": "1Mi",
        },
        "pod-level memory with container-level ephemeral storage",
    ),
    usage_case(
        make_pod([container(requests=mem("200Mi"), limits=mem("400Mi"))], statuses=[status(requests=mem("150Mi"))]),
        {"requests.memory": "200Mi", "limits.memory": "400Mi", "memory": "200Mi"},
        "resize: max(spec, status) memory",
    ),
    usage_case(
        make_pod([container(requests=cpu("100m"), limits=cpu("200m"))], statuses=[status(requests=cpu("150m"))]),
        {"requests.cpu": "150m", "limits.cpu": "200m", "cpu": "150m"},
        "resize: max(spec, status) CPU",
    ),
    usage_case(
        make_pod(
            [container(requests={"cpu": "100m", "memory": "200Mi"}, limits={"cpu": "200m", "memory": "400Mi"})],
            statuses=[status(requests={"cpu": "150m", "memory": "250Mi"})],
        ),
        {
            "requests.cpu": "150m",
            "limits.cpu": "200m",
            "requests.memory": "250Mi",
            "limits.memory": "400Mi",
            "cpu": "150m",
            "memory": "250Mi",
        },
        "resize: max(spec, status) CPU and memory",
    ),
    usage_case(
        make_pod(
            [container(requests={"cpu": "100m", "memory": "200Mi"}, limits={"cpu": "200m", "memory": "400Mi"})], statuses=[{}]
        ),
        {
            "requests.cpu": "100m",
            "limits.cpu": "200m",
            "requests.memory": "200Mi",
            "limits.memory": "400Mi",
            "cpu": "100m",
            "memory": "200Mi",
        },
        "resize: status without resources",
    ),
    usage_case(
        make_pod([container(requests={"storage": "1Gi", "pods": "3"})]), {}, "native resources other than compute are not charged"
    ),
]


@pytest.mark.parametrize(("pod", "expected"), QUOTA_CASES)
def test_quota_usage(pod: dict, expected: dict) -> None:
    assert quota_usage(pod, now=NOW) == ql(expected)


def test_quota_usage_stats_sum_over_pods() -> None:
    """TestPodEvaluatorUsageStats: terminal pods still count in count/pods."""

    def make(phase: str) -> dict:
        return {**make_pod([container(requests=cpu("1"), limits=cpu("1"))]), "status": {"phase": phase}}

    total: dict[str, Quantity] = {}
    for pod in (make("Running"), make("Succeeded")):
        for name, amount in quota_usage(pod).items():
            total[name] = total[name] + amount if name in total else amount
    assert total == ql({"pods": "1", "count/pods": "2", "cpu": "1", "requests.cpu": "1", "limits.cpu": "1"})


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("example.com/dongle", True),
        ("nvidia.com/gpu", True),
        ("kubernetes.io/foo", False),
        ("storage", False),
        ("requests.example.com/x", False),
        ("example.com/", False),
        ("Example.com/gpu", False),
        ("example.com/a/b", False),
        ("example.com/" + "x" * 64, False),
        ("deviceclass.resource.kubernetes.io/gpu", True),
    ],
)
def test_extended_resource_names_for_quota(name: str, extended: bool) -> None:
    usage = quota_usage(make_pod([container(requests={name: "1"})]))
    assert ("requests." + name in usage) == extended


def test_quota_usage_deletion_timestamp_validation() -> None:
    pod = make_pod([container(requests=cpu("1"))])
    pod["metadata"] = {"deletionTimestamp": "yesterday", "deletionGracePeriodSeconds": 30}
    with pytest.raises(PodSpecError, match="deletionTimestamp"):
        quota_usage(pod, now=NOW)
    pod["metadata"] = {"deletionTimestamp": "2025-01-01T00:00:00Z", "deletionGracePeriodSeconds": "30"}
    with pytest.raises(PodSpecError, match="deletionGracePeriodSeconds"):
        quota_usage(pod, now=NOW)
    pod["metadata"] = {"deletionTimestamp": "2025-01-01T00:00:00Z"}
    assert "cpu" in quota_usage(pod, now=NOW)


# ---------------------------------------------------------------------------------------
# Input handling


def test_quantities_as_json_numbers_null_and_padded_strings() -> None:
    pod = make_pod([container(requests={"cpu": 2, "memory": " 1Gi ", "example.com/gpu": 0.5, "ephemeral-storage": None})])
    assert pod_requests(pod) == ql({"cpu": "2", "memory": "1Gi", "example.com/gpu": "500m", "ephemeral-storage": "0"})


def test_input_is_not_mutated() -> None:
    pod = make_pod([container("a", cpu("1"), cpu("2"))], init=[container("s", cpu("1"), sidecar=True)], overhead=cpu("1"))
    snapshot = copy.deepcopy(pod)
    pod_requests(pod)
    pod_limits(pod)
    quota_usage(pod)
    assert pod == snapshot


@pytest.mark.parametrize(
    ("pod", "fragments"),
    [
        (make_pod([container("app", {"cpu": "abc"})]), ["container 'app'", "requests", "'cpu'", "'abc'"]),
        (make_pod([container("web", limits={"memory": "1GB"})]), ["container 'web'", "limits", "'memory'", "'1GB'"]),
        (make_pod([container(requests={"cpu": "1.1.1"})]), ["spec.containers[0]", "'cpu'"]),
        (make_pod(init=[container("setup", {"cpu": True})]), ["container 'setup'", "'cpu'"]),
        (make_pod([container("app", {"cpu": ["1"]})]), ["container 'app'", "'cpu'"]),
        (make_pod(overhead={"cpu": "lots"}), ["spec.overhead", "'cpu'", "'lots'"]),
        (make_pod(pod_resources={"requests": {"cpu": "x"}}), ["spec.resources.requests", "'cpu'"]),
        (make_pod([container("app", {"cpu": float("nan")})]), ["container 'app'", "'cpu'"]),
    ],
)
def test_malformed_quantities_raise_quantity_error_with_context(pod: dict, fragments: list[str]) -> None:
    with pytest.raises(QuantityError) as info:
        pod_requests(pod)
        pod_limits(pod)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_malformed_status_quantities_matter_only_when_status_is_used() -> None:
    pod = make_pod([container("app", cpu("1"))], statuses=[status("app", allocated={"cpu": "bogus"})])
    assert pod_requests(pod) == ql(cpu("1"))
    with pytest.raises(QuantityError, match="status of container 'app'"):
        pod_requests(pod, use_status_resources=True)


@pytest.mark.parametrize(
    "pod",
    [
        None,
        "pod",
        ["spec"],
        {"spec": []},
        {"spec": {"containers": {"name": "a"}}},
        {"spec": {"containers": "abc"}},
        {"spec": {"containers": [None]}},
        {"spec": {"containers": [["cpu"]]}},
        {"spec": {"containers": [{"resources": []}]}},
        {"spec": {"containers": [{"resources": {"requests": ["cpu", "1"]}}]}},
        {"spec": {"containers": [{"resources": {"requests": {1: "1"}}}]}},
        {"spec": {"containers": [{"name": 7}]}},
        {"spec": {"initContainers": [{"restartPolicy": True}]}},
        {"spec": {"overhead": "1"}},
        {"spec": {"resources": "1"}},
        {"spec": {"resources": {"requests": []}}},
        {"spec": {}, "status": "Running"},
        {"spec": {}, "status": {"containerStatuses": {}}},
        {"spec": {}, "status": {"containerStatuses": [{"resources": "x"}]}},
        {"spec": {}, "status": {"conditions": "Infeasible"}},
        {"spec": {}, "status": {"phase": 3}},
    ],
)
def test_malformed_pod_shapes_raise_pod_spec_error(pod: Any) -> None:
    with pytest.raises(PodSpecError):
        pod_requests(pod, use_status_resources=True)
        pod_limits(pod, use_status_resources=True)
        quota_usage(pod)


# ---------------------------------------------------------------------------------------
# Workloads

POD_SPEC = {"containers": [container("app", {"cpu": "250m", "memory": "512Mi"}, {"cpu": "1", "memory": "1Gi"})]}


def workload(api_version: str, kind: str, spec: dict, status: dict | None = None) -> dict:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def times(n: int) -> dict[str, Quantity]:
    per_pod = ql(
        {
            "count/pods": "1",
            "pods": "1",
            "cpu": "250m",
            "requests.cpu": "250m",
            "limits.cpu": "1",
            "memory": "512Mi",
            "requests.memory": "512Mi",
            "limits.memory": "1Gi",
        }
    )
    return {name: amount * n for name, amount in per_pod.items()}


@pytest.mark.parametrize(
    ("obj", "replicas"),
    [
        pytest.param(workload("apps/v1", "Deployment", {"replicas": 3, "template": {"spec": POD_SPEC}}), 3, id="Deployment"),
        pytest.param(workload("apps/v1", "Deployment", {"template": {"spec": POD_SPEC}}), 1, id="Deployment default replicas"),
        pytest.param(
            workload("apps/v1", "Deployment", {"replicas": None, "template": {"spec": POD_SPEC}}),
            1,
            id="Deployment null replicas",
        ),
        pytest.param(
            workload("apps/v1", "Deployment", {"replicas": 0, "template": {"spec": POD_SPEC}}), 0, id="Deployment scaled to zero"
        ),
        pytest.param(workload("apps/v1", "StatefulSet", {"replicas": 5, "template": {"spec": POD_SPEC}}), 5, id="StatefulSet"),
        pytest.param(workload("apps/v1", "ReplicaSet", {"replicas": 2, "template": {"spec": POD_SPEC}}), 2, id="ReplicaSet"),
        pytest.param(
            workload("v1", "ReplicationController", {"replicas": 2, "template": {"spec": POD_SPEC}}),
            2,
            id="ReplicationController",
        ),
        pytest.param(workload("batch/v1", "Job", {"template": {"spec": POD_SPEC}}), 1, id="Job defaults"),
        pytest.param(workload("batch/v1", "Job", {"parallelism": 4, "template": {"spec": POD_SPEC}}), 4, id="Job work queue"),
        pytest.param(
            workload("batch/v1", "Job", {"parallelism": 4, "completions": 10, "template": {"spec": POD_SPEC}}),
            4,
            id="Job parallelism bound",
        ),
        pytest.param(
            workload("batch/v1", "Job", {"parallelism": 4, "completions": 10, "template": {"spec": POD_SPEC}}, {"succeeded": 8}),
            2,
            id="Job remaining completions bound",
        ),
        pytest.param(
            workload("batch/v1", "Job", {"parallelism": 4, "completions": 3, "template": {"spec": POD_SPEC}}, {"succeeded": 3}),
            0,
            id="Job complete",
        ),
        pytest.param(
            workload("batch/v1", "Job", {"suspend": True, "parallelism": 4, "template": {"spec": POD_SPEC}}),
            0,
            id="Job suspended",
        ),
        pytest.param({"apiVersion": "v1", "kind": "Pod", "spec": POD_SPEC, "status": {"phase": "Succeeded"}}, 1, id="bare Pod"),
        pytest.param(
            workload("argoproj.io/v1alpha1", "Rollout", {"replicas": 6, "template": {"spec": POD_SPEC}}), 6, id="Argo Rollout"
        ),
    ],
)
def test_workload_usage(obj: dict, replicas: int) -> None:
    assert workload_replicas(obj) == replicas
    assert workload_usage(obj) == times(replicas)
    assert workload_pod_template(obj)["spec"] == POD_SPEC


def test_tfjob_sums_roles() -> None:
    small = {"containers": [container("tf", {"cpu": "1"}, {"cpu": "1"})]}
    gpu = {"containers": [container("tf", {"cpu": "2", "nvidia.com/gpu": "1"}, {"cpu": "2", "nvidia.com/gpu": "1"})]}
    job = workload(
        "kubeflow.org/v1",
        "TFJob",
        {
            "tfReplicaSpecs": {
                "Chief": {"replicas": 1, "template": {"spec": small}},
                "Worker": {"replicas": 4, "template": {"spec": gpu}},
                "PS": {"template": {"spec": small}},
            }
        },
    )
    assert workload_kind(job) == "kubeflow.org/TFJob"
    assert workload_replicas(job) == 6
    assert workload_pod_template(job)["spec"] == small
    assert [replicas for replicas, _ in workload_components(job)] == [1, 4, 1]
    assert workload_usage(job) == ql(
        {"count/pods": "6", "pods": "6", "cpu": "10", "requests.cpu": "10", "limits.cpu": "10", "requests.nvidia.com/gpu": "4"}
    )


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        ({"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {}}, UnsupportedWorkloadError),
        ({"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {}}, UnsupportedWorkloadError),
        ({"kind": "Deployment", "spec": {}}, UnsupportedWorkloadError),
        ({"apiVersion": "apps/v1", "spec": {}}, UnsupportedWorkloadError),
        ("Deployment", PodSpecError),
        (workload("apps/v1", "Deployment", {"replicas": 3}), PodSpecError),
        (workload("apps/v1", "Deployment", {"replicas": -1, "template": {"spec": POD_SPEC}}), PodSpecError),
        (workload("apps/v1", "Deployment", {"replicas": True, "template": {"spec": POD_SPEC}}), PodSpecError),
        (workload("apps/v1", "Deployment", {"replicas": "3", "template": {"spec": POD_SPEC}}), PodSpecError),
        (workload("apps/v1", "Deployment", {"replicas": 1, "template": "pod"}), PodSpecError),
        (workload("apps/v1", "Deployment", {"replicas": 1, "template": {"spec": {"containers": "x"}}}), PodSpecError),
        (workload("batch/v1", "Job", {"parallelism": "2", "template": {"spec": POD_SPEC}}), PodSpecError),
        (
            workload("argoproj.io/v1alpha1", "Rollout", {"replicas": 2, "workloadRef": {"kind": "Deployment", "name": "web"}}),
            PodSpecError,
        ),
        (workload("kubeflow.org/v1", "TFJob", {}), PodSpecError),
        (workload("kubeflow.org/v1", "TFJob", {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}), PodSpecError),
        (
            workload("apps/v1", "Deployment", {"template": {"spec": {"containers": [container("a", cpu("1 core"))]}}}),
            QuantityError,
        ),
    ],
)
def test_workload_errors(obj: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        workload_usage(obj)
    assert issubclass(error, ValueError)


def test_unknown_kind_message_is_clear() -> None:
    with pytest.raises(UnsupportedWorkloadError, match="apps/DaemonSet"):
        workload_replicas({"apiVersion": "apps/v1", "kind": "DaemonSet"})


def test_register_workload_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "_WORKLOAD_KINDS", dict(resources._WORKLOAD_KINDS))
    register_workload_kind("example.com/Widget", lambda obj: obj["spec"]["count"], lambda obj: obj["spec"]["podTemplate"])
    widget = {"apiVersion": "example.com/v2", "kind": "Widget", "spec": {"count": 2, "podTemplate": {"spec": POD_SPEC}}}
    assert workload_usage(widget) == times(2)
    with pytest.raises(PodSpecError, match="example.com/Widget"):
        workload_usage({"apiVersion": "example.com/v2", "kind": "Widget", "spec": {}})
    register_workload_kind("example.com/Widget", lambda obj: 1.5, lambda obj: {"spec": POD_SPEC})
    with pytest.raises(PodSpecError):
        workload_usage(widget)
    with pytest.raises(ValueError):
        register_workload_kind("", lambda obj: 1, lambda obj: {})
    with pytest.raises(TypeError):
        register_workload_kind("example.com/Gadget", 3, lambda obj: {})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Property tests

AMOUNTS = ["0", "1", "250m", "1.5", "7", "3Mi", "1Gi", "100M", "5n"]
NAMES = ["cpu", "memory", "hugepages-2Mi", "example.com/gpu", "ephemeral-storage"]

resource_lists = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(AMOUNTS), max_size=4)
well_formed_containers = st.builds(
    lambda requests, limits, sidecar: container("c", requests, limits, sidecar), resource_lists, resource_lists, st.booleans()
)


def model_total(containers: list[dict], inits: list[dict], field: str) -> dict[str, Decimal]:
    """The KEP-753 formula, written directly: max(sum(containers) + sum(sidecars), peak during each init)."""
    names = {name for c in containers + inits for name in c["resources"].get(field, {})}
    total = {}
    for name in names:

        def amount(c: dict, name: str = name) -> Decimal:
            return parse_quantity(c["resources"].get(field, {}).get(name, "0")).as_decimal()

        running, peak = Decimal(0), Decimal(0)
        for init in inits:
            if init.get("restartPolicy") == "Always":
                running += amount(init)
            else:
                peak = max(peak, running + amount(init))
        total[name] = max(sum((amount(c) for c in containers), Decimal(0)) + running, peak)
    return total


@FUZZ
@given(st.lists(well_formed_containers, max_size=4), st.lists(well_formed_containers, max_size=4), resource_lists)
def test_fuzz_totals_match_the_sidecar_formula(containers: list[dict], inits: list[dict], overhead: dict) -> None:
    pod = make_pod([{**c, "restartPolicy": None} for c in containers], init=inits, overhead=overhead)
    requests = pod_requests(pod, exclude_overhead=True)
    assert {name: q.as_decimal() for name, q in requests.items()} == model_total(pod["spec"]["containers"], inits, "requests")
    limits = pod_limits(pod, exclude_overhead=True)
    assert {name: q.as_decimal() for name, q in limits.items()} == model_total(pod["spec"]["containers"], inits, "limits")
    with_overhead = pod_requests(pod)
    for name, amount in ql(overhead).items():
        assert with_overhead[name] == requests.get(name, parse_quantity("0")) + amount
    assert pod_requests(pod, use_status_resources=True) == with_overhead


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(["1", "250m", "1Gi", "Always", "cpu", "PodResizePending", "Infeasible", "2025-01-01T00:00:00Z", "Succeeded"]),
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "requests", "limits", "cpu", "x"]), children, max_size=3)
    ),
    max_leaves=8,
)
quantity_like = st.one_of(st.sampled_from(["1", "250m", "1Gi", "0", "-1", "1.5", "x", "", " 2 ", "1e3", "Ki"]), json_leaves)
fuzz_resource_lists = st.one_of(st.dictionaries(st.sampled_from(NAMES + ["pods"]), quantity_like, max_size=3), json_values)
fuzz_requirements = st.one_of(
    st.fixed_dictionaries({}, optional={"requests": fuzz_resource_lists, "limits": fuzz_resource_lists}), json_values
)
fuzz_containers = st.one_of(
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.one_of(st.sampled_from(["a", "b"]), json_leaves),
                    "resources": fuzz_requirements,
                    "restartPolicy": json_leaves,
                },
            ),
            json_values,
        ),
        max_size=3,
    ),
    json_values,
)
fuzz_statuses = st.one_of(
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.sampled_from(["a", "b"]),
                    "resources": fuzz_requirements,
                    "allocatedResources": fuzz_resource_lists,
                },
            ),
            json_values,
        ),
        max_size=3,
    ),
    json_values,
)
fuzz_pods = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.one_of(
                st.fixed_dictionaries({}, optional={"deletionTimestamp": json_leaves, "deletionGracePeriodSeconds": json_leaves}),
                json_values,
            ),
            "spec": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "containers": fuzz_containers,
                        "initContainers": fuzz_containers,
                        "overhead": fuzz_resource_lists,
                        "resources": fuzz_requirements,
                    },
                ),
                json_values,
            ),
            "status": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "phase": json_leaves,
                        "containerStatuses": fuzz_statuses,
                        "initContainerStatuses": fuzz_statuses,
                        "conditions": st.one_of(st.just(INFEASIBLE), json_values),
                    },
                ),
                json_values,
            ),
        },
    ),
    json_values,
)


@FUZZ
@given(fuzz_pods, st.booleans(), st.booleans(), st.booleans())
def test_fuzz_malformed_pods_raise_only_pod_spec_or_quantity_errors(
    pod: Any, exclude: bool, skip: bool, use_status: bool
) -> None:
    options = {"exclude_overhead": exclude, "skip_pod_level_resources": skip, "use_status_resources": use_status}
    for compute in (lambda: pod_requests(pod, **options), lambda: pod_limits(pod, **options), lambda: quota_usage(pod, now=NOW)):
        try:
            result = compute()
        except (PodSpecError, QuantityError):
            continue
        assert all(isinstance(name, str) and isinstance(amount, Quantity) for name, amount in result.items())


fuzz_templates = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {}, optional={"spec": st.one_of(json_values, st.fixed_dictionaries({}, optional={"containers": fuzz_containers}))}
    ),
)
fuzz_workload_specs = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "replicas": json_leaves,
            "parallelism": json_leaves,
            "completions": json_leaves,
            "suspend": json_leaves,
            "template": fuzz_templates,
            "tfReplicaSpecs": st.one_of(
                json_values,
                st.dictionaries(
                    st.sampled_from(["Chief", "Worker"]),
                    json_values | st.fixed_dictionaries({}, optional={"replicas": json_leaves, "template": fuzz_templates}),
                ),
            ),
        },
    ),
)
fuzz_workloads = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(["apps/v1", "batch/v1", "v1", "kubeflow.org/v1", "argoproj.io/v1alpha1"]),
            "kind": st.sampled_from(["Deployment", "Job", "Pod", "TFJob", "Rollout", "Widget"]),
            "spec": fuzz_workload_specs,
        },
        optional={"status": json_values},
    ),
)


@FUZZ
@given(fuzz_workloads)
def test_fuzz_malformed_workloads_raise_only_value_errors(obj: Any) -> None:
    try:
        result = workload_usage(obj)
    except (PodSpecError, QuantityError, UnsupportedWorkloadError):
        return
    assert all(isinstance(amount, Quantity) for amount in result.values())
