"""``RolePermission`` refuses what it cannot decide: a method without a rule, a view without a
model, a queryset whose lookup failed. Small views built here, asked through DRF's request
cycle (``APIRequestFactory``), so the check is the one every real view gets."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.http import Http404
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from core.backends import MeridianBackend
from core.models import Job
from core.permissions import RolePermission

pytestmark = pytest.mark.django_db


class RuledView(APIView):
    """GET needs ``core.view_job``; POST and DELETE are implemented but only POST has a rule."""

    permission_classes = [RolePermission]
    required_permissions = {"GET": ["core.view_job"], "POST": ["core.cancel_job"]}

    def get(self, request):
        return Response({"ok": True})

    def post(self, request):
        return Response({"ok": True})

    def delete(self, request):
        return Response({"ok": True})


class OpenRuleView(APIView):
    """An empty rule: any signed-in user."""

    permission_classes = [RolePermission]
    required_permissions = {"GET": []}

    def get(self, request):
        return Response({"ok": True})


class ModelessView(APIView):
    """Neither a queryset nor rules: nothing to grant on."""

    permission_classes = [RolePermission]

    def get(self, request):
        return Response({"ok": True})


class FailedLookupView(APIView):
    """Its queryset needs a parent object that is not there."""

    permission_classes = [RolePermission]

    def get_queryset(self):
        raise Http404("no such parent")

    def get(self, request):
        return Response({"ok": True})


class JobsView(APIView):
    permission_classes = [RolePermission]
    queryset = Job.objects.all()

    def get(self, request):
        return Response({"ok": True})

    def put(self, request):
        return Response({"ok": True})


def call(view: type[APIView], method: str, user) -> int:
    request = getattr(APIRequestFactory(), method)("/probe/")
    force_authenticate(request, user=user)
    return view.as_view()(request).status_code


#: What each user gets from each view and method: (view, method, the user's fixture, status), asked in turn.
CASES = {
    "a method with a rule needs it": [(RuledView, "get", "viewer", 200), (RuledView, "post", "viewer", 403),
                                      (RuledView, "post", "operator", 200)],
    "a method the rules do not name is refused even to an admin": [(RuledView, "delete", "admin_user", 403)],
    "head and options follow get": [(RuledView, "head", "viewer", 200), (RuledView, "options", "viewer", 200),
                                    (RuledView, "head", "nobody", 403)],
    "a method the view does not implement is refused before its 405": [(RuledView, "patch", "admin_user", 403)],
    "an empty rule admits any signed-in user": [(OpenRuleView, "get", "nobody", 200)],
    "a view without model or rules is refused": [(ModelessView, "get", "admin_user", 403)],
    "a failed lookup is refused not let through": [(FailedLookupView, "get", "admin_user", 403)],
    # put is change_job: nobody but admins
    "model views map methods to actions": [(JobsView, "get", "viewer", 200), (JobsView, "put", "operator", 403),
                                           (JobsView, "put", "admin_user", 200)],
}


@pytest.mark.parametrize("asked", CASES.values(), ids=CASES.keys())
def test_role_permission_answers(asked, request):
    for view, method, user, status in asked:
        assert call(view, method, request.getfixturevalue(user)) == status, (view.__name__, method, user)


def test_a_read_only_token_writes_nothing_even_where_a_viewset_has_a_preview_method(operator):
    """ConfigTargetViewSet has a method named ``preview``: a truthy attribute that once let a
    read-only token past the write check on every route of the viewset."""
    from nodeconfig.models import ConfigType
    from nodeconfig.services import TargetSpec, save_target
    from tests.conftest import token_client

    target, _ = save_target(ConfigType.objects.get(name="AdminQoSConfiguration"),
                            TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}), reason="test")
    read_only = token_client(operator, write_enabled=False)
    url = f"/api/v1/nodeconfig/targets/{target.pk}/"
    assert read_only.patch(url, {"reason": "x", "priority": 0}, format="json").status_code == 403
    assert read_only.delete(url, {"reason": "x"}, format="json").status_code == 403
    assert read_only.post("/api/v1/nodeconfig/targets/", {}, format="json").status_code == 403
    assert read_only.post("/api/v1/nodeconfig/targets/import/", {"yaml": ""}, format="json").status_code == 403


def test_a_users_permissions_are_read_in_one_query_and_are_djangos(django_assert_num_queries):
    """The role check reads the user's own permissions and their groups' in one query (Django's
    backend makes two, on every request); the answer is the one Django's backend gives."""
    user = get_user_model().objects.create_user("perm-reader", password="x")
    role = Group.objects.create(name="perm-readers")
    role.permissions.add(Permission.objects.get(codename="view_job"), Permission.objects.get(codename="cancel_job"))
    user.groups.add(role)
    user.user_permissions.add(Permission.objects.get(codename="view_job"), Permission.objects.get(codename="add_group"))
    fresh = get_user_model().objects.get(pk=user.pk)
    with django_assert_num_queries(1):
        assert fresh.has_perm("core.cancel_job") and fresh.has_perm("auth.add_group") and not fresh.has_perm("core.delete_job")
    assert fresh.get_all_permissions() == {"core.view_job", "core.cancel_job", "auth.add_group"}
    django = get_user_model().objects.get(pk=user.pk)
    assert fresh.get_all_permissions() == ModelBackend().get_all_permissions(django)
    admin = get_user_model().objects.create_superuser("perm-admin", password="x")
    assert MeridianBackend().get_all_permissions(admin) == ModelBackend().get_all_permissions(
        get_user_model().objects.get(pk=admin.pk)) and len(admin.get_all_permissions()) == Permission.objects.count()
