"""Admin actions on the Study changelist that start dashboard jobs (add them to ``StudyAdmin.actions``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from console.dashboard import services
from console.dashboard.exceptions import JobRefused
from studies.models import Study


def _started(modeladmin: Any, request: HttpRequest, study: Study, what: str) -> None:
    modeladmin.message_user(
        request,
        format_html(
            '{} of “{}” is being prepared: <a href="{}">follow it and download it on the exports page</a>.',
            what, study.name, reverse("dashboard:exports", args=[study.slug]),
        ),
        level=messages.SUCCESS,
    )


@admin.action(description="Export selected studies (pseudonymous ZIP with sessions.json)")
def export_selected_studies(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Study]) -> None:
    """Queue one pseudonymous export per selected study; each request is audited by the service."""
    for study in queryset:
        try:
            services.export_request(study=study, actor=request.user)
        except JobRefused as exc:
            modeladmin.message_user(request, f"{study.name}: {exc}", level=messages.ERROR)
            continue
        _started(modeladmin, request, study, "An export")


@admin.action(description="Prepare payout files of selected studies (detailed CSV)")
def payouts_for_selected_studies(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Study]) -> None:
    """Queue a detailed payout CSV per selected study (pseudonyms; platform ids come from the exports page)."""
    for study in queryset:
        try:
            services.payouts_request(study=study, actor=request.user, file_format="detailed")
        except JobRefused as exc:
            modeladmin.message_user(request, f"{study.name}: {exc}", level=messages.ERROR)
            continue
        _started(modeladmin, request, study, "A payout file")
