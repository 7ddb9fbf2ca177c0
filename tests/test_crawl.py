"""The crawl behind the translation audit and the page benchmark follows pages, not the same
rows re-sorted, re-paged or downloaded, whatever table's prefix the parameter carries."""

from __future__ import annotations

import pytest

from .crawl import normalise


@pytest.mark.parametrize(("href", "page"), [
    ("/scheduling/cpu/?clusters-export=csv", "/scheduling/cpu/"),
    ("/scheduling/cpu/?clusters-sort=-nodes", "/scheduling/cpu/"),
    ("/scheduling/cpu/?request=32&clusters-per_page=500", "/scheduling/cpu/?request=32&clusters-per_page=500"),
    ("/federation/objects/1/?members-sort=cluster&members-page=2#x", "/federation/objects/1/"),
    ("/fleet/nodes/?sort=name&page=3&q=gpu", "/fleet/nodes/?q=gpu"),
    ("/scheduling/cpu/?cluster=db-a&request=40&clusters-q=db", "/scheduling/cpu/?cluster=db-a&request=40&clusters-q=db"),
    ("/quotas/groups/vision/?children-columns=name", "/quotas/groups/vision/"),
])
def test_a_link_is_the_page_it_names_without_its_tables_sorting_paging_or_export(href: str, page: str) -> None:
    """A table's rows re-sorted, another page of them, other columns or their CSV are the same
    page; a larger page size ("show all") is the page's largest view, measured as a page."""
    assert normalise(href) == page


def test_links_that_leave_the_console_are_not_pages() -> None:
    assert normalise("/api/v1/") is None and normalise("https://example.com/") is None
