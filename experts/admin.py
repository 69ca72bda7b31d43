"""Admin for expert profiles, their assignments and grades (grades are read-only: experts submit them)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from experts import models as m
from experts.task_names import JUDGE_COMPARISON_SET
from studies.read_only_admin import ReadOnlyAdmin
from studies.task_sending import send_task_on_commit


@admin.register(m.ExpertProfile)
class ExpertProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "is_active", "created_at")
    list_filter = ("is_active", "sectors")
    search_fields = ("user__username", "user__email")
    filter_horizontal = ("sectors",)
    raw_id_fields = ("user", "invited_by")


@admin.register(m.ExpertAssignment)
class ExpertAssignmentAdmin(admin.ModelAdmin):
    list_display = ("episode", "expert", "role", "status", "assigned_at")
    list_filter = ("role", "status")
    raw_id_fields = ("episode", "expert", "assigned_by")


class ExpertCriterionGradeInline(admin.TabularInline):
    model = m.ExpertCriterionGrade
    extra = 0
    readonly_fields = ("criterion", "verdict", "feedback")

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(m.ExpertGrade)
class ExpertGradeAdmin(ReadOnlyAdmin):
    list_display = ("episode", "expert", "status", "overall", "score", "attempt", "submitted_at")
    list_filter = ("status", "overall")
    inlines = [ExpertCriterionGradeInline]


@admin.register(m.ExpertCriterionGrade)
class ExpertCriterionGradeAdmin(ReadOnlyAdmin):
    list_display = ("grade", "criterion", "verdict")


class ComparisonPlacementInline(admin.TabularInline):
    model = m.ComparisonPlacement
    extra = 0
    fields = ("position", "item", "rank", "acceptability")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ARG002
        return False


@admin.register(m.ComparisonSet)
class ComparisonSetAdmin(ReadOnlyAdmin):
    """Sets are built on the staff comparisons page (expert:staff_comparisons), which checks them."""

    list_display = ("id", "study", "task", "created_by", "created_at")
    list_filter = ("study",)
    actions = ["judge_sets"]

    @admin.action(description="Have the study's judges rank the selected sets (both orders)")
    def judge_sets(self, request: HttpRequest, queryset: QuerySet[m.ComparisonSet]) -> None:
        """Queue one ranking task per set; rankings already stored are not paid for again."""
        ids = list(queryset.values_list("pk", flat=True))
        for pk in ids:
            send_task_on_commit(JUDGE_COMPARISON_SET, [pk])
        self.message_user(request, f"Queued judge rankings of {len(ids)} comparison set(s).", messages.SUCCESS)
        self.message_user(request, "To call again where a judge's call failed run `manage.py judge_comparisons "
                                   "--study SLUG --retry-failed`.", messages.INFO)


@admin.register(m.JudgeComparison)
class JudgeComparisonAdmin(ReadOnlyAdmin):
    list_display = ("id", "comparison_set", "order", "provider", "model", "status", "attempts", "cost_usd",
                    "finished_at")
    list_filter = ("status", "order", "provider")


@admin.register(m.ComparisonAssignment)
class ComparisonAssignmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "comparison_set", "expert", "status", "time_spent_seconds", "submitted_at")
    list_filter = ("status",)
    inlines = [ComparisonPlacementInline]
