"""Writers that raced: a stale ETag (If-Match, a page's version) is refused and writes nothing,
and two writers of one config type cannot both pass the overlap checks."""

from __future__ import annotations

import re
import threading
from html import unescape

import pytest
from django.db import connections

from core import concurrency
from core.errors import PreconditionFailed
from core.models import Job, ObjectChange
from nodeconfig import rollout, services
from nodeconfig.models import ConfigRevision, ConfigTarget
from nodeconfig.services import TargetSpec, save_target, spec_of

pytestmark = pytest.mark.django_db
TARGETS = "/api/v1/nodeconfig/targets/"
HDD = {"type": "AdminQoSConfiguration", "name": "hdd", "node_label_selector": "diskMode=hdd",
       "config": {"reclaimedResourceConfig": {"enableReclaim": True}}, "wave_size": "50%", "reason": "first"}


def written() -> tuple:
    """Everything a target write leaves behind: specs, revisions, audit entries, jobs."""
    specs = list(ConfigTarget.objects.order_by("pk").values_list(
        "name", "node_label_selector", "config", "revision_id", "paused", "rollout_state", "deleted"))
    return specs, ConfigRevision.objects.count(), ObjectChange.objects.count(), Job.objects.count()


@pytest.fixture
def target(fleet, operator_api) -> dict:
    """A target read by one client (its ETag), then changed by someone else: that ETag is stale."""
    created = operator_api.post(TARGETS, HDD, format="json")
    assert created.status_code == 201, created.content
    url = f"{TARGETS}{created.json()['id']}/"
    read = operator_api.get(url)
    changed = operator_api.patch(url, {"config": {"reclaimedResourceConfig": {"enableReclaim": False}},
                                       "reason": "someone else"}, format="json")
    assert changed.status_code == 200
    return {"url": url, "stale": read["ETag"], "current": changed["ETag"], "id": created.json()["id"]}


def test_get_answers_the_etag_and_if_none_match_says_not_modified(target, operator_api):
    response = operator_api.get(target["url"])
    assert response.status_code == 200 and response["ETag"] == target["current"] == response.json()["etag"]
    assert re.fullmatch(r'"[0-9a-f]{20}"', response["ETag"])
    assert operator_api.get(target["url"], HTTP_IF_NONE_MATCH=target["current"]).status_code == 304
    assert operator_api.get(target["url"], HTTP_IF_NONE_MATCH=target["stale"]).status_code == 200
    # status moves (nodes matched, rollout progress) do not make a writer's ETag stale
    ConfigTarget.objects.filter(pk=target["id"]).update(matched_node_count=17, observed_revision=2)
    assert operator_api.get(target["url"])["ETag"] == target["current"]


WRITES = [
    ("put", "", HDD | {"node_label_selector": "diskMode=hdd,machineModel=A1", "reason": "narrow"}, 200),
    ("patch", "", {"config": {}, "reason": "clear"}, 200),
    ("post", "rollback/", {"revision": 1, "reason": "back to the first"}, 201),
    ("post", "pause/", {"reason": "look first"}, 200),
]


@pytest.mark.parametrize("method, action, body, ok", WRITES, ids=[w[0] + ":" + (w[1] or "spec") for w in WRITES])
def test_a_stale_if_match_is_refused_with_412_and_writes_nothing(target, operator_api, method, action, body, ok):
    before = written()
    response = getattr(operator_api, method)(target["url"] + action, body, format="json", HTTP_IF_MATCH=target["stale"])
    assert response.status_code == 412, response.content
    assert response.json()["code"] == "stale" and "changed since you read it" in response.json()["detail"]
    assert written() == before
    # the current ETag (or none at all: If-Match is the caller's choice) goes through
    response = getattr(operator_api, method)(target["url"] + action, body, format="json", HTTP_IF_MATCH=target["current"])
    assert response.status_code == ok, response.content
    assert written() != before


def test_a_weak_or_unknown_etag_never_matches(target, operator_api):
    for header in (f"W/{target['current']}", '"nope"', target["stale"] + ', "nope"'):
        response = operator_api.patch(target["url"], {"config": {}}, format="json", HTTP_IF_MATCH=header)
        assert response.status_code == 412 and response.json()["code"] == "stale", header
    response = operator_api.patch(target["url"], {"config": {}}, format="json", HTTP_IF_MATCH=f'"nope", {target["current"]}')
    assert response.status_code == 200


@pytest.mark.parametrize("write", [
    lambda t: save_target(t.config_type, spec_of(t, config={"qrmPluginConfig": {}})),
    lambda t: services.rollback_target(t, 1, reason="back"),
    lambda t: services.set_paused(t, True, reason="look"),
    lambda t: services.delete_target(t, reason="gone"),
    lambda t: rollout.promote(t, reason="all"),
], ids=["save", "rollback", "pause", "delete", "promote"])
def test_the_services_check_the_version_again_under_the_row_lock(fleet, admin_qos, write):
    """The API's early If-Match check can pass just before another writer commits: the service
    compares again once it holds the row, so the late writer is refused all the same."""
    target, _ = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={},
                                                  wave_size="1"))
    read = concurrency.etag(target)
    save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={"x": {}}, wave_size="1"),
                reason="meanwhile")
    target.refresh_from_db()
    before = written()
    with concurrency.expecting(target, read), pytest.raises(PreconditionFailed):
        write(target)
    assert written() == before
    with concurrency.expecting(target, concurrency.etag(target)):
        write(target)
    assert written() != before


def version_in(html: str, prefix: str = "") -> str:
    name = f"{prefix}-version" if prefix else "version"
    match = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert match, f"no {name} field on the page"
    return unescape(match.group(1))


def test_the_edit_page_with_a_stale_version_shows_a_conflict_and_writes_nothing(client, operator, target):
    from .test_pages import form_data

    client.force_login(operator)
    edit = f"/nodeconfig/targets/{target['id']}/edit/"
    assert version_in(client.get(edit).content.decode()) == target["current"]
    data = form_data(name="hdd", node_label_selector="diskMode=hdd", config='{"qrmPluginConfig": {}}',
                     wave_size="50%", reason="my edit")
    before = written()
    response = client.post(edit, data | {"version": target["stale"]})
    assert response.status_code == 200
    assert "changed since you read it" in unescape(response.content.decode())
    assert written() == before
    assert client.post(edit, data | {"version": target["current"]}).status_code == 302
    assert ConfigTarget.objects.get(pk=target["id"]).config == {"qrmPluginConfig": {}}


def test_a_verb_form_with_a_stale_version_shows_a_conflict_and_writes_nothing(client, operator, target):
    client.force_login(operator)
    detail = client.get(f"/nodeconfig/targets/{target['id']}/").content.decode()
    assert version_in(detail, "rollback") == version_in(detail, "rollout") == target["current"]
    for action, data in (("rollback", {"rollback-revision": "1", "rollback-reason": "back"}),
                         ("rollout", {"rollout-action": "pause", "rollout-reason": "look"})):
        url = f"/nodeconfig/targets/{target['id']}/{action}/"
        before = written()
        response = client.post(url, data | {f"{action}-version": target["stale"]})
        assert response.status_code == 200 and "changed since you read it" in unescape(response.content.decode()), action
        assert written() == before
        assert client.post(url, data | {f"{action}-version": version_in(
            client.get(f"/nodeconfig/targets/{target['id']}/").content.decode(), action)}).status_code == 302
    target_row = ConfigTarget.objects.get(pk=target["id"])
    assert target_row.paused and target_row.revision.action == "rollback"


@pytest.mark.django_db(transaction=True)
def test_two_writers_of_overlapping_selectors_at_one_priority_one_wins(fleet, admin_qos, monkeypatch,
                                                                       purge_shard_queues):
    """Two operators save overlapping targets at the same moment: the checks of the second run
    after the first committed (the type's row lock; SQLite's IMMEDIATE transactions), so one is
    saved and the other refused ``selector_overlap`` naming it — never both."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from core.models import APIToken
    from tests.conftest import make_user

    _, raw = APIToken.issue(make_user(get_user_model(), "olga", "operator"))
    validated = threading.Barrier(2)
    check_spec = services.check_spec

    def check_then_linger(*args, **kwargs):
        """Validate, then give the other writer time to validate too (if it can) before saving."""
        check_spec(*args, **kwargs)
        try:
            validated.wait(timeout=1.5)
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(services, "check_spec", check_then_linger)
    answers: dict[str, object] = {}
    start = threading.Barrier(2)

    def write(name: str, selector: str) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        try:
            start.wait(timeout=10)
            answers[name] = client.post(TARGETS, {"type": "AdminQoSConfiguration", "name": name,
                                                  "node_label_selector": selector, "config": {}}, format="json")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=("hdd-a", "diskMode=hdd")),
               threading.Thread(target=write, args=("hdd-b", "diskMode in (hdd,nvme)"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    statuses = sorted(response.status_code for response in answers.values())
    assert statuses == [201, 400], {name: response.content for name, response in answers.items()}
    winner = next(name for name, response in answers.items() if response.status_code == 201)
    loser = next(response for response in answers.values() if response.status_code == 400)
    assert loser.json()["code"] == "selector_overlap" and f'"{winner}"' in loser.json()["detail"]
    assert list(ConfigTarget.objects.values_list("name", flat=True)) == [winner]
    assert ConfigRevision.objects.count() == 1 and Job.objects.filter(kind="nodeconfig.reconcile_type").count() == 1
