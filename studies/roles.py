"""Roles (worker, expert, staff) as Django groups, and the checks views use."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission
from django.contrib.auth.views import redirect_to_login
from django.core.cache import cache
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.http.response import Http404

WORKER = "worker"
EXPERT = "expert"
STAFF = "staff"
ROLES = (WORKER, EXPERT, STAFF)

User = AbstractBaseUser | AnonymousUser

# Apps whose admin pages staff work in. Identity (PII) permissions are left out on purpose: seeing names,
# e-mails or recruitment ids is a separate, explicit grant (it also gates identifying exports).
STAFF_APPS = ("studyapp", "grading", "experts", "rating", "surveys", "authtoken")
PII_PERMISSION = "studyapp.view_participantidentity"
PII_CODENAMES = ("view_participantidentity", "change_participantidentity", "add_participantidentity",
                 "delete_participantidentity")


def has_role(user: Any, role: str) -> bool:
    """Return whether the user holds a role; staff accounts (is_staff) always count as staff."""
    if not getattr(user, "is_authenticated", False):
        return False
    if role == STAFF and (user.is_staff or user.is_superuser):
        return True
    held = getattr(user, "_role_cache", None)
    if held is None:
        held = set(user.groups.values_list("name", flat=True))
        user._role_cache = held
    return role in held


# The menu's links are shown from roles remembered this long per account: a link only (every page checks the
# role itself with has_role), so a worker page does not pay a query for its menu.
NAVIGATION_ROLES_SECONDS = 60


def _navigation_key(user: Any) -> str:
    """Per account, and per its staff flags so that a change to them shows at once; the join time tells apart two
    accounts that got the same id (SQLite reuses the ids of rolled-back rows)."""
    joined = user.date_joined.timestamp() if getattr(user, "date_joined", None) else 0
    return f"nav-roles:{user.pk}:{joined}:{int(bool(user.is_staff))}{int(bool(user.is_superuser))}"


def navigation_roles(user: Any) -> frozenset[str]:
    """The roles whose links the menu shows (at most a minute old; granting a role here clears it at once)."""
    if not getattr(user, "is_authenticated", False):
        return frozenset()
    key = _navigation_key(user)
    roles = cache.get(key)
    if not isinstance(roles, frozenset):
        roles = frozenset(role for role in ROLES if has_role(user, role))
        cache.set(key, roles, NAVIGATION_ROLES_SECONDS)
    return roles


def grant_role(user: Any, role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    group, _ = Group.objects.get_or_create(name=role)
    user.groups.add(group)
    if role == STAFF:
        staff_permissions_sync()
        if not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
    if hasattr(user, "_role_cache"):
        del user._role_cache
    cache.delete(_navigation_key(user))


def staff_permissions_sync() -> int:
    """Give the staff group every permission of the study apps except PII; return how many it holds.

    Permissions exist only after migrate's post-migrate step, so this runs when someone is made staff
    rather than in a migration.
    """
    group, _ = Group.objects.get_or_create(name=STAFF)
    wanted = Permission.objects.filter(content_type__app_label__in=STAFF_APPS).exclude(
        Q(content_type__app_label="studyapp") & Q(codename__in=PII_CODENAMES)
    )
    group.permissions.add(*wanted)
    return group.permissions.count()


def role_required(role: str) -> Callable:
    """Require a role; anonymous users go to login, others get a 404 so nothing is revealed."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise Http404
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def can_export_pii(user: Any) -> bool:
    """Return whether the user may see identities (email, name, recruitment-platform id) in exports."""
    return bool(user and user.is_active and (user.is_superuser or user.has_perm(PII_PERMISSION)))


def file_jobs_visible(jobs: QuerySet, user: Any) -> QuerySet:
    """Leave out jobs whose file holds identities unless the user may see identities.

    The one check behind every route to a job (dashboard, API, admin), so a job the user may not open is
    neither listed nor shown nor served, whatever its status.
    """
    if can_export_pii(user):
        return jobs
    # Only jobs that say they hold no identities, or say nothing (analyses), pass: anything else stays hidden.
    return jobs.filter(Q(params__include_pii=False) | Q(params__include_pii__isnull=True))


staff_required = role_required(STAFF)
expert_required = role_required(EXPERT)
