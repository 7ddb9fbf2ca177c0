"""Every page a user reaches, read in Chinese: no English sentence left in the console's own words.

The catalogue test (``test_translations.py``) checks what is in the catalogue; this one finds
what never got there: a string not marked for translation shows up in English on a Chinese
page. The demo fleet with every area's demo is crawled from the overview as an admin (who sees
every page) with the language set to zh-hans; the visible text and the attributes a reader
meets (``title``, ``placeholder``, ``aria-label``, ``alt``) are searched for English phrases.
Data is not the console's words: object names, labels, YAML and code blocks (``pre``, ``code``,
``textarea``, anything marked ``translate="no"``) are skipped, and so are Kubernetes' own terms.
"""

from __future__ import annotations

import io
import re
import time
from html.parser import HTMLParser

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.crawl import Crawl, Page

#: Elements whose content is data or code, never the console's sentences.
SKIPPED = {"script", "style", "pre", "code", "textarea", "svg", "kbd", "samp"}
ATTRIBUTES = ("title", "placeholder", "aria-label", "alt")
#: An English phrase: two words of letters, the second in lower case ("Node config", "no rows").
PHRASE = re.compile(r"\b[A-Za-z][a-z]{1,}(?: [a-z]{2,})+\b")
#: Kubernetes' and our products' names, which stay as they are in either language.
TERMS = re.compile(r"\b(?:Meridian|Kubernetes|KubeAdmiral|Katalyst|Plotly|Redis|PostgreSQL|Celery|ReDoc|Swagger|kubectl)\b"
                   r"|\benv in\b")  # a selector in a help text's example: "team=a,env in (prod)"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Reader(HTMLParser):
    """Collects the text and reader-facing attributes outside skipped elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.texts: list[str] = []

    def _skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        skip = self._skipping() or tag in SKIPPED or values.get("translate") == "no"
        if not skip:
            self.texts.extend(v for k, v in attrs if k in ATTRIBUTES and v)
        if tag not in VOID:
            self.stack.append((tag, skip))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if not self._skipping() and data.strip():
            self.texts.append(data.strip())


def english(html: str) -> list[str]:
    """The texts of the page that hold an English phrase, each cut to its first 100 characters."""
    reader = _Reader()
    reader.feed(html)
    return [text[:100] for text in reader.texts if PHRASE.search(TERMS.sub(" ", text))]


@pytest.fixture
def demo(db):
    out = io.StringIO()
    call_command("seed_demo", clusters=2, nodes=60, seed=3, stdout=out)
    call_command("seed_nodeconfig_demo", stdout=out)
    call_command("seed_quotas_demo", stdout=out)
    call_command("seed_federation_demo", history_days=1, stdout=out)
    call_command("seed_scheduling_demo", stdout=out)


def test_every_page_reads_in_chinese(demo, client, admin_user):
    client.force_login(admin_user)
    client.cookies["django_language"] = "zh-hans"

    def fetch(url: str, route: str) -> Page:
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        html = response.content.decode() if "html" in response.get("Content-Type", "") else ""
        return Page(url, route, response.status_code, html, time.perf_counter() - started, len(queries))

    pages = list(Crawl(fetch, per_route=2).pages("/"))
    assert len(pages) > 60, [p.url for p in pages]
    broken = [(p.url, p.status) for p in pages if p.status >= 500]
    assert not broken
    untranslated = {p.url: sorted(set(english(p.html))) for p in pages}
    untranslated = {url: found for url, found in untranslated.items() if found}
    assert not untranslated, "English on Chinese pages (mark it for translation, or translate=\"no\" if it is data):\n" + \
        "\n".join(f"{url}: {found}" for url, found in untranslated.items())
