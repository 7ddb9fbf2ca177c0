"""The error answers: one body for API callers, a styled page for people, never a traceback.
A value the database cannot represent is the caller's mistake (400), not a fault (503)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from tests.servers import asgi_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

#: ISO 8601 as django-filter accepts it, with a UTC offset Python allows (< 24 h) and
#: PostgreSQL does not (its limit is ±15:59): found by schemathesis as a 503.
FAR_OFFSET = "0148-02-18T13:51:30.08-19:51"


def logged_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def test_an_unknown_address_is_a_styled_page_or_the_api_body(viewer, viewer_api):
    page = logged_in(viewer).get("/no/such/page/")
    html = page.content.decode()
    assert page.status_code == 404 and "There is nothing at this address." in html
    assert 'aria-label="Main"' in html and 'id="language"' in html, "inside the console's layout: navigation, language"
    denied = logged_in(viewer).get("/administration/")
    assert denied.status_code == 403 and 'aria-label="Main"' in denied.content.decode()
    api = viewer_api.get("/api/v1/fleet/clusters/no-such-cluster/")
    assert api.status_code == 404 and set(api.json()) == {"code", "detail", "errors"}


def test_a_time_offset_the_database_cannot_store_is_a_400_in_the_api(viewer_api):
    api = viewer_api.get("/api/v1/core/audit-log/", {"since": FAR_OFFSET})
    if connection.vendor == "postgresql":
        assert api.status_code == 400 and api.json()["code"] == "out_of_range", api.content
    else:  # SQLite stores the instant as text in UTC: nothing out of range
        assert api.status_code == 200


def test_a_time_offset_the_database_cannot_store_is_a_400_page(viewer):
    page = logged_in(viewer).get("/audit/", {"since": FAR_OFFSET})
    if connection.vendor == "postgresql":
        assert page.status_code == 400 and "out of the range" in page.content.decode()
        assert "Traceback" not in page.content.decode()
    else:
        assert page.status_code == 200


def test_a_request_django_refuses_before_any_view_gets_the_api_body(operator_api):
    """More form fields than DATA_UPLOAD_MAX_NUMBER_FIELDS: Django refuses it before the view
    (found by schemathesis as an HTML page on an API path)."""
    fields = "&".join(f"f{i}=x" for i in range(1200))
    response = operator_api.post("/api/v1/scheduling/preview/", fields, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and response["Content-Type"] == "application/json", response.content[:200]
    assert response.json()["code"] == "bad_request"


def test_a_forbidden_page_is_styled(nobody):
    page = logged_in(nobody).get("/audit/")
    assert page.status_code == 403 and "You do not have permission to do this." in page.content.decode()
    assert 'href="/static/' in page.content.decode() or "meridian.css" in page.content.decode()


def _connections_held_off_this_thread() -> list[str]:
    """The threads (other than this one) whose database connection is open."""
    import gc
    import threading

    from django.db.backends.base.base import BaseDatabaseWrapper

    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return [names.get(wrapper._thread_ident, "a finished thread") for wrapper in gc.get_objects()
            if issubclass(type(wrapper), BaseDatabaseWrapper) and wrapper.connection is not None
            and wrapper._thread_ident != threading.get_ident()]


@pytest.mark.django_db(transaction=True)
def test_an_error_page_served_over_asgi_gives_back_the_connection_it_opened(asgi_server, viewer):  # noqa: F811
    """Under ASGI, Django draws the error page of an exception a view raised on a thread of the
    event loop's executor (``response_for_exception``, not thread-sensitive), a thread no request
    ends. The page's layout reads the user's role there: the connection it opened stayed checked
    out for good, one per executor thread, until the pool ran dry."""
    import time

    import httpx

    cookies = {"sessionid": logged_in(viewer).cookies["sessionid"].value}
    for _ in range(3):
        page = httpx.get(f"{asgi_server}/fleet/clusters/no-such-cluster/", cookies=cookies, timeout=10)
        assert page.status_code == 404 and 'aria-label="Main"' in page.text, "drawn inside the layout, as the user"
    deadline = time.monotonic() + 5
    while (held := _connections_held_off_this_thread()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert held == []
