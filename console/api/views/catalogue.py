"""Read-only catalogue: sectors, occupations and agents."""

from __future__ import annotations

from django.db.models import Count, QuerySet
from rest_framework import viewsets

from console.api.filters import AgentFilter, OccupationFilter
from console.api.serializers import AgentSerializer, OccupationSerializer, SectorSerializer
from console.api.views.base import StaffApiMixin
from studies.models import Agent, Occupation, Sector


class SectorViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    """O*NET sectors tasks and workers are matched by."""

    serializer_class = SectorSerializer
    lookup_field = "code"
    lookup_value_converter = "slug"

    def get_queryset(self) -> QuerySet[Sector]:
        return Sector.objects.annotate(occupation_count=Count("occupations")).order_by("name")


class OccupationViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    """O*NET-SOC occupations, looked up by code (e.g. 13-2011.00)."""

    serializer_class = OccupationSerializer
    filterset_class = OccupationFilter
    lookup_field = "soc_code"
    lookup_value_converter = "str"
    queryset = Occupation.objects.select_related("sector").order_by("soc_code")


class AgentViewSet(StaffApiMixin, viewsets.ReadOnlyModelViewSet):
    """Agents workers are paired with, and the studies they take part in."""

    serializer_class = AgentSerializer
    filterset_class = AgentFilter
    lookup_field = "slug"
    lookup_value_converter = "slug"
    queryset = Agent.objects.prefetch_related("studies").order_by("name")
