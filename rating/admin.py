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
    list_display = ("study", "version", "produced_by", "base", "n_observations", "computed_at",
                    "participants_removed_at")
    list_filter = ("study", "produced_by")


@admin.register(m.LedgerChange)
class LedgerChangeAdmin(ReadOnlyAdmin):
    """The queue of live updates: normally empty a second after a grade."""

    list_display = ("id", "study", "observation_id", "participant_id", "was_active", "old_agent_id", "old_y",
                    "created_at")
    list_filter = ("study",)


@admin.register(m.PosteriorState)
class PosteriorStateAdmin(ReadOnlyAdmin):
    """Which refit a study's live updates rest on, and how many there have been since."""

    list_display = ("study", "live", "refit", "snapshot", "updates", "refitted_at", "updated_at")
    list_filter = ("live",)
    exclude = ("data",)


@admin.register(m.EntityRating)
class EntityRatingAdmin(ReadOnlyAdmin):
    list_display = ("label", "entity_kind", "rank", "mu", "sigma", "conservative", "n", "snapshot")
    list_filter = ("entity_kind", "snapshot__study")
    search_fields = ("label",)


@admin.register(m.PendingRatingRows)
class PendingRatingRowsAdmin(ReadOnlyAdmin):
    """Refits whose participants' rows were committed ahead of the snapshot: cleared by the next rating sweep."""

    list_display = ("snapshot_id", "rows", "created_at")
