"""Admin for expert profiles, their assignments and grades (grades are read-only: experts submit them)."""

from __future__ import annotations

from django.contrib import admin

from experts import models as m
from studies.read_only_admin import ReadOnlyAdmin


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


@admin.register(m.ComparisonAssignment)
class ComparisonAssignmentAdmin(ReadOnlyAdmin):
    list_display = ("id", "comparison_set", "expert", "status", "time_spent_seconds", "submitted_at")
    list_filter = ("status",)
    inlines = [ComparisonPlacementInline]
