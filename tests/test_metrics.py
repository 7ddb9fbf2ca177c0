"""``/metrics``: Prometheus's text format, for tokens of users who may view jobs; request
latency by route, webhook decisions by result, queue depth, live workers, the reconcile lag and
rollout progress, read where they live."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.models import Job
from core.redis import get_redis
from nodeconfig.models import ConfigType
from nodeconfig.services import TargetSpec, save_target


def samples(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


@pytest.mark.django_db
def test_metrics_need_a_user_who_may_view_jobs(client, nobody, viewer_api):
    assert client.get("/metrics").status_code in (401, 403)
    client.force_login(nobody)
    assert client.get("/metrics").status_code == 403
    assert viewer_api.get("/metrics").status_code == 200


@pytest.mark.django_db
def test_requests_are_timed_by_route_not_by_path(viewer_api):
    """Counts are per process (earlier tests' requests are in them): compared before and after."""
    def counts() -> dict[tuple[tuple[str, str], ...], float]:
        return {labels: value for (name, labels), value in samples(viewer_api).items()
                if name == "meridian_http_request_duration_seconds_count"}

    listed = (("method", "GET"), ("route", "/api/v1/fleet/clusters/"), ("status", "200"))
    missing = (("method", "GET"), ("route", "/api/v1/fleet/clusters/<name>/"), ("status", "404"))
    before = counts()
    viewer_api.get("/api/v1/fleet/clusters/")
    viewer_api.get("/api/v1/fleet/clusters/no-such-cluster/")
    after = counts()
    assert after[listed] == before.get(listed, 0) + 1
    assert after[missing] == before.get(missing, 0) + 1, "the pattern, never the cluster's name"
    assert not [labels for labels in after if "no-such-cluster" in dict(labels)["route"]]


@pytest.mark.django_db
def test_webhook_answers_are_counted_by_result(viewer_api, client):
    before = samples(viewer_api).get(("meridian_webhook_decisions_total", (("result", "401"), ("webhook", "quota-webhook"))), 0)
    client.post("/api/admission/v1/quotas/validate", b"{}", content_type="application/json")
    after = samples(viewer_api)[("meridian_webhook_decisions_total", (("result", "401"), ("webhook", "quota-webhook")))]
    assert after == before + 1


@pytest.mark.django_db
def test_queues_workers_lag_and_rollouts_are_read_at_scrape_time(viewer_api):
    redis = get_redis()
    redis.delete("default")
    redis.rpush("default", b"m1", b"m2")
    try:
        Job.objects.create(kind="fleet.sync_cluster", triggered_by="test", status=Job.Status.PENDING)
        config_type = ConfigType.objects.get(name="AdminQoSConfiguration")
        save_target(config_type, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}))
        found = samples(viewer_api)
    finally:
        redis.delete("default")
    assert found[("meridian_queue_depth", (("queue", "default"),))] == 2
    assert ("meridian_workers", ()) in found
    assert found[("meridian_job_oldest_unfinished_seconds", (("kind", "fleet.sync_cluster"),))] >= 0
    assert found[("meridian_jobs_unfinished", (("kind", "fleet.sync_cluster"), ("status", "pending")))] >= 1
    assert found[("meridian_rollout_nodes", (("config_type", "AdminQoSConfiguration"), ("state", "targeted"), ("target", "hdd")))] == 0
    assert found[("meridian_metrics_source_up", (("source", "nodeconfig"),))] == 1
    assert found[("meridian_metrics_source_up", (("source", "redis"),))] == 1
