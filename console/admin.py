"""Admin for every study-domain model; research rows are searchable by pseudonym, never by PII."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from console.dashboard.admin_actions import export_selected_studies, payouts_for_selected_studies
from studies import models as m
from studies.model_families import family_from_name
from studies.read_only_admin import ReadOnlyAdmin
from studies.roles import file_jobs_visible


class ConsentVersionInline(admin.StackedInline):
    model = m.ConsentVersion
    extra = 0


class SectorFallbackInline(admin.TabularInline):
    model = m.SectorFallback
    fk_name = "study"
    extra = 0


@admin.register(m.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = (
        "name", "slug", "status", "is_simulated", "tasks_per_session", "score_source", "rating_model", "created_at"
    )
    list_filter = ("status", "is_simulated", "score_source", "rating_model")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [ConsentVersionInline, SectorFallbackInline]
    actions = [export_selected_studies, payouts_for_selected_studies]

    def get_readonly_fields(self, request: Any, obj: Any = None) -> tuple[str, ...]:
        # A running study's pairing design changes only on the leaderboard's design panel, which audits it.
        extra = ("design_mode", "design_floor", "design_repeat_limit") if obj is not None else ()
        return (*super().get_readonly_fields(request, obj), *extra)


@admin.register(m.ConsentVersion)
class ConsentVersionAdmin(admin.ModelAdmin):
    list_display = ("study", "version", "requires_reconsent", "created_at")
    list_filter = ("study", "requires_reconsent")
    search_fields = ("study__name", "text")


@admin.register(m.Sector)
class SectorAdmin(admin.ModelAdmin):
    list_display = ("name", "code")
    search_fields = ("name", "code")


@admin.register(m.Occupation)
class OccupationAdmin(admin.ModelAdmin):
    list_display = ("title", "soc_code", "sector", "hourly_wage_usd")
    list_filter = ("sector",)
    search_fields = ("title", "soc_code")


@admin.register(m.SectorFallback)
class SectorFallbackAdmin(admin.ModelAdmin):
    list_display = ("study", "from_sector", "to_sector", "priority")
    list_filter = ("study",)


@admin.register(m.Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("pseudonym", "study", "status", "occupation", "years_experience", "is_simulated",
                    "last_activity_at")
    list_filter = ("study", "status", "is_simulated")
    search_fields = ("pseudonym",)
    raw_id_fields = ("user", "occupation", "consent_version")
    readonly_fields = ("pseudonym", "created_at")


@admin.register(m.ParticipantIdentity)
class ParticipantIdentityAdmin(admin.ModelAdmin):
    list_display = ("participant", "platform", "study")
    list_filter = ("study", "platform")
    search_fields = ("participant__pseudonym", "email", "platform_worker_id")
    raw_id_fields = ("participant",)


@admin.register(m.ConsentRecord)
class ConsentRecordAdmin(ReadOnlyAdmin):
    list_display = ("participant", "consent_version", "accepted", "decided_at")
    list_filter = ("accepted",)
    search_fields = ("participant__pseudonym",)


@admin.register(m.StepVisit)
class StepVisitAdmin(ReadOnlyAdmin):
    list_display = ("participant", "step", "episode", "started_at", "last_seen_at")
    list_filter = ("step",)
    search_fields = ("participant__pseudonym",)


class AgentForm(forms.ModelForm):
    """The agent form; a blank model family is filled in from the agent's names (studies/model_families.py)."""

    class Meta:
        model = m.Agent
        fields = ("name", "slug", "product", "model_version", "family", "interface", "setup_guide", "tutorial_url",
                  "log_instructions", "log_mode", "log_format", "share_url_hosts", "is_active", "studies")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not (data.get("family") or "").strip():
            data["family"] = family_from_name(data.get("model_version", ""), data.get("product", ""),
                                              data.get("name", ""))
        else:
            data["family"] = data["family"].strip().lower()
        return data


@admin.register(m.Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = ("name", "product", "model_version", "family", "interface", "log_mode", "log_format",
                    "is_active")
    list_filter = ("interface", "log_mode", "family", "is_active")
    search_fields = ("name", "product", "model_version")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("studies",)


class TaskFileInline(admin.TabularInline):
    model = m.TaskFile
    extra = 0
    readonly_fields = ("size", "sha256", "content_type")


@admin.register(m.TaskInstance)
class TaskInstanceAdmin(admin.ModelAdmin):
    list_display = ("title", "uuid", "source", "sector", "is_active")
    list_filter = ("source", "sector", "is_active")
    search_fields = ("title", "uuid", "prompt")
    filter_horizontal = ("occupations", "studies")
    inlines = [TaskFileInline]


@admin.register(m.TaskFile)
class TaskFileAdmin(admin.ModelAdmin):
    list_display = ("name", "task", "kind", "size")
    list_filter = ("kind",)
    search_fields = ("name", "task__title")
    raw_id_fields = ("task",)


class EpisodeFileInline(admin.TabularInline):
    model = m.EpisodeFile
    extra = 0
    readonly_fields = ("kind", "name", "size", "sha256", "content_type", "uploaded_at")
    exclude = ("file",)

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(m.Episode)
class EpisodeAdmin(admin.ModelAdmin):
    list_display = ("id", "participant", "agent", "condition", "task", "position", "status", "score",
                    "score_source", "needs_expert_review", "timed_out", "expert_grading")
    list_filter = ("study", "status", "condition", "skip_reason", "agent", "needs_expert_review", "timed_out",
                   "is_simulated", "score_source")
    search_fields = ("participant__pseudonym", "task__title")
    raw_id_fields = ("participant", "task", "agent", "study")
    # Scores change only through grading services so every change is audited.
    readonly_fields = ("score", "score_source", "submitted_at", "assigned_at", "design_mode", "assignment_probability",
                       "condition", "condition_order", "condition_order_probability", "used_ai_anyway")
    inlines = [EpisodeFileInline]
    list_select_related = ("participant", "agent", "task")

    @admin.display(description="Expert grading")
    def expert_grading(self, episode: m.Episode) -> str:
        """Link to the staff page where the episode is sent to an expert chosen by name."""
        if episode.is_simulated:
            return "—"
        return format_html('<a href="{}#assign">Grades / send to an expert</a>',
                           reverse("expert:staff_episode", args=[episode.pk]))


@admin.register(m.EpisodeFile)
class EpisodeFileAdmin(ReadOnlyAdmin):
    list_display = ("name", "episode", "kind", "size", "uploaded_at")
    list_filter = ("kind",)
    search_fields = ("name", "episode__participant__pseudonym")
    exclude = ("file",)


@admin.register(m.Payment)
class PaymentAdmin(admin.ModelAdmin):
    list_display = ("participant", "kind", "amount", "currency", "episode", "created_at", "paid_at")
    list_filter = ("kind", "currency")
    search_fields = ("participant__pseudonym", "note")
    raw_id_fields = ("participant", "episode")


@admin.register(m.AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "action", "object_type", "object_id", "actor", "study")
    list_filter = ("action", "object_type")
    search_fields = ("object_id", "note")


@admin.register(m.BackgroundJob)
class BackgroundJobAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "study", "status", "progress_done", "progress_total", "created_at")
    list_filter = ("kind", "status")

    def get_queryset(self, request):
        return file_jobs_visible(super().get_queryset(request), request.user)
