"""Configuration as code: every configurable kind as a ``meridian.io/v1`` document, applied,
diffed, deleted and exported through the kind's own services.

A document has Kubernetes' shape::

    apiVersion: meridian.io/v1
    kind: ConfigTarget
    metadata:
      name: hybrid-for-disk-hdd
      annotations: {meridian.io/description: "..."}   # every kind's description, when it has one
      resourceVersion: 3f2c...                          # written by export; optional on apply
    spec: {...}                                         # the fields the REST API writes (snake_case);
                                                        # upstream content (policies, templates) verbatim

Each app declares its kinds (``register(DocumentKind(...))`` from its ``AppConfig.ready``): how
to find the object a document names, render an object as a document, put a submitted spec
in the form the service stores (``normalize``: defaults filled, quantities canonical, the same
validation as the REST API), and save or remove it through its services — so revisions,
audit entries and jobs are exactly what the pages and the REST API make.

- **apply** (``apply_documents``): all documents or none (one transaction), in dependency
  order (``DocumentKind.order``; within a kind, a parent before its children). A document
  whose normalized spec equals the object's is *unchanged*: no service is called, so no
  revision, no audit entry, no job — and only ``view`` is asked of the caller, so an operator
  applies a whole repository whose clusters and config types (admins' to change) it left as
  they are; a created or changed object needs ``add`` / ``change`` on it. ``?dry_run=true`` (``core.api.viewsets.DryRunMixin``)
  rolls the whole apply back: the answer, with each document's field changes, is the
  server-side diff.
- **resourceVersion** is a digest of the document as rendered here (identity, description,
  spec): content-addressed rather than the REST ETag, because the ETag digests database ids
  (a foreign key, the current revision's row), which differ between two Meridians holding the
  same configuration — with the digest, exporting a fresh Meridian after applying another's
  export gives byte-identical files. A document carrying a resourceVersion that no longer
  matches the object is refused as stale (412) and nothing is written; the write itself is
  bound to the ETag read (``core.concurrency``), which the service checks again under its row
  lock. A resourceVersion naming an object that does not exist is ignored (a create), so an
  export applies to an empty Meridian.
- **delete** (``delete_documents``): reverse order, children first; an object that is not
  there is reported ``absent``.
- **export** (``export_documents``): every object the caller may view, in apply order.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Model, QuerySet
from django.utils.translation import gettext as _

from . import concurrency
from .diff import diff
from .errors import NON_FIELD, Forbidden, PreconditionFailed, Refused
from .permissions import may, restrict

API_VERSION = "meridian.io/v1"
DESCRIPTION = "meridian.io/description"
MAX_DOCUMENTS = 5000


@dataclass(frozen=True)
class Document:
    """One submitted document, its envelope checked; ``index`` is its place in the request."""

    index: int
    kind: str
    name: str
    namespace: str
    spec: dict[str, Any]
    annotations: dict[str, str] = field(default_factory=dict)
    resource_version: str = ""

    @property
    def description(self) -> str:
        return self.annotations.get(DESCRIPTION, "")

    def path(self, where: str) -> str:
        """An error path inside this document, as the one error body names it."""
        return f"documents[{self.index}].{where}" if where != NON_FIELD else f"documents[{self.index}]"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True)
class Rendered:
    """What a kind says about one stored object; the engine wraps it into a document."""

    name: str
    spec: dict[str, Any]
    namespace: str = ""
    description: str = ""


def _default_identity(document: Document) -> tuple[Any, ...]:
    return document.namespace, document.name


def _no_parent(document: Document) -> tuple[Any, ...] | None:
    return None


@dataclass(frozen=True)
class DocumentKind:
    """How one kind is found, rendered, normalized, saved and removed (see the module docstring).

    ``normalize(document, live)`` returns the spec the service would store (raising ``Refused``
    for what it would refuse); ``save(document, spec, live, reason)`` stores it through the
    services and returns the object; ``listing()`` is what export shows, in a stable order;
    ``identity`` tells two documents naming one object apart from others; ``parent`` names the
    identity of a same-kind document that must be applied first; ``creator`` is what ``add`` is
    asked on for a new object; ``fields`` maps a service's field names to document paths.
    """

    kind: str
    model: type[Model]
    order: int
    find: Callable[[Document], Model | None]
    render: Callable[[Any], Rendered]
    normalize: Callable[[Document, Any], dict[str, Any]]
    save: Callable[[Document, dict[str, Any], Any, str], Model]
    remove: Callable[[Any, str], None]
    listing: Callable[[], QuerySet]
    namespaced: bool = False
    #: Whether the kind has a description (``metadata.annotations["meridian.io/description"]``).
    described: bool = True
    identity: Callable[[Document], tuple[Any, ...]] = _default_identity
    parent: Callable[[Document], tuple[Any, ...] | None] = _no_parent
    creator: Callable[[Document], Model | type[Model] | None] | None = None
    fields: Mapping[str, str] = field(default_factory=dict)

    def where(self, service_field: str) -> str:
        """The document path of a service's field (``hard.cpu`` → ``spec.hard.cpu``)."""
        head, dot, rest = service_field.partition(".")
        for name in (service_field, head):
            if name in self.fields:
                mapped = self.fields[name]
                return mapped + (service_field[len(name):] if name != service_field else "")
        if service_field == NON_FIELD:
            return NON_FIELD
        if head in ("name", "namespace"):
            return f"metadata.{service_field}"
        if head == "description":
            return f"metadata.annotations.{DESCRIPTION}"
        return f"spec.{service_field}"


_kinds: dict[str, DocumentKind] = {}


def register(kind: DocumentKind) -> None:
    """Declare a configurable kind (call from an ``AppConfig.ready``)."""
    _kinds[kind.kind] = kind


def kinds() -> list[DocumentKind]:
    """The registered kinds in apply order."""
    return sorted(_kinds.values(), key=lambda k: (k.order, k.kind))


# ---------------------------------------------------------------------------- helpers for kinds

def only_fields(document: Document, allowed: Sequence[str], *, required: Sequence[str] = ()) -> None:
    """Refuse spec fields the kind does not have (a typo must not be silently dropped) and
    missing required ones, all at once."""
    unknown = _("Unknown field; this kind's spec has %(fields)s.") % {"fields": ", ".join(allowed)}
    errors = {name: unknown for name in document.spec if name not in allowed}
    errors |= {name: _("This field is required.") for name in required if document.spec.get(name) in (None, "")}
    if errors:
        raise Refused.from_errors(errors)


# ---------------------------------------------------------------------------- documents

def digest(document: Mapping[str, Any]) -> str:
    """The resourceVersion of a rendered document: its identity, description and spec."""
    meta = {k: v for k, v in (document.get("metadata") or {}).items() if k != "resourceVersion"}
    canonical = json.dumps({"kind": document.get("kind"), "metadata": meta, "spec": document.get("spec")},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def render_document(kind: DocumentKind, obj: Any) -> dict[str, Any]:
    """An object as its ``meridian.io/v1`` document, resourceVersion included."""
    rendered = kind.render(obj)
    metadata: dict[str, Any] = {"name": rendered.name}
    if rendered.namespace:
        metadata["namespace"] = rendered.namespace
    if rendered.description:
        metadata["annotations"] = {DESCRIPTION: rendered.description}
    document = {"apiVersion": API_VERSION, "kind": kind.kind, "metadata": metadata, "spec": rendered.spec}
    metadata["resourceVersion"] = digest(document)
    return document


def parse_documents(raw: Any) -> list[Document]:
    """Check every envelope (apiVersion, kind, metadata, spec) and return the documents; every
    problem of every document is refused at once, each under ``documents[i].<path>``."""
    if not isinstance(raw, list) or not raw:
        raise Refused("invalid", _("Send at least one document."), field="documents")
    if len(raw) > MAX_DOCUMENTS:
        raise Refused("invalid", _("At most %(count)s documents at once.") % {"count": MAX_DOCUMENTS}, field="documents")
    errors: dict[str, list[str]] = {}
    documents = []
    for index, item in enumerate(raw):
        document, problems = _parse_one(index, item)
        errors.update(problems)
        if document is not None:
            documents.append(document)
    seen: dict[tuple[Any, ...], int] = {}
    for document in documents:
        key = (document.kind, *_kinds[document.kind].identity(document))
        if key in seen:
            errors[document.path("metadata.name")] = [_("names the same object as documents[%(index)s].") % {"index": seen[key]}]
        seen.setdefault(key, document.index)
    if errors:
        raise Refused.from_errors(errors)
    return documents


def _parse_one(index: int, item: Any) -> tuple[Document | None, dict[str, list[str]]]:
    where = f"documents[{index}]"
    if not isinstance(item, Mapping):
        return None, {where: [_("Must be an object with apiVersion, kind, metadata and spec.")]}
    errors: dict[str, list[str]] = {}
    if item.get("apiVersion") != API_VERSION:
        errors[f"{where}.apiVersion"] = [_("Must be %(value)s.") % {"value": API_VERSION}]
    kind = _kinds.get(item.get("kind")) if isinstance(item.get("kind"), str) else None
    if kind is None:
        errors[f"{where}.kind"] = [_("Must be one of %(values)s.") % {"values": ", ".join(k.kind for k in kinds())}]
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        errors[f"{where}.metadata"] = [_("Must be an object with at least a name.")]
        metadata = {}
    name, namespace = metadata.get("name"), metadata.get("namespace") or ""
    if not isinstance(name, str) or not name:
        errors[f"{where}.metadata.name"] = [_("Is required.")]
    if not isinstance(namespace, str):
        errors[f"{where}.metadata.namespace"] = [_("Must be a string.")]
    elif namespace and kind is not None and not kind.namespaced:
        errors[f"{where}.metadata.namespace"] = [_("%(kind)s objects have no namespace.") % {"kind": kind.kind}]
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, Mapping) or not all(isinstance(v, str) for v in annotations.values()):
        errors[f"{where}.metadata.annotations"] = [_("Must map strings to strings.")]
        annotations = {}
    kept = {DESCRIPTION} if kind is None or kind.described else set()
    for key in set(annotations) - kept:  # dropped silently, a reader would think them stored
        errors[f"{where}.metadata.annotations.{key}"] = [
            _("Meridian keeps no such annotation on this kind; only %(annotation)s.") % {"annotation": DESCRIPTION}
            if kept else _("Meridian keeps no such annotation on this kind.")]
    version = metadata.get("resourceVersion") or ""
    if not isinstance(version, str):
        errors[f"{where}.metadata.resourceVersion"] = [_("Must be a string (as export writes it).")]
    spec = item.get("spec", {})
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        errors[f"{where}.spec"] = [_("Must be an object.")]
    if errors or kind is None:
        return None, errors
    return Document(index=index, kind=kind.kind, name=name, namespace=namespace, spec=dict(spec),
                    annotations={str(k): v for k, v in annotations.items()}, resource_version=version), {}


def ordered(documents: Sequence[Document]) -> list[Document]:
    """Apply order: by kind, and within a kind every parent the batch holds before its children."""
    result: list[Document] = []
    for kind in kinds():
        result += _parents_first(kind, [d for d in documents if d.kind == kind.kind])
    return result


def _parents_first(kind: DocumentKind, documents: list[Document]) -> list[Document]:
    by_identity = {kind.identity(d): d for d in documents}
    placed: list[Document] = []
    done: set[int] = set()
    for document in sorted(documents, key=lambda d: d.index):
        chain: list[Document] = []
        current: Document | None = document
        while current is not None and current.index not in done:
            done.add(current.index)  # a cycle stops here; the service refuses it when it comes
            chain.append(current)
            parent = kind.parent(current)
            current = by_identity.get(parent) if parent is not None else None
        placed += reversed(chain)
    return placed


# ---------------------------------------------------------------------------- apply, delete, export

def apply_documents(raw: Any, *, user: Any, reason: str = "") -> list[dict[str, Any]]:
    """Create or update what the documents describe, all or nothing; one result per document
    in the order applied: ``created``, ``configured`` or ``unchanged``, with the field changes."""
    documents = parse_documents(raw)
    with transaction.atomic():
        return [_apply_one(document, user, reason) for document in ordered(documents)]


def _apply_one(document: Document, user: Any, reason: str) -> dict[str, Any]:
    kind = _kinds[document.kind]
    with _about(document, kind):
        live = kind.find(document)
        if live is not None:
            _allow(user, "view", live, document)
        before = render_document(kind, live) if live is not None else None
        _check_version(document, before)
        desired = kind.normalize(document, live)
        if before is not None and before["spec"] == desired and _description(before) == document.description:
            return _result(document, "unchanged", before, before)  # nothing is written: viewing it is enough
        if live is None:
            _allow(user, "add", (kind.creator(document) if kind.creator else None) or kind.model, document)
        else:
            _allow(user, "change", live, document)
        with concurrency.expecting(live, concurrency.etag(live)) if live is not None else contextlib.nullcontext():
            obj = kind.save(document, desired, live, reason)
    after = render_document(kind, obj)
    if before is not None and after == before:
        return _result(document, "unchanged", before, after)
    return _result(document, "created" if before is None else "configured", before, after)


def delete_documents(raw: Any, *, user: Any, reason: str = "") -> list[dict[str, Any]]:
    """Delete what the documents name, all or nothing, children before parents; ``deleted`` or
    ``absent`` per document."""
    documents = parse_documents(raw)
    results = []
    with transaction.atomic():
        for document in reversed(ordered(documents)):
            kind = _kinds[document.kind]
            with _about(document, kind):
                live = kind.find(document)
                if live is None:
                    results.append(_result(document, "absent", None, None))
                    continue
                _allow(user, "delete", live, document)
                before = render_document(kind, live)
                _check_version(document, before)
                with concurrency.expecting(live, concurrency.etag(live)):
                    kind.remove(live, reason)
            results.append(_result(document, "deleted", before, None))
    return results


def export_documents(*, user: Any, only: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every object of every kind (or of the kinds named) the user may view, in apply order."""
    unknown = sorted(set(only) - set(_kinds))
    if unknown:
        raise Refused("invalid", _("Unknown kind %(kind)s; one of %(kinds)s.") % {
            "kind": repr(unknown[0]), "kinds": ", ".join(k.kind for k in kinds())}, field="kind")
    out = []
    for kind in kinds():
        if only and kind.kind not in only:
            continue
        out += [render_document(kind, obj) for obj in restrict(kind.listing(), user, "view")]
    return out


def _allow(user: Any, action: str, obj: Any, document: Document) -> None:
    if not may(user, action, obj):
        message = {"view": _("You may not view %(object)s."), "add": _("You may not add %(object)s."),
                   "change": _("You may not change %(object)s."), "delete": _("You may not delete %(object)s.")}[action]
        raise Forbidden("forbidden", message % {"object": document.label}, field=document.path("metadata.name"))


def _check_version(document: Document, before: Mapping[str, Any] | None) -> None:
    if before is None or not document.resource_version:
        return
    current = before["metadata"]["resourceVersion"]
    if document.resource_version != current:
        raise PreconditionFailed(_("%(object)s changed since resourceVersion %(version)s (it is %(current)s now); "
                                   "export it again, redo the edit, then apply.") % {
                                       "object": document.label, "version": document.resource_version, "current": current},
                                 field=document.path("metadata.resourceVersion"))


def _description(document: Mapping[str, Any]) -> str:
    return (document["metadata"].get("annotations") or {}).get(DESCRIPTION, "")


def _result(document: Document, action: str, before: Mapping[str, Any] | None,
            after: Mapping[str, Any] | None) -> dict[str, Any]:
    shown = after or before or {}
    return {"index": document.index, "kind": document.kind, "name": document.name,
            "namespace": document.namespace or None, "action": action,
            "resourceVersion": (shown.get("metadata") or {}).get("resourceVersion"),
            "changes": diff(_comparable(before), _comparable(after)) if action != "unchanged" else []}


def _comparable(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The parts of a document an edit changes (the resourceVersion follows from them)."""
    if document is None:
        return None
    return {"metadata": {k: v for k, v in document["metadata"].items() if k != "resourceVersion"}, "spec": document["spec"]}


@contextlib.contextmanager
def _about(document: Document, kind: DocumentKind) -> Iterator[None]:
    """A service's refusal, re-addressed to the document: its fields become
    ``documents[i].spec.<field>`` and its detail names the document."""
    try:
        yield
    except Refused as exc:
        if not any(key.startswith("documents[") for key in exc.errors):
            exc.errors = {document.path(kind.where(key)): messages for key, messages in exc.errors.items()} or {
                document.path(NON_FIELD): [exc.detail]}
            exc.detail = f"{document.label}: {exc.detail}"
            exc.field = next(iter(exc.errors), None)
            exc.args = (exc.detail,)
        raise
