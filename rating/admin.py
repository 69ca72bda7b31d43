"""Read-only admin for the rating ledger and posterior snapshots (changed only by rating services)."""

from __future__ import annotations

from django.contrib import admin

from rating import models as m
from studies.read_only_admin import ReadOnlyAdmin


@admin.register(m.Observation)
class ObservationAdmin(ReadOnlyAdmin):
    list_display = ("id", "study", "episode", "agent", "participant", "y", "weight", "source", "active", "task_uuid",
                    "external_id")
    list_filter = ("study", "source", "active", "agent")
    search_fields = ("participant__pseudonym", "external_id")


@admin.register(m.GradeObservation)
class GradeObservationAdmin(ReadOnlyAdmin):
    list_display = ("id", "study", "episode", "agent", "agent_family", "grader", "grader_kind", "grader_family", "y",
                    "active", "retraction_reason")
    list_filter = ("study", "grader_kind", "grader_family", "agent_family", "active")
    search_fields = ("participant__pseudonym", "grader")


class EntityRatingInline(admin.TabularInline):
    model = m.EntityRating
    extra = 0
    readonly_fields = ("entity_kind", "entity_id", "label", "mu", "sigma", "conservative", "n", "rank")
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(m.RatingSnapshot)
class RatingSnapshotAdmin(ReadOnlyAdmin):
    list_display = ("study", "version", "n_observations", "computed_at")
    list_filter = ("study",)


@admin.register(m.EntityRating)
class EntityRatingAdmin(ReadOnlyAdmin):
    list_display = ("label", "entity_kind", "rank", "mu", "sigma", "conservative", "n", "snapshot")
    list_filter = ("entity_kind", "snapshot__study")
    search_fields = ("label",)
