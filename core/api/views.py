from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from .. import jobs, scopes
from ..tokens import issue_token, revoke_token
from ..filtersets import JobFilterSet, ObjectChangeFilterSet
from ..models import APIToken, Job, ObjectChange
from ..permissions import token_may_write
from ..roles import user_role
from .serializers import (
    APITokenSerializer,
    JobSerializer,
    ObjectChangeSerializer,
    TokenCreateSerializer,
    TokenRequestSerializer,
    TokenResponseSerializer,
)
from .viewsets import DryRunMixin, MeridianListDestroyViewSet, MeridianReadOnlyViewSet


class APIRootView(APIView):
    """Entry point of the REST API: each area's collections and endpoints without parameters,
    read from the URL map itself (so it links only to what exists)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(exclude=True)
    def get(self, request):
        def link(name: str) -> str:
            return reverse(name, request=request)

        return Response(
            {
                "auth": {"token": link("api:token-obtain"), "tokens": link("api:apitoken-list"), "me": link("api:me")},
                "core": {"jobs": link("api:job-list"), "audit-log": link("api:objectchange-list")},
                "configuration": {"apply": link("api:apply"), "delete": link("api:delete"), "export": link("api:export")},
                **area_links(request),
                "schema": request.build_absolute_uri("/api/schema/"),
            }
        )


def area_links(request) -> dict[str, dict[str, str]]:
    """``{area: {path: url}}`` for every app's API (``api/v1/<area>/``): its routes that take no
    parameter, in the URL map's order."""
    areas: dict[str, dict[str, str]] = {}
    root = next(p for p in get_resolver().url_patterns if isinstance(p, URLResolver) and str(p.pattern) == "api/v1/")
    for area in root.url_patterns:
        prefix = str(area.pattern).strip("/")
        if not isinstance(area, URLResolver) or not prefix:
            continue
        areas[prefix] = {
            str(route.pattern).strip("^$").rstrip("/"): reverse(f"{area.namespace}:{route.name}", request=request)
            for route in area.url_patterns
            if isinstance(route, URLPattern) and route.name and route.pattern.regex.groups == 0}
    return areas


class TokenObtainView(DryRunMixin, generics.GenericAPIView):
    """Exchange a username and password for an API token (shown once)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    serializer_class = TokenRequestSerializer

    @extend_schema(responses={201: TokenResponseSerializer})
    def post(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, raw = issue_token(data["user"], name=data.get("name", ""), write_enabled=data["write_enabled"])
        body = {"token": raw, "expires": token.expires, "write_enabled": token.write_enabled}
        return Response(TokenResponseSerializer(body).data, status=status.HTTP_201_CREATED)


class MeView(APIView):
    """Who the caller is, the role they hold fleet-wide and the roles they hold on part of it."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: dict})
    def get(self, request):
        user = request.user
        scoped = [{"role": b.role, "scope": b.scope, "names": b.names, "selector": b.selector, "source": b.source}
                  for b in scopes.bindings_of(user)]
        return Response({"username": user.get_username(), "role": user_role(user), "is_superuser": user.is_superuser,
                         "scoped_roles": scoped})


class APITokenViewSet(MeridianListDestroyViewSet):
    """The caller's own tokens: list them (without keys), issue one, revoke one."""

    serializer_class = APITokenSerializer
    permission_classes = [IsAuthenticated]
    queryset = APIToken.objects.none()

    def get_queryset(self):
        return APIToken.objects.filter(user=self.request.user)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenResponseSerializer})
    def create(self, request):
        """Issue another token for the caller (shown once). A token never mints a stronger one:
        a read-only token issues only read-only tokens, and none outliving itself, so a leaked
        key cannot be turned into a longer-lived or writing one."""
        data = self.valid(TokenCreateSerializer)
        ttl = timedelta(days=data["ttl_days"]) if data["ttl_days"] else None
        caller = request.auth if isinstance(request.auth, APIToken) else None
        if caller is not None:
            if data["write_enabled"] and not token_may_write(request):
                raise PermissionDenied("A read-only token issues only read-only tokens (write_enabled=false).")
            ttl = _within(caller, ttl)
        token, raw = issue_token(request.user, name=data["name"], write_enabled=data["write_enabled"], ttl=ttl)
        body = {"token": raw, "expires": token.expires, "write_enabled": token.write_enabled}
        return Response(TokenResponseSerializer(body).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, obj, *, reason=""):
        revoke_token(obj)


def _within(caller: APIToken, ttl: timedelta | None) -> timedelta | None:
    """``ttl`` cut down so a token issued with another token expires no later than it."""
    if caller.expires is None:
        return ttl
    left = max(caller.expires - timezone.now() - timedelta(seconds=1), timedelta(seconds=1))  # issuing takes a moment
    return min(ttl, left) if ttl is not None else min(left, timedelta(days=settings.MERIDIAN_TOKEN_TTL_DAYS))


class JobViewSet(MeridianReadOnlyViewSet):
    queryset = Job.objects.select_related("object_type")
    serializer_class = JobSerializer
    filterset_class = JobFilterSet
    ordering_fields = ["created", "finished", "kind", "status"]

    @extend_schema(request=None, responses={200: JobSerializer, 409: dict})
    @action(detail=True, methods=["post"], verb="cancel")
    def cancel(self, request, pk=None):
        """Cancel a job that has not finished and revoke its task; 409 when it already finished."""
        return self.respond(jobs.cancel_job(self.get_object()))


class ObjectChangeViewSet(MeridianReadOnlyViewSet):
    """The audit log."""

    queryset = ObjectChange.objects.select_related("object_type")
    serializer_class = ObjectChangeSerializer
    filterset_class = ObjectChangeFilterSet
    ordering_fields = ["time"]
