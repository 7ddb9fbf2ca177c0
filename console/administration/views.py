"""The Administration section's pages (admins only).

Reading any of them needs ``auth.view_user``, which only the admin role holds
(``core.roles``: viewers and operators hold Meridian's permissions, never ``auth``'s); each
write also needs its own permission through ``core.permissions.may`` (``auth.add_user``,
``core.add_apitoken``, ``fleet.add_cluster``, ``fleet.add_clustertoken``, …). Every write calls
the service the REST API calls, so a refusal reads the same and lands on the form, nothing is
half applied, and the audit entry is the same.

A token's key is shown once: in the answer to the POST that issued it (``Cache-Control:
no-store``, never a redirect to a page that could show it again). Only its prefix is stored
in readable form.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.functional import cached_property
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.generic import FormView, TemplateView

from core import bindings, concurrency, users
from core.errors import Refused
from core.forms import add_refusal
from core.models import APIToken, RoleBinding
from core.permissions import may
from core.roles import user_role
from core.tables import TableMixin, build_table, paginate
from core.tokens import issue_token as issue_api_token
from core.tokens import revoke_token as revoke_api_token
from core.views import PermissionMixin
from fleet import services as fleet_services
from fleet import tokens as cluster_tokens
from fleet import webhooks
from fleet.models import Cluster, ClusterToken
from kube.manifests import dump_documents
from nodeconfig import services as nodeconfig_services
from nodeconfig.models import ConfigType
from quotas.models import QuotaGroup
from quotas.webhook import CONFIGURATION as QUOTAS_WEBHOOK
from scheduling.webhook import CONFIGURATION as SCHEDULING_WEBHOOK

from .forms import (
    APITokenIssueForm,
    ClusterRegisterForm,
    ClusterTokenIssueForm,
    ConfigTypeForm,
    RoleBindingForm,
    RoleBindingRevokeForm,
    UserActiveForm,
    UserCreateForm,
    UserRoleForm,
    WebhookURLForm,
)
from .tables import (
    AdminClusterTable,
    AdminConfigTypeTable,
    APITokenTable,
    ClusterTokenTable,
    QuotaOwnerTable,
    RoleBindingTable,
    UserTable,
)

User = get_user_model()
WEBHOOKS = {"quotas": QUOTAS_WEBHOOK, "scheduling": SCHEDULING_WEBHOOK}


class AdminMixin(PermissionMixin):
    """Admins only: every administration page needs ``auth.view_user`` first (the page's own
    model alone would let an operator who views clusters into the clusters' administration);
    then the one page rule of ``PermissionMixin``."""

    model: type = User

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not may(request.user, "view", User):
            raise PermissionDenied
        return super().dispatch(request, *args, **kwargs)


def shown_once(request, template: str, context: dict[str, Any]) -> HttpResponse:
    """The page carrying a freshly issued key: never cached, by the browser or anyone between."""
    response = TemplateResponse(request, template, context)
    add_never_cache_headers(response)
    response["Cache-Control"] = "no-store, " + response["Cache-Control"]
    return response


class AdminIndexView(AdminMixin, TemplateView):
    template_name = "console/administration/index.html"

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {
            "user_count": User.objects.count(), "active_user_count": User.objects.filter(is_active=True).count(),
            "token_count": APIToken.objects.active().count(), "cluster_count": Cluster.objects.count(),
            "configtype_count": ConfigType.objects.count(),
        }


class AddableListMixin(AdminMixin, TableMixin):
    """A table page with an add button for whoever may add (users, clusters, config types)."""

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"may_add": self.can("add")}


# ------------------------------------------------------------------------------------------ users

class UserListView(AddableListMixin, TemplateView):
    template_name = "console/administration/user_list.html"
    table_class = UserTable

    def get_table_queryset(self):
        return User.objects.prefetch_related("groups")


class UserCreateView(AdminMixin, FormView):
    action = "add"
    template_name = "console/administration/user_form.html"
    form_class = UserCreateForm

    def form_valid(self, form):
        data = form.cleaned_data
        try:
            user = users.create_user(username=data["username"], password=data["password"], email=data["email"],
                                     first_name=data["first_name"], last_name=data["last_name"], role=data["role"] or None)
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        messages.success(self.request, _("Created user %(user)s.") % {"user": user.get_username()})
        return redirect("administration:user-detail", pk=user.pk)


class UserDetailView(AdminMixin, TemplateView):
    """One user: their role (and the form changing it), active or not, and their API tokens."""

    template_name = "console/administration/user_detail.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        person = get_object_or_404(User.objects.prefetch_related("groups"), pk=self.kwargs["pk"])
        role = user_role(person) or ""
        table = build_table(self.request, APITokenTable, APIToken.objects.filter(user=person).select_related("user"),
                            page_request=self.request, may_revoke=may(self.request.user, "delete", APIToken))
        paginate(self.request, table)
        context.update(person=person, role=role, table=table, may_change=self.can("change"),
                       owned_groups=list(person.owned_quota_groups.order_by("path")),
                       may_issue=may(self.request.user, "add", APIToken),
                       bindings=list(person.role_bindings.order_by("scope", "pk")),
                       may_bind=may(self.request.user, "add", RoleBinding),
                       may_unbind=may(self.request.user, "delete", RoleBinding),
                       sso_identities=list(person.identities.order_by("issuer")))
        context.setdefault("binding_form", RoleBindingForm(prefix="binding"))
        context.setdefault("role_form", UserRoleForm(prefix="role", initial={"role": role}))
        context.setdefault("active_form", UserActiveForm(prefix="active", initial={"active": "0" if person.is_active else "1"}))
        return context


class UserChangeView(UserDetailView):
    """POST: a user's role (``role-…``) or active state (``active-…``); a refusal comes back on
    the user's page with the form that asked."""

    action = "change"
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        person = get_object_or_404(User, pk=kwargs["pk"])
        which = "role" if any(key.startswith("role-") for key in request.POST) else "active"
        form = (UserRoleForm if which == "role" else UserActiveForm)(request.POST, prefix=which)
        if form.is_valid():
            data = form.cleaned_data
            try:
                if which == "role":
                    users.set_role(person, data["role"] or None, reason=data["reason"])
                    messages.success(request, _("%(user)s's role is now %(role)s.")
                                     % {"user": person.get_username(), "role": data["role"] or _("none")})
                else:
                    users.set_active(person, data["active"], reason=data["reason"])
                    text = _("Reactivated %(user)s.") if data["active"] else _("Deactivated %(user)s: they can no longer "
                                                                                 "sign in, and their API tokens are refused.")
                    messages.success(request, text % {"user": person.get_username()})
            except Refused as exc:
                add_refusal(form, exc)
            else:
                return redirect("administration:user-detail", pk=person.pk)
        return self.render_to_response(self.get_context_data(**{f"{which}_form": form}))


# ----------------------------------------------------------------------------------- scoped roles

class RoleBindingGrantView(UserDetailView):
    """POST: give the user a role on clusters, a quota subtree or namespaces (``core.bindings``);
    a refusal comes back on the user's page with the form."""

    model = RoleBinding
    action = "add"
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        person = get_object_or_404(User, pk=kwargs["pk"])
        form = RoleBindingForm(request.POST, prefix="binding")
        if form.is_valid():
            try:
                binding = bindings.grant(person, form.grant(), reason=form.cleaned_data["reason"])
            except Refused as exc:
                add_refusal(form, exc)
            else:
                messages.success(request, _("%(user)s is now %(binding)s.") % {"user": person.get_username(), "binding": binding})
                return redirect("administration:user-detail", pk=person.pk)
        return self.render_to_response(self.get_context_data(binding_form=form))


class RevocableListMixin(AdminMixin, TableMixin):
    """A table of what users were given (roles, tokens), each row with its revoke button."""

    def get_table_queryset(self):
        return self.model.objects.select_related("user")

    def table_kwargs(self):
        return {"page_request": self.request, "may_revoke": self.can("delete")}


class RevokeView(AdminMixin, TemplateView):
    """The revoke button of a ``RevocableListMixin`` row: a POST on one of ``model``'s rows,
    which ``revoke`` handles and answers with where to go next."""

    action = "delete"
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        return redirect(self.revoke(get_object_or_404(self.model.objects.select_related("user"), pk=kwargs["pk"])))

    def revoke(self, obj) -> str:
        raise NotImplementedError


class RoleBindingListView(RevocableListMixin, TemplateView):
    """Every scoped role in one table (searchable, exportable)."""

    model = RoleBinding
    template_name = "console/administration/rolebinding_list.html"
    table_class = RoleBindingTable


class RoleBindingRevokeView(RevokeView):
    model = RoleBinding

    def revoke(self, binding: RoleBinding) -> str:
        if binding.source != RoleBinding.Source.MANUAL:
            messages.error(self.request, _("This role comes from the provider group %(group)s: it returns at the next sign-in; "
                                           "remove the user from the group at the provider.") % {"group": binding.group})
        else:
            bindings.revoke(binding, reason=RoleBindingRevokeForm(self.request.POST).data.get("reason", ""))
            messages.success(self.request, _("Revoked: %(user)s is no longer %(binding)s.")
                             % {"user": binding.user.get_username(), "binding": binding})
        return reverse("administration:user-detail", kwargs={"pk": binding.user_id})


# ------------------------------------------------------------------------------------- API tokens

class APITokenListView(RevocableListMixin, TemplateView):
    model = APIToken
    template_name = "console/administration/apitoken_list.html"
    table_class = APITokenTable

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"may_issue": self.can("add")}


class APITokenIssueView(AdminMixin, FormView):
    """Issue a token for a user; the answer shows its key, once."""

    model = APIToken
    action = "add"
    template_name = "console/administration/apitoken_form.html"
    form_class = APITokenIssueForm

    def get_initial(self):
        owner = self.request.GET.get("user", "")
        return {"user": owner} if owner.isdigit() else {}

    def form_valid(self, form):
        data = form.cleaned_data
        token, raw = issue_api_token(data["user"], name=data["name"], write_enabled=not data["read_only"],
                                     ttl=timedelta(days=data["days"]))
        return shown_once(self.request, "console/administration/token_issued.html",
                          {"token": token, "raw": raw, "owner": data["user"], "kind": _("API token"),
                           "back": reverse("administration:apitoken-list"), "usage": "Authorization: Token <token>"})


class APITokenRevokeView(RevokeView):
    model = APIToken

    def revoke(self, token: APIToken) -> str:
        revoke_api_token(token)
        request = self.request
        messages.success(request, _("Revoked %(owner)s's token %(prefix)s…; it is refused from now on.")
                         % {"owner": token.user.get_username(), "prefix": token.key_prefix})
        back = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
            back = reverse("administration:apitoken-list")
        return back


# --------------------------------------------------------------------------------------- clusters

class ClusterAdminListView(AddableListMixin, TemplateView):
    model = Cluster
    template_name = "console/administration/cluster_list.html"
    table_class = AdminClusterTable

    def get_table_queryset(self):
        live = Q(tokens__revoked__isnull=True)
        return Cluster.objects.annotate(agent_tokens=Count("tokens", filter=live & Q(tokens__kind="agent")),
                                        webhook_tokens=Count("tokens", filter=live & Q(tokens__kind="webhook")))


class ClusterRegisterView(AdminMixin, FormView):
    """Register a member cluster from a kubeconfig. "Test connection" reaches its API server
    and says what answered (or why nothing did), saving nothing; "Register" tries again and
    saves (``fleet.services.register_cluster``)."""

    model = Cluster
    action = "add"
    template_name = "console/administration/cluster_form.html"
    form_class = ClusterRegisterForm

    def form_valid(self, form):
        values = form.values()
        if "test" in self.request.POST:
            try:
                info = fleet_services.try_connection(values)
            except Refused as exc:
                return self.render_to_response(self.get_context_data(form=form, test={"ok": False, "error": exc.detail}))
            return self.render_to_response(self.get_context_data(
                form=form, test={"ok": True, "version": info.kubernetes_version or "?", "resources": len(info.api_resources)}))
        try:
            cluster = fleet_services.register_cluster(values)
        except Refused as exc:
            add_refusal(form, exc)
            return self.render_to_response(self.get_context_data(form=form, test={"ok": False, "error": exc.detail}))
        messages.success(self.request, _("Registered %(cluster)s; its first sync is queued.") % {"cluster": cluster.name})
        return redirect("administration:cluster-detail", name=cluster.name)


class ClusterAdminView(AdminMixin, TemplateView):
    """A cluster's agent and webhook tokens (issue, revoke) and its webhook configurations
    (Meridian's URL as the cluster reaches it, then preview and download)."""

    model = ClusterToken
    template_name = "console/administration/cluster_detail.html"

    def get_cluster(self) -> Cluster:
        return get_object_or_404(Cluster, name=self.kwargs["name"])

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        cluster = self.get_cluster()
        table = build_table(self.request, ClusterTokenTable, ClusterToken.objects.filter(cluster=cluster).select_related("cluster"),
                            page_request=self.request, may_revoke=self.can("change"))
        paginate(self.request, table)
        url_form = WebhookURLForm(self.request.GET or None)
        base_url = url_form.cleaned_data["base_url"] if url_form.is_bound and url_form.is_valid() else ""
        context.update(cluster=cluster, table=table, may_issue=self.can("add"), url_form=url_form,
                       webhooks=webhook_previews(cluster, base_url), base_url=base_url)
        context.setdefault("token_form", ClusterTokenIssueForm(prefix="token"))
        return context


def webhook_previews(cluster: Cluster, base_url: str) -> dict[str, Any]:
    """Both webhook configurations as YAML, or the refusal saying what is missing (the URL)."""
    try:
        documents = webhook_documents(cluster, base_url)
    except Refused as exc:
        return {"error": exc.detail}
    return {"yaml": dump_documents(documents), "names": [d["metadata"]["name"] for d in documents[:2]]}


def webhook_documents(cluster: Cluster, base_url: str) -> list[dict[str, Any]]:
    """The quota and scheduling webhook configurations, then the API server's two token files."""
    shown = [webhooks.preview(cluster, config, base_url=base_url or None) for config in WEBHOOKS.values()]
    files = shown[0].files
    return [s.configuration for s in shown] + [files["admission_configuration"], files["kubeconfig"]]


class ClusterTokenIssueView(ClusterAdminView):
    """Issue an agent or webhook token; the answer shows its key, once."""

    action = "add"
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        cluster = self.get_cluster()
        form = ClusterTokenIssueForm(request.POST, prefix="token")
        if not form.is_valid():
            return self.render_to_response(self.get_context_data(token_form=form))
        data = form.cleaned_data
        token, raw = cluster_tokens.issue_token(cluster, data["kind"], name=data["name"], rotate=data["rotate"])
        return shown_once(request, "console/administration/token_issued.html",
                          {"token": token, "raw": raw, "cluster": cluster, "kind": token.get_kind_display(),
                           "back": reverse("administration:cluster-detail", args=[cluster.name]),
                           "usage": "Authorization: Bearer <token>"})


class ClusterTokenRevokeView(AdminMixin, TemplateView):
    model = ClusterToken
    action = "change"
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        token = get_object_or_404(ClusterToken.objects.select_related("cluster"), pk=kwargs["pk"], cluster__name=kwargs["name"])
        if cluster_tokens.revoke_token(token):
            messages.success(request, _("Revoked %(kind)s token %(prefix)s…; it is refused from now on.")
                             % {"kind": token.get_kind_display(), "prefix": token.key_prefix})
        else:
            messages.info(request, _("That token was already revoked."))
        return redirect("administration:cluster-detail", name=token.cluster.name)


class WebhookDownloadView(AdminMixin, TemplateView):
    """The cluster's webhook configurations and token files as one YAML file to apply."""

    model = Cluster

    def get(self, request, *args, **kwargs):
        cluster = get_object_or_404(Cluster, name=kwargs["name"])
        form = WebhookURLForm(request.GET)
        form.is_valid()
        try:
            documents = webhook_documents(cluster, form.cleaned_data.get("base_url", ""))
        except Refused as exc:
            return HttpResponse(exc.detail, status=400, content_type="text/plain; charset=utf-8")
        response = HttpResponse(dump_documents(documents), content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="meridian-webhooks-{cluster.name}.yaml"'
        return response


# ---------------------------------------------------------------------------------- config types

class ConfigTypeListView(AddableListMixin, TemplateView):
    model = ConfigType
    template_name = "console/administration/configtype_list.html"
    table_class = AdminConfigTypeTable

    def get_table_queryset(self):
        return ConfigType.objects.annotate(target_count=Count("targets", filter=Q(targets__deleted=False)))


class ConfigTypeFormView(AdminMixin, FormView):
    """Register a node config type, or change one (``name`` given); the service checks the
    JSON schema and the default body against it and revalidates the type's targets. The
    form's ``etag`` holds the type as it was read: a save after someone else's is refused."""

    model = ConfigType
    template_name = "console/administration/configtype_form.html"
    form_class = ConfigTypeForm

    @property
    def action(self) -> str:  # type: ignore[override]
        return "change" if "name" in self.kwargs else "add"

    @cached_property
    def instance(self) -> ConfigType | None:
        """The type being changed (looked up after the permission check), None for a new one."""
        return get_object_or_404(ConfigType, name=self.kwargs["name"]) if "name" in self.kwargs else None

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs() | {"instance": self.instance}
        if self.instance is not None:
            kwargs["initial"] = {"etag": concurrency.etag(self.instance)}
        return kwargs

    def form_valid(self, form):
        try:
            if self.instance is None:
                saved = nodeconfig_services.save_config_type(form.values())
            else:
                with concurrency.expecting(self.instance, form.cleaned_data.get("etag") or None):
                    saved = nodeconfig_services.save_config_type(form.values(), instance=self.instance)
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        messages.success(self.request, (_("Saved config type %(name)s.") if self.instance else
                                        _("Registered config type %(name)s.")) % {"name": saved.name})
        return redirect("administration:configtype-list")

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"config_type": self.instance}


# ---------------------------------------------------------------------------------- quota owners

class QuotaOwnerListView(AdminMixin, TableMixin, TemplateView):
    """Who may manage which quota subtree: every group with owners, each linking to its page
    (where owners are changed under the tree's rules) and each owner to their user page."""

    model = QuotaGroup
    template_name = "console/administration/quota_owners.html"
    table_class = QuotaOwnerTable

    def get_table_queryset(self):
        owned = QuotaGroup.objects.filter(owners__isnull=False).values("pk")
        return QuotaGroup.objects.filter(pk__in=owned).prefetch_related("owners")
