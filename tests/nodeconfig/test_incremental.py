"""A target change reconciles only what it can move: its body changed, only the nodes holding it.

The oracle after every step is a full reconcile of the type, which must find nothing to write.
"""

from __future__ import annotations

import pytest

from nodeconfig.hashing import config_hash
from nodeconfig.models import ConfigTarget, NodeConfig
from nodeconfig.reconcile import nodes_for_targets, reconcile
from nodeconfig.services import TargetSpec, delete_target, save_target

from .conftest import settle

pytestmark = pytest.mark.django_db
BODY = {"reclaimedResourceConfig": {"enableReclaim": False}}


def save(admin_qos, name: str, **fields) -> ConfigTarget:
    target, _ = save_target(admin_qos, TargetSpec(name=name, **({"config": BODY} | fields)), reason="test")
    settle(target)
    return target


def holders(target: ConfigTarget) -> set[int]:
    return set(NodeConfig.objects.filter(matched_target=target).values_list("node_id", flat=True))


def assert_settled(admin_qos) -> None:
    report = reconcile(admin_qos)
    assert (report.written, report.removed) == (0, 0), "an incremental pass left a node behind"


def test_a_new_body_reconciles_the_nodes_holding_the_target_and_searches_no_other(fleet, admin_qos):
    hdd = save(admin_qos, "hdd", node_label_selector="diskMode=hdd")
    # the online hdd nodes go to a higher-priority target: hdd reaches them but does not hold them
    online = save(admin_qos, "online", node_label_selector="pool=online", priority=1)
    reachable = set(fleet["bj-1"].nodes.filter(labels__diskMode="hdd").values_list("pk", flat=True)) | set(
        fleet["sh-1"].nodes.filter(labels__diskMode="hdd").values_list("pk", flat=True))
    assert holders(hdd) < reachable and holders(online)

    hdd = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd",
                                            config={"reclaimedResourceConfig": {"enableReclaim": True}}), reason="test")[0]
    plan = nodes_for_targets(admin_qos, [hdd.pk])
    assert plan.node_ids == holders(hdd) and plan.searched == {}
    settle(hdd)
    assert set(NodeConfig.objects.filter(target=hdd).values_list("config_hash", flat=True)) == {config_hash(hdd.config)}
    assert_settled(admin_qos)


def test_a_new_selection_or_priority_is_searched_again(fleet, admin_qos):
    save(admin_qos, "online", node_label_selector="pool=online", priority=1)
    hdd = save(admin_qos, "hdd", node_label_selector="diskMode=hdd")
    for spec in (TargetSpec(name="hdd", node_label_selector="diskMode=ssd", config=BODY),
                 TargetSpec(name="hdd", node_label_selector="machineModel=A1", config=BODY),
                 TargetSpec(name="hdd", node_label_selector="pool=offline", priority=1, config=BODY),
                 TargetSpec(name="hdd", node_names=("bj-1-n001", "sh-1-n002"), last_duration="1h", config=BODY)):
        hdd = save_target(admin_qos, spec, reason="test")[0]
        assert hdd.pk in nodes_for_targets(admin_qos, [hdd.pk]).searched
        settle(hdd)
        assert_settled(admin_qos)
        assert nodes_for_targets(admin_qos, [hdd.pk]).searched == {}


def test_a_target_revived_with_its_old_selection_reaches_its_nodes_again(fleet, admin_qos):
    hdd = save(admin_qos, "hdd", node_label_selector="diskMode=hdd")
    had = holders(hdd)
    assert had
    delete_target(hdd, reason="test")
    settle(hdd)
    assert holders(hdd) == set()
    hdd = save(admin_qos, "hdd", node_label_selector="diskMode=hdd")
    assert holders(hdd) == had
    assert_settled(admin_qos)


def test_a_full_pass_records_every_live_targets_selection(fleet, admin_qos):
    hdd, _ = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config=BODY), reason="test")
    assert hdd.pk in nodes_for_targets(admin_qos, [hdd.pk]).searched
    reconcile(admin_qos)
    assert nodes_for_targets(admin_qos, [hdd.pk]).searched == {}
    assert NodeConfig.objects.filter(target=hdd).exists()


def test_a_full_pass_that_wrote_nothing_records_no_job(fleet, admin_qos):
    """The periodic full pass (``full_reconcile`` fans out one per type) over nodes already as
    their targets say records no Job row (#32 goal 8: ~580 a day per type on the idle demo);
    one that had to write a node's config records what it wrote."""
    from core.models import Job
    from nodeconfig.tasks import reconcile_type_task

    hdd = save(admin_qos, "hdd", node_label_selector="diskMode=hdd")
    reconcile_type_task.apply(args=(admin_qos.pk,), headers={"celery_beat_task": True}).result
    before = Job.objects.filter(kind="nodeconfig.reconcile_type").count()
    result = reconcile_type_task.apply(args=(admin_qos.pk,), headers={"celery_beat_task": True}).result
    assert result["nodes"] == 18 and (result["written"], result["removed"], result["conflicts"]) == (0, 0, 0)
    assert Job.objects.filter(kind="nodeconfig.reconcile_type").count() == before

    NodeConfig.objects.filter(matched_target=hdd, node__name="bj-1-n000").delete()  # diskMode=hdd (i % 3 == 0)
    result = reconcile_type_task.apply(args=(admin_qos.pk,), headers={"celery_beat_task": True}).result
    assert result["written"] == 1
    assert Job.objects.filter(kind="nodeconfig.reconcile_type").count() == before + 1
    assert Job.objects.filter(kind="nodeconfig.reconcile_type").latest("pk").result["written"] == 1
