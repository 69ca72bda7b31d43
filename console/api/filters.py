"""Query-string filters (django-filter) for the list endpoints."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import django_filters as filters
from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django_filters.fields import IsoDateTimeField
from django_filters.rest_framework import DjangoFilterBackend

from experts.models import ExpertGrade
from grading.models import JudgeRun
from studies.models import Agent, Episode, Occupation, Participant, Study, TaskInstance
from studies.roles import EXPERT, STAFF, WORKER, has_role

# A user holding several scoped roles filters by the most restrictive one: an expert who is also a worker must
# not learn the grading state of an assignment through a worker's status filter.
SCOPED_ROLE_PRECEDENCE = (EXPERT, WORKER)


class RoleFilterBackend(DjangoFilterBackend):
    """Each role filters by a filter set of its own, never by the staff set.

    Staff get the view's ``filterset_class``. Any other role gets only the filter set the view names for it in
    ``role_filtersets`` and no filtering at all when it names none, so a staff filter added later (an agent, a
    score, a judge-derived flag) cannot become a way for a worker or a blind grader to narrow their list.
    """

    def get_filterset_class(self, view, queryset=None):
        staff_filterset = super().get_filterset_class(view, queryset)
        user = getattr(getattr(view, "request", None), "user", None)
        if staff_filterset is None or getattr(view, "swagger_fake_view", False) or has_role(user, STAFF):
            return staff_filterset
        return scoped_filterset(view, user)


def scoped_filterset(view: Any, user: Any) -> type[filters.FilterSet] | None:
    """Return the filter set a non-staff user gets on a view (None: the query string filters nothing)."""
    by_role = getattr(view, "role_filtersets", {})
    for role in SCOPED_ROLE_PRECEDENCE:
        if has_role(user, role):
            return by_role.get(role)
    return None


class UtcIsoDateTimeField(IsoDateTimeField):
    """ISO 8601 date-time converted to UTC while cleaning.

    Python accepts any offset under 24 h, PostgreSQL only up to ±15:59; the same instant in UTC keeps an
    odd offset from becoming a server error, and an instant outside the calendar is a field error.
    """

    def to_python(self, value):
        value = super().to_python(value)
        if value is not None and value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                raise ValidationError("This date-time is outside the supported range.", code="invalid")
        return value


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class StrictBooleanField(forms.NullBooleanField):
    """true/false (or 1/0); anything else is a field error instead of being silently ignored."""

    widget = forms.TextInput

    def to_python(self, value):
        if value in (None, ""):
            return None
        text = str(value).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise ValidationError("Must be true or false.", code="invalid")


class StrictBooleanFilter(filters.BooleanFilter):
    field_class = StrictBooleanField


EMPTY_MEANS_NO_FILTER = "An empty value (`?name=`) means no filter, as if the parameter were left out."


class ApiFilterSet(filters.FilterSet):
    """Filters generated from model fields refuse values of the wrong type with a 400.

    An empty value means no filter for every filter alike (the schema says so for each parameter): an HTML
    filter form, the browsable API's included, sends every field it shows, filled in or not. Without this,
    ``?status=`` was a 400 on multiple-choice filters while ``?kind=`` was ignored on the others.
    """

    FILTER_DEFAULTS = {**filters.FilterSet.FILTER_DEFAULTS, models.BooleanField: {"filter_class": StrictBooleanFilter}}

    def __init__(self, data: QueryDict | None = None, *args: Any, **kwargs: Any) -> None:
        if data is not None:
            data = data.copy()
            for name in self.base_filters:
                if name in data:
                    values = [value for value in data.getlist(name) if value != ""]
                    if values:
                        data.setlist(name, values)
                    else:
                        del data[name]
        super().__init__(data, *args, **kwargs)


class StudyFilter(ApiFilterSet):
    status = filters.MultipleChoiceFilter(choices=Study.Status.choices)

    class Meta:
        model = Study
        fields = ["status", "is_simulated"]


class OccupationFilter(ApiFilterSet):
    sector = filters.CharFilter(field_name="sector__code", help_text="Sector code.")
    q = filters.CharFilter(method="search", help_text="Part of the title, or the start of the SOC code.")

    class Meta:
        model = Occupation
        fields = ["sector"]

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(title__icontains=value) | Q(soc_code__startswith=value))


class AgentFilter(ApiFilterSet):
    study = filters.CharFilter(field_name="studies__slug", distinct=True, help_text="Study slug.")

    class Meta:
        model = Agent
        fields = ["is_active", "interface", "study"]


class TaskFilter(ApiFilterSet):
    sector = filters.CharFilter(field_name="sector__code", help_text="Sector code.")
    occupation = filters.CharFilter(field_name="occupations__soc_code", distinct=True, help_text="O*NET-SOC code.")
    study = filters.CharFilter(field_name="studies__slug", distinct=True, help_text="Study slug.")
    q = filters.CharFilter(field_name="title", lookup_expr="icontains", help_text="Part of the title.")

    class Meta:
        model = TaskInstance
        fields = ["source", "sector", "occupation", "study", "is_active"]


class ParticipantFilter(ApiFilterSet):
    study = filters.CharFilter(field_name="study__slug", help_text="Study slug.")
    status = filters.MultipleChoiceFilter(choices=Participant.Status.choices)
    occupation = filters.CharFilter(field_name="occupation__soc_code", help_text="O*NET-SOC code.")

    class Meta:
        model = Participant
        fields = ["study", "status", "occupation", "is_simulated"]


class WorkerEpisodeFilter(ApiFilterSet):
    """What a worker may filter their own episodes by: nothing that tells how grading went."""

    study = filters.CharFilter(field_name="study__slug", help_text="Study slug.")
    status = filters.MultipleChoiceFilter(choices=[(s, s) for s in Episode.WORKER_STATUSES], method="_status",
                                          help_text="`submitted` matches every grading state.")

    class Meta:
        model = Episode
        fields = ["study", "status"]

    def _status(self, queryset, name, value):
        wanted = set(value)
        if "submitted" in wanted:
            wanted |= {Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED}
        return queryset.filter(status__in=wanted)


class ExpertEpisodeFilter(ApiFilterSet):
    """What an expert may filter their assignments by: only what the blind grade page shows.

    No agent, participant, status (it tells whether automated grading has finished), review flag (derived from
    the judges) or simulation flag: a filter that narrows by a hidden attribute unblinds as surely as a field.
    """

    study = filters.CharFilter(field_name="study__slug", help_text="Study slug.")
    task = filters.UUIDFilter(field_name="task__uuid", help_text="Task UUID.")

    class Meta:
        model = Episode
        fields = ["study", "task"]


class WorkerParticipantFilter(ApiFilterSet):
    """What a worker may filter their own participations by: what their study pages show them."""

    study = filters.CharFilter(field_name="study__slug", help_text="Study slug.")
    status = filters.MultipleChoiceFilter(choices=Participant.Status.choices)

    class Meta:
        model = Participant
        fields = ["study", "status"]


class EpisodeFilter(ApiFilterSet):
    study = filters.CharFilter(field_name="study__slug", help_text="Study slug.")
    status = filters.MultipleChoiceFilter(choices=Episode.Status.choices, help_text="Repeat to match several.")
    agent = filters.CharFilter(field_name="agent__slug", help_text="Agent slug.")
    sector = filters.CharFilter(field_name="task__sector__code", help_text="Sector code of the task.")
    participant = filters.CharFilter(field_name="participant__pseudonym", help_text="Participant pseudonym.")
    task = filters.UUIDFilter(field_name="task__uuid", help_text="Task UUID.")
    submitted_after = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="lt")

    class Meta:
        model = Episode
        fields = ["study", "status", "agent", "sector", "participant", "task", "needs_expert_review", "is_simulated"]


class JudgeRunFilter(ApiFilterSet):
    study = filters.CharFilter(field_name="episode__study__slug", help_text="Study slug.")
    status = filters.MultipleChoiceFilter(choices=JudgeRun.Status.choices)
    task = filters.UUIDFilter(field_name="rubric__task__uuid", help_text="Task UUID.")

    class Meta:
        model = JudgeRun
        fields = ["episode", "study", "status", "provider", "model", "is_current", "task"]


class ExpertGradeFilter(ApiFilterSet):
    study = filters.CharFilter(field_name="episode__study__slug", help_text="Study slug.")
    expert = filters.CharFilter(field_name="expert__user__username", help_text="The expert's username.")
    status = filters.ChoiceFilter(choices=ExpertGrade.Status.choices)

    class Meta:
        model = ExpertGrade
        fields = ["episode", "study", "expert", "status", "overall"]
