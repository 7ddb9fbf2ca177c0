"""User journeys (/work/shared/spec/journeys.md) walked as written, in a real browser, on the demo
fleet the seed commands make (``seed_demo``, ``seed_nodeconfig_demo``), with real workers
delivering and the node agents answering through the real agent HTTP API."""

from __future__ import annotations

import io
from datetime import datetime, timedelta

import httpx
import pytest
from django.core.management import call_command

from core.live import publish_pending
from core.models import Job, ObjectChange
from fleet.models import Cluster, Node, Pod, Workload
from fleet.tokens import issue_token
from nodeconfig.models import ConfigTarget, ConfigType
from nodeconfig.rollout import progress
from nodeconfig.services import latest_delivery
from quotas.models import CashSample
from tests.nodeconfig.conftest import type_key
from tests.workers import purge_queues, shard_worker, wait_for_job

from tests.conftest import PASSWORD

from .conftest import wait_js
from .test_console_live import log_in
from .test_nodeconfig_live import counts_on, in_worker

pytestmark = pytest.mark.browser
KIND = "AdminQoSConfiguration"
INCIDENT = "latency incident INC-4411"
AGENT_ERROR = "write /sys/fs/cgroup/cpu/offline/cpu.max: device or resource busy"


@pytest.fixture
def demo(transactional_db, purge_shard_queues):
    """The demo fleet (smaller than ``make run``'s 2,000 nodes, same seed) with the node config
    demo's targets delivered by a real worker of the type's shard."""
    admin_qos = ConfigType.objects.get(name=KIND)
    purge_queues(type_key(admin_qos))
    in_worker(lambda: call_command("seed_demo", nodes=300, stdout=io.StringIO()))
    in_worker(lambda: call_command("seed_nodeconfig_demo", stdout=io.StringIO()))
    with shard_worker(type_key(admin_qos), purge=False):
        for job in Job.objects.filter(kind="nodeconfig.reconcile_type").exclude(status__in=Job.FINISHED):
            wait_for_job(job, timeout=60)
    return admin_qos


class Agents:
    """The node agents of one cluster, speaking the agent HTTP API: poll the config, report."""

    def __init__(self, base: str, cluster: str) -> None:
        token = issue_token(Cluster.objects.get(name=cluster), "agent")[1]
        self.http = httpx.Client(base_url=f"{base}/api/agent/v1/clusters/{cluster}/nodes/",
                                 headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def served(self, node: str) -> dict:
        response = self.http.get(f"{node}/config")
        assert response.status_code == 200, response.text
        return response.json()["configs"][KIND]

    def apply(self, nodes: list[str]) -> None:
        for node in nodes:
            response = self.http.post(f"{node}/status", json={"applied": {KIND: self.served(node)["hash"]}})
            assert response.status_code == 204, response.text

    def fail(self, nodes: list[str]) -> None:
        for node in nodes:
            response = self.http.post(f"{node}/status", json={"errors": {KIND: AGENT_ERROR}})
            assert response.status_code == 204, response.text


def deliver(target: ConfigTarget, admin_qos: ConfigType) -> None:
    """A worker of the type's shard delivers the latest change, then the beat's coalesced summary."""
    with shard_worker(type_key(admin_qos), purge=False):
        assert wait_for_job(latest_delivery(target), timeout=60).status == Job.Status.SUCCEEDED
    in_worker(publish_pending)


def acknowledged_on(page, selector: str, applied: int, failed: int) -> None:
    """Agents reported: the beat publishes one summary, the page's counts follow."""
    in_worker(publish_pending)
    page.locator(f'{selector} [data-count="applied"]', has_text=str(applied)).first.wait_for(timeout=15000)
    assert counts_on(page, selector)["failed"] == failed


def test_journey_1_switch_off_colocation_on_a_demo_cluster(demo, page, asgi_server, operator):
    cluster = "bj-1"
    nodes = sorted(Node.objects.filter(cluster__name=cluster).values_list("name", flat=True))
    assert len(nodes) > 20, "a demo cluster of some size"
    failing, first, rest = nodes[:3], nodes[3:len(nodes) // 2], nodes[len(nodes) // 2:]

    # 03:00: the overview, Emergency downgrade, scope "cluster bj-1", the reason, the cluster's name.
    log_in(page, asgi_server, operator.username)
    page.goto(f"{asgi_server}/")
    page.get_by_text("Emergency downgrade…").click()
    page.check('#emergency-form input[name="scope"][value="cluster"]')
    page.select_option("#emergency-form select[name=cluster]", cluster)
    page.fill("#emergency-form [name=reason]", INCIDENT)
    page.fill("#emergency-form [name=confirm]", cluster)
    page.click("#emergency-form button[type=submit]")
    page.wait_for_url(f"{asgi_server}/nodeconfig/targets/*/")
    target = ConfigTarget.objects.get(emergency=True, deleted=False)
    deliver(target, demo)

    # Within seconds the panel shows every node of bj-1 targeted, then the acknowledgements climb.
    page.goto(f"{asgi_server}/")
    wait_js(page, "document.body.dataset.live === '1'")
    page.wait_for_timeout(300)
    panel = f'#emergency-panel .nc-progress[data-target-id="{target.pk}"]'
    page.locator(f'{panel} [data-count="targeted"]', has_text=f"{len(nodes)}").wait_for(timeout=15000)
    assert counts_on(page, panel)["applied"] == 0
    agents = Agents(asgi_server, cluster)
    assert agents.served(nodes[0])["config"]["reclaimedResourceConfig"]["enableReclaim"] is False, "served the downgrade"
    agents.apply(first)
    acknowledged_on(page, panel, len(first), 0)
    agents.apply(rest)
    agents.fail(failing)
    acknowledged_on(page, panel, len(first) + len(rest), 3)
    assert progress(target)["failed"] == 3

    # A handful failed, with node names and agent errors, on the overview itself (the section is
    # fetched again after each agent's report: wait for the fetch after the last one).
    failures = page.locator("#attention-downgrades .attention-failures")
    for node in failing:
        failures.locator("li", has_text=node).wait_for(timeout=15000)
    text = failures.inner_text()
    assert all(node in text for node in failing) and AGENT_ERROR in text
    assert failures.locator("a", has_text=failing[0]).get_attribute("href") == f"/nodeconfig/nodes/{cluster}/{failing[0]}/"

    # The audit log has her name, the reason and the time.
    page.goto(f"{asgi_server}/audit/?q=INC-4411")
    row = page.locator("table tbody tr", has_text=operator.username).first
    entry = ObjectChange.objects.filter(actor=operator.username, reason=INCIDENT).order_by("time").first()
    assert entry is not None
    assert INCIDENT in row.inner_text() and entry.time.strftime("%Y-%m-%d %H:%M") in row.inner_text()

    # 05:30: Restore (a rollback to the previous revision), and the acknowledgements again.
    page.goto(f"{asgi_server}/nodeconfig/targets/{target.pk}/")
    page.fill("#restore-form [name=restore-reason]", "INC-4411 resolved")
    page.click("#restore-form button[type=submit]")
    page.wait_for_url(f"{asgi_server}/nodeconfig/targets/{target.pk}/")
    assert page.locator("#progress-title").inner_text() == "Restore progress"
    wait_js(page, "document.body.dataset.live === '1'")
    page.wait_for_timeout(300)
    deliver(target, demo)
    bar = f'.nc-progress[data-target-id="{target.pk}"]'
    moved_back = progress(ConfigTarget.objects.get(pk=target.pk))["targeted"]
    assert moved_back > 0, "the demo's hybrid-for-disk-hdd nodes go back to their regular target"
    page.locator(f'{bar} [data-count="targeted"]', has_text=str(moved_back)).wait_for(timeout=15000)
    assert counts_on(page, bar)["applied"] == 0
    assert all(agents.served(node)["config"]["reclaimedResourceConfig"]["enableReclaim"] is not False for node in nodes[:5])
    agents.apply(nodes[: len(nodes) // 2])
    climbing = progress(ConfigTarget.objects.get(pk=target.pk))["applied"]
    acknowledged_on(page, bar, climbing, 0)
    agents.apply(nodes[len(nodes) // 2:])
    acknowledged_on(page, bar, moved_back, 0)
    assert ObjectChange.objects.filter(actor=operator.username, reason="INC-4411 resolved").exists()


# ---------------------------------------------------------------------------- journey 3

A100 = "requests.nvidia.com/gpu.A100"
GPU_HOURS = "cash/requests.nvidia.com/gpu"


@pytest.fixture
def quota_demo(transactional_db, django_user_model):
    """The demo fleet and its quota tree; the AI platform owner owns BU vision (an admin's grant)."""
    from quotas import services
    from quotas.models import QuotaGroup
    from tests.conftest import make_user

    in_worker(lambda: call_command("seed_demo", nodes=300, stdout=io.StringIO()))
    in_worker(lambda: call_command("seed_quotas_demo", stdout=io.StringIO()))
    owner = make_user(django_user_model, "pia-platform", "viewer")
    lead = make_user(django_user_model, "leo-lead", None)
    in_worker(lambda: services.update_group(QuotaGroup.objects.get(name="vision"), owners=[owner.username], reason="BU owner"))
    return owner, lead


def hard_of(name: str) -> dict[str, str]:
    from quotas.models import QuotaGroup

    return QuotaGroup.objects.get(name=name).hard


def with_line(lines: str, key: str, quantity: str) -> str:
    """A “key: quantity” textarea with one key's quantity replaced."""
    out = [f"{key}: {quantity}" if line.split(":", 1)[0].strip() == key else line for line in lines.splitlines()]
    assert f"{key}: {quantity}" in out, f"{key} is not among the lines"
    return "\n".join(out)


def test_journey_3_quarterly_quota_planning_on_the_demo_tree(quota_demo, page, asgi_server, chromium):
    from quotas.models import QuotaGroup

    from .test_quotas_live import SECTORS, sector_fills, sector_names

    owner, lead = quota_demo
    # The quota tree of BU vision: a treemap of vision → detection, segmentation, ocr, coloured by usage.
    log_in(page, asgi_server, owner.username)
    page.goto(f"{asgi_server}/quotas/?key={A100}")
    wait_js(page, f"document.querySelectorAll('{SECTORS}').length > 0")
    page.locator(SECTORS, has_text="vision").first.click(position={"x": 5, "y": 5})
    wait_js(page, "document.getElementById('quota-treemap').dataset.focus === 'vision'")
    assert sorted(sector_names(page)) == ["vision", "vision-detection", "vision-ocr", "vision-segmentation"]
    assert all(fill.startswith("rgb(") for fill in sector_fills(page).values()), "every tile coloured by its use"

    # 40 A100 GPUs from ocr to detection, in one atomic operation.
    page.goto(f"{asgi_server}/quotas/groups/vision-ocr/")
    page.select_option("#id_move-target", "vision-detection")
    page.fill("#id_move-amount", f"{A100}: 40")
    page.fill("#id_move-reason", "Q3 planning: detection trains more")
    page.click("#move-form button[type=submit]")
    page.wait_for_url(f"{asgi_server}/quotas/groups/vision-ocr/**")
    assert hard_of("vision-ocr")[A100] == "88" and hard_of("vision-detection")[A100] == "168"
    assert ObjectChange.objects.filter(actor=owner.username, verb="move_quota").count() == 2, "one audited move, both sides"

    # segmentation gets 20,000 GPU-hours for the quarter.
    page.goto(f"{asgi_server}/quotas/groups/vision-segmentation/")
    lines = page.input_value("#id_resize-hard")
    page.fill("#id_resize-hard", with_line(lines, GPU_HOURS, "20000"))
    page.fill("#id_resize-reason", "Q3 GPU-hours")
    page.click("#resize-form button[type=submit]")
    page.wait_for_url(f"{asgi_server}/quotas/groups/vision-segmentation/**")
    assert hard_of("vision-segmentation")[GPU_HOURS] == "20k"
    assert page.locator("#quota-cash-chart").is_visible(), "its burn-down chart is there"

    # detection is delegated to its lead...
    page.goto(f"{asgi_server}/quotas/groups/vision-detection/")
    page.fill("#id_owners-owners", lead.username)
    page.click("#owners-form button[type=submit]")
    page.wait_for_url(f"{asgi_server}/quotas/groups/vision-detection/**")
    assert list(QuotaGroup.objects.get(name="vision-detection").owners.values_list("username", flat=True)) == [lead.username]

    # ...who, signed in himself (no role, only the delegation), splits it among three teams.
    context = chromium.new_context(locale="en-US")
    try:
        lead_page = context.new_page()
        lead_page.goto(f"{asgi_server}/quotas/groups/vision-detection/")
        lead_page.fill("#id_username", lead.username)
        lead_page.fill("#id_password", PASSWORD)
        lead_page.click("button[type=submit]")
        lead_page.wait_for_url(f"{asgi_server}/quotas/groups/vision-detection/")
        assert lead_page.locator("#move-form").count() == 0, "he manages below detection, not detection itself"
        for team in ("face", "vehicle", "retail"):
            lead_page.goto(f"{asgi_server}/quotas/groups/vision-detection/")
            lead_page.fill("#child_name", f"vision-detection-{team}")
            lead_page.fill("#child_hard", with_line(lead_page.input_value("#child_hard"), A100, "24"))
            lead_page.fill("#child_reason", "Q3 split")
            lead_page.click("#child-form button[type=submit]")
            lead_page.wait_for_url(f"{asgi_server}/quotas/groups/vision-detection-{team}/")
        lead_page.goto(f"{asgi_server}/quotas/groups/vision/")
        assert lead_page.locator("#resize-form").count() == 0, "nothing above his subtree"
    finally:
        context.close()
    teams = QuotaGroup.objects.filter(parent__name="vision-detection")
    assert sorted(teams.values_list("name", flat=True)) == [f"vision-detection-{t}" for t in ("face", "retail", "vehicle")]
    assert all(team.hard[A100] == "24" for team in teams)
    assert ObjectChange.objects.filter(actor=lead.username, action="create").count() == 3

    # A week later a 64 × A100 training job is refused at admission, through the webhook over HTTP.
    from tests.quotas.conftest import deployment, review

    token = issue_token(Cluster.objects.get(name="bj-1"), "webhook")[1]
    job = deployment("train-det-v9", group="vision-detection", cpu="8", memory="64Gi", replicas=8, gpus=8, gpu_type="A100")
    answer = httpx.post(f"{asgi_server}/api/admission/v1/quotas/validate", json=review(job),
                        headers={"Authorization": f"Bearer {token}"}, timeout=10).json()["response"]
    message = answer["status"]["message"]
    assert answer["allowed"] is False
    assert "vision-detection" in message and "requests.nvidia.com/gpu" in message and "64" in message
    assert "used" in message and "hard" in message, message

    # ...and the burn-down shows segmentation exhausting its GPU-hours in 9 days: a week of its
    # training job's pod time (13 pods × 4 GPUs), accrued by the reconciler day by day.
    week_ago = run_segmentation_training(gpus=52, days=7)
    page.goto(f"{asgi_server}/quotas/groups/vision-segmentation/")
    wait_js(page, "document.querySelector('#quota-cash-chart .main-svg') !== null")
    exhaustion = page.locator(".qt-exhaustion").first
    projected = datetime.fromisoformat(exhaustion.get_attribute("datetime"))
    last = CashSample.objects.filter(group__name="vision-segmentation").latest("time").time
    assert last - week_ago == timedelta(days=7)
    # 52 GPU-hours an hour: 8,736 of 20,000 spent, 11,264 left: 9.03 days at that rate.
    assert timedelta(days=9) <= projected - last < timedelta(days=9, hours=2), (projected, last)
    assert page.locator(".qt-exhaustion-in").first.inner_text() == "(in 9 days)"


def run_segmentation_training(*, gpus: int, days: int) -> datetime:
    """The inventory as a sync writes it for a training job of vision-segmentation that ran the
    last ``days`` days (pods of 4 GPUs on a demo cluster), its ledger charge (``sync_ledger``),
    and the cash reconciler accruing once a day until now. Returns when the job started."""
    from django.utils import timezone

    from quotas.models import QuotaGroup
    from quotas.reconcile import accrue_cash, sync_ledger

    cluster = Cluster.objects.get(name="bj-1")
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(days=days)
    per_pod = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}
    labels = {"app": "train-seg", "biz.group.resource.quota": "vision-segmentation"}
    workload = Workload.objects.create(cluster=cluster, namespace="vision", api_version="apps/v1", kind="Deployment",
                                       name="train-seg", labels=labels, replicas=gpus // 4, ready_replicas=gpus // 4,
                                       pod_requests=per_pod, pod_limits=per_pod, gpu_request=4)
    Pod.objects.bulk_create(Pod(cluster=cluster, namespace="vision", name=f"train-seg-{i}", uid=f"train-seg-{i}", workload=workload,
                                owner_kind="ReplicaSet", owner_name="train-seg-1", labels=labels, phase="Running", requests=per_pod,
                                limits=per_pod, gpu_request=4, started_at=start) for i in range(gpus // 4))

    def accrue() -> None:
        sync_ledger(cluster, [("vision", "Deployment", "train-seg")])
        QuotaGroup.objects.filter(name="vision-segmentation").update(last_reconcile_time=start)
        for day in range(1, days + 1):
            accrue_cash(start + timedelta(days=day))

    in_worker(accrue)
    return start
