"""Journey 2 (spec journeys.md), walked in a real browser on the demo fleet as a platform engineer
lives it: a new machine model A4 with HDDs gets its own eviction policy, rolled out in waves of
5% with an automatic pause at 2% failures. Wave 1 fails on two nodes (their agents, answering
through the real agent HTTP API, refuse the body), the rollout pauses itself and the page says
so live; he reads the node errors, fixes the body (revision 2), diffs it against revision 1,
resumes and watches it complete. Then a 72-hour node-list experiment on two nodes, gone by itself
once the injected clock passes 72 hours.

The demo fleet is the one ``make run`` seeds (``seed_demo``, ``seed_nodeconfig_demo``), smaller.
A real Celery worker of the type's shard reconciles every save; what the beat runs (rollout
steps, the coalesced progress events, the expiry) runs here with the clock given explicitly.
"""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from django.core.management import call_command

from core.live import publish_pending
from core.models import Job
from fleet.models import Cluster, Node
from fleet.tokens import issue_token
from nodeconfig.models import ConfigTarget, ConfigType, NodeConfig
from nodeconfig.rollout import progress, step_all
from nodeconfig.services import RECONCILE_TASK
from nodeconfig.tasks import expire_targets
from tests.nodeconfig.conftest import clean_agent_cache, type_key  # noqa: F401 (fixture)
from tests.workers import purge_queues, shard_worker, wait_for_job

from .conftest import wait_js
from .test_console_live import log_in
from .test_nodeconfig_live import counts_on, in_worker, wait_live

pytestmark = pytest.mark.browser
TYPE = "AdminQoSConfiguration"
SELECTOR = "diskMode=hdd,machineModel=A4"
#: Revision 1 also switches system-level eviction on, which the two oldest A4 boxes' agents refuse.
FIRST_BODY = {"evictionConfig": {"memoryPressureEvictionConfig": {"systemFreeMemoryThresholdMinimum": "20Gi",
                                                                  "enableSystemLevelEviction": True}}}
FIXED_BODY = {"evictionConfig": {"memoryPressureEvictionConfig": {"systemFreeMemoryThresholdMinimum": "20Gi"}}}
KERNEL_ERROR = "failed to apply: system-level eviction needs cgroup v2 (node runs kernel 4.19 with cgroup v1)"


class Agents:
    """The A4 nodes' agents: poll their config and report through the agent HTTP API with their
    cluster's agent token. Nodes in ``old_kernel`` refuse a body that enables system-level eviction."""

    def __init__(self, base: str, old_kernel: set[str]) -> None:
        self.http = httpx.Client(base_url=base, timeout=10)
        self.tokens = {cluster.name: in_worker(lambda c=cluster: issue_token(c, "agent", name="journey-2")[1])
                       for cluster in Cluster.objects.all()}
        self.old_kernel = old_kernel
        self.errors_sent = 0

    def answer(self, target: ConfigTarget) -> int:
        """Every node served a revision of ``target`` it has not reported on polls and reports."""
        rows = NodeConfig.objects.filter(target=target, error="").order_by("node__name")
        reported = 0
        for cluster, node, served, applied in rows.values_list("cluster__name", "node__name", "config_hash", "applied_hash"):
            if applied == served:
                continue
            headers = {"Authorization": f"Bearer {self.tokens[cluster]}"}
            url = f"/api/agent/v1/clusters/{cluster}/nodes/{node}/"
            polled = self.http.get(url + "config", headers=headers)
            assert polled.status_code == 200, polled.text
            entry = polled.json()["configs"][TYPE]
            eviction = entry["config"]["evictionConfig"]["memoryPressureEvictionConfig"]
            if node in self.old_kernel and eviction.get("enableSystemLevelEviction"):
                body = {"errors": {TYPE: KERNEL_ERROR}}
                self.errors_sent += 1
            else:
                body = {"applied": {TYPE: entry["hash"]}}
            sent = self.http.post(url + "status", headers=headers, json=body)
            assert sent.status_code == 204, sent.text
            reported += 1
        return reported


def beat() -> None:
    """What the beat does every few seconds: a rollout step, then the coalesced progress events."""
    in_worker(lambda: (step_all(), publish_pending()))


def delivered(target: ConfigTarget) -> Job:
    """The newest reconcile job of ``target``, once the worker has run it."""
    job = Job.objects.filter(kind=RECONCILE_TASK, object_id=str(target.pk)).order_by("-created").first()
    assert job is not None
    done = wait_for_job(job)
    assert done.status == Job.Status.SUCCEEDED, done.error
    return done


def fill_target_form(page, *, name: str, config: dict, reason: str) -> None:
    page.select_option("#id_type", TYPE)
    page.fill("#id_name", name)
    page.check('input[name="mode"][value="selector"]')
    page.fill("#id_node_label_selector", SELECTOR)
    page.fill("#id_config", json.dumps(config, indent=2))
    page.fill("#id_wave_size", "5%")
    page.fill("#id_wave_interval_seconds", "0")
    page.fill("#id_failure_threshold_percent", "2")
    page.fill("#id_reason", reason)


@pytest.fixture
def demo_fleet(transactional_db):
    """The demo fleet as ``make run`` seeds it (two clusters of 1,200 nodes, synced), and its node config."""
    purge_queues(type_key(ConfigType.objects.get(name=TYPE)))  # the seed's delivery is the first message there
    in_worker(lambda: (call_command("seed_demo", clusters=2, nodes=1200), call_command("seed_nodeconfig_demo", if_empty=True)))
    return ConfigTarget.objects.get(name="hybrid-for-disk-hdd")


def test_journey_2_grey_release_of_an_eviction_policy(page, asgi_server, operator, demo_fleet,  # noqa: F811
                                                      purge_shard_queues):
    config_type = ConfigType.objects.get(name=TYPE)
    a4_hdd = sorted(Node.objects.filter(labels__diskMode="hdd", labels__machineModel="A4").values_list("name", flat=True))
    assert len(a4_hdd) >= 40, "enough A4 HDD nodes for waves of 5% to hold two failures in wave 1"
    first_wave = a4_hdd[: len(a4_hdd) * 5 // 100]
    agents = Agents(asgi_server, old_kernel=set(first_wave[:2]))

    with shard_worker(type_key(config_type), purge=False):
        delivered(demo_fleet)  # the seeded target's own delivery, queued by the seed
        log_in(page, asgi_server, operator.username)

        # --- the A4 target: preview, then save with pacing
        page.goto(f"{asgi_server}/nodeconfig/targets/new/")
        fill_target_form(page, name="a4-hdd-eviction", config=FIRST_BODY, reason="A4 HDD boxes need more free memory")
        page.click('#target-form button[name="preview"]')
        page.locator("#preview").wait_for()
        assert page.locator("#preview-matched").inner_text() == str(len(a4_hdd))
        assert "This target can be saved." in page.locator("#preview").inner_text()
        assert "No conflicts with existing targets." in page.locator("#preview").inner_text()
        assert not ConfigTarget.objects.filter(name="a4-hdd-eviction").exists(), "a preview saves nothing"
        page.click('#target-form button[name="save"]')
        page.wait_for_url(f"{asgi_server}/nodeconfig/targets/*/")
        target = ConfigTarget.objects.get(name="a4-hdd-eviction")
        assert target.priority == 0 and target.wave_size == "5%" and target.failure_threshold_percent == 2
        wait_live(page)
        delivered(target)  # the worker matched the nodes and released wave 1
        in_worker(publish_pending)
        bar = f'.nc-progress[data-target-id="{target.pk}"]'
        page.locator(f'{bar} [data-count="pending"]', has_text=str(len(first_wave))).wait_for(timeout=10000)
        page.locator('[data-nc-field="matched_nodes"]', has_text=str(len(a4_hdd))).wait_for(timeout=10000)
        assert counts_on(page, bar)["held"] == len(a4_hdd) - len(first_wave)
        assert set(NodeConfig.objects.filter(target=target).values_list("node__name", flat=True)) == set(first_wave)

        # --- wave 1: two agents refuse the body; the rollout pauses itself, the page says so live
        assert agents.answer(target) == len(first_wave) and agents.errors_sent == 2
        beat()
        page.locator('[data-nc-field="rollout_state"]', has_text="Paused on failures").wait_for(timeout=10000)
        page.locator('#rollout-form button[value="resume"]').wait_for(state="visible", timeout=10000)
        assert page.locator('#rollout-form button[value="pause"]').is_hidden()
        assert f"2 of {len(first_wave)} nodes failed" in page.locator('[data-nc-field="message"]').inner_text()
        assert counts_on(page, bar)["failed"] == 2
        target.refresh_from_db()
        assert target.paused and target.rollout_state == "failed"
        beat()
        assert progress(target)["delivered"] == len(first_wave), "nothing more is released while paused"

        # --- he reads the node errors
        page.select_option("#id_state", "failed")
        page.click("#nodes form button[type=submit]")
        rows = page.locator("#node-table tbody tr")
        assert rows.count() == 2
        assert sorted(rows.locator("td:first-child").all_inner_texts()) == first_wave[:2]
        assert all(KERNEL_ERROR in text for text in rows.locator("td.error").all_inner_texts())

        # --- fixes the body: revision 2, still paused until he resumes
        page.click("nav.nc-toolbar >> text=Edit")
        page.fill("#id_config", json.dumps(FIXED_BODY, indent=2))
        page.fill("#id_reason", "system-level eviction needs cgroup v2; not on every A4 box")
        page.click('#target-form button[name="save"]')
        page.wait_for_url(f"{asgi_server}/nodeconfig/targets/{target.pk}/")
        assert page.locator('[data-nc-field="current_revision"]').inner_text() == "2"
        assert page.locator('#rollout-form button[value="resume"]').is_visible(), "the fix waits for Resume"
        delivered(target)
        target.refresh_from_db()
        assert target.revision.number == 2 and target.paused and progress(target)["delivered"] == 0

        # --- diffs it against revision 1
        page.click('#revisions a[href="?a=1&b=2#diff"]')
        diff = page.locator("#diff")
        assert "Changes from r1 to r2" in diff.inner_text()
        assert "enableSystemLevelEviction" in diff.inner_text()
        assert diff.locator("tr.changed").count() == 1

        # --- resumes, and the waves run to the end
        wait_live(page)
        page.fill("#id_rollout-reason", "fixed in r2")
        page.click('#rollout-form button[value="resume"]')
        page.wait_for_url(f"{asgi_server}/nodeconfig/targets/{target.pk}/")
        assert page.locator('#rollout-form button[value="pause"]').is_visible()
        wait_live(page)
        for _ in range(len(a4_hdd) + 5):
            agents.answer(target)
            beat()
            target.refresh_from_db()
            if target.rollout_state == "complete":
                break
        assert target.rollout_state == "complete" and agents.errors_sent == 2
        counts = progress(target)
        assert counts["applied"] == counts["targeted"] == len(a4_hdd) and counts["failed"] == 0
        page.locator('[data-nc-field="rollout_state"]', has_text="Complete").wait_for(timeout=10000)
        page.locator('[data-nc-when="complete"]').wait_for(state="visible", timeout=10000)
        assert page.locator("#rollout-form").is_hidden()
        page.locator(f'{bar} [data-count="applied"]', has_text=str(len(a4_hdd))).wait_for(timeout=10000)

        # --- a 72-hour experiment on two nodes
        pair = a4_hdd[-2:]
        page.goto(f"{asgi_server}/nodeconfig/targets/new/")
        page.select_option("#id_type", TYPE)
        page.fill("#id_name", "numa-eviction-a4-gray")
        page.check('input[name="mode"][value="node_list"]')
        page.fill("#id_node_names", "\n".join(pair))
        page.fill("#id_last_duration", "72h")
        page.fill("#id_config", json.dumps({"evictionConfig": {"memoryPressureEvictionConfig": {
            "enableNumaLevelEviction": True}}}))
        page.fill("#id_reason", "72-hour NUMA eviction experiment")
        page.click('#target-form button[name="save"]')
        page.wait_for_url(f"{asgi_server}/nodeconfig/targets/*/")
        gray = ConfigTarget.objects.get(name="numa-eviction-a4-gray")
        delivered(gray)
        assert sorted(NodeConfig.objects.filter(target=gray).values_list("node__name", flat=True)) == pair
        expires = gray.created + timedelta(hours=72)
        assert "expires" in page.locator("#spec-title + dl").inner_text()

        # the clock the expiry task is given: 71 hours later it stays, past 72 hours it goes
        assert in_worker(lambda: expire_targets(now=gray.created + timedelta(hours=71))) == 0
        assert in_worker(lambda: expire_targets(now=expires + timedelta(seconds=1))) == 1
        delivered(gray)  # its nodes go back to the A4 target
        gray.refresh_from_db()
        assert gray.deleted and gray.revision.reason == "lastDuration 72h elapsed"
        assert set(NodeConfig.objects.filter(node__name__in=pair).values_list("target__name", flat=True)) == {
            "a4-hdd-eviction"}
        page.goto(f"{asgi_server}/nodeconfig/")
        wait_js(page, "document.readyState === 'complete'")
        names = page.locator("main").inner_text()
        assert "numa-eviction-a4-gray" not in names and "a4-hdd-eviction" in names
