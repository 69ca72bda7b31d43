"""Studies and what is computed for them: leaderboard, stability, survey statistics, exports."""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from console import economics
from console.api.errors import Conflict
from console.api.filters import StudyFilter
from console.api.serializers import (
    ErrorSerializer,
    ExportJobSerializer,
    ExportRequestSerializer,
    LeaderboardSerializer,
    StabilitySerializer,
    StudyComparisonsSerializer,
    StudyCostsSerializer,
    StudySerializer,
)
from console.api.views.base import StaffApiMixin
from console.dashboard.services import export_request, job_download_record
from console.jobs import finished_preferences_result, finished_stability_job
from experts.comparison_selectors import raw_arm_pair_counts, study_submitted_comparisons
from experts.judge_comparison_selectors import study_judge_preferences
from rating.selectors import latest_snapshot
from studies.files import serve_private_file
from studies.models import BackgroundJob, Episode, Participant, Study, TaskInstance
from studies.roles import file_jobs_visible
from surveys.study_statistics import survey_statistics

_NOT_YET = OpenApiResponse(ErrorSerializer, description="Nothing computed yet, or no such study.")


def _count(model, link: str) -> Coalesce:
    rows = model.objects.filter(**{link: OuterRef("pk")}).order_by().values(link)
    return Coalesce(Subquery(rows.annotate(c=Count("pk")).values("c")[:1], output_field=IntegerField()), 0)


class LeaderboardQuery(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["agent", "human"], required=False,
                                   help_text="Only agents or only humans; both when left out.")


class SurveyStatisticsQuery(serializers.Serializer):
    skill_measure = serializers.ChoiceField(
        choices=["conservative", "mu"], default="conservative",
        help_text="Skill the items are correlated with: CollabSkill μ − kσ (conservative) or the posterior mean μ.",
    )
    holm = serializers.BooleanField(default=True, help_text="Add Holm-adjusted p-values per table.")


class StudyViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    """Studies with their settings and counts; read-only (studies are set up in the dashboard)."""

    serializer_class = StudySerializer
    filterset_class = StudyFilter
    lookup_field = "slug"
    lookup_value_converter = "slug"

    def get_queryset(self) -> QuerySet[Study]:
        return Study.objects.annotate(
            participant_count=_count(Participant, "study"),
            episode_count=_count(Episode, "study"),
            task_count=_count(TaskInstance.studies.through, "study"),
        ).order_by("-created_at")

    def _study(self) -> Study:
        return get_object_or_404(Study, slug=self.kwargs["slug"])

    @extend_schema(parameters=[LeaderboardQuery], responses={200: LeaderboardSerializer, 404: _NOT_YET},
                   summary="Latest posterior: agents and humans ranked by μ − kσ")
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def leaderboard(self, request: Request, slug: str) -> Response:
        query = LeaderboardQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        study = self._study()
        snapshot = latest_snapshot(study)
        if snapshot is None:
            raise NotFound("No rating has been computed for this study yet.", code="no_rating_yet")
        context = {**self.get_serializer_context(), "kind": query.validated_data.get("kind")}
        return Response(LeaderboardSerializer(snapshot, context=context).data)

    @extend_schema(responses={200: StabilitySerializer, 404: _NOT_YET},
                   summary="Latest finished ranking-stability analysis")
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def stability(self, request: Request, slug: str) -> Response:
        study = self._study()
        job = finished_stability_job(study)
        if job is None:
            raise NotFound("No stability analysis has finished for this study yet; start one from the dashboard.",
                           code="no_stability_analysis")
        return Response(StabilitySerializer(job).data)

    @extend_schema(responses={200: StudyCostsSerializer},
                   summary="Time and cost of each submitted episode, per agent and per sector, and the price table")
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def costs(self, request: Request, slug: str) -> Response:
        study = self._study()
        rows = economics.episode_economics(study)
        prices = [{"id": p.id, "model": p.model, "effective_from": p.effective_from.isoformat(),
                   "input_per_million": str(p.input), "cache_read_per_million": str(p.cache_read),
                   "cache_write_per_million": str(p.cache_write), "output_per_million": str(p.output),
                   "source": p.source} for p in economics.price_table()]
        return Response(StudyCostsSerializer({**economics.economics_summary(rows), "episodes": rows,
                                              "prices": prices}).data)

    @extend_schema(responses={200: StudyComparisonsSerializer},
                   summary="Submitted blind comparisons (shown order, ranks with ties, acceptability, time, arms) "
                           "and raw win/tie counts per arm pair (raw counts, not a model)")
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def comparisons(self, request: Request, slug: str) -> Response:
        rows = study_submitted_comparisons(self._study())
        return Response(StudyComparisonsSerializer({"comparisons": rows,
                                                    "raw_arm_pair_counts": raw_arm_pair_counts(rows)}).data)

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: _NOT_YET},
                   summary="The preference model's fit of the blind comparisons and rubric scores: win/tie rates of "
                           "every arm against every other with intervals, quality differences, expert effects, "
                           "agreement with the scores; what it cannot identify is named without a number; under "
                           "\"judges\" the LLM judges' comparison-mode agreement with the experts, order "
                           "consistency and position bias")
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def preferences(self, request: Request, slug: str) -> Response:
        study = self._study()
        result = finished_preferences_result(study)
        if result is None:
            raise NotFound("No preference fit of this study's current comparisons has finished; open the "
                           "dashboard's Comparisons tab to start one.", code="no_preference_fit")
        # The judges' comparison-mode rankings against the experts' are counted live: no fit is involved.
        return Response({**result, "judges": study_judge_preferences(study)})

    @extend_schema(parameters=[SurveyStatisticsQuery], responses={200: OpenApiTypes.OBJECT, 404: _NOT_YET},
                   summary="Paired pre/post survey statistics and their relation to skill")
    @action(detail=True, methods=["get"], url_path="survey-statistics", filterset_class=None,
            pagination_class=None)
    def survey_statistics(self, request: Request, slug: str) -> Response:
        query = SurveyStatisticsQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        study = self._study()
        return Response(survey_statistics(study, skill_measure=query.validated_data["skill_measure"],
                                          holm_correction=query.validated_data["holm"]))


@extend_schema_view(
    list=extend_schema(summary="A study's exports, newest first"),
    retrieve=extend_schema(summary="One export: status, progress and download link"),
)
class StudyExportViewSet(StaffApiMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Study exports run as background jobs; poll one until ``status`` is ``done``, then download it."""

    serializer_class = ExportJobSerializer
    lookup_value_converter = "int"
    filterset_class = None

    def _study(self) -> Study:
        return get_object_or_404(Study, slug=self.kwargs["slug"])

    def get_queryset(self) -> QuerySet[BackgroundJob]:
        if getattr(self, "swagger_fake_view", False):
            return BackgroundJob.objects.none()
        jobs = BackgroundJob.objects.filter(study=self._study(), kind="export").select_related("study")
        return file_jobs_visible(jobs, self.request.user)

    @extend_schema(request=ExportRequestSerializer, responses={202: ExportJobSerializer},
                   summary="Start an export of the study")
    def create(self, request: Request, slug: str) -> Response:
        data = ExportRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = export_request(study=self._study(), actor=request.user,
                             include_pii=data.validated_data["include_pii"])
        job = BackgroundJob.objects.select_related("study").get(pk=job.pk)
        return Response(self.get_serializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY,
                              409: OpenApiResponse(ErrorSerializer, description="The export has not finished.")},
                   summary="Download a finished export")
    @action(detail=True, methods=["get"])
    def download(self, request: Request, slug: str, pk: int):
        job = self.get_object()
        if job.status != BackgroundJob.Status.DONE or not job.file:
            raise Conflict(f"The export is {job.get_status_display().lower()}, not done.", code="export_not_ready")
        job_download_record(job=job, actor=request.user)
        name = (job.result or {}).get("file_name") or f"{job.study.slug}-export-{job.pk}.zip"
        return serve_private_file(job.file, name)
