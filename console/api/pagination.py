"""Page-number pagination with a bounded, client-chosen page size."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class ApiPagination(PageNumberPagination):
    """``?page=N&page_size=M`` (M ≤ 500); the default page size comes from REST_FRAMEWORK["PAGE_SIZE"].

    A page or page size that is not a positive whole number is a 400 naming the parameter (DRF would answer
    404 for the page and silently use the default size); a page past the last one stays a 404.
    """

    page_size_query_param = "page_size"
    max_page_size = 500

    def paginate_queryset(self, queryset, request, view=None):
        _positive(request, self.page_query_param, also=self.last_page_strings)
        _positive(request, self.page_size_query_param)
        return super().paginate_queryset(queryset, request, view)


def _positive(request, name: str, also: tuple[str, ...] = ()) -> None:
    raw = request.query_params.get(name)
    if raw is None or raw in also:
        return
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        raise ValidationError({name: ["Must be a whole number of 1 or more."]})
