"""Admin for survey instruments (editable by staff) and responses (read-only)."""

from __future__ import annotations

from django.contrib import admin

from studies.read_only_admin import ReadOnlyAdmin
from surveys import models as m


class QuestionInline(admin.StackedInline):
    model = m.Question
    extra = 0


@admin.register(m.Instrument)
class InstrumentAdmin(admin.ModelAdmin):
    list_display = ("title", "slug", "version", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("title", "slug")
    inlines = [QuestionInline]


@admin.register(m.Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ("code", "instrument", "kind", "phases", "required", "order")
    list_filter = ("instrument", "kind", "phases")
    search_fields = ("code", "text")


class AnswerInline(admin.TabularInline):
    model = m.Answer
    extra = 0
    readonly_fields = ("question", "value", "numeric", "updated_at")

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(m.SurveyResponse)
class SurveyResponseAdmin(ReadOnlyAdmin):
    list_display = ("participant", "phase", "instrument", "started_at", "submitted_at")
    list_filter = ("phase", "instrument")
    search_fields = ("participant__pseudonym",)
    inlines = [AnswerInline]


@admin.register(m.Answer)
class AnswerAdmin(ReadOnlyAdmin):
    list_display = ("response", "question", "value", "numeric", "updated_at")
