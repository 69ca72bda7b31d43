"""In a browser at phone width: a log that is not the task agent's session file is flagged at once, on the
new row the upload adds, and again after a reload; the worker can still go on to submit."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from studies import models as m
from studies.log_sources import LogFormat
from tests.e2e.steps import drop_file, login
from tests.factories import UserFactory
from tests.factories.scenarios import make_participant, make_world
from tests.grading.transcripts.conftest import SAMPLES


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_claude_code_log_on_a_gemini_task_is_flagged_on_upload_and_after_a_reload(page, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.STORAGES = {**settings.STORAGES, "default": {**settings.STORAGES["default"], "OPTIONS": {
        **settings.STORAGES["default"].get("OPTIONS", {}), "location": str(tmp_path)}}}
    world = make_world(with_files=True)
    for index, agent in enumerate(world.agents):
        m.Agent.objects.filter(pk=agent.pk).update(name=f"Gemini CLI {index}", log_format=LogFormat.GEMINI,
                                                   log_mode=m.Agent.LogMode.UPLOAD)
    user = UserFactory(username="phone-worker", roles=["worker"])
    participant = make_participant(world, user=user)
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "phone-worker", "pw-correct-horse")
    page.goto(reverse("worker:task", args=["pilot", 1]))
    page.get_by_role("button", name="Show me task 1").click()
    page.wait_for_url("**/tasks/1/")
    episode = m.Episode.objects.get(participant=participant, position=1)

    drop_file(page, "log", "7b2e9c10-4f3a-4c1d-8e2b-9a0f1c2d3e4f.jsonl",
              (SAMPLES / "claude_code_session_v2.jsonl").read_text())
    warning = page.locator(".file-table[data-kind='log'] .file-warning")
    expect(warning).to_contain_text("looks like a Claude Code session file")
    expect(warning).to_contain_text(f"this task's agent is {episode.agent.name}")
    # The warning wraps inside the phone's width instead of widening the page.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path="var/e2e-log-format-warning.png", full_page=True)

    page.reload()
    expect(page.locator(".file-table[data-kind='log'] .file-warning")).to_contain_text("you can still submit")
    assert m.EpisodeFile.objects.filter(episode=episode, kind=m.EpisodeFile.Kind.LOG).count() == 1


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_agents_own_session_file_is_confirmed_on_upload_and_counted_after_the_parse(page, settings, tmp_path):
    from grading import tasks

    settings.MEDIA_ROOT = tmp_path
    settings.STORAGES = {**settings.STORAGES, "default": {**settings.STORAGES["default"], "OPTIONS": {
        **settings.STORAGES["default"].get("OPTIONS", {}), "location": str(tmp_path)}}}
    world = make_world(with_files=True)
    m.Agent.objects.filter(pk__in=[a.pk for a in world.agents]).update(log_format=LogFormat.CLAUDE_CODE,
                                                                        log_mode=m.Agent.LogMode.UPLOAD)
    user = UserFactory(username="claude-worker", roles=["worker"])
    participant = make_participant(world, user=user)
    login(page, "claude-worker", "pw-correct-horse")
    page.goto(reverse("worker:task", args=["pilot", 1]))
    page.get_by_role("button", name="Show me task 1").click()
    page.wait_for_url("**/tasks/1/")
    episode = m.Episode.objects.get(participant=participant, position=1)

    drop_file(page, "log", "session.jsonl", (SAMPLES / "claude_code_session_v2.jsonl").read_text())
    row = page.locator(".file-table[data-kind='log'] tr", has_text="session.jsonl")
    expect(row.locator(".file-recognised")).to_contain_text("Recognised as a Claude Code session file")
    expect(row.locator(".file-warning")).to_have_count(0)

    tasks.parse_log.apply(args=[episode.pk])  # what the worker's parse message does
    page.reload()
    expect(page.locator(".file-table[data-kind='log'] .file-recognised")).to_have_text(
        "Claude Code session: 3 prompts, 3 tool calls.")
