"""The one viewset base: app viewsets declare queryset, serializers and filters, and call services.

Shared behaviour lives here once:

- **permission restriction**: lists and lookups show only what the caller may view
  (``core.permissions.restrict``); every write is checked per object (``RolePermission``);
  an extra action names its verb, ``@action(..., verb="rollback")``; a caller holding the
  write's action on some objects only writes in a transaction that must leave the object in
  their scope (``initial``);
- **ETag / If-Match**: a detail GET answers with the object's ETag (``If-None-Match`` → 304);
  a write with ``If-Match`` is held to it — a stale one answers 412 and changes nothing
  (checked again by the service under the row lock, ``core.concurrency.check``);
- **writes through services**: ``create``/``update``/``destroy`` validate the body with the
  write serializer and call ``perform_create``/``perform_update``/``perform_destroy``, which
  app viewsets implement with their service functions (validation lives there, so the pages
  and the API refuse the same things); the answer is the read serializer of the result;
- **revisions** (``RevisionsMixin``): ``revisions/``, ``diff/?a=&b=`` and ``rollback/`` with one
  response shape everywhere: 201 and the new revision;
- **dry runs** (``DryRunMixin``): ``?dry_run=true`` on any write (create, update, destroy, a verb)
  runs it for real — validation, services, revisions, audit — in a transaction that is then
  rolled back, as Kubernetes' ``dryRun=All``: the answer is what would be stored (or the
  refusal), and nothing is (events and jobs go out only after a commit, so none do).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import Model, QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response

from .. import concurrency, revisions
from ..errors import PreconditionFailed, Refused
from ..permissions import is_preview, permission_name, restrict, stays_within, view_action, view_model


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class RollbackSerializer(serializers.Serializer):
    revision = serializers.IntegerField(min_value=1)
    #: Required by the services (``reason_required``), which say so in the one error body.
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class DiffSerializer(serializers.Serializer):
    a = serializers.IntegerField(min_value=1)
    b = serializers.IntegerField(min_value=1)
    changes = serializers.ListField(child=serializers.DictField())


#: ``?dry_run=`` values meaning "yes" (``All`` is how Kubernetes spells it) and "no".
DRY_RUN_YES = frozenset({"true", "1", "all"})
DRY_RUN_NO = frozenset({"false", "0", ""})
DRY_RUN_HEADER = "X-Meridian-Dry-Run"


def dry_run_asked(query: Mapping[str, str]) -> bool:
    """Whether a request asks for a dry run. A value that is neither yes nor no counts as yes
    here (so it never writes) and is refused by ``DryRunMixin.initial``."""
    return "dry_run" in query and str(query["dry_run"]).strip().lower() not in DRY_RUN_NO


class DryRunMixin:
    """``?dry_run=true`` on an unsafe request: the whole request runs inside a transaction that is
    rolled back at the end, so validation, permission checks, services, revisions and audit
    entries all happen exactly as for real and none of it is kept; ``transaction.on_commit``
    work (live events, job messages, Redis ETags) never runs. The answer is the real one (201
    with what would be stored, 400 with the refusal, 409/412 when stale) plus the header
    ``X-Meridian-Dry-Run: true``.

    Views whose effects leave the database (applying a webhook configuration to a member
    cluster) list the actions (or, for plain API views, the HTTP methods) they cannot dry-run
    in ``dry_run_refused``: such a request is refused (400, ``dry_run_unsupported``) rather
    than carried out.
    """

    dry_run_refused: frozenset[str] = frozenset()

    def dispatch(self, request, *args, **kwargs):
        if request.method in SAFE_METHODS or not dry_run_asked(request.GET):
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
            transaction.set_rollback(True)
        response[DRY_RUN_HEADER] = "true"
        return response

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if request.method in SAFE_METHODS or not dry_run_asked(request.query_params):
            return
        if str(request.query_params["dry_run"]).strip().lower() not in DRY_RUN_YES:
            raise ValidationError({"dry_run": ["Use dry_run=true (or All), or leave it out."]})
        if (getattr(self, "action", None) or request.method) in self.dry_run_refused:
            raise Refused("dry_run_unsupported", _("This request acts outside Meridian's database and cannot be dry-run."),
                          field="dry_run")


class MeridianViewSetMixin(DryRunMixin):
    """See the module docstring. ``write_serializer_class`` validates bodies of create/update."""

    #: The verb an extra action needs (``@action(..., verb="rollback")``); None: by HTTP method.
    verb: str | None = None
    #: An action that computes and commits nothing (a what-if): read-only tokens may call it.
    preview: bool = False
    write_serializer_class: type[serializers.Serializer] | None = None
    _expecting: Any = None
    _written: Model | None = None

    # ---------------------------------------------------------------- reads

    def get_queryset(self) -> QuerySet:
        queryset = super().get_queryset()  # type: ignore[misc]
        return restrict(queryset, self.request.user, "view")

    def get_object(self) -> Model:
        obj = super().get_object()  # type: ignore[misc]
        if self.request.method not in ("GET", "HEAD", "OPTIONS"):
            self._hold_to_if_match(obj)
            self._written = obj
        return obj

    # ---------------------------------------------------------------- writes held to a scope

    def initial(self, request, *args, **kwargs):
        """A write by a caller who holds its action on some objects only (a scoped role, a quota
        owner) runs in one transaction that must leave its object among those: created inside
        their scope, not moved out of it by a change; otherwise it is rolled back, 403. Every
        write of every viewset, whatever its own ``create``/``update``/verb does."""
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return
        action, model = view_action(request, self), view_model(self)
        if action is None or model is None or request.user.has_perm(permission_name(model, action)):
            return
        if getattr(self, "detail", True) is False and getattr(self, "action", None) != "create" and not is_preview(self):
            # A list route writing several objects at once (an import): no one object to hold to the scope.
            raise exceptions.PermissionDenied("Writing many objects at once needs the role fleet-wide.")
        name = request.method.lower()
        handler = getattr(self, name)

        def held(*args: Any, **kwargs: Any) -> Response:
            with transaction.atomic():
                response = handler(*args, **kwargs)
                written = self._written if self._written is not None else self._created(model, response)
                if written is not None:
                    stays_within(request.user, action, written)
            return response

        setattr(self, name, held)

    def _created(self, model: type[Model], response: Response) -> Model | None:
        data = getattr(response, "data", None)
        if response.status_code != status.HTTP_201_CREATED or not isinstance(data, Mapping):
            return None
        field = self.lookup_field if self.lookup_field != "pk" else "id"  # type: ignore[attr-defined]
        value = data.get(field, data.get("id"))
        return model._default_manager.filter(**{field if field != "id" else "pk": value}).first() if value else None

    def retrieve(self, request, *args, **kwargs):
        obj = self.get_object()
        tag = concurrency.etag(obj)
        if tag in {t.strip() for t in request.headers.get("If-None-Match", "").split(",")}:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tag})
        return self.respond(obj)

    def respond(self, obj: Model, status_code: int = status.HTTP_200_OK, *, extra: Mapping[str, Any] | None = None,
                serializer_class: type[serializers.Serializer] | None = None) -> Response:
        """The read representation of ``obj`` (fresh from the database, through the viewset's
        own queryset so its annotations and prefetches are there) with its ETag."""
        fresh = type(obj)._default_manager.filter(pk=obj.pk).first() or obj
        queryset = self.get_queryset()
        if queryset.model is type(obj):
            fresh = queryset.filter(pk=obj.pk).first() or fresh
        serializer = (serializer_class or self.get_serializer_class())(fresh, context=self.get_serializer_context())
        data = dict(serializer.data) | dict(extra or {})
        return Response(data, status=status_code, headers={"ETag": concurrency.etag(fresh)})

    # ---------------------------------------------------------------- If-Match

    def _hold_to_if_match(self, obj: Model) -> None:
        tags = concurrency.parse_if_match(self.request.headers.get("If-Match"))
        if tags is None:
            return
        if "*" not in tags and concurrency.etag(obj) not in tags:
            raise PreconditionFailed(_("%(object)s changed since you read it (If-Match does not match its ETag); "
                                       "GET it again and retry.") % {"object": obj})
        self._expecting = concurrency.expecting(obj, tags)
        self._expecting.__enter__()

    def finalize_response(self, request, response, *args, **kwargs):
        if self._expecting is not None:
            self._expecting.__exit__(None, None, None)
            self._expecting = None
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]

    # ---------------------------------------------------------------- writes through services

    def valid(self, serializer_class: type[serializers.Serializer], data: Any = None, *, partial: bool = False,
              instance: Any = None) -> dict[str, Any]:
        """Validated data of a body (``data`` defaults to the request's); 400 with field errors otherwise."""
        data = self.request.data if data is None else data
        if not isinstance(data, Mapping):
            raise ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        serializer = serializer_class(instance, data=data, partial=partial, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

class WriteThroughServicesMixin:
    """create/update/destroy of a full resource viewset, each calling the app's service."""

    def create(self, request, *args, **kwargs):
        data = self.valid(self.write_serializer_class or self.get_serializer_class())
        return self.respond(self.perform_create(data), status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        partial = kwargs.pop("partial", False)
        obj = self.get_object()
        data = self.valid(self.write_serializer_class or self.get_serializer_class(), partial=partial, instance=obj)
        return self.respond(self.perform_update(obj, data, partial=partial))

    def destroy(self, request, *args, **kwargs):
        obj = self.get_object()
        body = request.data if isinstance(request.data, Mapping) else {}
        reason = str(body.get("reason") or request.query_params.get("reason", ""))
        self.perform_destroy(obj, reason=reason)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def perform_create(self, data: dict[str, Any]) -> Model:  # type: ignore[override]
        raise Refused("not_supported", _("This resource cannot be created through the API."))

    def perform_update(self, obj: Model, data: dict[str, Any], *, partial: bool) -> Model:  # type: ignore[override]
        raise Refused("not_supported", _("This resource cannot be changed through the API."))

    def perform_destroy(self, obj: Model, *, reason: str = "") -> None:  # type: ignore[override]
        raise Refused("not_supported", _("This resource cannot be deleted through the API."))



class RevisionsMixin:
    """``revisions/``, ``diff/?a=&b=`` and ``rollback/`` for a versioned resource.

    The viewset sets ``revision_serializer_class`` and implements ``revisions_of(obj)`` and
    ``perform_rollback(obj, number, reason) -> revision`` (its service).
    """

    revision_serializer_class: type[serializers.Serializer]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Document the subclass's revision shape: a list from ``revisions/``, one (201) from ``rollback/``."""
        super().__init_subclass__(**kwargs)
        revision = cls.__dict__.get("revision_serializer_class")
        if revision is not None:
            extend_schema_view(
                revisions=extend_schema(responses={200: revision(many=True)}),
                rollback=extend_schema(request=RollbackSerializer, responses={201: revision}),
            )(cls)

    def revisions_of(self, obj: Model) -> QuerySet:
        return obj.revisions.all()  # type: ignore[attr-defined]

    def perform_rollback(self, obj: Model, number: int, reason: str) -> Model:
        raise NotImplementedError

    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def revisions(self, request, *args, **kwargs):
        """Every revision, newest first."""
        rows = self.revisions_of(self.get_object()).order_by("-number")
        return Response(self.revision_serializer_class(rows, many=True).data)

    @extend_schema(parameters=[OpenApiParameter("a", int, required=True), OpenApiParameter("b", int, required=True)],
                   responses={200: DiffSerializer})
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def diff(self, request, *args, **kwargs):
        """What changed from revision ``a`` to revision ``b``, field by field."""
        obj = self.get_object()
        numbers = self.valid(_RevisionPair, request.query_params)
        return Response(revisions.compare(self.revisions_of(obj), numbers["a"], numbers["b"], obj))

    @action(detail=True, methods=["post"], verb="rollback")
    def rollback(self, request, *args, **kwargs):
        """A new revision equal to an old one (validated like any change); the reason is recorded."""
        obj = self.get_object()
        data = self.valid(RollbackSerializer)
        revision = self.perform_rollback(obj, data["revision"], data["reason"])
        return Response(self.revision_serializer_class(revision).data, status=status.HTTP_201_CREATED)


class _RevisionPair(serializers.Serializer):
    a = serializers.IntegerField(min_value=1)
    b = serializers.IntegerField(min_value=1)


class MeridianModelViewSet(MeridianViewSetMixin, WriteThroughServicesMixin, viewsets.ModelViewSet):
    pass


class MeridianReadOnlyViewSet(MeridianViewSetMixin, viewsets.ReadOnlyModelViewSet):
    pass


class MeridianListDestroyViewSet(MeridianViewSetMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    def destroy(self, request, *args, **kwargs):
        self.perform_destroy(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    def perform_destroy(self, obj: Model, *, reason: str = "") -> None:  # type: ignore[override]
        raise Refused("not_supported", _("This resource cannot be deleted through the API."))
