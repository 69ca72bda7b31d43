"""Who may call which endpoint, and which rows each role sees.

The API is staff-only. A few read endpoints also serve workers and experts, each scoped in the queryset so
another person's object is simply not found (404): a worker reads their own participations and episodes,
an expert the episodes assigned to them and their own grades. Evaluator data (scores, rubrics, judge runs,
hidden task files, hidden info) never leaves through those scoped views.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from rest_framework.permissions import SAFE_METHODS, BasePermission

from experts.models import ExpertAssignment, ExpertGrade
from studies.models import Episode, EpisodeFile, Participant, TaskInstance
from studies.roles import EXPERT, STAFF, WORKER, has_role


def is_staff(user: Any) -> bool:
    return has_role(user, STAFF)


class IsStaff(BasePermission):
    """Staff accounts only (the is_staff flag or the staff role)."""

    message = "Only study staff may use this endpoint."

    def has_permission(self, request, view) -> bool:
        return is_staff(request.user)


class StaffOrScopedReader(BasePermission):
    """Staff may do anything the view offers; holders of the view's ``scoped_roles`` may read.

    The view must narrow its queryset for non-staff users (see the ``visible_*`` functions).
    """

    message = "Only study staff may use this endpoint."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if is_staff(user):
            return True
        if request.method not in SAFE_METHODS:
            return False
        return any(has_role(user, role) for role in getattr(view, "scoped_roles", ()))


def _active_assignments() -> QuerySet[ExpertAssignment]:
    return ExpertAssignment.objects.exclude(status=ExpertAssignment.Status.CANCELLED)


def visible_episodes(user: Any, queryset: QuerySet[Episode]) -> QuerySet[Episode]:
    """Narrow episodes to what the user may read: all (staff), their own (worker), assigned (expert)."""
    if is_staff(user):
        return queryset
    scope = Q(pk__in=[])
    if has_role(user, WORKER):
        scope |= Q(participant__user=user)
    if has_role(user, EXPERT):
        scope |= Q(pk__in=_active_assignments().filter(expert__user=user).values("episode_id"))
    return queryset.filter(scope)


def visible_participants(user: Any, queryset: QuerySet[Participant]) -> QuerySet[Participant]:
    """Staff read every participant; anyone else only their own participations."""
    if is_staff(user):
        return queryset
    return queryset.filter(user=user) if has_role(user, WORKER) else queryset.none()


def visible_expert_grades(user: Any, queryset: QuerySet[ExpertGrade]) -> QuerySet[ExpertGrade]:
    """Staff read every expert grade; an expert only their own."""
    if is_staff(user):
        return queryset
    return queryset.filter(expert__user=user) if has_role(user, EXPERT) else queryset.none()


def visible_reference_tasks(user: Any, queryset: QuerySet[TaskInstance]) -> QuerySet[TaskInstance]:
    """Narrow tasks whose reference files the user may read: any (staff), those of their own or assigned episodes."""
    if is_staff(user):
        return queryset
    episodes = visible_episodes(user, Episode.objects.all())
    return queryset.filter(pk__in=episodes.values("task_id"))


def episode_file_kinds(user: Any, episode: Episode) -> set[str] | None:
    """Return the file kinds of a visible episode the user may download (None: every kind)."""
    if is_staff(user) or (has_role(user, WORKER) and episode.participant.user_id == user.pk):
        return None
    return {EpisodeFile.Kind.DELIVERABLE}
