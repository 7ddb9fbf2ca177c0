"""The quota tree pages as people use them: read for everyone, write by role or by ownership,
refusals on the right field with nothing lost, the what-if that commits nothing, and an
index whose query count does not grow with the tree."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.models import Cluster
from kube.admission import parse_admission_review
from quotas import services
from quotas.models import CashSample, QuotaCharge, QuotaGroup
from tests.pages import html

from .conftest import deployment, review

pytestmark = pytest.mark.django_db

INDEX, CHECK, NEW = "/quotas/", "/quotas/check/", "/quotas/new/"


def detail(name: str) -> str:
    return f"/quotas/groups/{name}/"


def group(name: str) -> QuotaGroup:
    return QuotaGroup.objects.get(name=name)


def errors(response, form: str = "form") -> dict[str, list[str]]:
    return response.context[form].errors


def create_form(name: str, hard: str, **extra) -> dict[str, str]:
    return {"name": name, "hard": hard, "description": "", "owners": "", "reason": "", **extra}


def resize(client, name: str, hard: str, **kwargs):
    return client.post(f"{detail(name)}resize/", {"resize-hard": hard, "resize-reason": "test"}, **kwargs)


def move(client, source: str, target: str, amount: str):
    return client.post(f"{detail(source)}move/", {"move-target": target, "move-amount": amount, "move-reason": ""})


def delete(client, name: str):
    return client.post(f"{detail(name)}delete/", {"delete-reason": "test"})


def admit(cluster: Cluster, manifest: dict) -> services.Decision:
    """Charge a workload to its group the way the webhook does."""
    return services.admit(cluster, parse_admission_review(review(manifest)))


@pytest.fixture
def tree(db):
    """vision (two children) and a sibling root, search."""
    services.create_group(name="vision", parent=None, hard={"limits.cpu": "100", "requests.nvidia.com/gpu": "16"})
    services.create_group(name="vision-ocr", parent="vision", hard={"limits.cpu": "30", "requests.nvidia.com/gpu": "4"})
    services.create_group(name="vision-det", parent="vision", hard={"limits.cpu": "20", "requests.nvidia.com/gpu": "2"})
    services.create_group(name="search", parent=None, hard={"limits.cpu": "50"})


# ---------------------------------------------------------------------------- reading

def test_every_page_renders_for_a_viewer_without_write_forms(client, viewer, tree):
    client.force_login(viewer)
    index = client.get(INDEX)
    assert index.status_code == 200
    page = html(index)
    assert 'id="quota-tree-data"' in page and 'id="quota-treemap"' in page and 'data-topics="quotas"' in page
    assert 'href="/quotas/groups/vision-ocr/"' in page, "the nested list works without JS"
    assert index.context["stats"] == {"groups": 4, "roots": 2, "over": 0, "cash_exhausted": 0}
    assert index.context["key"] == "limits.cpu"
    assert "New group" not in page
    for name in ("vision", "vision-ocr", "search"):
        response = client.get(detail(name))
        assert response.status_code == 200, name
        for form_id in ("child-form", "resize-form", "move-form", "owners-form", "delete-form"):
            assert f'id="{form_id}"' not in html(response), (name, form_id)
    assert client.get(CHECK).status_code == 403, "the check page is nothing but a form a viewer cannot send"
    assert client.get(detail("no-such-group")).status_code == 404


def test_an_empty_tree_and_the_chinese_pages_render(client, viewer, operator):
    client.force_login(viewer)
    empty = client.get(INDEX)
    assert empty.status_code == 200 and empty.context["keys"] == [] and empty.context["key"] is None
    services.create_group(name="ads", parent=None, hard={"limits.cpu": "1"})
    client.cookies["django_language"] = "zh-hans"
    for path in (INDEX, detail("ads")):
        assert client.get(path).status_code == 200, path
    client.force_login(operator)
    assert client.get(CHECK).status_code == 200


def test_the_index_picks_a_resource_key(client, viewer, tree):
    client.force_login(viewer)
    response = client.get(INDEX, {"key": "requests.nvidia.com/gpu"})
    assert response.context["key"] == "requests.nvidia.com/gpu"
    assert response.context["keys"] == ["limits.cpu", "requests.nvidia.com/gpu"]
    data = response.context["tree_data"]
    names = [row[0] for row in data["groups"]]
    assert names == ["search", "vision", "vision-det", "vision-ocr"], "pre-order, siblings by name"
    vision = data["groups"][names.index("vision")]
    assert vision[2] == [100.0, 16.0] and vision[3] == [50.0, 6.0], "hard and used per key"
    assert data["groups"][names.index("vision-ocr")][1] == names.index("vision")
    assert client.get(INDEX, {"key": "bogus"}).context["key"] == "limits.cpu"


def test_a_viewer_who_owns_nothing_cannot_write(client, viewer, tree):
    client.force_login(viewer)
    assert client.get(NEW).status_code == 403
    assert client.get(NEW, {"parent": "vision"}).status_code == 403
    assert client.post(NEW, create_form("mine", "limits.cpu: 1")).status_code == 403
    child = create_form("mine", "limits.cpu: 1\nrequests.nvidia.com/gpu: 1")
    assert client.post(f"{NEW}?parent=vision", child).status_code == 403
    assert resize(client, "vision-ocr", "limits.cpu: 1\nrequests.nvidia.com/gpu: 1").status_code == 403
    assert delete(client, "vision-det").status_code == 403
    assert move(client, "vision-ocr", "vision-det", "limits.cpu: 1").status_code == 403
    assert client.post(f"{detail('vision')}owners/", {"owners-owners": viewer.username}).status_code == 403
    what_if = {"workload": yaml.safe_dump(deployment("x", group="vision-ocr")), "group": ""}
    assert client.post(CHECK, what_if).status_code == 403, "a what-if needs the role that could make the change"
    assert not QuotaGroup.objects.filter(name="mine").exists()
    assert group("vision-ocr").hard == {"limits.cpu": "30", "requests.nvidia.com/gpu": "4"}
    assert QuotaGroup.objects.filter(name="vision-det").exists() and not group("vision").owners.exists()


def test_an_owner_manages_the_subtree_below_their_group_only(client, viewer, tree):
    group("vision").owners.add(viewer)
    client.force_login(viewer)
    page = html(client.get(detail("vision")))
    assert 'id="child-form"' in page, "owners create children of their group"
    assert 'id="resize-form"' not in page and 'id="delete-form"' not in page, "…but their group's size comes from above"
    child_page = html(client.get(detail("vision-ocr")))
    assert 'id="resize-form"' in child_page and 'id="delete-form"' in child_page and 'id="move-form"' in child_page

    created = client.post(f"{NEW}?parent=vision", create_form("vision-seg", "limits.cpu: 10\nrequests.nvidia.com/gpu: 1"))
    assert created.status_code == 302 and created["Location"] == detail("vision-seg")
    assert group("vision-seg").parent.name == "vision" and group("vision").used["limits.cpu"] == "60"
    assert resize(client, "vision-ocr", "limits.cpu: 35\nrequests.nvidia.com/gpu: 4").status_code == 302
    assert group("vision-ocr").hard["limits.cpu"] == "35"
    assert delete(client, "vision-det").status_code == 302
    assert not QuotaGroup.objects.filter(name="vision-det").exists()

    assert resize(client, "vision", "limits.cpu: 1000\nrequests.nvidia.com/gpu: 16").status_code == 403
    assert delete(client, "vision").status_code == 403
    assert client.post(f"{NEW}?parent=search", create_form("search-x", "limits.cpu: 1")).status_code == 403
    assert resize(client, "search", "limits.cpu: 500").status_code == 403
    assert move(client, "vision-ocr", "search", "limits.cpu: 1").status_code == 200, "a refusal, shown on the form"
    assert group("search").hard == {"limits.cpu": "50"} and group("vision").hard["limits.cpu"] == "100"

    typed = client.post(NEW, create_form("vision-typed", "limits.cpu: 1\nrequests.nvidia.com/gpu: 1", parent="vision"))
    assert typed.status_code == 302, "the free form accepts a parent inside their subtree"
    elsewhere = client.post(NEW, create_form("search-typed", "limits.cpu: 1", parent="search"))
    assert "outside the subtrees you manage" in " ".join(errors(elsewhere)["parent"])
    root = client.post(NEW, create_form("rogue-root", "limits.cpu: 1"))
    assert root.status_code == 200 and "parent" in errors(root), "owners do not create roots"
    assert not QuotaGroup.objects.filter(name__in=["rogue-root", "search-typed"]).exists()


# ---------------------------------------------------------------------------- creating

def test_operator_creates_a_root_and_a_child_through_the_form(client, operator):
    client.force_login(operator)
    assert client.get(NEW).status_code == 200
    root = client.post(NEW, create_form("ads", "limits.cpu: 10\nlimits.cpu.A4 = 4\n\n# models\npods: '20'",
                                        description="Ads", owners=operator.username, reason="new team"))
    assert root.status_code == 302 and root["Location"] == detail("ads")
    ads = group("ads")
    assert ads.hard == {"limits.cpu": "10", "limits.cpu.A4": "4", "pods": "20"} and ads.parent is None
    assert list(ads.owners.values_list("username", flat=True)) == [operator.username]

    form_page = client.get(NEW, {"parent": "ads"})
    assert form_page.status_code == 200
    assert form_page.context["form"]["hard"].value() == "limits.cpu: 0\nlimits.cpu.A4: 0\npods: 0", "the parent's keys"
    child = client.post(f"{NEW}?parent=ads", create_form("ads-web", "limits.cpu: 6\nlimits.cpu.A4: 2\npods: 10",
                                                         parent="ignored: the parent is fixed"))
    assert child.status_code == 302
    assert group("ads-web").parent.name == "ads"
    assert group("ads").used == {"limits.cpu": "6", "limits.cpu.A4": "2", "pods": "10"}
    messages = [str(m) for m in get_messages(child.wsgi_request)]
    assert any("ads-web" in m for m in messages)


def test_a_refused_child_explains_itself_on_the_hard_field_and_creates_nothing(client, operator, tree):
    client.force_login(operator)
    typed = "limits.cpu: 51\nrequests.nvidia.com/gpu: 1"
    too_big = client.post(f"{NEW}?parent=vision", create_form("vision-big", typed))
    assert too_big.status_code == 200
    message = " ".join(errors(too_big)["hard"])
    assert "vision" in message and "limits.cpu" in message and "50" in message, message
    assert too_big.context["form"]["hard"].value() == typed, "nothing typed is lost"

    missing = client.post(f"{NEW}?parent=vision", create_form("vision-big", "limits.cpu: 1"))
    assert missing.status_code == 200
    assert "requests.nvidia.com/gpu" in " ".join(errors(missing)["hard"])

    assert not QuotaGroup.objects.filter(name="vision-big").exists()
    assert group("vision").used == {"limits.cpu": "50", "requests.nvidia.com/gpu": "6"}

    bad_quantity = client.post(NEW, create_form("x", "limits.cpu: ten"))
    assert "limits.cpu" in " ".join(errors(bad_quantity)["hard"])
    taken = client.post(NEW, create_form("vision", "limits.cpu: 1"))
    assert errors(taken)["name"]
    unknown_parent = client.post(NEW, create_form("orphan", "limits.cpu: 1", parent="nowhere"))
    assert "nowhere" in " ".join(errors(unknown_parent)["parent"])
    assert client.get(NEW, {"parent": "nowhere"}).status_code == 404


def test_a_malformed_hard_line_is_reported_with_its_number(client, operator):
    client.force_login(operator)
    response = client.post(NEW, create_form("ads", "limits.cpu: 10\n\nlimits.memory 4Gi\npods: 3"))
    assert response.status_code == 200
    message = " ".join(errors(response)["hard"])
    assert "Line 3" in message and "limits.memory 4Gi" in message
    duplicate = client.post(NEW, create_form("ads", "pods: 1\npods=2"))
    assert "Line 2" in " ".join(errors(duplicate)["hard"])
    only_comments = client.post(NEW, create_form("ads", "# limits.cpu: 10\n"))
    assert only_comments.status_code == 200 and "at least one resource" in " ".join(errors(only_comments)["hard"])
    negative = client.post(NEW, create_form("ads", "limits.cpu: -5"))
    assert "greater than or equal to 0" in " ".join(errors(negative)["hard"])
    assert not QuotaGroup.objects.exists()


# ---------------------------------------------------------------------------- resize, delete, move

def test_resizing_below_usage_is_allowed_with_the_warning(client, operator, cluster):
    services.create_group(name="ads", parent=None, hard={"limits.cpu": "10", "pods": "20"})
    assert admit(cluster, deployment("web", cpu="2", replicas=3)).allowed
    client.force_login(operator)
    form = client.get(detail("ads")).context["resize_form"]
    assert form["hard"].value() == "limits.cpu: 10\npods: 20", "the editor is prefilled"

    response = resize(client, "ads", "limits.cpu: 4\npods: 20", follow=True)
    assert response.status_code == 200
    levels = {(m.level_tag, str(m)) for m in response.context["messages"]}
    assert any(tag == "warning" and "limits.cpu" in text and "in use" in text for tag, text in levels), levels
    assert group("ads").hard["limits.cpu"] == "4" and group("ads").used["limits.cpu"] == "6"
    assert "shrunk below usage: admissions fail until usage drops" in html(response)


def test_resize_refusals_land_on_the_hard_field(client, operator, tree):
    client.force_login(operator)
    response = resize(client, "vision-ocr", "limits.cpu: 200\nrequests.nvidia.com/gpu: 4")
    assert response.status_code == 200 and "limits.cpu" in " ".join(errors(response, "resize_form")["hard"])
    assert response.context["resize_form"]["hard"].value() == "limits.cpu: 200\nrequests.nvidia.com/gpu: 4"
    dropped = resize(client, "vision-ocr", "limits.cpu: 10")
    assert "requests.nvidia.com/gpu" in " ".join(errors(dropped, "resize_form")["hard"])
    assert group("vision-ocr").hard == {"limits.cpu": "30", "requests.nvidia.com/gpu": "4"}


def test_only_leaves_are_deleted(client, operator, tree):
    client.force_login(operator)
    page = html(client.get(detail("vision")))
    assert "disabled" in page[page.index('id="delete-form"'):] and "delete them first" in page
    refused = delete(client, "vision")
    assert refused.status_code == 200
    assert "child groups" in " ".join(refused.context["delete_form"].non_field_errors())
    assert QuotaGroup.objects.filter(name="vision").exists()
    deleted = delete(client, "vision-det")
    assert deleted.status_code == 302 and deleted["Location"] == detail("vision")
    assert group("vision").used["limits.cpu"] == "30", "the leaf's quota returned to its parent"


def test_quota_moves_between_siblings_only(client, operator, tree):
    client.force_login(operator)
    form = client.get(detail("vision-ocr")).context["move_form"]
    assert [c[0] for c in form.fields["target"].widget.choices] == ["", "vision-det"]
    assert move(client, "vision-ocr", "vision-det", "limits.cpu: 5").status_code == 302
    assert group("vision-ocr").hard["limits.cpu"] == "25" and group("vision-det").hard["limits.cpu"] == "25"
    assert group("vision").used["limits.cpu"] == "50"

    cousin = move(client, "vision-ocr", "search", "limits.cpu: 1")
    assert cousin.status_code == 200 and "sibling" in " ".join(errors(cousin, "move_form")["target"])
    over = move(client, "vision-ocr", "vision-det", "limits.cpu: 26")
    assert over.status_code == 200 and "limits.cpu" in " ".join(errors(over, "move_form")["amount"])
    unknown = move(client, "vision-ocr", "nobody", "limits.cpu: 1")
    assert "nobody" in " ".join(errors(unknown, "move_form")["target"])
    assert group("vision-ocr").hard["limits.cpu"] == "25" and group("search").hard == {"limits.cpu": "50"}


def test_owners_are_edited_by_username(client, operator, viewer, tree):
    client.force_login(operator)
    response = client.post(f"{detail('vision')}owners/", {"owners-owners": f"{viewer.username}, {operator.username}"})
    assert response.status_code == 302
    assert set(group("vision").owners.values_list("username", flat=True)) == {viewer.username, operator.username}
    unknown = client.post(f"{detail('vision')}owners/", {"owners-owners": "ghost"})
    assert "ghost" in " ".join(errors(unknown, "owners_form")["owners"])


# ---------------------------------------------------------------------------- detail contents

def test_detail_shows_resources_children_workloads_and_history(client, operator, tree, cluster):
    client.force_login(operator)
    resize(client, "vision-ocr", "limits.cpu: 31\nrequests.nvidia.com/gpu: 4")
    response = client.get(detail("vision"))
    rows = {r["key"]: r for r in response.context["resources"]}
    cpu = rows["limits.cpu"]
    assert (cpu["hard"], cpu["used"], cpu["self_used"], cpu["children_hard"], cpu["remaining"]) == ("100", "51", "0", "51", "49")
    assert [c["name"] for c in response.context["children"]] == ["vision-det", "vision-ocr"]
    ocr = client.get(detail("vision-ocr"))
    assert ocr.context["ancestors"] == ["vision"] and 'href="/quotas/groups/vision/"' in html(ocr)
    changes = ocr.context["history"]
    assert [c.action for c in changes] == ["update", "create"] and changes[0].reason == "test"
    assert changes[0].changes == [{"field": "hard.limits.cpu", "before": "30", "after": "31"}], "per key, not whole dicts"

    for i in range(55):
        QuotaCharge.objects.create(group=group("vision-ocr"), cluster=cluster, namespace="ml", kind="Deployment",
                                   api_version="apps/v1", name=f"w{i:02d}", replicas=1,
                                   charge={"limits.cpu": "1", "limits.memory": "1Gi"},
                                   admitted_at=timezone.now() + timedelta(seconds=i))
    first = client.get(detail("vision-ocr")).context["workloads_table"]
    rows = list(first.page.object_list)
    assert len(rows) == 50 and rows[0].record.name == "w54", "most recent first"
    assert rows[0].get_cell_value("charge") == "limits.cpu 1", "the charge on the group's keys"
    second = client.get(detail("vision-ocr"), {"workloads-page": 2}).context["workloads_table"]
    assert len(second.page.object_list) == 5


def test_a_child_budget_is_no_burn_only_pod_time_is(client, viewer):
    """Creating a child carves its cash budget out of the parent's at once: the parent's used
    jumps by 500 without a pod running, and the burn-down must not read that as 500 an hour."""
    from quotas.reconcile import accrue_cash

    services.create_group(name="gpu-lab", parent=None, hard={"cash/limits.cpu": "1000", "limits.cpu": "100"})
    start = timezone.now() + timedelta(hours=1)
    assert accrue_cash(start) == 1
    services.create_group(name="gpu-lab-a", parent="gpu-lab", hard={"cash/limits.cpu": "500", "limits.cpu": "10"})
    accrue_cash(start + timedelta(hours=1))
    samples = list(CashSample.objects.filter(group=group("gpu-lab")).order_by("time"))
    assert [s.used for s in samples] == [{"cash/limits.cpu": "0"}, {"cash/limits.cpu": "500"}]
    assert [s.burned for s in samples] == [{"cash/limits.cpu": "0"}, {"cash/limits.cpu": "0"}]
    client.force_login(viewer)
    series = client.get(detail("gpu-lab")).context["cash"]["series"][0]
    assert series["used"] == [0.0, 500.0], "the chart still shows what is left"
    assert series["rate"] == 0.0 and series["exhaustion"] is None, "no pod ran: nothing burns, no exhaustion date"


def test_cash_burn_down_with_projected_exhaustion(client, viewer):
    services.create_group(name="gpu-lab", parent=None, hard={"cash/limits.cpu": "100", "limits.cpu": "10"})
    lab = group("gpu-lab")
    start = timezone.now() - timedelta(hours=2)
    for hours, used in ((0, "10"), (1, "20"), (2, "30")):
        CashSample.objects.create(group=lab, time=start + timedelta(hours=hours), used={"cash/limits.cpu": used})
    client.force_login(viewer)
    response = client.get(detail("gpu-lab"))
    series = response.context["cash"]["series"]
    assert [s["key"] for s in series] == ["cash/limits.cpu"]
    assert series[0]["used"] == [10.0, 20.0, 30.0] and series[0]["rate"] == 10.0
    assert series[0]["exhaustion"] == start + timedelta(hours=9), "70 left at 10 per hour after the last sample"
    page = html(response)
    assert 'id="quota-cash-chart"' in page and 'id="quota-cash-data"' in page and "plotly.min.js" in page
    assert "plotly.min.js" not in html(client.get(CHECK))
    services.create_group(name="no-cash", parent=None, hard={"limits.cpu": "1"})
    assert client.get(detail("no-cash")).context["cash"] is None


# ---------------------------------------------------------------------------- what-if

def test_what_if_answers_without_committing(client, operator, cluster, ads):
    assert admit(cluster, deployment("a4-web", cpu="4", cpu_type="A4")).allowed
    before = dict(group("ads").used)
    charges = QuotaCharge.objects.count()
    client.force_login(operator)  # a preview needs the role that could make the change ("add")

    more_a4 = client.post(CHECK, {"workload": yaml.safe_dump(deployment("a4-more", cpu="4", cpu_type="A4")), "group": ""})
    assert more_a4.status_code == 200
    decision = more_a4.context["decision"]
    assert decision.allowed is False and decision.group == "ads" and "limits.cpu.A4" in decision.message
    assert "Denied" in html(more_a4) and decision.message.replace('"', "&quot;") in html(more_a4)

    plain = client.post(CHECK, {"workload": yaml.safe_dump(deployment("plain", cpu="4")), "group": ""})
    decision = plain.context["decision"]
    assert decision.allowed is True and decision.delta["limits.cpu"] == "4" and "limits.cpu.A4" not in decision.delta
    assert "Allowed" in html(plain) and {"key": "limits.cpu", "value": "4"} in plain.context["delta"]

    assert group("ads").used == before and QuotaCharge.objects.count() == charges, "the what-if commits nothing"


def test_what_if_reports_input_problems_on_the_form(client, operator, ads):
    client.force_login(operator)
    broken = client.post(CHECK, {"workload": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: [oops\n", "group": ""})
    assert broken.status_code == 200 and "decision" not in broken.context
    assert "line" in " ".join(errors(broken)["workload"]).lower()
    scalar = client.post(CHECK, {"workload": "- just\n- a list", "group": ""})
    assert "must be a mapping (key: value pairs), not a list" in " ".join(errors(scalar)["workload"])
    unknown = client.post(CHECK, {"workload": yaml.safe_dump(deployment("x")), "group": "nope"})
    assert "nope" in " ".join(errors(unknown)["group"])
    override = client.post(CHECK, {"workload": yaml.safe_dump(deployment("x", group=None, cpu="11")), "group": "ads"})
    assert override.context["decision"].allowed is False and override.context["decision"].group == "ads"


# ---------------------------------------------------------------------------- scale

def bulk_tree(roots: int, children: int, grandchildren: int, *, start: int = 0) -> int:
    """A wide tree written directly (the services are not what is measured here)."""
    hard = {"limits.cpu": "1000", "pods": "100", "cash/limits.cpu": "50"}
    used = {"limits.cpu": "10", "pods": "100", "cash/limits.cpu": "50"}
    made = 0
    for r in range(start, start + roots):
        root = QuotaGroup.objects.create(name=f"r{r}", path=f"/r{r}/", depth=0, hard=hard, used=used)
        level = QuotaGroup.objects.bulk_create(
            [QuotaGroup(name=f"r{r}-c{c}", parent=root, path=f"/r{r}/r{r}-c{c}/", depth=1, hard=hard, used=used)
             for c in range(children)])
        QuotaGroup.objects.bulk_create(
            [QuotaGroup(name=f"{p.name}-g{g}", parent=p, path=f"{p.path}{p.name}-g{g}/", depth=2, hard=hard, used=used)
             for p in level for g in range(grandchildren)])
        made += 1 + children + children * grandchildren
    return made


def test_the_index_issues_a_bounded_number_of_queries(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    bulk_tree(2, 2, 2)
    with CaptureQueriesContext(connection) as small:
        assert client.get(INDEX).status_code == 200
    bulk_tree(10, 5, 5, start=2)
    with django_assert_max_num_queries(len(small.captured_queries)):
        response = client.get(INDEX)
    assert response.context["stats"]["groups"] == 14 + 310
    tree_queries = [q["sql"] for q in small.captured_queries
                    if "quotas_quotagroup" in q["sql"] and "quotas_quotagroup_owners" not in q["sql"]
                    and "LIMIT" not in q["sql"] and "COUNT(" not in q["sql"]]
    assert len(tree_queries) == 1, "one query reads the whole tree (the flat table reads one page and counts)"


def test_the_index_renders_5000_groups(client, viewer):
    """Its speed is measured by bench/bench_quotas.py; here, that the whole tree is on the page."""
    assert bulk_tree(50, 9, 10) == 5000
    client.force_login(viewer)
    response = client.get(INDEX)
    assert response.status_code == 200
    assert response.context["stats"] == {"groups": 5000, "roots": 50, "over": 0, "cash_exhausted": 5000}
    assert response.content.decode().count('data-i="') >= 5000


@pytest.mark.parametrize("text,binary,shown", [
    ("15478900m", False, "15,478.9"), ("4600", False, "4,600"), ("12m", False, "0.012"), ("5k", False, "5,000"),
    ("250M", False, "250M"), ("40552320Mi", False, "38.7Ti"), ("1536Mi", False, "1.5Gi"), ("2147483648", True, "2Gi"),
    ("0", False, "0"), ("not-a-quantity", False, "not-a-quantity"),
])
def test_pages_show_quantities_readably(text, binary, shown):
    from quotas.views import readable

    assert readable(text, binary) == shown
