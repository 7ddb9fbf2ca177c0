"""The Administration section's list tables (``core.tables``): users with their role, API
tokens and cluster tokens (owner, prefix, scope, expiry, last use; a revoke button per live
token), and member clusters with their live token counts."""

from __future__ import annotations

from typing import Any

import django_tables2 as tables
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.roles import user_role
from core.tables import BaseTable, TimeColumn


def _post_button(request: Any, url: str, label: str, *, confirm_id: str = "") -> str:
    """A one-button form posting to ``url`` with the page's CSRF token."""
    return format_html('<form method="post" action="{}" class="inline"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
                       '<button type="submit" class="ghost" id="{}">{}</button></form>', url, get_token(request), confirm_id, label)


class UserTable(BaseTable):
    username = tables.Column(verbose_name=gettext_lazy("User"), linkify=("administration:user-detail", {"pk": tables.A("pk")}))
    name = tables.Column(verbose_name=gettext_lazy("Name"), accessor="first_name", empty_values=())
    email = tables.Column(verbose_name=gettext_lazy("Email"))
    role = tables.Column(verbose_name=gettext_lazy("Role"), accessor="pk", orderable=False, empty_values=())
    is_active = tables.Column(verbose_name=gettext_lazy("Active"))
    last_login = TimeColumn(verbose_name=gettext_lazy("Last login"), format="Y-m-d H:i")
    date_joined = TimeColumn(verbose_name=gettext_lazy("Joined"), format="Y-m-d")

    search_fields = ("username", "email", "first_name", "last_name")
    export_name = "meridian-users"

    class Meta(BaseTable.Meta):
        order_by = ("username",)
        empty_text = gettext_lazy("No users.")
        attrs = {"class": "table", "id": "user-table"}
        row_attrs = {"id": lambda record: f"user-{record.username}"}

    def render_name(self, record) -> str:
        return " ".join(part for part in (record.first_name, record.last_name) if part) or "—"

    def value_name(self, record) -> str:
        return " ".join(part for part in (record.first_name, record.last_name) if part)

    def render_role(self, record) -> str:
        role = user_role(record)
        return format_html('<span class="badge">{}</span>', role) if role else _("none")

    def value_role(self, record) -> str:
        return user_role(record) or ""

    def render_is_active(self, value: bool) -> str:
        return _("yes") if value else format_html('<span class="badge failed">{}</span>', _("deactivated"))


class TokenColumnsMixin:
    """What every token table shows after its own columns: prefix, created, expiry, last use;
    and its revoke column, shown only to whoever may revoke (``may_revoke``), posting with the
    page's CSRF token (``page_request``)."""

    def __init__(self, *args: Any, page_request: Any, may_revoke: bool, **kwargs: Any) -> None:
        self.page_request = page_request
        super().__init__(*args, exclude=() if may_revoke else ("revoke",), **kwargs)  # type: ignore[call-arg]

    def render_key_prefix(self, value: str) -> str:
        return format_html("<code>{}…</code>", value)

    def render_expires(self, value) -> str:
        if value is None:
            return _("never")
        text = value.strftime("%Y-%m-%d %H:%M")
        return format_html('<span class="badge failed">{} {}</span>', _("expired"), text) if value <= timezone.now() else text

    def render_last_used(self, value) -> str:
        return value.strftime("%Y-%m-%d %H:%M") if value else _("never")


class APITokenTable(TokenColumnsMixin, BaseTable):
    """Every user's API tokens; the revoke button for those who may (``core.delete_apitoken``)."""

    user = tables.Column(verbose_name=gettext_lazy("Owner"), accessor="user__username",
                         linkify=("administration:user-detail", {"pk": tables.A("user_id")}))
    name = tables.Column(verbose_name=gettext_lazy("Name"))
    key_prefix = tables.Column(verbose_name=gettext_lazy("Prefix"), orderable=False)
    write_enabled = tables.Column(verbose_name=gettext_lazy("Scope"))
    created = TimeColumn(verbose_name=gettext_lazy("Issued"), format="Y-m-d H:i")
    expires = tables.Column(verbose_name=gettext_lazy("Expires"))
    last_used = tables.Column(verbose_name=gettext_lazy("Last used"), empty_values=())
    revoke = tables.Column(verbose_name=gettext_lazy("Actions"), accessor="pk", orderable=False, exclude_from_export=True)

    search_fields = ("user__username", "name", "key_prefix")
    export_name = "meridian-api-tokens"

    class Meta(BaseTable.Meta):
        order_by = ("-created",)
        empty_text = gettext_lazy("No API tokens.")
        attrs = {"class": "table", "id": "apitoken-table"}
        row_attrs = {"id": lambda record: f"apitoken-{record.pk}"}

    def render_write_enabled(self, value: bool) -> str:
        return _("read-write") if value else _("read-only")

    def value_write_enabled(self, value: bool) -> str:
        return "read-write" if value else "read-only"

    def render_revoke(self, record) -> str:
        return _post_button(self.page_request, reverse("administration:apitoken-revoke", args=[record.pk]), _("Revoke"),
                            confirm_id=f"revoke-apitoken-{record.pk}")


class ClusterTokenTable(TokenColumnsMixin, BaseTable):
    """One cluster's agent and webhook tokens, revoked ones kept (with when) for the record."""

    kind = tables.Column(verbose_name=gettext_lazy("Kind"))
    name = tables.Column(verbose_name=gettext_lazy("Name"))
    key_prefix = tables.Column(verbose_name=gettext_lazy("Prefix"), orderable=False)
    created_by = tables.Column(verbose_name=gettext_lazy("Issued by"))
    created = TimeColumn(verbose_name=gettext_lazy("Issued"), format="Y-m-d H:i")
    expires = tables.Column(verbose_name=gettext_lazy("Expires"))
    last_used = tables.Column(verbose_name=gettext_lazy("Last used"), empty_values=())
    revoked = tables.Column(verbose_name=gettext_lazy("State"), empty_values=())
    revoke = tables.Column(verbose_name=gettext_lazy("Actions"), accessor="pk", orderable=False, exclude_from_export=True,
                           empty_values=())

    search_fields = ("kind", "name", "key_prefix", "created_by")
    export_name = "meridian-cluster-tokens"

    class Meta(BaseTable.Meta):
        order_by = ("-created",)
        empty_text = gettext_lazy("No tokens issued for this cluster yet.")
        attrs = {"class": "table", "id": "clustertoken-table"}
        row_attrs = {"id": lambda record: f"clustertoken-{record.pk}"}

    def render_kind(self, record) -> str:
        return record.get_kind_display()

    def render_revoked(self, record) -> str:
        if record.revoked:
            return format_html('<span class="badge failed">{} {}</span>', _("revoked"), record.revoked.strftime("%Y-%m-%d %H:%M"))
        return format_html('<span class="badge succeeded">{}</span>', _("active"))

    def value_revoked(self, record) -> str:
        return record.revoked.isoformat() if record.revoked else ""

    def render_revoke(self, record) -> str:
        if record.revoked:
            return "—"
        url = reverse("administration:clustertoken-revoke", args=[record.cluster.name, record.pk])
        return _post_button(self.page_request, url, _("Revoke"), confirm_id=f"revoke-clustertoken-{record.pk}")


class AdminClusterTable(BaseTable):
    """Member clusters with their connection state and live token counts (annotations)."""

    name = tables.Column(verbose_name=gettext_lazy("Cluster"), linkify=("administration:cluster-detail", {"name": tables.A("name")}))
    connector = tables.Column(verbose_name=gettext_lazy("Connector"))
    ready = tables.Column(verbose_name=gettext_lazy("Status"))
    kubernetes_version = tables.Column(verbose_name=gettext_lazy("Kubernetes"))
    agent_tokens = tables.Column(verbose_name=gettext_lazy("Agent tokens"))
    webhook_tokens = tables.Column(verbose_name=gettext_lazy("Webhook tokens"))
    created = TimeColumn(verbose_name=gettext_lazy("Registered"), format="Y-m-d H:i")

    search_fields = ("name", "display_name")
    export_name = "meridian-cluster-registrations"

    class Meta(BaseTable.Meta):
        order_by = ("name",)
        empty_text = gettext_lazy("No clusters registered yet.")
        attrs = {"class": "table", "id": "admin-cluster-table"}

    def render_ready(self, value: bool) -> str:
        if value:
            return format_html('<span class="badge succeeded">{}</span>', _("Ready"))
        return format_html('<span class="badge failed">{}</span>', _("Not ready"))


class AdminConfigTypeTable(BaseTable):
    """Node config types, each linking to its edit page; ``target_count`` is annotated."""

    name = tables.Column(verbose_name=gettext_lazy("Kind"), linkify=("administration:configtype-edit", {"name": tables.A("name")}))
    gvr = tables.Column(verbose_name=gettext_lazy("GVR"), accessor="resource", orderable=False)
    schema = tables.Column(verbose_name=gettext_lazy("Schema"), orderable=False, empty_values=())
    target_count = tables.Column(verbose_name=gettext_lazy("Targets"))
    updated = TimeColumn(verbose_name=gettext_lazy("Updated"), format="Y-m-d H:i")

    search_fields = ("name", "description", "resource", "group")
    export_name = "meridian-config-types"

    class Meta(BaseTable.Meta):
        order_by = ("name",)
        empty_text = gettext_lazy("No config types are registered yet.")
        attrs = {"class": "table", "id": "admin-configtype-table"}
        row_attrs = {"id": lambda record: f"configtype-{record.name}"}

    def render_gvr(self, record) -> str:
        return format_html("<code>{}</code>", record.gvr)

    def value_gvr(self, record) -> str:
        return record.gvr

    def render_schema(self, record) -> str:
        return _("yes") if record.schema else _("none")

    def value_schema(self, record) -> str:
        return "yes" if record.schema else ""


class QuotaOwnerTable(BaseTable):
    """Quota groups that have owners: who manages which subtree (``quotas.delegation``). The
    owners are changed on the group's own page, where the tree's rules are checked."""

    name = tables.Column(verbose_name=gettext_lazy("Quota group"), linkify=lambda record: record.get_absolute_url())
    path = tables.Column(verbose_name=gettext_lazy("Path"))
    owners = tables.Column(verbose_name=gettext_lazy("Owners"), accessor="pk", orderable=False, empty_values=())

    search_fields = ("name", "path", "owners__username")
    export_name = "meridian-quota-owners"

    class Meta(BaseTable.Meta):
        order_by = ("path",)
        empty_text = gettext_lazy("No quota group has owners: only operators and admins manage the tree.")
        attrs = {"class": "table", "id": "quota-owner-table"}
        row_attrs = {"id": lambda record: f"quota-owners-{record.name}"}

    def render_path(self, value: str) -> str:
        return format_html("<code>{}</code>", value)

    def render_owners(self, record) -> str:
        owners = [(reverse("administration:user-detail", args=[u.pk]), u.get_username()) for u in record.owners.all()]
        return format_html_join(", ", '<a href="{}">{}</a>', owners) if owners else "—"

    def value_owners(self, record) -> str:
        return " ".join(u.get_username() for u in record.owners.all())


class RoleBindingTable(BaseTable):
    """Scoped role bindings: who holds which role on which clusters, quota subtree or
    namespaces, and where the binding comes from (the Administration, or a provider group)."""

    user = tables.Column(verbose_name=gettext_lazy("User"), accessor="user__username",
                         linkify=("administration:user-detail", {"pk": tables.A("user_id")}))
    role = tables.Column(verbose_name=gettext_lazy("Role"))
    scope = tables.Column(verbose_name=gettext_lazy("Scope"))
    names = tables.Column(verbose_name=gettext_lazy("On"), orderable=False, empty_values=())
    source = tables.Column(verbose_name=gettext_lazy("From"))
    created = TimeColumn(verbose_name=gettext_lazy("Since"), format="Y-m-d H:i")
    revoke = tables.Column(verbose_name=gettext_lazy("Actions"), accessor="pk", orderable=False, exclude_from_export=True,
                           empty_values=())

    search_fields = ("user__username", "role", "scope", "selector", "group")
    export_name = "meridian-role-bindings"

    class Meta(BaseTable.Meta):
        order_by = ("user",)
        empty_text = gettext_lazy("No scoped roles: every role is fleet-wide.")
        attrs = {"class": "table", "id": "rolebinding-table"}
        row_attrs = {"id": lambda record: f"rolebinding-{record.pk}"}

    def __init__(self, *args: Any, page_request: Any, may_revoke: bool, **kwargs: Any) -> None:
        self.page_request = page_request
        super().__init__(*args, exclude=() if may_revoke else ("revoke",), **kwargs)

    def render_names(self, record) -> str:
        shown = ", ".join(record.names)
        if record.selector:
            shown = f"{shown} + {record.selector}" if shown else record.selector
        return format_html("<code>{}</code>", shown)

    def value_names(self, record) -> str:
        return " ".join(record.names) + (f" {record.selector}" if record.selector else "")

    def render_source(self, record) -> str:
        return record.get_source_display() + (f" ({record.group})" if record.group else "")

    def render_revoke(self, record) -> str:
        if record.source != "manual":
            return _("change the group at the provider")
        return _post_button(self.page_request, reverse("administration:rolebinding-revoke", args=[record.pk]), _("Revoke"),
                            confirm_id=f"revoke-rolebinding-{record.pk}")
