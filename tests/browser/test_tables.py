"""List tables in a real browser: a header click sorts, the search box filters, the export downloads CSV."""

from __future__ import annotations

import csv
import io

import pytest

from core.audit import record_change
from core.context import acting_as
from core.models import Job
from fleet.models import Cluster

from .test_console_live import log_in

pytestmark = pytest.mark.browser


def shown(page, selector: str, attr: str) -> list[str]:
    return page.eval_on_selector_all(selector, f"rows => rows.map(r => r.getAttribute('{attr}'))")


def download_rows(page) -> list[list[str]]:
    with page.expect_download() as info:
        page.click("a[data-table-export]")
    download = info.value
    assert download.suggested_filename.endswith(".csv")
    with open(download.path(), encoding="utf-8") as f:
        return list(csv.reader(io.StringIO(f.read())))


def test_fleet_table_sorts_searches_and_exports(page, asgi_server, viewer):
    for name in ("bj-a4", "sh-b2", "gz-c7"):
        Cluster.objects.create(name=name, connector="simulated", ready=True, node_count=1, ready_node_count=1)
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/fleet/")
    assert shown(page, "#cluster-table tbody tr", "data-cluster") == ["bj-a4", "gz-c7", "sh-b2"]

    with page.expect_navigation():
        page.click('#cluster-table th a[data-sort="name"]')
    assert shown(page, "#cluster-table tbody tr", "data-cluster") == ["sh-b2", "gz-c7", "bj-a4"]

    page.fill("input[data-table-search]", "a4")
    with page.expect_navigation():
        page.press("input[data-table-search]", "Enter")
    assert shown(page, "#cluster-table tbody tr", "data-cluster") == ["bj-a4"]
    assert page.input_value("input[data-table-search]") == "a4"

    rows = download_rows(page)
    assert rows[0][:3] == ["Cluster", "Status", "Nodes"] and [r[0] for r in rows[1:]] == ["bj-a4"]


def test_audit_and_job_tables_in_the_browser(page, asgi_server, viewer):
    for actor, what in (("carol", "target hdd-a4"), ("alice", "cluster bj-3"), ("bob", "target ssd-b1")):
        with acting_as(actor):
            record_change(None, "update", object_repr=what, reason="INC-1")
    for kind in ("sync-a4", "prune"):
        Job.objects.create(kind=kind, triggered_by="test", status=Job.Status.SUCCEEDED)
    log_in(page, asgi_server, viewer.username)

    page.goto(f"{asgi_server}/audit/")
    with page.expect_navigation():
        page.click('#audit-table th a[data-sort="actor"]')
    actors = page.eval_on_selector_all("#audit-table tbody tr td:nth-child(2)", "cells => cells.map(c => c.innerText)")
    assert actors == ["alice", "bob", "carol"]
    page.fill("input[data-table-search]", "ssd")
    with page.expect_navigation():
        page.press("input[data-table-search]", "Enter")
    assert page.locator("#audit-table tbody tr").count() == 1 and "ssd-b1" in page.inner_text("#audit-table tbody")
    rows = download_rows(page)
    assert rows[0][:2] == ["Time", "Actor"] and [r[1] for r in rows[1:]] == ["bob"]

    page.goto(f"{asgi_server}/jobs/")
    with page.expect_navigation():
        page.click('#job-table th a[data-sort="id"]')
    with page.expect_navigation():
        page.click('#job-table th a[data-sort="id"]')
    first = page.inner_text("#job-table tbody tr:first-child td:first-child")
    assert first.startswith("prune #"), "the second click sorts descending"
    rows = download_rows(page)
    assert rows[0][:2] == ["Job", "Status"] and len(rows) == 3


def test_federated_objects_table_sorts_searches_and_exports(page, asgi_server, viewer):
    from federation.models import FederatedObject

    for name in ("qa-b", "qa-a4", "qa-c"):
        FederatedObject.objects.create(namespace="qa", name=name, api_version="v1", kind="ConfigMap", template={},
                                       template_hash="x")
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/federation/")
    names = "rows => rows.map(r => r.querySelector('td:nth-child(2) a').textContent)"
    assert page.eval_on_selector_all("#fed-objects-table tbody tr", names) == ["qa/qa-a4", "qa/qa-b", "qa/qa-c"]

    with page.expect_navigation():
        page.click('#fed-objects-table th a[data-sort="name"]')
    with page.expect_navigation():
        page.click('#fed-objects-table th a[data-sort="name"]')
    assert page.eval_on_selector_all("#fed-objects-table tbody tr", names) == ["qa/qa-c", "qa/qa-b", "qa/qa-a4"]

    page.fill("input[data-table-search]", "a4")
    with page.expect_navigation():
        page.press("input[data-table-search]", "Enter")
    assert page.eval_on_selector_all("#fed-objects-table tbody tr", names) == ["qa/qa-a4"]
    assert page.locator("#fed-objects-table[data-live-fragment]").count() == 1, "still a live part"

    rows = download_rows(page)
    assert rows[0][:3] == ["Kind", "Namespace/name", "Phase"] and [r[1] for r in rows[1:]] == ["qa/qa-a4"]


def test_node_config_targets_table_sorts_searches_and_exports(page, asgi_server, viewer):
    from nodeconfig.models import ConfigTarget, ConfigType

    config_type = ConfigType.objects.create(name="QaBrowserConfiguration", resource="qabrowsers")
    for name in ("qa-b", "qa-a4", "qa-c"):
        ConfigTarget.objects.create(config_type=config_type, name=name, node_label_selector=f"pool={name}")
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/nodeconfig/?type=QaBrowserConfiguration")
    names = "rows => rows.map(r => r.querySelector('td:nth-child(2) a').textContent)"
    assert page.eval_on_selector_all("#target-table tbody tr", names) == ["qa-a4", "qa-b", "qa-c"]
    assert page.locator("#target-table .nc-progress[data-target-id]").count() == 3, "the live progress bars stay"

    with page.expect_navigation():
        page.click('#target-table th a[data-sort="name"]')
    with page.expect_navigation():
        page.click('#target-table th a[data-sort="name"]')
    assert page.eval_on_selector_all("#target-table tbody tr", names) == ["qa-c", "qa-b", "qa-a4"]
    assert page.input_value("#nc-type") == "QaBrowserConfiguration", "the type filter is kept"

    page.fill("input[data-table-search]", "pool=qa-b")
    with page.expect_navigation():
        page.press("input[data-table-search]", "Enter")
    assert page.eval_on_selector_all("#target-table tbody tr", names) == ["qa-b"]

    rows = download_rows(page)
    assert rows[0][:3] == ["Type", "Target", "Mode"] and [r[1] for r in rows[1:]] == ["qa-b"]
