"""Reading the console's pages in tests."""

from __future__ import annotations


def html(response) -> str:
    """A page's HTML as text."""
    return response.content.decode()
