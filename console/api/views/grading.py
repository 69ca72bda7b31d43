"""Judge runs (staff only) and expert grades (staff, and each expert their own)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets

from console.api.filters import ExpertGradeFilter, JudgeRunFilter
from console.api.permissions import StaffOrScopedReader, is_staff, visible_expert_grades
from console.api.serializers import ExpertGradeSerializer, ExpertOwnGradeSerializer, JudgeRunSerializer
from console.api.views.base import StaffApiMixin
from experts.models import ExpertGrade
from grading.models import JudgeRun
from studies.roles import EXPERT


@extend_schema_view(
    list=extend_schema(description="Judge runs, newest first, with per-criterion scores and the raw response "
                                   "(use page_size to keep pages small)."),
    retrieve=extend_schema(description="One judge run with its per-criterion scores and raw response."),
)
class JudgeRunViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = JudgeRunSerializer
    filterset_class = JudgeRunFilter
    lookup_value_converter = "int"
    queryset = (JudgeRun.objects.select_related("rubric", "rubric__task")
                .prefetch_related("criterion_scores__criterion").order_by("-created_at", "-pk"))


def _grade_for_caller(many: bool) -> PolymorphicProxySerializer:
    """Staff get the grade with its assignment role; an expert their own grade without it (a closed shape)."""
    return PolymorphicProxySerializer(component_name="ExpertGradeForCaller", resource_type_field_name=None,
                                      many=many, serializers=[ExpertGradeSerializer, ExpertOwnGradeSerializer])


@extend_schema_view(
    list=extend_schema(description="Expert grades with their criterion verdicts. Staff see all; an expert "
                                   "sees only their own.", responses=_grade_for_caller(many=True)),
    retrieve=extend_schema(description="One expert grade (another expert's grade is not found). An expert "
                                       "reading their own grade gets no assignment role: a gold check or an "
                                       "adjudication is not announced to the grader.",
                           responses=_grade_for_caller(many=False)),
)
class ExpertGradeViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = ExpertGradeSerializer
    filterset_class = ExpertGradeFilter
    role_filtersets = {EXPERT: ExpertGradeFilter}
    permission_classes = [StaffOrScopedReader]
    scoped_roles = (EXPERT,)
    lookup_value_converter = "int"

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if getattr(self, "swagger_fake_view", False) or is_staff(self.request.user):
            return ExpertGradeSerializer
        return ExpertOwnGradeSerializer

    def get_queryset(self) -> QuerySet[ExpertGrade]:
        queryset = (ExpertGrade.objects.select_related("expert__user", "assignment", "rubric")
                    .prefetch_related("criterion_grades__criterion").order_by("-started_at", "-pk"))
        return visible_expert_grades(self.request.user, queryset)
