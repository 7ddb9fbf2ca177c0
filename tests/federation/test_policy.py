"""Policies as users write them: field messages for every mistake, and their translation into
scheduler input; override rules, rendering and status aggregation over plain data."""

from __future__ import annotations

import pytest

from federation.aggregate import MemberView, aggregate
from federation.followers import referenced
from federation.policy import (
    api_resource,
    cluster_patches,
    resource_request,
    scheduling_unit,
    validate_override,
    validate_propagation,
)
from federation.render import (
    KEY_ANNOTATION,
    TEMPLATE_HASH_ANNOTATION,
    RenderError,
    member_object,
    observe,
    resolve_fencepost,
    rollout_target,
    template_hash,
)
from federation.rollout import RolloutPlan
from federation.scheduler import ClusterInfo, schedule

from .conftest import deployment


@pytest.mark.parametrize(("spec", "field", "fragment"), [
    ({"clusterSelector": {"bad key!": "x"}}, "clusterSelector", "bad key!"),
    ({"placement": [{"cluster": "a", "preferences": {"minReplicas": -1}}]}, "placement[0].preferences.minReplicas", "non-negative"),
    ({"placement": [{"cluster": "a", "preferences": {"minReplicas": 5, "maxReplicas": 2}}]},
     "placement[0].preferences.minReplicas", "exceeds maxReplicas"),
    ({"placement": [{"cluster": "a"}, {"cluster": "a"}]}, "placement[1].cluster", "listed twice"),
    ({"schedulingProfile": "turbo"}, "schedulingProfile", "unknown scheduling profile"),
    ({"schedulingMode": "Spread"}, "schedulingMode", "Divide or Duplicate"),
    ({"maxClusters": -2}, "maxClusters", "negative"),
    ({"maxClusters": "3"}, "maxClusters", "integer"),
    ({"replicas": 3}, "replicas", "unknown field"),
    ({"clusterAffinity": [{"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]},
     "clusterAffinity[0]", "Near"),
    ({"tolerations": [{"key": "", "operator": "Equal", "value": "x"}]}, "tolerations[0]", "Exists"),
    ({"replicaRescheduling": {"avoidDisruption": "yes"}}, "replicaRescheduling", "true or false"),
])
def test_invalid_propagation_policies_get_field_messages(spec, field, fragment):
    errors = validate_propagation(spec)
    assert field in errors, errors
    assert fragment in errors[field]


def test_a_full_valid_policy_has_no_errors_and_becomes_the_scheduler_unit():
    spec = {"schedulingMode": "Divide", "clusterSelector": {"region": "bj"}, "maxClusters": 2, "stickyCluster": False,
            "clusterAffinity": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}],
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "placement": [{"cluster": "bj-1", "preferences": {"weight": 2, "minReplicas": 1, "maxReplicas": 9}}],
            "replicaRescheduling": {"avoidDisruption": False}, "schedulingProfile": "default"}
    assert validate_propagation(spec) == {}
    unit = scheduling_unit(deployment(replicas=7, cpu="250m", memory="1Gi"), spec, current={"bj-1": 3}, key="shop/web")
    assert unit.gvk == "apps/v1/deployments"
    assert unit.desired_replicas == 7
    assert unit.resource_request == {"cpu": 250, "memory": 2**30}
    assert unit.max_clusters == 2 and unit.avoid_migration is False
    assert unit.placements["bj-1"].weight == 2 and unit.placements["bj-1"].max_replicas == 9
    assert unit.current_clusters == {"bj-1": 3} and unit.key == "shop/web"


def test_served_resources_are_matched_by_their_plural_as_clusters_list_them():
    assert api_resource("apps/v1", "Deployment") == "apps/v1/deployments"
    assert api_resource("v1", "Ingress") == "v1/ingresses"
    assert api_resource("networking.k8s.io/v1", "NetworkPolicy") == "networking.k8s.io/v1/networkpolicies"
    unit = scheduling_unit({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "t"}}, {})
    serving = ClusterInfo("a", api_resources=frozenset({"kubeflow.org/v1/tfjobs"}))
    lacking = ClusterInfo("b", api_resources=frozenset({"apps/v1/deployments"}))
    result = schedule(unit, [serving, lacking])
    assert list(result.clusters) == ["a"]
    assert "does not serve" in result.filtered["b"][0]


def test_requests_come_from_the_pod_template_like_kubernetes_counts_them():
    obj = deployment(cpu="500m", memory="256Mi")
    obj["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "init", "image": "x", "resources": {"requests": {"cpu": "2"}}}]
    assert resource_request(obj) == {"cpu": 2000, "memory": 256 * 2**20}
    assert resource_request({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}) == {}


def test_override_rules_validate_and_select_clusters_by_name_labels_and_affinity():
    spec = {"overrideRules": [
        {"targetClusters": {"clusters": ["bj-1"]},
         "overriders": {"jsonpatch": [{"operator": "replace", "path": "/spec/replicas", "value": 1}]}},
        {"targetClusters": {"clusterSelector": {"region": "sh"}},
         "overriders": {"jsonpatch": [{"operator": "add", "path": "/metadata/labels/region", "value": "sh"}]}},
        {"targetClusters": {"clusterAffinity": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
         "overriders": {"jsonpatch": [{"operator": "add", "path": "/metadata/labels/gpu", "value": "yes"}]}},
        {"overriders": {"jsonpatch": [{"operator": "add", "path": "/metadata/labels/all", "value": "1"}]}},
    ]}
    assert validate_override(spec) == {}
    assert [op["path"] for op in cluster_patches(spec, "bj-1", {"region": "bj"})] == ["/spec/replicas", "/metadata/labels/all"]
    assert [op["path"] for op in cluster_patches(spec, "sh-1", {"region": "sh", "gpu": "a100"})] == [
        "/metadata/labels/region", "/metadata/labels/gpu", "/metadata/labels/all"]
    errors = validate_override({"overrideRules": [
        {"targetClusters": {"clusterSelector": {"bad key!": "x"}}, "overriders": {"jsonpatch": [{"operator": "add", "path": "/a"}]}},
        {"overriders": {"image": "x"}}], "extra": 1})
    assert errors["extra"] == "unknown field"
    assert "bad key!" in errors["overrideRules[0].targetClusters.clusterSelector"]
    assert errors["overrideRules[0].overriders.jsonpatch[0]"] == "add needs a value"
    assert "jsonpatch" in errors["overrideRules[1].overriders"]


def test_rendering_sets_replicas_overrides_and_step_fenceposts_and_strips_server_fields():
    obj = deployment(replicas=30)
    obj["metadata"].update(uid="u-1", resourceVersion="9")
    obj["status"] = {"replicas": 30}
    body = member_object(obj, key="shop/web", revision=4, replicas=12,
                         patches=[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:sh"}],
                         step=RolloutPlan(max_surge=2, max_unavailable=0))
    assert body["spec"]["replicas"] == 12
    assert body["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:sh"
    assert body["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 2, "maxUnavailable": 0}
    assert "status" not in body and "uid" not in body["metadata"] and "resourceVersion" not in body["metadata"]
    assert body["metadata"]["annotations"][KEY_ANNOTATION] == "shop/web"
    assert body["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION] == template_hash(obj)
    assert obj["spec"]["replicas"] == 30, "the template is not modified"
    with pytest.raises(RenderError, match="override does not apply"):
        member_object(obj, key="k", revision=1, replicas=1, patches=[{"op": "remove", "path": "/spec/nothing"}])


def test_scaling_is_not_a_template_change_but_an_image_is():
    a, b, c = deployment(replicas=3), deployment(replicas=30), deployment(replicas=3, image="nginx:2")
    assert template_hash(a) == template_hash(b) != template_hash(c)


@pytest.mark.parametrize(("value", "replicas", "up", "expected"), [
    ("25%", 10, True, 3), ("25%", 10, False, 2), (None, 4, True, 1), (5, 100, False, 5), ("0%", 10, True, 0),
])
def test_fenceposts_resolve_like_kubernetes(value, replicas, up, expected):
    assert resolve_fencepost(value, replicas, round_up=up) == expected


def test_observed_members_become_rollout_targets():
    body = member_object(deployment(replicas=10), key="k", revision=1, replicas=10)
    body["status"] = {"replicas": 12, "updatedReplicas": 4, "availableReplicas": 9, "readyReplicas": 9}
    seen = observe(body)
    assert seen["maxSurge"] == 3 and seen["maxUnavailable"] == 2
    target = rollout_target("a", 10, seen, template_hash(deployment()))
    assert target.updated and target.updated_replicas == 4 and target.actual_replicas == 12
    assert target.updated_available_replicas == 1, "9 available minus 8 old pods"
    stale = rollout_target("a", 10, seen, "other-hash")
    assert not stale.updated and stale.updated_replicas == 0 and stale.current_new_replicas == 4
    assert rollout_target("b", 5, {}, "h").replicas == 0


def test_aggregation_sums_members_and_names_the_failing_cluster():
    members = [
        MemberView("a", 6, "applied", "", {"replicas": 6, "readyReplicas": 6, "availableReplicas": 6, "updatedReplicas": 6}, True),
        MemberView("b", 4, "error", "forbidden: nope", {}, False),
    ]
    status, phase, message = aggregate("Deployment", 10, members)
    assert (phase, status["availableReplicas"], status["desiredReplicas"]) == ("Degraded", 6, 10)
    assert "b" in message and status["clusters"]["b"]["error"] == "forbidden: nope"
    ready = [MemberView("a", 10, "applied", "", {"replicas": 10, "readyReplicas": 10, "availableReplicas": 10,
                                                  "updatedReplicas": 10}, True)]
    assert aggregate("Deployment", 10, ready)[1] == "Ready"
    stale = [MemberView("a", 10, "applied", "", {"replicas": 10, "readyReplicas": 10, "availableReplicas": 10,
                                                  "updatedReplicas": 10}, False)]
    status, phase, _ = aggregate("Deployment", 10, stale)
    assert phase == "Rolling" and status["updatedReplicas"] == 0
    assert aggregate("ConfigMap", None, [MemberView("a", None, "applied", "", {}, True)])[1] == "Ready"
    assert aggregate("Deployment", 10, [], scheduling_error="no cluster")[1] == "Unschedulable"


def test_followers_are_every_configmap_and_secret_the_pods_reference():
    obj = deployment()
    pod = obj["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "a", "configMap": {"name": "cm-vol"}}, {"name": "b", "secret": {"secretName": "sec-vol"}},
                      {"name": "c", "projected": {"sources": [{"configMap": {"name": "cm-proj"}}]}}]
    pod["imagePullSecrets"] = [{"name": "registry"}]
    pod["containers"][0]["envFrom"] = [{"configMapRef": {"name": "cm-env"}}]
    pod["containers"][0]["env"] = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "sec-key", "key": "k"}}}]
    assert referenced(obj) == [("ConfigMap", "cm-env"), ("ConfigMap", "cm-proj"), ("ConfigMap", "cm-vol"),
                               ("Secret", "registry"), ("Secret", "sec-key"), ("Secret", "sec-vol")]
    assert referenced({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}) == []
