"""The overview's "needs attention" sections: what they count and list, where each row links,
who sees which, and that their cost does not grow with the fleet (a fixed number of queries)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from federation.models import FederatedObject
from fleet.models import Cluster
from nodeconfig.models import ConfigTarget, ConfigType
from quotas import services
from quotas.models import QuotaGroup
from tests.quotas.conftest import deployment, post_review, review
from fleet.tokens import issue_token

pytestmark = pytest.mark.django_db


def section(html: str, key: str) -> str:
    match = re.search(rf'<section class="card attention-section[^"]*" id="attention-{key}".*?</section>', html, re.S)
    assert match, f"no section {key}"
    return match.group(0)


def count(html: str, key: str) -> int:
    return int(re.search(r'attention-count">([\d,]+)<', section(html, key)).group(1).replace(",", ""))


def make_fleet(n: int, start: int = 0) -> ConfigType:
    """n clusters not ready, n rolling node-config targets, n degraded and n rolling federated objects."""
    config_type = ConfigType.objects.get_or_create(name="QaOverviewConfiguration", defaults={"resource": "qaoverviews"})[0]
    for i in range(start, start + n):
        Cluster.objects.create(name=f"down-{i}", connector="simulated", ready=False, status_message=f"cannot reach down-{i}")
        ConfigTarget.objects.create(config_type=config_type, name=f"wave-{i}", node_label_selector=f"pool=p{i}",
                                    wave_size="5%", rollout_state=ConfigTarget.RolloutState.PROGRESSING)
        FederatedObject.objects.create(namespace="shop", name=f"broken-{i}", api_version="apps/v1", kind="Deployment",
                                       template={}, template_hash="x", phase="Degraded", message="1/3 clusters failed")
        FederatedObject.objects.create(namespace="shop", name=f"rolling-{i}", api_version="apps/v1", kind="Deployment",
                                       template={}, template_hash="x", phase="Rolling")
    return config_type


def test_each_section_counts_lists_and_links_to_its_detail(client, viewer):
    Cluster.objects.create(name="ok-1", connector="simulated", ready=True)
    make_fleet(2)
    failed = ConfigTarget.objects.get(name="wave-1")
    failed.rollout_state = ConfigTarget.RolloutState.FAILED
    failed.save()
    client.force_login(viewer)
    html = client.get("/").content.decode()

    clusters = section(html, "clusters")
    assert count(html, "clusters") == 2 and "ok-1" not in clusters
    assert 'href="/fleet/clusters/down-0/"' in clusters and "cannot reach down-0" in clusters
    rollouts = section(html, "rollouts")
    assert count(html, "rollouts") == 4, "two node-config rollouts and two federated ones"
    assert f'href="/nodeconfig/targets/{failed.pk}/"' in rollouts and "Paused on failures" in rollouts
    rolling = FederatedObject.objects.get(name="rolling-0")
    assert f'href="/federation/objects/{rolling.pk}/"' in rollouts
    degraded = section(html, "federation")
    broken = FederatedObject.objects.get(name="broken-1")
    assert count(html, "federation") == 2 and f'href="/federation/objects/{broken.pk}/"' in degraded
    assert "1/3 clusters failed" in degraded and 'href="/federation/?phase=Degraded"' in degraded
    assert count(html, "downgrades") == 0 and "No downgrade is active." in section(html, "downgrades")
    assert count(html, "quotas") == 0


def test_quota_groups_near_their_limit_come_from_the_stored_level(client, viewer, db):
    """Admission (through the webhook) and a shrink below usage both store the level the
    overview filters on; the fullest group is listed first."""
    cluster = Cluster.objects.create(name="bj-1", connector="simulated")
    token = issue_token(cluster, "webhook")[1]
    services.create_group(name="ads", parent=None, hard={"limits.cpu": "10", "pods": "20"})
    services.create_group(name="search", parent=None, hard={"limits.cpu": "100", "pods": "100"})
    services.create_group(name="roomy", parent=None, hard={"limits.cpu": "100", "pods": "100"})
    assert post_review(client, token, review(deployment("web", group="ads", cpu="1", replicas=9)))["allowed"]
    assert QuotaGroup.objects.get(name="ads").level == 0.9
    assert post_review(client, token, review(deployment("idx", group="search", cpu="1", replicas=50)))["allowed"]
    services.update_group(QuotaGroup.objects.get(name="search"), hard={"limits.cpu": "40", "pods": "100"}, reason="shrink")
    assert QuotaGroup.objects.get(name="search").level == 1.25, "a shrink below usage: over its limit"

    client.force_login(viewer)
    html = client.get("/").content.decode()
    quotas = section(html, "quotas")
    assert count(html, "quotas") == 2 and "roomy" not in quotas
    assert quotas.index('href="/quotas/groups/search/"') < quotas.index('href="/quotas/groups/ads/"'), "fullest first"
    assert "125%" in quotas and "90%" in quotas


def test_a_quota_owner_sees_only_their_subtree_and_no_fleet_sections(client, django_user_model):
    owner = django_user_model.objects.create_user("lead", password="x")
    services.create_group(name="vision", parent=None, hard={"limits.cpu": "10"})
    services.create_group(name="vision-a", parent="vision", hard={"limits.cpu": "9"}, owners=["lead"])
    services.create_group(name="other", parent=None, hard={"limits.cpu": "1"})
    services.update_group(QuotaGroup.objects.get(name="other"), hard={"limits.cpu": "0"}, reason="t")
    Cluster.objects.create(name="down", connector="simulated", ready=False)
    client.force_login(owner)
    html = client.get("/").content.decode()
    assert 'id="attention-clusters"' not in html and 'id="attention-rollouts"' not in html
    assert count(html, "quotas") == 0 and "other" not in section(html, "quotas"), "vision is 90% used but not theirs"


def test_the_sections_cost_the_same_queries_whatever_the_fleet(client, viewer):
    """No per-row queries: ten times the rows, the same statements (lists are LIMITed)."""
    make_fleet(3)
    for i in range(3):
        services.create_group(name=f"g{i}", parent=None, hard={"pods": "0"})
    client.force_login(viewer)
    client.get("/?fragment=attention")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/?fragment=attention")
        assert response.status_code == 200
        return len(captured)

    small = queries()
    make_fleet(30, start=3)
    assert queries() == small
    fragment = client.get("/?fragment=attention").content.decode()
    assert fragment.lstrip().startswith("<section") and "<html" not in fragment, "the live fragment is only the sections"
    assert count(fragment, "clusters") == 33 and "and 25 more" in section(fragment, "clusters")


def test_stat_numbers_are_grouped(client, viewer):
    Cluster.objects.create(name="big", connector="simulated", ready=True, node_count=200000, ready_node_count=198512,
                           cpu_allocatable_milli=16_000_000_000)
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert re.search(r'id="stat-nodes">198,512/200,000<', html)
    assert re.search(r'id="stat-cores">16,000,000<', html)
