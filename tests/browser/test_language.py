"""Every page in Simplified Chinese, in a real browser: the language is switched with the
header's picker as a user does, then every page of the console (the URL resolver walked, the
objects the access matrix creates) is opened and its labels read — headings, table headers,
form labels, buttons, links, term names. An English word left among them is an untranslated
string, unless it is a technical token the Chinese text keeps too (Kubernetes kinds, field
and resource names, product names) or the name of an object on the page."""

from __future__ import annotations

import re

import pytest

from tests.test_access import MACHINE_PREFIXES, SKIPPED_PREFIXES, _is_api, all_routes
from tests.test_access_matrix import _world

from .test_console_live import log_in

pytestmark = pytest.mark.browser

#: Words the zh-Hans text keeps as they are (the glossary's technical tokens).
TECHNICAL = {
    "Meridian", "English", "Kubernetes", "Katalyst", "KubeAdmiral", "Pod", "Pods", "Hash", "Spec", "Schema", "Webhook",
    "Cash", "Profile", "GiB", "Kubeconfig",
    # field, resource and plugin names shown as labels (upstream's own spelling)
    "cpu", "memory", "limits", "requests", "cpuset", "alloc", "exclude", "reserve", "shares", "quota", "spec",
    "nsc", "psc", "scb",
}
#: Names of the objects the access matrix creates (data on the page, not labels).
DATA = {"admin", "matrix", "probe", "owned", "test", "viewer", "operator"}
LABELS = "h1, h2, h3, th, label, legend, button, summary, dt, nav a, a.button"
WORD = re.compile(r"[A-Za-z][A-Za-z]{2,}")


def pages() -> list[str]:
    """Every HTML page of the console (not the API, the machine endpoints or logout)."""
    return [path for path, callback in all_routes()
            if not (path.startswith((*SKIPPED_PREFIXES, *MACHINE_PREFIXES, "/api/")) or _is_api(callback) or "logout" in path)]


def english_labels(page) -> set[str]:
    texts = page.evaluate("""selector => Array.from(document.querySelectorAll(selector))
        .filter(el => !el.closest('code, pre, textarea, td, option, [translate=no]'))
        .map(el => el.innerText)""", LABELS)
    return {word for text in texts for word in WORD.findall(text) if not _token(word)} - TECHNICAL - DATA


def _token(word: str) -> bool:
    """An acronym (GVR, NUMA, PEM) or a Kubernetes kind in CamelCase (ConfigMap): kept as written."""
    return word.isupper() or any(c.isupper() for c in word[1:])


@pytest.mark.django_db(transaction=True)
def test_every_page_is_chinese_after_the_switch(page, asgi_server, django_user_model):
    admin = _world(django_user_model)["admin"]["user"]
    log_in(page, asgi_server, admin.username)
    page.goto(f"{asgi_server}/")
    with page.expect_navigation():
        page.select_option("#language", "zh-hans")
    assert page.evaluate("document.documentElement.lang") == "zh-hans"
    left: dict[str, set[str]] = {}
    visited = 0
    for path in pages():
        probe = page.request.get(f"{asgi_server}{path}", max_redirects=0)  # the browser's cookies, no navigation
        if probe.status != 200 or "text/html" not in probe.headers.get("content-type", ""):
            continue  # an action URL (POST only), a redirect, JSON
        page.goto(f"{asgi_server}{path}")
        visited += 1
        words = english_labels(page)
        if words:
            left[path] = words
    assert visited >= 35, f"only {visited} pages opened"
    assert left == {}, f"English labels in the Chinese console: {left}"
