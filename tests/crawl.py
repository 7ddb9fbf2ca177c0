"""Walk the console the way a user does: from the overview, follow every link to our own pages.

Used by the translation audit (every page a user reaches, in Chinese) and by the page benchmark
(every page at fleet scale). A fleet has a detail page per node and per object, so each URL
route is visited for at most ``per_route`` distinct URLs: what is measured or checked is each
kind of page, not each of 200,000 nodes. Links that leave the console (the API, Django's admin,
downloads, sign-out) are not followed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.urls import Resolver404, resolve

#: Not pages to read: machine and REST endpoints, Django's admin, sign-out, static files.
NOT_PAGES = ("/api/", "/admin/", "/accounts/", "/static/", "/i18n/", "/ws/", "/healthz", "/readyz", "/metrics")
#: Query parameters that only re-sort, re-page or download the same rows. (``per_page`` is not
#: one: a table's sizes are a form, and the links that set one — "show all" on the CPU fleet
#: page — open the page's largest view, which the page benchmark must measure.)
SAME_ROWS = ("sort", "page", "columns", "export", "fragment", "format")


@dataclass
class Page:
    url: str
    route: str
    status: int
    html: str
    seconds: float = 0.0
    queries: int = 0


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def links(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.hrefs


def same_rows(parameter: str) -> bool:
    """Whether a query parameter only re-sorts, re-pages or downloads rows: one of ``SAME_ROWS``,
    or one with a table's prefix (``members-sort``, ``clusters-export`` on a page of several tables)."""
    return parameter in SAME_ROWS or parameter.rpartition("-")[2] in SAME_ROWS


def normalise(href: str, base: str = "/") -> str | None:
    """The console URL a link names, without fragment and re-sorting parameters; None when the
    link leaves the console or is not a page."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith(("#", "javascript:", "mailto:")):
        return None
    path = parts.path or urlsplit(base).path
    if not path.startswith("/") or path.startswith(NOT_PAGES):
        return None
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not same_rows(k)]
    return path + ("?" + urlencode(query) if query else "")


def route_of(url: str) -> str | None:
    try:
        match = resolve(urlsplit(url).path)
    except Resolver404:
        return None
    return match.route + ("?" if "?" in url else "")


@dataclass
class Crawl:
    """Breadth-first from ``start``; ``fetch(url) -> Page`` does the request."""

    fetch: Callable[[str, str], Page]
    per_route: int = 3
    limit: int = 2000
    seen: set[str] = field(default_factory=set)
    per: dict[str, int] = field(default_factory=dict)

    def pages(self, *start: str) -> Iterator[Page]:
        queue = deque(start)
        self.seen.update(start)
        visited = 0
        while queue and visited < self.limit:
            url = queue.popleft()
            route = route_of(url)
            if route is None or self.per.get(route, 0) >= self.per_route:
                continue
            self.per[route] = self.per.get(route, 0) + 1
            page = self.fetch(url, route)
            visited += 1
            yield page
            if page.status == 200 and "html" in page.html[:200].lower():
                for href in links(page.html):
                    target = normalise(href, url)
                    if target and target not in self.seen:
                        self.seen.add(target)
                        queue.append(target)

