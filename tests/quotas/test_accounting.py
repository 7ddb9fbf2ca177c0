"""The bizrq accounting core: pure functions, no database."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube.quantity import Quantity, parse_quantity
from kube.resources import PodSpecError, UnsupportedWorkloadError
from quotas import accounting as acc

Q = parse_quantity
CPU_TYPE, MEMORY_TYPE, GPU_TYPE = acc.MODEL_LABELS["cpu"], acc.MODEL_LABELS["memory"], acc.MODEL_LABELS["gpu"]
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def rl(**kwargs: str) -> acc.ResourceList:
    """A ResourceList from keyword pairs; ``__`` spells a dot, ``_S_`` a slash (``limits__cpu``)."""
    return {k.replace("_S_", "/").replace("__", "."): Q(v) for k, v in kwargs.items()}


def res(mapping: Mapping[str, str]) -> acc.ResourceList:
    return {k: Q(v) for k, v in mapping.items()}


def container(name: str, cpu: str, memory: str = "1Gi", *, limit_cpu: str | None = None, limit_memory: str | None = None,
              gpus: int = 0, restart: str | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {"cpu": limit_cpu or cpu, "memory": limit_memory or memory}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"name": name, "image": f"{name}:1", "resources": {"requests": requests, "limits": limits}}
    if restart:
        spec["restartPolicy"] = restart
    return spec


def workload(kind: str = "Deployment", *, replicas: int = 1, containers: list[dict[str, Any]] | None = None,
             init: list[dict[str, Any]] | None = None, group: str | None = "ads", **models: str) -> dict[str, Any]:
    """A Deployment/StatefulSet-shaped manifest; ``models`` are cpu=/memory=/gpu= model labels."""
    labels = {"app": "web"}
    if group is not None:
        labels[acc.GROUP_LABEL] = group
    for kind_name, model in models.items():
        labels[acc.MODEL_LABELS[kind_name]] = model
    pod_spec: dict[str, Any] = {"containers": containers or [container("app", "1")]}
    if init:
        pod_spec["initContainers"] = init
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web", "namespace": "default", "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec}}}


def cpu_workload(cores: int, *, replicas: int = 1, **models: str) -> dict[str, Any]:
    return workload(replicas=replicas, containers=[container("app", str(cores))], **models)


class Group:
    """A group's hard/used and the admission sequence services.commit runs, minus storage."""

    def __init__(self, hard: Mapping[str, str], used: Mapping[str, str] | None = None) -> None:
        self.hard = acc.parse_hard(hard)
        self.used: acc.ResourceList = res(used or {})

    def admit(self, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None = None) -> list[acc.Exceeded]:
        new_charge = acc.tracked(acc.workload_charge_of(new), self.hard) if new else {}
        old_charge = acc.tracked(acc.workload_charge_of(old), self.hard) if old else {}
        delta = acc.usage_delta(new_charge, old_charge)
        exceeded = acc.check_admission(self.hard, self.used, delta)
        if not exceeded:
            self.used = acc.add(self.used, delta)
        return exceeded

    def used_of(self, key: str) -> Quantity:
        return self.used.get(key, Q("0"))


# ---------------------------------------------------------------------------------------
# The spec's example


def test_spec_example_model_limit_and_prefix_limit_both_bind():
    ads = Group({"limits.cpu": "10", "limits.cpu.A4": "4"})

    assert ads.admit(cpu_workload(4, cpu="A4")) == []
    assert ads.used_of("limits.cpu") == Q("4")
    assert ads.used_of("limits.cpu.A4") == Q("4")

    refused = ads.admit(cpu_workload(1, cpu="A4"))
    assert refused == [acc.Exceeded("limits.cpu.A4", Q("1"), Q("4"), Q("4"))]
    assert "limits.cpu.A4 requested 1, used 4, hard 4" in acc.denial_message("ads", refused)
    assert ads.used_of("limits.cpu") == Q("4"), "a refused request commits nothing"

    assert ads.admit(cpu_workload(6)) == []
    assert ads.used_of("limits.cpu") == Q("10")
    assert ads.used_of("limits.cpu.A4") == Q("4")

    refused = ads.admit(cpu_workload(1))
    assert [e.resource for e in refused] == ["limits.cpu"]
    assert acc.denial_message("ads", refused) == 'exceeded quota group "ads": limits.cpu requested 1, used 10, hard 10'


def test_one_more_a4_core_when_both_are_full_names_both_limits():
    ads = Group({"limits.cpu": "10", "limits.cpu.A4": "4"}, {"limits.cpu": "10", "limits.cpu.A4": "4"})
    refused = ads.admit(cpu_workload(1, cpu="A4"))
    assert refused == [acc.Exceeded("limits.cpu", Q("1"), Q("10"), Q("10")),
                       acc.Exceeded("limits.cpu.A4", Q("1"), Q("4"), Q("4"))]
    assert acc.denial_message("ads", refused) == (
        'exceeded quota group "ads": limits.cpu requested 1, used 10, hard 10; limits.cpu.A4 requested 1, used 4, hard 4')


def test_model_limit_above_prefix_limit_is_allowed_but_the_prefix_binds():
    ads = Group({"limits.cpu": "4", "limits.cpu.A4": "100"})
    assert ads.admit(cpu_workload(4, cpu="A4")) == []
    assert [e.resource for e in ads.admit(cpu_workload(1, cpu="A4"))] == ["limits.cpu"]


def test_other_models_do_not_consume_a_model_limit():
    ads = Group({"limits.cpu": "10", "limits.cpu.A4": "4"})
    assert ads.admit(cpu_workload(5, cpu="A3")) == []
    assert "limits.cpu.A4" not in ads.used
    assert ads.admit(cpu_workload(4, cpu="A4")) == []


def test_gpu_model_keys():
    ml = Group({"requests.nvidia.com/gpu": "8", "requests.nvidia.com/gpu.A30": "2"})
    gpu_job = workload(containers=[container("train", "4", "16Gi", gpus=1)], replicas=2, gpu="A30")
    assert ml.admit(gpu_job) == []
    assert ml.used_of("requests.nvidia.com/gpu") == Q("2")
    assert ml.used_of("requests.nvidia.com/gpu.A30") == Q("2")
    refused = ml.admit(workload(containers=[container("train", "1", gpus=1)], gpu="A30"))
    assert refused == [acc.Exceeded("requests.nvidia.com/gpu.A30", Q("1"), Q("2"), Q("2"))]
    assert ml.admit(workload(containers=[container("train", "1", gpus=6)], gpu="T4")) == []
    assert [e.resource for e in ml.admit(workload(containers=[container("t", "1", gpus=1)]))] == ["requests.nvidia.com/gpu"]


def test_memory_models():
    ads = Group({"limits.memory": "64Gi", "limits.memory.M2": "16Gi"})
    assert ads.admit(workload(containers=[container("db", "1", "8Gi")], replicas=2, memory="M2")) == []
    assert ads.used_of("limits.memory.M2") == Q("16Gi")
    refused = ads.admit(workload(containers=[container("db", "1", "1Mi")], memory="M2"))
    assert refused == [acc.Exceeded("limits.memory.M2", Q("1Mi"), Q("16Gi"), Q("16Gi"))]
    assert "limits.memory.M2 requested 1Mi, used 16Gi, hard 16Gi" in acc.denial_message("ads", refused)


# ---------------------------------------------------------------------------------------
# Names


@pytest.mark.parametrize(("key", "base"), [
    ("limits.cpu.A4", "limits.cpu"),
    ("requests.cpu.A4", "requests.cpu"),
    ("cpu.A4", "cpu"),
    ("limits.memory.A4", "limits.memory"),
    ("requests.memory.M2", "requests.memory"),
    ("memory.M2", "memory"),
    ("requests.nvidia.com/gpu.A30", "requests.nvidia.com/gpu"),
    ("limits.nvidia.com/gpu.T4", "limits.nvidia.com/gpu"),
    ("requests.amd.com/gpu.MI300", "requests.amd.com/gpu"),
    ("limits.cpu.v1.2", "limits.cpu"),
    ("limits.cpu", None),
    ("requests.nvidia.com/gpu", None),
    ("cash/limits.cpu", None),
    ("cash/limits.cpu.A4", None),
    ("limits.cpu.", None),
    ("limits.cpu.-A4", None),
    ("limits.cpu.A 4", None),
    ("limits.cpu." + "A" * 64, None),
    ("nvidia.com/gpu.A30", None),
    ("requests.nvidia.com/mig.A30", None),
    ("requests.kubernetes.io/gpu.A30", None),
    ("limits.ephemeral-storage.A4", None),
    ("pods.A4", None),
])
def test_prefix_resource(key, base):
    assert acc.prefix_resource(key) == base


@pytest.mark.parametrize(("base", "kind"), [
    ("limits.cpu", "cpu"), ("requests.cpu", "cpu"), ("cpu", "cpu"),
    ("requests.memory", "memory"), ("limits.memory", "memory"), ("memory", "memory"),
    ("requests.nvidia.com/gpu", "gpu"), ("limits.nvidia.com/gpu", "gpu"), ("requests.amd.com/gpu", "gpu"),
    ("nvidia.com/gpu", None), ("requests.example.com/fpga", None), ("pods", None), ("limits.cpu.A4", None),
    ("requests.ephemeral-storage", None),
])
def test_model_kind(base, kind):
    assert acc.model_kind(base) == kind


def test_cash_base():
    assert acc.cash_base("cash/limits.cpu") == "limits.cpu"
    assert acc.cash_base("cash/requests.nvidia.com/gpu") == "requests.nvidia.com/gpu"
    assert acc.cash_base("limits.cpu") is None
    assert acc.cash_base("cash/") is None
    assert acc.cash_base("count/pods") is None


@pytest.mark.parametrize("labels", [None, {}, {"app": "x"}, {acc.GROUP_LABEL: ""}, {acc.GROUP_LABEL: "   "},
                                    {acc.GROUP_LABEL: None}])
def test_group_of_absent(labels):
    assert acc.group_of(labels) is None


def test_group_of_strips():
    assert acc.group_of({acc.GROUP_LABEL: " ads "}) == "ads"


# ---------------------------------------------------------------------------------------
# parse_hard


def test_parse_hard_accepts_every_family():
    hard = acc.parse_hard({
        "cpu": "2", "pods": 10, "requests.cpu": "500m", "limits.memory": "4Gi", "requests.nvidia.com/gpu": "8",
        "count/pods": "5", "count/deployments.apps": "3", "hugepages-2Mi": "1Gi", "requests.hugepages-1Gi": "2Gi",
        "example.com/widgets": "1", "services.loadbalancers": "2",
        "limits.cpu.A4": "4", "cpu.A4": "1", "memory.M2": "1Gi", "requests.nvidia.com/gpu.A30": "2",
        "limits.nvidia.com/gpu.T4": "1",
        "cash/limits.cpu": "100", "cash/requests.nvidia.com/gpu": "10", "cash/requests.cpu": "0.5", "cash/pods": "1k",
    })
    assert hard["pods"] == Q("10")
    assert hard["requests.cpu"] == Q("500m")
    assert hard["cash/requests.cpu"] == Q("500m")
    assert hard["cash/pods"] == Q("1000")
    assert acc.canonical(hard)["limits.memory"] == "4Gi"


def test_parse_hard_empty_is_allowed():
    assert acc.parse_hard({}) == {}


def test_parse_hard_values_numbers_and_whitespace():
    hard = acc.parse_hard({"limits.cpu": 1.5, "requests.cpu": " 2 ", "limits.memory": "1e3", "pods": 0})
    assert hard == rl(limits__cpu="1500m", requests__cpu="2", limits__memory="1k", pods="0")


@pytest.mark.parametrize(("key", "fragment"), [
    ("cpuu", "not a ResourceQuota resource name"),
    ("limits.pods", "not a ResourceQuota resource name"),
    ("limits.cpu.", "not a ResourceQuota resource name"),
    ("limits.cpu.A 4", "not a ResourceQuota resource name"),
    ("limits.ephemeral-storage.A4", "not a ResourceQuota resource name"),
    ("Limits.CPU", "not a ResourceQuota resource name"),
    ("a/b/c", "not a ResourceQuota resource name"),
    ("", "not a ResourceQuota resource name"),
    ("cash/limits.cpu.A4", "per resource, not per model"),
    ("cash/requests.nvidia.com/gpu.A30", "use cash/requests.nvidia.com/gpu"),
    ("cash/", "names no resource"),
    ("cash/cash/limits.cpu", "cash of cash"),
    ("cash/count/deployments.apps", "not a resource workloads are charged over time"),
    ("cash/limits.nvidia.com/gpu", "not a resource workloads are charged over time"),
    ("cash/services", "not a resource workloads are charged over time"),
])
def test_parse_hard_bad_keys(key, fragment):
    with pytest.raises(acc.QuotaSpecError) as caught:
        acc.parse_hard({"limits.cpu": "1", key: "1"})
    assert caught.value.field == f"hard.{key}"
    assert fragment in caught.value.message
    assert str(caught.value) == caught.value.message


@pytest.mark.parametrize(("value", "fragment"), [
    ("-1", "greater than or equal to 0"),
    (-3, "greater than or equal to 0"),
    ("-100m", "greater than or equal to 0"),
    ("ten", "invalid quantity"),
    ("1Gb", "invalid quantity"),
    ("", "invalid quantity"),
    (None, "expected a quantity"),
    (True, "expected a quantity"),
    ([1], "expected a quantity"),
    (float("inf"), "expected a quantity"),
])
def test_parse_hard_bad_values(value, fragment):
    with pytest.raises(acc.QuotaSpecError) as caught:
        acc.parse_hard({"pods": "1", "limits.cpu": value})
    assert caught.value.field == "hard.limits.cpu"
    assert fragment in caught.value.message
    assert caught.value.message.startswith("limits.cpu")


def test_parse_hard_object_counts_must_be_whole():
    with pytest.raises(acc.QuotaSpecError) as caught:
        acc.parse_hard({"pods": "1.5"})
    assert caught.value.field == "hard.pods"
    assert "whole number" in caught.value.message
    assert acc.parse_hard({"limits.cpu": "1.5"}) == rl(limits__cpu="1500m")


def test_parse_hard_shape():
    with pytest.raises(acc.QuotaSpecError) as caught:
        acc.parse_hard(["limits.cpu"])  # type: ignore[arg-type]
    assert caught.value.field == "hard"
    with pytest.raises(acc.QuotaSpecError) as caught:
        acc.parse_hard({1: "1"})  # type: ignore[dict-item]
    assert caught.value.field == "hard"


def test_canonical_sorts_and_prints_canonically():
    resources = {"pods": Q("3"), "limits.memory": Q("1024Mi"), "limits.cpu": Q("1500m") + Q("500m")}
    assert list(acc.canonical(resources).items()) == [("limits.cpu", "2"), ("limits.memory", "1Gi"), ("pods", "3")]


@given(st.dictionaries(st.sampled_from(["limits.cpu", "requests.memory", "cash/limits.cpu", "limits.cpu.A4", "pods"]),
                       st.integers(0, 10**9)))
def test_parse_hard_round_trips_its_canonical_form(millis):
    hard = {k: str(Quantity.from_milli(v * 1000 if k == "pods" else v)) for k, v in millis.items()}
    parsed = acc.parse_hard(hard)
    assert acc.parse_hard(acc.canonical(parsed)) == parsed
    assert acc.canonical(parsed) == {k: hard[k] for k in sorted(hard)}


# ---------------------------------------------------------------------------------------
# Charges of real manifests


def test_deployment_with_sidecar_and_init_container():
    """Per pod: requests cpu max(500m + 100m sidecar, 2 init + 100m) = 2100m; limits 2200m; memory from containers."""
    manifest = workload(
        replicas=3,
        containers=[container("app", "500m", "512Mi", limit_cpu="1", limit_memory="1Gi")],
        init=[container("proxy", "100m", "64Mi", limit_cpu="200m", limit_memory="128Mi", restart="Always"),
              container("migrate", "2", "256Mi")],
        cpu="A4", memory="M2",
    )
    charge = acc.workload_charge_of(manifest)
    expected = rl(pods="3", count_S_pods="3", cpu="6300m", requests__cpu="6300m", limits__cpu="6600m",
                  memory="1728Mi", requests__memory="1728Mi", limits__memory="3456Mi")
    models = {f"{k}.A4": v for k, v in expected.items() if acc.model_kind(k) == "cpu"}
    models |= {f"{k}.M2": v for k, v in expected.items() if acc.model_kind(k) == "memory"}
    assert charge == expected | models
    assert acc.canonical(charge)["limits.memory.M2"] == "3456Mi"
    assert set(models) == {"cpu.A4", "requests.cpu.A4", "limits.cpu.A4", "memory.M2", "requests.memory.M2",
                           "limits.memory.M2"}


def test_statefulset_with_gpus_and_gpu_model():
    manifest = workload("StatefulSet", replicas=2, containers=[container("train", "4", "16Gi", limit_cpu="8", gpus=1)],
                        gpu="A30")
    charge = acc.workload_charge_of(manifest)
    assert charge["requests.nvidia.com/gpu"] == Q("2")
    assert charge["requests.nvidia.com/gpu.A30"] == Q("2")
    assert charge["limits.cpu"] == Q("16")
    assert not any(k.endswith(".A30") and k != "requests.nvidia.com/gpu.A30" for k in charge), "gpu-type only copies GPUs"
    assert "limits.nvidia.com/gpu" not in charge, "extended resources are charged as requests only"


def test_job_counts_outstanding_parallel_pods():
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "etl", "labels": {acc.GROUP_LABEL: "ads", CPU_TYPE: "A2"}},
           "spec": {"parallelism": 4, "completions": 10,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container("etl", "1", "2Gi")]}}},
           "status": {"succeeded": 8}}
    charge = acc.workload_charge_of(job)
    assert charge["pods"] == Q("2")
    assert charge["limits.cpu.A2"] == Q("2")
    suspended = copy.deepcopy(job)
    suspended["spec"]["suspend"] = True
    assert acc.workload_charge_of(suspended)["limits.cpu.A2"] == Q("0")


def test_tfjob_sums_roles_and_copies_each_model():
    tfjob = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
             "metadata": {"name": "mnist", "labels": {acc.GROUP_LABEL: "ml", CPU_TYPE: "A2", GPU_TYPE: "V100"}},
             "spec": {"tfReplicaSpecs": {
                 "PS": {"replicas": 1, "template": {"spec": {"containers": [container("ps", "2", "4Gi")]}}},
                 "Worker": {"replicas": 4, "template": {"spec": {
                     "containers": [container("tf", "4", "8Gi", gpus=1)],
                     "initContainers": [container("fetch", "6", "1Gi")]}}},
             }}}
    charge = acc.workload_charge_of(tfjob)
    # Worker pods need max(4, 6 init) = 6 cores each: 2 + 4 × 6.
    assert charge["limits.cpu"] == charge["limits.cpu.A2"] == Q("26")
    assert charge["requests.nvidia.com/gpu"] == charge["requests.nvidia.com/gpu.V100"] == Q("4")
    assert charge["pods"] == Q("5")
    assert "requests.memory.A2" not in charge


def test_workload_charge_without_labels_or_with_blank_models():
    usage = rl(limits__cpu="2", requests__cpu="1")
    assert acc.workload_charge(usage, None) == usage
    assert acc.workload_charge(usage, {CPU_TYPE: "  "}) == usage
    assert acc.workload_charge(usage, {GPU_TYPE: "T4"}) == usage, "no GPU in usage, so no GPU model copies"
    no_labels = workload()
    del no_labels["metadata"]["labels"]
    assert "limits.cpu" in acc.workload_charge_of(no_labels)


def test_workload_charge_of_propagates_manifest_errors():
    with pytest.raises(UnsupportedWorkloadError):
        acc.workload_charge_of({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {}})
    broken = workload()
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "lots"
    with pytest.raises(ValueError, match="lots"):
        acc.workload_charge_of(broken)
    bad_labels = workload()
    bad_labels["metadata"]["labels"] = ["x"]
    with pytest.raises(PodSpecError):
        acc.workload_charge_of(bad_labels)


# ---------------------------------------------------------------------------------------
# Arithmetic and updates


def test_add_subtract_scaled_over_the_union():
    a, b = rl(limits__cpu="2", pods="1"), rl(limits__cpu="500m", memory="1Gi")
    assert acc.add(a, b) == rl(limits__cpu="2500m", pods="1", memory="1Gi")
    assert acc.subtract(a, b) == rl(limits__cpu="1500m", pods="1", memory="-1Gi")
    assert acc.scaled(a, 3) == rl(limits__cpu="6", pods="3")
    assert acc.scaled(a, 0) == rl(limits__cpu="0", pods="0")
    assert a == rl(limits__cpu="2", pods="1"), "inputs are not mutated"
    with pytest.raises(TypeError):
        acc.scaled(a, 1.5)  # type: ignore[arg-type]


def test_usage_delta_drops_unchanged_keys():
    assert acc.usage_delta(rl(limits__cpu="4", pods="2"), rl(limits__cpu="4", pods="1")) == rl(pods="1")
    assert acc.usage_delta({}, rl(pods="1")) == rl(pods="-1")


def test_tracked_keeps_hard_keys_and_cash_bases():
    charge = rl(limits__cpu="4", requests__cpu="4", pods="1", limits__cpu__A4="4")
    assert acc.tracked(charge, ["limits.cpu", "limits.memory"]) == rl(limits__cpu="4")
    assert acc.tracked(charge, ["cash/limits.cpu"]) == rl(limits__cpu="4")
    assert acc.tracked(charge, ["limits.cpu.A4", "pods"]) == rl(limits__cpu__A4="4", pods="1")
    assert acc.tracked(charge, []) == {}


def test_scale_up_and_down():
    ads = Group({"limits.cpu": "10"})
    assert ads.admit(cpu_workload(2, replicas=2)) == []
    assert ads.admit(cpu_workload(2, replicas=5), old=cpu_workload(2, replicas=2)) == []
    assert ads.used_of("limits.cpu") == Q("10")
    refused = ads.admit(cpu_workload(2, replicas=6), old=cpu_workload(2, replicas=5))
    assert refused == [acc.Exceeded("limits.cpu", Q("2"), Q("10"), Q("10"))]
    assert ads.admit(cpu_workload(2, replicas=1), old=cpu_workload(2, replicas=5)) == []
    assert ads.used_of("limits.cpu") == Q("2")


def test_update_that_changes_nothing_tracked_is_admitted_even_when_full():
    ads = Group({"limits.cpu": "4"}, {"limits.cpu": "9"})
    assert ads.admit(cpu_workload(4), old=cpu_workload(4)) == []


def test_scale_down_is_allowed_when_over_hard():
    ads = Group({"limits.cpu": "10", "pods": "2"}, {"limits.cpu": "12", "pods": "5"})
    assert ads.admit(cpu_workload(1, replicas=1), old=cpu_workload(1, replicas=3)) == []
    assert ads.used_of("limits.cpu") == Q("10")
    assert ads.used_of("pods") == Q("3")


def test_mixed_update_is_judged_per_key():
    """Fewer pods but more cores: the growing key still has to fit."""
    ads = Group({"limits.cpu": "10", "pods": "10"}, {"limits.cpu": "9", "pods": "4"})
    refused = ads.admit(cpu_workload(4, replicas=1), old=cpu_workload(1, replicas=2))
    assert refused == [acc.Exceeded("limits.cpu", Q("2"), Q("9"), Q("10"))]
    assert ads.admit(cpu_workload(3, replicas=1), old=cpu_workload(1, replicas=2)) == []
    assert ads.used_of("pods") == Q("3")


def test_model_label_change_moves_usage_between_models():
    ads = Group({"limits.cpu": "10", "limits.cpu.A4": "4", "limits.cpu.A3": "4"})
    assert ads.admit(cpu_workload(4, cpu="A4")) == []
    assert ads.admit(cpu_workload(4, cpu="A3"), old=cpu_workload(4, cpu="A4")) == []
    assert ads.used_of("limits.cpu") == Q("4")
    assert ads.used_of("limits.cpu.A4") == Q("0")
    assert ads.used_of("limits.cpu.A3") == Q("4")
    delta = acc.usage_delta(acc.workload_charge_of(cpu_workload(4, cpu="A3")), acc.workload_charge_of(cpu_workload(4, cpu="A4")))
    assert delta["limits.cpu.A3"] == Q("4") and delta["limits.cpu.A4"] == Q("-4")
    assert "limits.cpu" not in delta


def test_model_label_change_into_a_full_model_is_refused():
    ads = Group({"limits.cpu": "10", "limits.cpu.A3": "2"})
    assert ads.admit(cpu_workload(4, cpu="A4")) == []
    refused = ads.admit(cpu_workload(4, cpu="A3"), old=cpu_workload(4, cpu="A4"))
    assert refused == [acc.Exceeded("limits.cpu.A3", Q("4"), Q("0"), Q("2"))]


# ---------------------------------------------------------------------------------------
# Cash


def test_exhausted_cash_blocks_new_usage_only():
    ads = Group({"cash/limits.cpu": "100"}, {"cash/limits.cpu": "100", "limits.cpu": "8"})
    refused = ads.admit(cpu_workload(1))
    assert refused == [acc.Exceeded("cash/limits.cpu", Q("1"), Q("100"), Q("100"), cash=True)]
    assert acc.denial_message("ads", refused) == 'exceeded quota group "ads": cash/limits.cpu exhausted: used 100, hard 100'
    assert ads.admit(cpu_workload(1), old=cpu_workload(2)) == [], "a scale-down passes"
    assert ads.admit(cpu_workload(1), old=cpu_workload(1)) == [], "a no-op update passes"
    assert ads.admit(None, old=cpu_workload(1)) == [], "releasing usage passes"


def test_cash_below_hard_admits():
    ads = Group({"cash/limits.cpu": "100"}, {"cash/limits.cpu": "99999m"})
    assert ads.admit(cpu_workload(50)) == []


def test_cash_blocks_only_its_own_resource():
    ml = Group({"cash/requests.nvidia.com/gpu": "10", "limits.cpu": "100"}, {"cash/requests.nvidia.com/gpu": "12"})
    assert ml.admit(cpu_workload(4)) == []
    refused = ml.admit(workload(containers=[container("t", "1", gpus=1)]))
    assert [(e.resource, e.cash) for e in refused] == [("cash/requests.nvidia.com/gpu", True)]


def test_exhausted_cash_blocks_a_switch_to_another_model():
    hard = res({"cash/limits.cpu": "100", "limits.cpu.A3": "10"})
    delta = acc.usage_delta(acc.tracked(acc.workload_charge_of(cpu_workload(4, cpu="A3")), hard),
                            acc.tracked(acc.workload_charge_of(cpu_workload(4, cpu="A4")), hard))
    assert delta == rl(limits__cpu__A3="4"), "same cores: the base does not change"
    exceeded = acc.check_admission(hard, rl(cash_S_limits__cpu="100"), delta)
    assert exceeded == [acc.Exceeded("cash/limits.cpu", Q("4"), Q("100"), Q("100"), cash=True)]


def test_check_admission_treats_missing_used_as_zero():
    assert acc.check_admission(rl(pods="2"), {}, rl(pods="2")) == []
    assert acc.check_admission(rl(pods="2"), {}, rl(pods="3")) == [acc.Exceeded("pods", Q("3"), Q("0"), Q("2"))]
    assert acc.check_admission(rl(cash_S_limits__cpu="0"), {}, rl(limits__cpu="1"))[0].cash, "a zero budget is spent"


def test_denial_message_needs_a_reason():
    with pytest.raises(ValueError):
        acc.denial_message("ads", [])


KEYS = ["limits.cpu", "limits.cpu.A4", "pods", "requests.nvidia.com/gpu", "cash/limits.cpu"]
milli = st.integers(-5_000, 20_000).map(Quantity.from_milli)
resource_lists = st.dictionaries(st.sampled_from(KEYS), milli)


@given(hard=st.dictionaries(st.sampled_from(KEYS), st.integers(0, 20_000).map(Quantity.from_milli)),
       used=resource_lists, delta=st.dictionaries(st.sampled_from([k for k in KEYS if not k.startswith("cash/")]), milli))
def test_check_admission_is_exact(hard, used, delta):
    """Admitted deltas never take a growing key above hard; every refusal has a reason."""
    exceeded = {e.resource for e in acc.check_admission(hard, used, delta)}
    zero = Quantity.from_int(0)
    for key, limit in hard.items():
        base = acc.cash_base(key)
        if base is None:
            grows = delta.get(key, zero) > zero
            breaks = grows and used.get(key, zero) + delta[key] > limit
        else:
            grows = any(v > zero and (k == base or acc.prefix_resource(k) == base) for k, v in delta.items())
            breaks = grows and used.get(key, zero) >= limit
        assert (key in exceeded) == breaks
    assert exceeded <= set(hard)


@given(resource_lists, resource_lists)
def test_usage_delta_plus_old_is_new(new, old):
    delta = acc.usage_delta(new, old)
    zero = Quantity.from_int(0)
    restored = acc.add(delta, old)
    for key in set(new) | set(old):
        assert restored.get(key, zero) == new.get(key, zero)
    assert all(not v.is_zero() for v in delta.values())


# ---------------------------------------------------------------------------------------
# The tree


def test_child_must_carry_every_parent_key():
    with pytest.raises(acc.TreeError) as caught:
        acc.validate_child_hard("org", rl(limits__cpu="10", pods="10"), {}, rl(limits__cpu="1"))
    assert (caught.value.code, caught.value.field) == ("missing_key", "hard.pods")
    assert '"org"' in caught.value.message and "pods" in caught.value.message


def test_child_must_fit_in_parent_remaining():
    with pytest.raises(acc.TreeError) as caught:
        acc.validate_child_hard("x", rl(limits__cpu="10"), rl(limits__cpu="7"), rl(limits__cpu="4"))
    assert (caught.value.code, caught.value.field) == ("insufficient", "hard.limits.cpu")
    assert caught.value.message == 'parent "x" has 3 of limits.cpu left (hard 10, used 7); the child asks for 4'
    acc.validate_child_hard("x", rl(limits__cpu="10"), rl(limits__cpu="7"), rl(limits__cpu="3"))


def test_child_keys_the_parent_lacks_are_free():
    acc.validate_child_hard("x", rl(limits__cpu="10"), {}, rl(limits__cpu="1", limits__cpu__A4="1000", pods="99"))


def test_child_of_an_overused_parent_reads_nothing_left():
    with pytest.raises(acc.TreeError) as caught:
        acc.validate_child_hard("x", rl(pods="10"), rl(pods="12"), rl(pods="0") | rl(pods="1"))
    assert "has 0 of pods left (hard 10, used 12)" in caught.value.message
    acc.validate_child_hard("x", rl(pods="10"), rl(pods="12"), rl(pods="0"))


def test_child_cash_is_carved_from_parent_cash():
    parent_hard = rl(cash_S_limits__cpu="100")
    used, _ = acc.group_status(parent_hard, rl(cash_S_limits__cpu="30"), [rl(cash_S_limits__cpu="50")])
    assert used == rl(cash_S_limits__cpu="80")
    with pytest.raises(acc.TreeError):
        acc.validate_child_hard("org", parent_hard, used, rl(cash_S_limits__cpu="21"))
    acc.validate_child_hard("org", parent_hard, used, rl(cash_S_limits__cpu="20"))


def resize(old: Mapping[str, str], new: Mapping[str, str], *, parent_hard: Mapping[str, str] | None = None,
           parent_used: Mapping[str, str] | None = None, children: Sequence[Mapping[str, str]] = (),
           self_used: Mapping[str, str] | None = None) -> list[str]:
    return acc.validate_resize("team", res(old), res(new), parent=None if parent_hard is None else "org",
                               parent_hard=None if parent_hard is None else res(parent_hard),
                               parent_used=None if parent_used is None else res(parent_used),
                               children_hard=[res(c) for c in children], self_used=res(self_used or {}))


def test_resize_growth_must_fit_in_parent_remaining():
    parent = {"limits.cpu": "10"}
    assert resize({"limits.cpu": "4"}, {"limits.cpu": "7"}, parent_hard=parent, parent_used={"limits.cpu": "7"}) == []
    with pytest.raises(acc.TreeError) as caught:
        resize({"limits.cpu": "4"}, {"limits.cpu": "8"}, parent_hard=parent, parent_used={"limits.cpu": "7"})
    assert (caught.value.code, caught.value.field) == ("insufficient", "hard.limits.cpu")
    assert caught.value.message == 'parent "org" has 3 of limits.cpu left (hard 10, used 7); "team" asks for 4 more'


def test_resize_keys_the_parent_lacks_are_free_and_roots_are_unbounded():
    assert resize({"limits.cpu": "4"}, {"limits.cpu": "4", "pods": "1000"}, parent_hard={"limits.cpu": "4"},
                  parent_used={"limits.cpu": "4"}) == []
    assert resize({"limits.cpu": "4"}, {"limits.cpu": "4000"}) == []


def test_resize_must_keep_parent_keys():
    with pytest.raises(acc.TreeError) as caught:
        resize({"limits.cpu": "4", "pods": "4"}, {"limits.cpu": "4"}, parent_hard={"pods": "10"}, parent_used={})
    assert (caught.value.code, caught.value.field) == ("missing_key", "hard.pods")


def test_resize_may_drop_a_key_the_parent_does_not_have():
    assert resize({"limits.cpu": "4", "pods": "4"}, {"limits.cpu": "4"}, parent_hard={"limits.cpu": "10"},
                  parent_used={"limits.cpu": "4"}) == []


def test_resize_may_not_gain_a_key_a_child_lacks():
    children = [{"limits.cpu": "1", "pods": "1"}, {"limits.cpu": "1"}]
    with pytest.raises(acc.TreeError) as caught:
        resize({"limits.cpu": "4"}, {"limits.cpu": "4", "pods": "10"}, children=children)
    assert (caught.value.code, caught.value.field) == ("children_missing_key", "hard.pods")
    assert "pods" in caught.value.message
    assert resize({"limits.cpu": "4"}, {"limits.cpu": "4", "pods": "10"}, children=[{"limits.cpu": "1", "pods": "1"}]) == []


def test_resize_below_usage_is_allowed_with_a_warning():
    warnings = resize({"limits.cpu": "10", "pods": "10"}, {"limits.cpu": "8", "pods": "9"},
                      children=[{"limits.cpu": "4", "pods": "1"}], self_used={"limits.cpu": "5", "pods": "2"})
    assert warnings == ["limits.cpu 8 is below what is in use (9): admissions will fail until usage drops"]


def test_resize_warns_about_spent_cash():
    warnings = resize({"cash/limits.cpu": "100"}, {"cash/limits.cpu": "50"}, self_used={"cash/limits.cpu": "60"})
    assert len(warnings) == 1
    assert warnings[0].startswith("cash/limits.cpu 50 is below what has been spent (60)")


def test_resize_does_not_warn_about_keys_it_leaves_alone():
    assert resize({"limits.cpu": "4", "pods": "1"}, {"limits.cpu": "4", "pods": "2"}, self_used={"limits.cpu": "9"}) == []


def test_move_between_siblings():
    kwargs = {"source_hard": rl(limits__cpu="10", pods="5"), "source_used": rl(limits__cpu="7"),
              "target_hard": rl(limits__cpu="1", pods="1")}
    acc.validate_move("a", "b", rl(limits__cpu="3"), **kwargs)
    acc.validate_move("a", "b", rl(limits__cpu="3", pods="5"), **kwargs)
    cases = [
        (rl(limits__cpu="4"), "insufficient", "amount.limits.cpu"),
        (rl(limits__cpu="0"), "amount", "amount.limits.cpu"),
        (rl(pods="-1"), "amount", "amount.pods"),
        (rl(memory="1Gi"), "missing_key", "amount.memory"),
        ({}, "amount", "amount"),
    ]
    for amount, code, field in cases:
        with pytest.raises(acc.TreeError) as caught:
            acc.validate_move("a", "b", amount, **kwargs)
        assert (caught.value.code, caught.value.field) == (code, field), amount
    with pytest.raises(acc.TreeError) as caught:
        acc.validate_move("a", "b", rl(limits__cpu="4"), **kwargs)
    assert caught.value.message == '"a" can give at most 3 of limits.cpu (hard 10, used 7); asked to move 4'


def test_move_key_must_exist_in_the_target():
    with pytest.raises(acc.TreeError) as caught:
        acc.validate_move("a", "b", rl(pods="1"), source_hard=rl(pods="5"), source_used={}, target_hard=rl(limits__cpu="1"))
    assert caught.value.code == "missing_key"
    assert '"b"' in caught.value.message


def test_children_used_and_group_status():
    hard = rl(limits__cpu="10", pods="10", cash_S_limits__cpu="100", memory="1Gi")
    self_used = rl(limits__cpu="2", requests__cpu="1", cash_S_limits__cpu="7")
    children = [rl(limits__cpu="3", pods="2"), rl(limits__cpu="1", pods="1", limits__cpu__A4="1")]
    assert acc.children_used(self_used, children) == rl(
        limits__cpu="6", requests__cpu="1", cash_S_limits__cpu="7", pods="3", limits__cpu__A4="1")
    used, own = acc.group_status(hard, self_used, children)
    assert used == rl(limits__cpu="6", pods="3", cash_S_limits__cpu="7", memory="0")
    assert own == rl(limits__cpu="2", pods="0", cash_S_limits__cpu="7", memory="0")
    assert acc.canonical(used)["memory"] == "0"


# ---------------------------------------------------------------------------------------
# Cash accrual and projection


def span(charge: Mapping[str, str], started: datetime | None, finished: datetime | None = None) -> acc.PodSpan:
    return acc.PodSpan(charge=res(charge), started=started, finished=finished)


def test_accrue_cash_overlaps():
    since, until = T0, T0 + timedelta(hours=1)
    hour = timedelta(hours=1)
    pods = [
        span({"limits.cpu": "2"}, since - hour),                                       # before since, still running: 2
        span({"limits.cpu": "4"}, since + hour / 2, since + hour * 3 / 4),             # inside the window: 1
        span({"limits.cpu": "8"}, since - hour, since + hour / 4),                     # finished mid-window: 2
        span({"limits.cpu": "100"}, None),                                             # never started
        span({"limits.cpu": "100"}, since - 2 * hour, since - hour),                   # finished before since
        span({"limits.cpu": "100"}, until),                                            # starts at until
        span({"limits.cpu": "100"}, since, since),                                     # ran for no time
        span({"requests.nvidia.com/gpu": "2", "limits.cpu": "500m"}, since + hour / 2),  # half an hour: 1 GPU-h, 0.25
    ]
    spent = acc.accrue_cash(pods, ["cash/limits.cpu", "cash/requests.nvidia.com/gpu", "cash/limits.memory"], since, until)
    assert spent == rl(cash_S_limits__cpu="5250m", cash_S_requests__nvidia__com_S_gpu="1", cash_S_limits__memory="0")


def test_accrue_cash_does_not_count_model_copies_twice():
    pod = span({"limits.cpu": "2", "limits.cpu.A4": "2"}, T0)
    assert acc.accrue_cash([pod], ["cash/limits.cpu"], T0, T0 + timedelta(hours=3)) == rl(cash_S_limits__cpu="6")


def test_accrue_cash_rounds_up_to_milli():
    pod = span({"limits.cpu": "1m"}, T0)
    assert acc.accrue_cash([pod], ["cash/limits.cpu"], T0, T0 + timedelta(seconds=1)) == rl(cash_S_limits__cpu="1m")
    pod = span({"limits.cpu": "1"}, T0)
    assert acc.accrue_cash([pod], ["cash/limits.cpu"], T0, T0 + timedelta(seconds=18)) == rl(cash_S_limits__cpu="5m")
    assert acc.accrue_cash([pod], ["cash/limits.cpu"], T0, T0 + timedelta(seconds=19)) == rl(cash_S_limits__cpu="6m")


def test_accrue_cash_empty_window_and_bad_keys():
    pod = span({"limits.cpu": "1"}, T0 - timedelta(hours=1))
    assert acc.accrue_cash([pod], ["cash/limits.cpu"], T0, T0) == rl(cash_S_limits__cpu="0")
    assert acc.accrue_cash([], [], T0, T0 + timedelta(hours=1)) == {}
    with pytest.raises(ValueError):
        acc.accrue_cash([pod], ["limits.cpu"], T0, T0 + timedelta(hours=1))


@given(cores=st.lists(st.tuples(st.integers(1, 64_000), st.integers(-7200, 7200), st.integers(0, 14400)), max_size=6),
       cut=st.integers(0, 3600))
def test_accrue_cash_split_windows_differ_by_at_most_one_rounding(cores, cut):
    """Accruing [since, mid) then [mid, until) costs at most 1m more than one pass, never less."""
    pods = [span({"limits.cpu": str(Quantity.from_milli(m))}, T0 + timedelta(seconds=start),
                 T0 + timedelta(seconds=start + length)) for m, start, length in cores]
    since, mid, until = T0, T0 + timedelta(seconds=cut), T0 + timedelta(hours=1)
    whole = acc.accrue_cash(pods, ["cash/limits.cpu"], since, until)["cash/limits.cpu"]
    parts = acc.add(acc.accrue_cash(pods, ["cash/limits.cpu"], since, mid),
                    acc.accrue_cash(pods, ["cash/limits.cpu"], mid, until))["cash/limits.cpu"]
    assert whole <= parts <= whole + Q("1m")


def test_burn_rate():
    samples = [(T0 + timedelta(hours=2), Q("30")), (T0, Q("10")), (T0 + timedelta(hours=1), Q("12"))]
    assert acc.burn_rate(samples) == Decimal(10)
    assert acc.burn_rate(samples[:1]) is None
    assert acc.burn_rate([]) is None
    assert acc.burn_rate([(T0, Q("1")), (T0, Q("5"))]) is None
    assert acc.burn_rate([(T0, Q("500m")), (T0 + timedelta(minutes=30), Q("1"))]) == Decimal(1)


def test_projected_exhaustion():
    assert acc.projected_exhaustion(Q("100"), Q("40"), Decimal(10), T0) == T0 + timedelta(hours=6)
    assert acc.projected_exhaustion(Q("100"), Q("99"), Decimal(4), T0) == T0 + timedelta(minutes=15)
    assert acc.projected_exhaustion(Q("100"), Q("40"), None, T0) is None
    assert acc.projected_exhaustion(Q("100"), Q("40"), Decimal(0), T0) is None
    assert acc.projected_exhaustion(Q("100"), Q("40"), Decimal(-1), T0) is None
    assert acc.projected_exhaustion(Q("100"), Q("100"), Decimal(1), T0) == T0
    assert acc.projected_exhaustion(Q("100"), Q("120"), None, T0) == T0, "already exhausted, whatever the rate"
    assert acc.projected_exhaustion(Q("1e30"), Q("0"), Decimal("0.001"), T0) is None, "beyond year 9999"


def test_a_denial_reads_in_the_units_people_use():
    """Refusals said "used 2959690m, hard 5k" (the canonical quantity): now numbers as the
    quota pages show them, memory in binary units."""
    refused = [acc.Exceeded("cash/limits.cpu", Q("500m"), Q("2959690m"), Q("5k"), cash=True),
               acc.Exceeded("requests.memory", Q("1536Mi"), Q("40552320Mi"), Q("40Ti")),
               acc.Exceeded("requests.cpu", Q("250m"), Q("99900m"), Q("100"))]
    assert acc.denial_message("vision", refused) == (
        'exceeded quota group "vision": cash/limits.cpu exhausted: used 2,959.69, hard 5,000; '
        "requests.memory requested 1.5Gi, used 38.7Ti, hard 40Ti; requests.cpu requested 0.25, used 99.9, hard 100")
