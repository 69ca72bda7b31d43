"""Participants and episodes, scoped per role: staff see all, workers their own, experts their assignments."""

from __future__ import annotations

from django.db.models import Count, QuerySet
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request

from console.api.filters import (
    EpisodeFilter,
    ExpertEpisodeFilter,
    ParticipantFilter,
    WorkerEpisodeFilter,
    WorkerParticipantFilter,
)
from console.api.permissions import (
    StaffOrScopedReader,
    episode_file_kinds,
    is_staff,
    visible_episodes,
    visible_participants,
)
from console.api.serializers import (
    EpisodeSerializer,
    ExpertEpisodeSerializer,
    ParticipantSerializer,
    WorkerEpisodeSerializer,
)
from console.api.views.base import StaffApiMixin
from studies.files import serve_private_file
from studies.models import Episode, Participant
from studies.roles import EXPERT, WORKER, has_role

_SCOPE_NOTE = (
    " Staff see every field. A worker reading their own episodes gets only the fields of `WorkerEpisode` (no "
    "scores or grading state); an expert reading assigned episodes gets `ExpertEpisode` (no agent, participant "
    "or scores, deliverables only)."
)


@extend_schema_view(
    list=extend_schema(description="Participants. Staff see all; a worker sees only their own participations."),
    retrieve=extend_schema(description="One participant by pseudonym (others' participations are not found)."),
)
class ParticipantViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = ParticipantSerializer
    filterset_class = ParticipantFilter
    role_filtersets = {WORKER: WorkerParticipantFilter}
    permission_classes = [StaffOrScopedReader]
    scoped_roles = (WORKER,)
    lookup_field = "pseudonym"
    lookup_value_converter = "str"

    def get_queryset(self) -> QuerySet[Participant]:
        queryset = (Participant.objects.select_related("study", "occupation", "consent_version")
                    .annotate(episode_count=Count("episodes")).order_by("study", "created_at", "pk"))
        return visible_participants(self.request.user, queryset)




def _episode_for_caller(many: bool) -> PolymorphicProxySerializer:
    """The representation each role gets: exactly one of the three validates any answer (the scoped ones are
    closed, and the staff one requires the scores they lack)."""
    return PolymorphicProxySerializer(
        component_name="EpisodeForCaller", resource_type_field_name=None, many=many,
        serializers=[EpisodeSerializer, WorkerEpisodeSerializer, ExpertEpisodeSerializer])


@extend_schema_view(
    list=extend_schema(description="Episodes, filterable by status, agent, sector, participant, study and task."
                                   + _SCOPE_NOTE, responses=_episode_for_caller(many=True)),
    retrieve=extend_schema(description="One episode." + _SCOPE_NOTE, responses=_episode_for_caller(many=False)),
)
class EpisodeViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = EpisodeSerializer
    filterset_class = EpisodeFilter
    role_filtersets = {WORKER: WorkerEpisodeFilter, EXPERT: ExpertEpisodeFilter}
    permission_classes = [StaffOrScopedReader]
    scoped_roles = (WORKER, EXPERT)
    lookup_value_converter = "int"

    def get_queryset(self) -> QuerySet[Episode]:
        queryset = (Episode.objects.select_related("study", "participant", "agent", "task", "task__sector")
                    .prefetch_related("files").order_by("-assigned_at", "-pk"))
        return visible_episodes(self.request.user, queryset)

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        user = self.request.user
        if getattr(self, "swagger_fake_view", False) or is_staff(user):
            return EpisodeSerializer
        if has_role(user, EXPERT):
            return ExpertEpisodeSerializer
        return WorkerEpisodeSerializer

    @extend_schema(responses={(200, "*/*"): OpenApiTypes.BINARY},
                   summary="Download one of an episode's files")
    @action(detail=True, methods=["get"], url_path="files/<int:file_pk>/download", url_name="download-file",
            filterset_class=None)
    def download_file(self, request: Request, pk: int, file_pk: int) -> FileResponse:
        episode = self.get_object()
        episode_file = get_object_or_404(episode.files.all(), pk=file_pk)
        kinds = episode_file_kinds(request.user, episode)
        if kinds is not None and episode_file.kind not in kinds:
            raise NotFound()
        return serve_private_file(episode_file.file, episode_file.name)
