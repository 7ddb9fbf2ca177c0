"""The validating webhook as API servers call it: whole-workload admission against quota groups."""

from __future__ import annotations

import json

import pytest

from fleet.tokens import issue_token
from quotas import services
from quotas.models import QuotaCharge, QuotaGroup

from .conftest import deployment, hpa_review, post_review, review, scale_review

pytestmark = pytest.mark.django_db


def used(name: str) -> dict[str, str]:
    return QuotaGroup.objects.get(name=name).used


def test_the_seed_example_model_quota_rolls_up_into_its_prefix(client, webhook_token, ads):
    a4 = post_review(client, webhook_token, review(deployment("a4-web", cpu="4", cpu_type="A4")))
    assert a4["allowed"] is True
    assert used("ads") == {"limits.cpu": "4", "limits.cpu.A4": "4", "pods": "1"}

    more_a4 = post_review(client, webhook_token, review(deployment("a4-more", cpu="1", cpu_type="A4")))
    assert more_a4["allowed"] is False and more_a4["status"]["code"] == 403
    message = more_a4["status"]["message"]
    assert '"ads"' in message and "limits.cpu.A4" in message and "requested 1" in message
    assert "used 4" in message and "hard 4" in message

    other = post_review(client, webhook_token, review(deployment("plain", cpu="6")))
    assert other["allowed"] is True, "6 non-A4 cores still fit under limits.cpu 10"
    assert used("ads") == {"limits.cpu": "10", "limits.cpu.A4": "4", "pods": "2"}
    last = post_review(client, webhook_token, review(deployment("one-more", cpu="1")))
    assert last["allowed"] is False and "limits.cpu requested 1, used 10, hard 10" in last["status"]["message"]
    assert used("ads") == {"limits.cpu": "10", "limits.cpu.A4": "4", "pods": "2"}, "a denial commits nothing"


def test_a_whole_workload_is_admitted_or_refused_never_half(client, webhook_token, ads):
    answer = post_review(client, webhook_token, review(deployment("big", cpu="1", replicas=11)))
    assert answer["allowed"] is False and "requested 11" in answer["status"]["message"]
    assert not QuotaCharge.objects.exists()
    assert post_review(client, webhook_token, review(deployment("fits", cpu="1", replicas=10)))["allowed"] is True
    assert QuotaCharge.objects.get(name="fits").replicas == 10


def test_workloads_outside_bizrq_pass_and_unknown_groups_are_refused(client, webhook_token, ads):
    assert post_review(client, webhook_token, review(deployment("free", group=None, cpu="64")))["allowed"] is True
    missing = post_review(client, webhook_token, review(deployment("lost", group="no-such-group")))
    assert missing["allowed"] is False and '"no-such-group"' in missing["status"]["message"]
    assert "does not exist" in missing["status"]["message"]
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"biz.group.resource.quota": "ads"}}}
    assert post_review(client, webhook_token, review(config_map, resource=("", "v1", "configmaps"),
                                                     kind=("", "v1", "ConfigMap")))["allowed"] is True
    assert used("ads")["limits.cpu"] == "0"


def test_update_charges_the_delta_and_scale_down_always_passes(client, webhook_token, ads):
    old = deployment("web", cpu="2", replicas=2)
    post_review(client, webhook_token, review(old))
    grown = deployment("web", cpu="2", replicas=5)
    assert post_review(client, webhook_token, review(grown, operation="UPDATE", old=old))["allowed"] is True
    assert used("ads")["limits.cpu"] == "10"
    too_big = deployment("web", cpu="2", replicas=6)
    denied = post_review(client, webhook_token, review(too_big, operation="UPDATE", old=grown))
    assert denied["allowed"] is False and "requested 2, used 10, hard 10" in denied["status"]["message"]
    services.update_group(QuotaGroup.objects.get(name="ads"), hard={"limits.cpu": "4", "limits.cpu.A4": "4", "pods": "20"})
    smaller = deployment("web", cpu="2", replicas=3)
    assert post_review(client, webhook_token, review(smaller, operation="UPDATE", old=grown))["allowed"] is True, \
        "shrinking passes even while the group is over its (shrunk) hard"
    assert used("ads")["limits.cpu"] == "6"


def test_a_model_label_change_moves_usage_between_models(client, webhook_token, ads):
    old = deployment("svc", cpu="3", cpu_type="A4")
    post_review(client, webhook_token, review(old))
    moved = deployment("svc", cpu="3", cpu_type="A2")
    assert post_review(client, webhook_token, review(moved, operation="UPDATE", old=old))["allowed"] is True
    assert used("ads") == {"limits.cpu": "3", "limits.cpu.A4": "0", "pods": "1"}


def test_moving_a_workload_to_another_group_releases_the_first(client, webhook_token, ads):
    services.create_group(name="search", parent=None, hard={"limits.cpu": "5"})
    old = deployment("mover", cpu="4")
    post_review(client, webhook_token, review(old))
    new = deployment("mover", cpu="4", group="search")
    assert post_review(client, webhook_token, review(new, operation="UPDATE", old=old))["allowed"] is True
    assert used("ads")["limits.cpu"] == "0" and used("search")["limits.cpu"] == "4"
    assert QuotaCharge.objects.get(name="mover").group.name == "search"


def test_dry_run_is_checked_but_never_committed(client, webhook_token, ads):
    dry = post_review(client, webhook_token, review(deployment("dry", cpu="8"), dry_run=True))
    assert dry["allowed"] is True
    assert used("ads")["limits.cpu"] == "0" and not QuotaCharge.objects.exists()
    refused = post_review(client, webhook_token, review(deployment("dry", cpu="11"), dry_run=True))
    assert refused["allowed"] is False


def test_delete_returns_the_quota(client, webhook_token, ads):
    obj = deployment("gone", cpu="7")
    post_review(client, webhook_token, review(obj))
    assert post_review(client, webhook_token, review(None, operation="DELETE", old=obj, name="gone"))["allowed"] is True
    assert used("ads")["limits.cpu"] == "0" and not QuotaCharge.objects.exists()


def test_scale_subresource_is_charged_per_replica(client, webhook_token, ads):
    post_review(client, webhook_token, review(deployment("scaled", cpu="2", replicas=1)))
    assert post_review(client, webhook_token, scale_review("scaled", 5, 1))["allowed"] is True
    assert used("ads")["limits.cpu"] == "10" and QuotaCharge.objects.get(name="scaled").spec_replicas == 5
    denied = post_review(client, webhook_token, scale_review("scaled", 6, 5))
    assert denied["allowed"] is False and "limits.cpu requested 2" in denied["status"]["message"]
    assert post_review(client, webhook_token, scale_review("unknown", 50, 1))["allowed"] is True, "not bizrq's workload"


def test_hpa_max_replicas_is_reserved(client, webhook_token, ads):
    post_review(client, webhook_token, review(deployment("auto", cpu="1", replicas=2)))
    assert post_review(client, webhook_token, hpa_review("auto", 8))["allowed"] is True
    charge = QuotaCharge.objects.get(name="auto")
    assert (charge.hpa_max_replicas, charge.replicas) == (8, 8) and used("ads")["limits.cpu"] == "8"
    denied = post_review(client, webhook_token, hpa_review("auto", 11, operation="UPDATE", old_max=8))
    assert denied["allowed"] is False and "requested 3" in denied["status"]["message"]
    scaled = post_review(client, webhook_token, scale_review("auto", 9, 2))
    assert scaled["allowed"] is True and used("ads")["limits.cpu"] == "9", "above the HPA max, the spec binds"
    assert post_review(client, webhook_token, hpa_review("auto", 0, operation="DELETE", old_max=8))["allowed"] is True
    assert used("ads")["limits.cpu"] == "9"


def test_other_workload_kinds(client, webhook_token, ads):
    services.update_group(QuotaGroup.objects.get(name="ads"), hard={"limits.cpu": "100", "limits.cpu.A4": "4", "pods": "100"})
    job = deployment("batch", cpu="2", kind="Job", api_version="batch/v1")
    job["spec"] = {"parallelism": 3, "completions": 10, "template": job["spec"]["template"]}
    assert post_review(client, webhook_token, review(job, resource=("batch", "v1", "jobs"), kind=("batch", "v1", "Job")))["allowed"]
    sts = deployment("db", cpu="4", replicas=3, kind="StatefulSet")
    assert post_review(client, webhook_token, review(sts, resource=("apps", "v1", "statefulsets"),
                                                     kind=("apps", "v1", "StatefulSet")))["allowed"]
    template = deployment("t", cpu="1")["spec"]["template"]
    tfjob = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
             "metadata": {"name": "train", "namespace": "default", "labels": {"biz.group.resource.quota": "ads"}},
             "spec": {"tfReplicaSpecs": {"PS": {"replicas": 2, "template": template},
                                         "Worker": {"replicas": 4, "template": template}}}}
    assert post_review(client, webhook_token, review(tfjob, resource=("kubeflow.org", "v1", "tfjobs"),
                                                     kind=("kubeflow.org", "v1", "TFJob")))["allowed"]
    assert used("ads")["limits.cpu"] == str(3 * 2 + 3 * 4 + 6)
    assert used("ads")["pods"] == str(3 + 3 + 6)


def test_gpu_models(client, webhook_token):
    services.create_group(name="vision", parent=None,
                          hard={"requests.nvidia.com/gpu": "8", "requests.nvidia.com/gpu.A30": "2", "limits.cpu": "100"})
    a30 = deployment("train-a30", group="vision", cpu="4", gpus=2, gpu_type="A30")
    assert post_review(client, webhook_token, review(a30))["allowed"] is True
    more = post_review(client, webhook_token, review(deployment("more-a30", group="vision", gpus=1, gpu_type="A30")))
    assert more["allowed"] is False and "requests.nvidia.com/gpu.A30" in more["status"]["message"]
    t4 = deployment("infer-t4", group="vision", gpus=6, gpu_type="T4")
    assert post_review(client, webhook_token, review(t4))["allowed"] is True
    assert used("vision")["requests.nvidia.com/gpu"] == "8"


def test_exhausted_cash_blocks_new_usage_but_not_shrinking(client, webhook_token):
    group = services.create_group(name="hours", parent=None, hard={"limits.cpu": "100", "cash/limits.cpu": "10"})
    obj = deployment("burner", group="hours", cpu="2", replicas=2)
    assert post_review(client, webhook_token, review(obj))["allowed"] is True
    QuotaGroup.objects.filter(pk=group.pk).update(self_used=dict(group.self_used, **{"cash/limits.cpu": "10"}),
                                                  used=dict(group.used, **{"cash/limits.cpu": "10"}))
    denied = post_review(client, webhook_token, review(deployment("new", group="hours", cpu="1")))
    assert denied["allowed"] is False and "cash/limits.cpu" in denied["status"]["message"]
    smaller = deployment("burner", group="hours", cpu="2", replicas=1)
    assert post_review(client, webhook_token, review(smaller, operation="UPDATE", old=obj))["allowed"] is True


def test_bad_objects_are_denied_with_the_reason_not_a_500(client, webhook_token, ads):
    bad = deployment("bad", cpu="lots")
    answer = post_review(client, webhook_token, review(bad))
    assert answer["allowed"] is False and "lots" in answer["status"]["message"]
    negative = deployment("neg", replicas=-1)
    assert post_review(client, webhook_token, review(negative))["allowed"] is False
    assert not QuotaCharge.objects.exists()


def test_caller_authentication_and_malformed_reviews(client, cluster, webhook_token, ads):
    url = "/api/admission/v1/quotas/validate"
    body = json.dumps(review(deployment("x")))
    assert client.post(url, body, content_type="application/json").status_code == 401
    agent = issue_token(cluster, "agent")[1]
    assert client.post(url, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {agent}").status_code == 401
    auth = {"HTTP_AUTHORIZATION": f"Bearer {webhook_token}"}
    assert client.post(url, "{not json", content_type="application/json", **auth).status_code == 400
    no_uid = review(deployment("x"))
    del no_uid["request"]["uid"]
    response = client.post(url, json.dumps(no_uid), content_type="application/json", **auth)
    assert response.status_code == 400 and "uid" in response.json()["detail"]
    assert client.get(url, **auth).status_code == 405
    assert used("ads")["limits.cpu"] == "0"


def test_what_if_commits_nothing(ads):
    decision = services.what_if(deployment("maybe", cpu="4", cpu_type="A4"))
    assert decision.allowed and decision.delta == {"limits.cpu": "4", "limits.cpu.A4": "4", "pods": "1"}
    assert services.what_if(deployment("too-much", cpu="5", cpu_type="A4")).allowed is False
    assert QuotaGroup.objects.get(name="ads").used["limits.cpu"] == "0" and not QuotaCharge.objects.exists()


def test_a_create_for_a_workload_charged_elsewhere_locks_both_groups(client, webhook_token, ads):
    """A create names only its new group; the ledger says the workload is charged to another:
    the batch starts over locking both, and the old charge is released, not leaked."""
    services.create_group(name="search", parent=None, hard={"limits.cpu": "5"})
    post_review(client, webhook_token, review(deployment("again", cpu="3")))
    assert used("ads")["limits.cpu"] == "3"
    assert post_review(client, webhook_token, review(deployment("again", group="search", cpu="2")))["allowed"] is True
    assert used("ads")["limits.cpu"] == "0" and used("search")["limits.cpu"] == "2"
    assert QuotaCharge.objects.get(name="again").group.name == "search"


def test_a_batch_is_decided_in_order_against_running_totals(cluster, ads):
    from kube.admission import parse_admission_review
    from quotas.admission import decide_batch

    requests = [parse_admission_review(review(deployment(f"b{i}", cpu="3"))) for i in range(4)]
    requests.append(parse_admission_review(review(deployment("b0", cpu="1"), operation="UPDATE", old=deployment("b0", cpu="3"))))
    requests.append(parse_admission_review(review(deployment("b9", cpu="2"), dry_run=True)))
    decisions = decide_batch([(cluster, r) for r in requests])
    assert [d.allowed for d in decisions] == [True, True, True, False, True, True]
    assert "requested 3, used 9, hard 10" in decisions[3].message
    assert used("ads")["limits.cpu"] == "7", "3+3+3, then b0 shrank to 1; the dry run added nothing"
    assert QuotaCharge.objects.filter(group__name="ads").count() == 3
