"""Task instances, their reference and hidden files, and task-bundle import."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.filters import TaskFilter
from console.api.parsers import NulRefusingFormParser, NulRefusingMultiPartParser
from console.api.permissions import IsStaff, StaffOrScopedReader, visible_reference_tasks
from console.api.serializers import (
    ErrorSerializer,
    ImportReportSerializer,
    TaskFileSerializer,
    TaskImportSerializer,
    TaskSerializer,
)
from console.api.views.base import StaffApiMixin
from studies.files import serve_private_file
from studies.models import TaskFile, TaskInstance
from studies.roles import EXPERT, WORKER
from studies.services.task_bundles import task_bundles_import


class TaskViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    """Task instances with prompts and hidden evaluator information (staff only)."""

    serializer_class = TaskSerializer
    filterset_class = TaskFilter
    lookup_field = "uuid"
    lookup_value_converter = "uuid"
    queryset = (TaskInstance.objects.select_related("sector")
                .prefetch_related("occupations", "studies").order_by("title", "pk"))

    @extend_schema(
        request={"multipart/form-data": TaskImportSerializer},
        responses={200: ImportReportSerializer,
                   400: OpenApiResponse(ErrorSerializer,
                                        description="Every problem found, per file and field; nothing imported.")},
        summary="Import task bundles or a task table",
        description="Creates or updates tasks by UUID (see docs/task-bundles.md). The whole upload is checked "
                    "first; if anything is wrong, every problem is listed in `error.fields` (keyed "
                    "`path:field`) and nothing is written.",
    )
    @action(detail=False, methods=["post"], url_path="import", filterset_class=None, pagination_class=None,
            parser_classes=[NulRefusingMultiPartParser, NulRefusingFormParser])
    def import_bundles(self, request: Request) -> Response:
        data = TaskImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        # The upload is read as a stream, never as a path: a table's files are looked up inside the upload only.
        report = task_bundles_import(source=upload, name=upload.name, study=data.validated_data.get("study"),
                                     actor=request.user, dry_run=data.validated_data["dry_run"])
        return Response(ImportReportSerializer(report.to_dict()).data)


class _TaskFileViewSet(StaffApiMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = TaskFileSerializer
    filterset_class = None
    lookup_value_converter = "int"
    kind: str = ""

    def _task_queryset(self) -> QuerySet[TaskInstance]:
        return TaskInstance.objects.all()

    def get_queryset(self) -> QuerySet[TaskFile]:
        if getattr(self, "swagger_fake_view", False):
            return TaskFile.objects.none()
        task = get_object_or_404(self._task_queryset(), uuid=self.kwargs["uuid"])
        return TaskFile.objects.filter(task=task, kind=self.kind).select_related("task").order_by("name")

    def _download(self) -> FileResponse:
        task_file = self.get_object()
        return serve_private_file(task_file.file, task_file.name)


class TaskReferenceFileViewSet(_TaskFileViewSet):
    """Reference files of a task: staff, and workers and experts whose own or assigned episodes use the task."""

    permission_classes = [StaffOrScopedReader]
    scoped_roles = (WORKER, EXPERT)
    kind = TaskFile.Kind.REFERENCE

    def _task_queryset(self) -> QuerySet[TaskInstance]:
        return visible_reference_tasks(self.request.user, TaskInstance.objects.all())

    @extend_schema(responses={(200, "*/*"): OpenApiTypes.BINARY},
                   summary="Download a reference file")
    @action(detail=True, methods=["get"])
    def download(self, request: Request, uuid: str, pk: int) -> FileResponse:
        return self._download()


class TaskHiddenFileViewSet(_TaskFileViewSet):
    """Hidden evaluator files (gold deliverables): staff only."""

    permission_classes = [IsStaff]
    kind = TaskFile.Kind.HIDDEN

    @extend_schema(responses={(200, "*/*"): OpenApiTypes.BINARY},
                   summary="Download a hidden evaluator file")
    @action(detail=True, methods=["get"])
    def download(self, request: Request, uuid: str, pk: int) -> FileResponse:
        return self._download()
