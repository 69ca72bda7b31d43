"""Study changelist actions that queue exports and payout files."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory

from console.dashboard.admin_actions import export_selected_studies, payouts_for_selected_studies
from studies.models import AuditEvent, BackgroundJob, Study


def _request(user):
    request = RequestFactory().post("/admin/studyapp/study/")
    request.user = user
    request.session = {}
    request._messages = FallbackStorage(request)
    return request


@pytest.mark.django_db
def test_the_export_action_queues_one_audited_job_per_study(staff_user, populated, empty_study):
    request = _request(staff_user)
    export_selected_studies(admin.site._registry[Study], request, Study.objects.filter(pk__in=[populated.study.pk,
                                                                                             empty_study.pk]))
    jobs = BackgroundJob.objects.filter(kind="export")
    assert {job.study_id for job in jobs} == {populated.study.pk, empty_study.pk}
    assert all(job.params == {"include_pii": False} and job.requested_by == staff_user for job in jobs)
    assert AuditEvent.objects.filter(action="export.requested", actor=staff_user).count() == 2
    texts = [str(message) for message in get_messages(request)]
    assert any("/admin/dashboard/empty-study/exports/" in text for text in texts)


@pytest.mark.django_db
def test_the_payout_action_queues_a_detailed_file(staff_user, populated):
    request = _request(staff_user)
    payouts_for_selected_studies(admin.site._registry[Study], request, Study.objects.filter(pk=populated.study.pk))
    job = BackgroundJob.objects.get(kind="payouts")
    assert job.params == {"format": "detailed", "include_pii": False}
