from django.contrib import admin

from .models import APIToken, Job, ObjectChange


@admin.register(APIToken)
class APITokenAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "user", "name", "write_enabled", "created", "expires", "last_used"]
    readonly_fields = ["key_prefix", "key_hash", "created", "last_used"]
    list_filter = ["write_enabled"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "status", "triggered_by", "created", "finished"]
    list_filter = ["status", "kind"]
    readonly_fields = [f.name for f in Job._meta.fields]


@admin.register(ObjectChange)
class ObjectChangeAdmin(admin.ModelAdmin):
    list_display = ["time", "actor", "source", "action", "verb", "object_repr"]
    list_filter = ["action", "source"]
    search_fields = ["actor", "object_repr", "reason"]
    readonly_fields = [f.name for f in ObjectChange._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
