"""Base viewsets: the shared behaviour lives once here; app viewsets stay thin."""

from __future__ import annotations

from rest_framework import mixins, viewsets


class MeridianViewSetMixin:
    #: Set per extra action via ``@action(..., action_permissions=[...])``.
    action_permissions: list[str] | None = None


class MeridianModelViewSet(MeridianViewSetMixin, viewsets.ModelViewSet):
    pass


class MeridianReadOnlyViewSet(MeridianViewSetMixin, viewsets.ReadOnlyModelViewSet):
    pass


class MeridianListDestroyViewSet(MeridianViewSetMixin, mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    pass
