"""Quotas admin: read-mostly; tree changes go through the API or UI, where the rules live."""

from django.contrib import admin

from .models import QuotaCharge, QuotaGroup


@admin.register(QuotaGroup)
class QuotaGroupAdmin(admin.ModelAdmin):
    list_display = ("name", "parent", "depth", "version", "last_reconcile_time")
    search_fields = ("name",)
    readonly_fields = [f.name for f in QuotaGroup._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(QuotaCharge)
class QuotaChargeAdmin(admin.ModelAdmin):
    list_display = ("name", "namespace", "kind", "cluster", "group", "replicas", "source", "observed")
    list_filter = ("source", "observed", "kind")
    search_fields = ("name", "namespace")
    readonly_fields = [f.name for f in QuotaCharge._meta.fields]

    def has_add_permission(self, request):
        return False
