"""In a browser, on a phone (390 px) and on a desktop: a worker does a solo task (no AI tool, no setup, no
log) and then an agent task in one session, and staff see each agent's boost on "Who benefits from the
agent" and the ToM analysis on "Why some gain more"; no page scrolls sideways at phone width."""

from __future__ import annotations

import re

import pytest
from celery import current_app
from django.urls import reverse
from playwright.sync_api import expect

from console.dashboard import services
from studies import models as m
from tests.e2e.steps import login, open_task, sign_out
from tests.factories import UserFactory
from tests.factories.files import XLSX
from tests.factories.scenarios import make_participant, make_world
from tests.factories.synergy import planted_synergy_study
from tests.factories.tom import tom_study

PHONE = {"width": 390, "height": 844}


def _no_sideways_scroll(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_worker_does_a_solo_and_an_agent_task_and_staff_see_the_boost(page, settings, tmp_path, monkeypatch):
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, **kw: None)
    settings.MEDIA_ROOT = tmp_path
    settings.STORAGES = {**settings.STORAGES, "default": {**settings.STORAGES["default"], "OPTIONS": {
        **settings.STORAGES["default"].get("OPTIONS", {}), "location": str(tmp_path)}}}
    world = make_world(with_files=True, tasks_per_session=2, solo_tasks_per_session=1, condition_order="solo_first")
    m.Agent.objects.filter(pk__in=[a.pk for a in world.agents]).update(log_mode=m.Agent.LogMode.UPLOAD)
    participant = make_participant(world, user=UserFactory(username="solo-worker", roles=["worker"]))
    deliverable = tmp_path / "summary.xlsx"
    deliverable.write_bytes(XLSX)
    log = tmp_path / "session.txt"
    log.write_bytes(b"worker: please total the sheet\nagent: done\n")

    page.set_viewport_size(PHONE)
    login(page, "solo-worker", "pw-correct-horse")
    page.goto(reverse("worker:task", args=["pilot", 1]))
    open_task(page, 1)
    expect(page.locator("#solo-notice")).to_contain_text("without any AI tool")
    assert page.locator("#setup").count() == 0 and page.locator("#log").count() == 0
    _no_sideways_scroll(page)
    page.screenshot(path="var/e2e-solo-task-phone.png", full_page=True)
    page.locator("#upload-deliverable").set_input_files(str(deliverable))
    page.locator(".file-table[data-kind='deliverable'] tbody tr", has_text="summary.xlsx").wait_for()
    page.get_by_label("I used an AI tool for this task anyway.").check()
    page.get_by_role("button", name="Review and submit").click()
    page.get_by_role("button", name="Submit task 1").click()
    solo = m.Episode.objects.get(participant=participant, position=1)
    assert solo.condition == m.Episode.Condition.SOLO and solo.agent is None and solo.used_ai_anyway
    assert solo.status == m.Episode.Status.SUBMITTED

    open_task(page, 2)
    expect(page.locator(".agent-name")).to_be_visible()
    page.get_by_label("Used a few times").check()
    page.locator("#agent-ready").check()
    page.get_by_role("button", name="Save setup").click()
    page.locator("#upload-deliverable").set_input_files(str(deliverable))
    page.locator(".file-table[data-kind='deliverable'] tbody tr", has_text="summary.xlsx").wait_for()
    page.locator("#upload-log").set_input_files(str(log))
    page.locator(".file-table[data-kind='log'] tbody tr", has_text="session.txt").wait_for()
    _no_sideways_scroll(page)
    page.get_by_role("button", name="Review and submit").click()
    page.get_by_role("button", name="Submit task 2").click()
    page.wait_for_url(re.compile(r"/survey/post/$|/complete/$|/study/pilot/$"))
    second = m.Episode.objects.get(participant=participant, position=2)
    assert second.condition == m.Episode.Condition.WITH_AGENT and second.status == m.Episode.Status.SUBMITTED
    sign_out(page)

    planted = planted_synergy_study(slug="boosted")
    job = services.analysis_request(study=planted.world.study, kind="synergy", actor=None)
    services.analysis_job_run(job_id=job.pk)
    UserFactory(username="synergy-staff", roles=["staff"])
    login(page, "synergy-staff", "pw-correct-horse")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(reverse("dashboard:synergy", args=[planted.world.study.slug]))
        expect(page.locator("#synergy-verdict")).to_contain_text("makes people score higher than alone")
        boosts = page.locator("#synergy-boosts")
        for name in planted.boosts:
            expect(boosts).to_contain_text(name)
        _no_sideways_scroll(page)
        page.screenshot(path=f"var/e2e-synergy-{width}.png", full_page=True)
    tom = tom_study(slug="tom-phone")
    services.analysis_job_run(job_id=services.analysis_request(study=tom, kind="tom", actor=None).pk)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(reverse("dashboard:tom", args=[tom.slug]))
        expect(page.locator("#tom-verdict")).to_be_visible()
        expect(page.locator("#tom-effects")).to_contain_text("ability with the agent")
        _no_sideways_scroll(page)
        page.screenshot(path=f"var/e2e-tom-{width}.png", full_page=True)
