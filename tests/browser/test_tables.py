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
