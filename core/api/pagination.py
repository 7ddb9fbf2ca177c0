"""Pagination: numbered pages for small lists, a cursor for tables of 100k+ rows."""

from rest_framework.pagination import CursorPagination, PageNumberPagination


class StandardPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000


class LargeCursorPagination(CursorPagination):
    """Stable, O(page) pagination over huge tables: no COUNT(*), no deep OFFSET."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    ordering = "pk"
