"""Page bases every app shares: permission checks through ``core.permissions``, and the one
verb view (a POST that changes one object through a service, answering a refusal on the form).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Model
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from . import concurrency
from .errors import Refused
from .forms import DiffForm, add_refusal, limit_choices
from .permissions import may, may_any_or_role, permission_name, stays_within
from .revisions import diff_revisions

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class PermissionMixin(AccessMixin):
    """Reading a page needs ``view`` on ``model`` (by role, or on some objects through a
    constraint); a POST needs ``action`` (``add``/``change``/``delete`` or a verb). Object pages
    check the object itself in ``get_object``.

    A user who holds the action on some objects only (a scoped role, a quota owner) writes in
    one transaction that must leave its object (``self.object``) among those they may act on:
    a change that would move it out of their scope (another cluster, another namespace) is
    rolled back and refused. Creating needs the action fleet-wide, unless the page checks
    where the new object goes itself (``scoped_create``: quota groups, asked of the parent).
    """

    model: type[Model]
    #: What a POST does (a verb view sets its verb); None: the page is read-only.
    action: str | None = None
    #: Another model whose view permission the page needs instead (pages about several models).
    permission_model: type[Model] | None = None
    #: A scoped user may create here: the page sets ``self.object`` to what it created, which
    #: must be in their scope (else the creation is rolled back).
    scoped_create = False
    #: The page shows fleet-wide figures (water levels and weights, the CPU fleet view): it
    #: needs ``view`` fleet-wide, not on some objects.
    fleet_wide = False
    #: The page is nothing but the form of its change (a create or import form, a what-if):
    #: opening it needs what its POST needs, so nobody fills in a form they may not send.
    form_page = False

    def dispatch(self, request, *args, **kwargs):
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        model = self.permission_model or self.model
        if not may_any_or_role(request.user, "view", model):
            raise PermissionDenied
        if self.fleet_wide and not may(request.user, "view", model):
            raise PermissionDenied
        if request.method in SAFE_METHODS:
            if self.form_page and not self.may_send(request.user, model):
                raise PermissionDenied
            return super().dispatch(request, *args, **kwargs)
        if not self.may_send(request.user, model):
            raise PermissionDenied
        if request.user.has_perm(permission_name(model, self.action)):
            return super().dispatch(request, *args, **kwargs)
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)
            stays_within(request.user, self.action, getattr(self, "object", None))
        return response

    def may_send(self, user: Any, model: type[Model]) -> bool:
        """Could ``user`` POST here at all? Creating needs the action fleet-wide unless the
        page checks where the new object goes (``scoped_create``); other actions are checked
        on the object again."""
        if not self.action:
            return False
        somewhere = self.action != "add" or self.scoped_create
        return (may_any_or_role if somewhere else may)(user, self.action, model)

    def get_object(self, queryset=None) -> Model:
        obj = super().get_object(queryset)  # type: ignore[misc]
        if not may(self.request.user, "view", obj):
            raise PermissionDenied
        if self.request.method not in SAFE_METHODS and self.action and not may(self.request.user, self.action, obj):
            raise PermissionDenied
        return obj

    def get_form(self, form_class=None):
        """A form view's form, its object choices limited to what the user may view (a scoped
        operator picks among their clusters)."""
        return limit_choices(super().get_form(form_class), self.request.user)  # type: ignore[misc]

    def can(self, action: str, obj: Model | None = None) -> bool:
        """For templates and ``write_forms``: may the user do ``action`` (on ``obj``)?"""
        return may(self.request.user, action, obj if obj is not None else (self.permission_model or self.model))


class VerbViewMixin:
    """A POST-only write on one object, mixed into the object's detail view.

    Subclasses set ``action`` (the permission verb), ``form_class``, ``prefix`` and ``form_key``
    (where the detail template shows the form) and implement ``perform(obj, form)``, which
    calls a service and returns a redirect URL or response (None: back to the object). A
    refusal — a rule, or a stale ``version`` when the form carries one — re-renders the
    detail page with the bound form saying why: nothing typed is lost, nothing is a 500.
    """

    http_method_names = ["post"]
    form_class: type | None = None
    prefix = ""
    form_key = ""

    def make_form(self, obj: Model):
        return self.form_class(self.request.POST, prefix=self.prefix)  # type: ignore[misc]

    def perform(self, obj: Model, form) -> str | HttpResponse | None:
        raise NotImplementedError

    def success_url(self, obj: Model) -> str:
        return obj.get_absolute_url()  # type: ignore[attr-defined]

    def post(self, request, *args, **kwargs):
        self.object = obj = self.get_object()  # type: ignore[attr-defined]
        form = self.make_form(obj)
        if form.is_valid():
            version = form.cleaned_data.get("version") if hasattr(form, "cleaned_data") else None
            try:
                with concurrency.expecting(obj, version or None):
                    if version:
                        concurrency.check(obj)  # early: the service checks again under its row lock
                    outcome = self.perform(obj, form)
            except Refused as exc:
                add_refusal(form, exc)
            else:
                if isinstance(outcome, HttpResponse):
                    return outcome
                return redirect(outcome or self.success_url(obj))
        return self.render_to_response(self.get_context_data(**{self.form_key: form}))  # type: ignore[attr-defined]



def login_locked_out(request, response=None, credentials=None, *args: Any, **kwargs: Any) -> HttpResponse:
    """django-axes' lockout answer: the login page again, saying why, with status 429 (the
    API's one error body for the token endpoint)."""
    from django.contrib.auth.forms import AuthenticationForm
    from django.http import JsonResponse
    from django.shortcuts import render
    from django.utils.translation import gettext as _

    from .errors import error_body

    if request.path.startswith("/api/"):
        detail = _("Too many failed logins for this user from this address; try again later.")
        return JsonResponse(error_body("throttled", detail), status=429)

    form = AuthenticationForm(request, initial={"username": (credentials or {}).get("username", "")})
    return render(request, "registration/login.html", {"form": form, "locked_out": True, "next": request.GET.get("next", "")},
                  status=429)


def server_error(request, *args: Any, **kwargs: Any) -> HttpResponse:
    """The 500 handler: a database that is down or refusing connections is a 503 (retry), a
    value it cannot represent (``DataError``, e.g. a filter's time zone offset) a 400, with
    the API's one error body for API callers and a styled page for people; anything else is
    a 500 that says an error was logged. Never a traceback."""
    import sys

    from django.db import DatabaseError, DataError
    from django.http import JsonResponse
    from django.utils.translation import gettext as _

    from .errors import error_body

    exc = sys.exc_info()[1]
    out_of_range = isinstance(exc, DataError)
    unavailable = isinstance(exc, DatabaseError) and not out_of_range
    status = 400 if out_of_range else 503 if unavailable else 500
    detail = (_("A value in the request is out of the range the database can store (a number or a time zone offset).")
              if out_of_range else _("The database is unavailable; retry in a moment.") if unavailable
              else _("Something went wrong on our side; the error was logged."))
    code = "out_of_range" if out_of_range else "unavailable" if unavailable else "server_error"
    if request.path.startswith("/api/"):
        return JsonResponse(error_body(code, detail), status=status)
    response = HttpResponse(_error_page(request, status, detail, layout=not unavailable), status=status)
    if unavailable:
        response["Retry-After"] = "5"
    return response


def not_found(request, exception: Exception | None = None) -> HttpResponse:
    """A styled 404 (the one error body for API callers)."""
    from django.utils.translation import gettext as _

    return _error_answer(request, 404, "not_found", _("There is nothing at this address."))


def bad_request(request, exception: Exception | None = None) -> HttpResponse:
    """A request Django refuses before any view runs (too many form fields, a body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``, a disallowed host): 400 with the one error body."""
    from django.utils.translation import gettext as _

    return _error_answer(request, 400, "bad_request",
                         _("The request could not be read (too large, too many fields, or malformed)."))


def permission_denied(request, exception: Exception | None = None) -> HttpResponse:
    """A styled 403 for pages (the one error body for API callers outside DRF's views)."""
    from django.utils.translation import gettext as _

    return _error_answer(request, 403, "permission_denied", _("You do not have permission to do this."))


def _error_answer(request, status: int, code: str, detail: str) -> HttpResponse:
    from django.http import JsonResponse

    from .errors import error_body

    if request.path.startswith("/api/"):
        return JsonResponse(error_body(code, detail), status=status)
    return HttpResponse(_error_page(request, status, detail), status=status)


@contextmanager
def _connection_given_back() -> Iterator[None]:
    """A database connection the error page opens (the layout reads the user and their role) is
    closed once the page is drawn. Under ASGI, Django draws the page for an exception a view
    raised on a thread of the event loop's executor (``response_for_exception``, not
    thread-sensitive), a thread no request ends: the connection stayed checked out of the pool
    for good there, one per executor thread. One the request had open already is left to it."""
    from django.db import connection

    opened_here = connection.connection is None
    try:
        yield
    finally:
        if opened_here:
            connection.close()


def _error_page(request, status: int, detail: str, *, layout: bool = True) -> str:
    """An error page inside the console's layout (navigation, language switch, theme), or a
    plain one when the layout cannot be drawn: it needs the user and the session, and the
    database may be what is down (then the caller asks for no layout, not to wait on it)."""
    from django.template import loader
    from django.utils.html import escape

    context = {"status": status, "detail": detail}
    try:
        if layout:
            with _connection_given_back():
                return loader.render_to_string("error.html", context, request=request)
    except Exception:  # noqa: BLE001 - see the docstring
        pass
    try:
        return loader.render_to_string("error_plain.html", context)
    except Exception:  # noqa: BLE001 - the template layer itself may need what is down
        return f"<!DOCTYPE html><title>{status}</title><h1>{status}</h1><p>{escape(detail)}</p>"


class RevisionDiffMixin:
    """A detail page comparing two of its object's revisions (``templates/includes/revision_diff.html``)."""

    request: Any

    def diff_context(self, revisions: list[Any]) -> dict[str, Any]:
        """``diff_form`` and ``diff`` (``a``, ``b``, ``changes`` with display texts) for the page."""
        if not {"a", "b"} & set(self.request.GET):
            return {"diff_form": DiffForm(revisions=revisions), "diff": None}
        form = DiffForm(self.request.GET, revisions=revisions)
        if not form.is_valid():
            return {"diff_form": form, "diff": None}
        by_number = {r.number: r for r in revisions}
        a, b = by_number[form.cleaned_data["a"]], by_number[form.cleaned_data["b"]]
        changes = [c | {"old_text": _as_text(c["old"]), "new_text": _as_text(c["new"])} for c in diff_revisions(a, b)]
        return {"diff_form": form, "diff": {"a": a, "b": b, "changes": changes}}


def _as_text(value: Any) -> str:
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


#: What ReDoc's bundle fetches from outside (its footer's logo), and the empty image in its place.
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
EMPTY_IMAGE = "data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27/%3E"


@require_GET
def redoc_bundle(request) -> HttpResponse:
    """ReDoc's script (drf-spectacular-sidecar's copy) without the one request it makes outside
    Meridian: the logo its sidebar's footer loads from cdn.redoc.ly. Installations are often
    offline, and the API docs should not tell a third party who reads them. Signed in, as the
    docs page is."""
    response = HttpResponse(_redoc_script(), content_type="application/javascript; charset=utf-8")
    response["Cache-Control"] = "private, max-age=86400"
    return response


@functools.lru_cache(maxsize=1)
def _redoc_script() -> str:
    from importlib.resources import files

    script = (files("drf_spectacular_sidecar") / "static" / "drf_spectacular_sidecar" / "redoc" / "bundles"
              / "redoc.standalone.js").read_text(encoding="utf-8")
    return script.replace(REDOC_CDN_LOGO, EMPTY_IMAGE)
