"""The dashboard's Comparisons tab after the preference job ran: the verdict, the model win-rate table with
intervals and the raw counts, at 1280 px and at 390 px without horizontal page scroll."""

from __future__ import annotations

import pytest
from celery import current_app
from django.urls import reverse
from playwright.sync_api import expect

from console.dashboard import services
from studies.models import BackgroundJob
from tests.console.dashboard.test_comparisons_tab import fitted_world
from tests.e2e.steps import login
from tests.e2e.test_comparison_journey import DESKTOP, PASSWORD, PHONE, _no_horizontal_scroll
from tests.factories import UserFactory


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_model_table_shows_after_the_job_on_desktop_and_phone(page, monkeypatch):
    monkeypatch.setattr(current_app, "send_task", lambda *a, **k: None)
    study = fitted_world()["study"]
    UserFactory(username="sam", roles=["staff"])
    page.set_viewport_size(DESKTOP)
    login(page, "sam", PASSWORD)
    url = reverse("dashboard:comparisons", args=[study.slug])
    page.goto(url)
    expect(page.locator(".dash-job-text")).to_contain_text("Queued")
    services.analysis_job_run(job_id=BackgroundJob.objects.get(study=study, kind="preferences").pk)
    page.goto(url)
    expect(page.locator("#preferences-verdict")).to_contain_text("against the worker alone")
    expect(page.locator("#preferences-versus")).to_contain_text("agent alone: Claude Code")
    expect(page.locator("#preferences-raw")).to_contain_text("Worker + Claude Code")
    page.set_viewport_size(PHONE)
    page.goto(url)
    expect(page.locator("#preferences-win-rates")).to_be_visible()
    _no_horizontal_scroll(page)
