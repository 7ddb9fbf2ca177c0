"""The read-only admin site (``core.admin`` says why). Apart from ``core.admin``'s registrations:
Django builds the default site by importing this class, so its module must register nothing."""

from __future__ import annotations

from typing import Any

from django.contrib import admin


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """Viewing only: no add, change or delete, whatever the user's permissions."""

    def has_add_permission(self, request: Any, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class ReadOnlyAdminSite(admin.AdminSite):
    """The admin site every registration lands on, each wrapped read-only."""

    site_header = "Meridian (read-only)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.disable_action("delete_selected")

    def register(self, model_or_iterable: Any, admin_class: type[admin.ModelAdmin] | None = None, **options: Any) -> None:
        base = admin_class or admin.ModelAdmin
        read_only = base if issubclass(base, ReadOnlyModelAdmin) else type(f"ReadOnly{base.__name__}",
                                                                            (ReadOnlyModelAdmin, base), {})
        super().register(model_or_iterable, read_only, **options)
