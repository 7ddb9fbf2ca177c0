"""Node config in a real browser: progress bars fill as the simulated agents acknowledge, and the
emergency downgrade goes from the overview's button to live acknowledgements."""

from __future__ import annotations


import pytest

from core.live import publish_pending
from core.models import Job
from nodeconfig.models import ConfigTarget, NodeConfig
from nodeconfig.rollout import progress
from nodeconfig.services import TargetSpec, emergency_downgrade, latest_delivery, save_target
from nodeconfig.tasks import simulate_agents
from tests.nodeconfig.conftest import admin_qos, clean_agent_cache, fleet, settle, type_key  # noqa: F401 (fixtures)
from tests.workers import purge_queues, shard_worker, wait_for_job  # noqa: F401

from .test_console_live import log_in
from .conftest import in_worker, wait_live

pytestmark = pytest.mark.browser
FAR_FUTURE = 4_000_000_000.0  # every simulated agent's delay has passed


def agents_report_and_publish() -> None:
    """What the beat does: the simulated agents report, then one coalesced summary per target."""
    in_worker(lambda: (simulate_agents(now=FAR_FUTURE), publish_pending()))


def create_and_settle(config_type, spec: TargetSpec) -> ConfigTarget:
    target, _ = save_target(config_type, spec)
    settle(target)
    return target


def counts_on(page, selector: str) -> dict[str, int]:
    return {name: int(page.locator(f'{selector} [data-count="{name}"]').first.inner_text())
            for name in ("applied", "failed", "pending", "held", "targeted")}


def test_progress_bars_fill_live_as_agents_acknowledge(page, asgi_server, viewer, fleet, admin_qos,  # noqa: F811
                                                       purge_shard_queues):  # noqa: F811
    target = in_worker(create_and_settle, admin_qos, TargetSpec(
        name="hybrid-for-disk-hdd", node_label_selector="diskMode=hdd",
        config={"reclaimedResourceConfig": {"enableReclaim": False}}))
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/nodeconfig/")
    bar = f'.nc-progress[data-target-id="{target.pk}"]'
    before = counts_on(page, bar)
    assert before["targeted"] == 6 and before["applied"] == 0 and before["pending"] == 6
    wait_live(page)

    agents_report_and_publish()
    expected = progress(target)
    assert expected["applied"] + expected["failed"] == 6, "every agent answered"
    page.locator(f'{bar} [data-count="pending"]', has_text="0").wait_for(timeout=10000)
    assert counts_on(page, bar) == {k: expected[k] for k in ("applied", "failed", "pending", "held", "targeted")}
    width = page.locator(f"{bar} .nc-seg.applied").evaluate("el => parseFloat(el.style.width)")
    assert width == pytest.approx(100 * expected["applied"] / 6, abs=0.01)
    assert page.locator("#live-indicator").inner_text() == "Live"


def test_emergency_downgrade_from_the_overview(page, asgi_server, operator, fleet, admin_qos,  # noqa: F811
                                               purge_shard_queues):  # noqa: F811
    purge_queues(type_key(admin_qos))  # only what this test sends is in the type's queue
    log_in(page, asgi_server, operator.username)
    page.goto(f"{asgi_server}/")
    page.click("#emergency-panel summary")
    page.check('#emergency-form input[name="scope"][value="cluster"]')
    assert page.locator('#emergency-form [data-show-when="scope:selector"]').is_hidden()
    page.select_option("#emergency-form select[name=cluster]", "bj-1")
    page.fill("#emergency-form [name=reason]", "reclaim hurts latency in bj-1")
    assert page.get_attribute("#emergency-form [name=confirm]", "placeholder") == "bj-1", "the name to type is shown"
    page.fill("#emergency-form [name=confirm]", "sh-1")
    page.click("#emergency-form button[type=submit]")
    assert "bj-1" in page.locator("#emergency-form .errorlist").inner_text(), "another scope's name is refused, saying which"
    assert not ConfigTarget.objects.filter(emergency=True).exists()

    page.fill("#emergency-form [name=confirm]", "bj-1")
    page.click("#emergency-form button[type=submit]")
    page.wait_for_url(f"{asgi_server}/nodeconfig/targets/*/")
    target = ConfigTarget.objects.get(emergency=True)
    assert target.cluster.name == "bj-1"
    job = latest_delivery(target)
    assert job is not None and job.status == Job.Status.PENDING, "committed with its delivery job, no worker ran yet"
    assert not NodeConfig.objects.filter(target=target).exists()
    bar = f'.nc-progress[data-target-id="{target.pk}"]'
    assert page.locator(f"{bar} [data-nc-delivery]").is_visible(), "the page says the delivery is pending"

    page.goto(f"{asgi_server}/")
    wait_live(page)
    panel = f"#emergency-panel {bar}"
    assert page.locator(f"{panel} [data-nc-delivery]").is_visible()
    with shard_worker(type_key(admin_qos), purge=False):  # a worker of the type's shard delivers it
        assert wait_for_job(job).status == Job.Status.SUCCEEDED
    assert NodeConfig.objects.filter(target=target).count() == 12
    in_worker(publish_pending)  # the beat's coalesced summary
    page.locator(f'{panel} [data-count="targeted"]', has_text="12").wait_for(timeout=10000)
    page.locator(f"{panel} [data-nc-delivery]").wait_for(state="hidden", timeout=10000)
    assert counts_on(page, panel)["applied"] == 0 and counts_on(page, panel)["pending"] == 12

    agents_report_and_publish()
    expected = progress(target)
    page.locator(f'{panel} [data-count="applied"]', has_text=str(expected["applied"])).wait_for(timeout=10000)
    assert expected["applied"] > 0 and counts_on(page, panel)["pending"] == 0


def test_a_restore_is_watched_like_the_downgrade(page, asgi_server, operator, fleet, admin_qos,  # noqa: F811
                                                 purge_shard_queues):  # noqa: F811
    """Journey 1 at 05:30: Restore, then the acknowledgements climb again as the agents apply
    their regular config (the page used to show "0 of 0" once the downgrade was gone)."""
    purge_queues(type_key(admin_qos))
    in_worker(create_and_settle, admin_qos, TargetSpec(name="bj-regular", cluster="bj-1",
                                                       config={"reclaimedResourceConfig": {"enableReclaim": True}}))
    target, _, job = in_worker(lambda: emergency_downgrade(cluster="bj-1", selector="", reason="latency incident INC-4411"))
    with shard_worker(type_key(admin_qos), purge=False):
        assert wait_for_job(job).status == Job.Status.SUCCEEDED
    log_in(page, asgi_server, operator.username)
    page.goto(f"{asgi_server}/nodeconfig/targets/{target.pk}/")
    page.fill("#restore-form [name=restore-reason]", "latency is fine again")
    page.click("#restore-form button[type=submit]")
    page.wait_for_url(f"{asgi_server}/nodeconfig/targets/{target.pk}/")
    assert page.locator("#progress-title").inner_text() == "Restore progress"
    wait_live(page)
    with shard_worker(type_key(admin_qos), purge=False):  # the restore's delivery
        assert wait_for_job(latest_delivery(target)).status == Job.Status.SUCCEEDED
    in_worker(publish_pending)
    bar = f'.nc-progress[data-target-id="{target.pk}"]'
    page.locator(f'{bar} [data-count="targeted"]', has_text="12").wait_for(timeout=10000)
    assert counts_on(page, bar)["applied"] == 0 and counts_on(page, bar)["pending"] == 12

    agents_report_and_publish()
    expected = progress(ConfigTarget.objects.get(pk=target.pk))
    assert expected["applied"] > 0 and expected["applied"] + expected["failed"] == 12
    page.locator(f'{bar} [data-count="applied"]', has_text=str(expected["applied"])).wait_for(timeout=10000)
