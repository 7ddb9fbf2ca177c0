"""One refusal, one error body, for the REST API, the pages and the webhooks alike.

Every rule a service enforces raises :class:`Refused` (or a subclass naming another HTTP
status) before anything is written; the caller turns it into its own shape:

- REST: ``{"code": <machine code>, "detail": <human text>, "errors": {<field>: [<message>, ...]}}``
  with the refusal's status (``core.api.exceptions.exception_handler`` does it for every view);
- pages: the messages land on the form's fields (``core.forms.add_refusal``);
- admission webhooks: a decision is an AdmissionReview (a reasoned denial, ``kube.admission.deny``),
  never a 500 the API server misreads; a call that is not one (no token, too large, not an
  AdmissionReview, the database down) gets this same body (``fleet.machine.refusal``).

``code`` is stable and meant for machines (node config's validation reason codes from
contracts.md appear here unchanged); ``detail`` is for people; ``errors`` names the input
at fault, by field path or query parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.utils.translation import gettext as _

NON_FIELD = "non_field_errors"


def field_messages(errors: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """``{field: message or [messages]}`` → ``{field: [messages]}`` (strings, in order)."""
    result: dict[str, list[str]] = {}
    for field, value in (errors or {}).items():
        messages = [value] if isinstance(value, str) or not isinstance(value, Iterable) else list(value)
        result[str(field)] = [str(m) for m in messages]
    return result


def error_body(code: str, detail: str, errors: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The one 4xx body of the REST API and the import endpoints."""
    return {"code": code, "detail": str(detail), "errors": field_messages(errors)}


class Refused(ValueError):
    """A change or request the rules refuse; nothing was written.

    ``field`` names the one input at fault (the message goes under it); ``errors`` names
    several. With neither, the refusal is about the request as a whole.
    """

    status = 400

    def __init__(self, code: str, detail: str, *, field: str | None = None,
                 errors: Mapping[str, Any] | None = None) -> None:
        super().__init__(str(detail))
        self.code, self.detail = code, str(detail)
        self.errors = field_messages(errors)
        if field and field not in self.errors:
            self.errors[field] = [self.detail]
        self.field = field or next(iter(self.errors), None)

    @classmethod
    def from_errors(cls, errors: Mapping[str, Any], *, code: str = "invalid") -> Refused:
        """A refusal listing field problems; the detail repeats them in one line."""
        messages = field_messages(errors)
        detail = "; ".join(f"{field}: {' '.join(texts)}" for field, texts in messages.items())
        return cls(code, detail, errors=messages)

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.detail, self.errors)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.detail!r})"


class Forbidden(Refused):
    """The caller may not do this to what the request names (checked per object)."""

    status = 403


class NotFound(Refused):
    """What the request names does not exist (or the caller may not know it does)."""

    status = 404


class Conflict(Refused):
    """The request clashes with the current state (a name taken meanwhile, a finished job)."""

    status = 409


class PreconditionFailed(Refused):
    """``If-Match`` (or a form's version) names a state that is no longer current."""

    status = 412

    def __init__(self, detail: str = "", **kwargs: Any) -> None:
        super().__init__("stale", detail or _("Someone changed this since you read it; reload and try again."), **kwargs)


class Unavailable(Refused):
    """A dependency (database, Redis, a member cluster) is down: retry later; nothing was written."""

    status = 503
