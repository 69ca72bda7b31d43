"""The admin base class every app uses for ledger-like tables (kept apart from the study admin, which imports
the staff dashboard's actions, so the domain apps' admins do not reach the staff-facing layer)."""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Ledger-like tables are changed only through services, so the admin shows them read-only."""

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False
