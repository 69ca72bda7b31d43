"""What every API view shares: staff-only access and bounded pagination (throttles come from settings)."""

from __future__ import annotations

from console.api.pagination import ApiPagination
from console.api.permissions import IsStaff


class StaffApiMixin:
    """Staff-only by default; a view widens access only through ``StaffOrScopedReader`` and a scoped queryset."""

    permission_classes = [IsStaff]
    pagination_class = ApiPagination
