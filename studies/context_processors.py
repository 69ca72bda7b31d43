"""Per-role navigation for the base layout."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import reverse

from studies.roles import EXPERT, STAFF, WORKER, navigation_roles

# (role, label, url name). Every name must resolve: a typo fails every page loudly instead of hiding a link.
NAV_ITEMS: tuple[tuple[str, str, str], ...] = (
    (WORKER, "My study", "worker:home"),
    (EXPERT, "Expert workspace", "expert:home"),
    (STAFF, "Dashboard", "dashboard:index"),
    (STAFF, "Experts and rubrics", "expert:staff_experts"),
    (STAFF, "Admin", "admin:index"),
    (STAFF, "API docs", "api-docs"),
)


def navigation(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    roles = navigation_roles(user) if user is not None else frozenset()
    return {"nav_items": [{"label": label, "url": reverse(name), "role": role}
                          for role, label, name in NAV_ITEMS if role in roles]}
