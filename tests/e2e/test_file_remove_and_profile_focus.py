"""In a browser: removing a file asks first and says which file went, with and without script; a profile sent
with both fields empty brings the worker to the first field, the occupation search."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from studies import models as m
from tests.e2e.steps import close_quietly, login
from tests.factories import UserFactory
from tests.factories.files import PDF
from tests.factories.scenarios import make_participant, make_world


def _worker_with_task(page, tmp_path, username: str) -> m.Episode:
    world = make_world()
    participant = make_participant(world, user=UserFactory(username=username, roles=["worker"]))
    login(page, username, "pw-correct-horse")
    page.goto(reverse("worker:task", args=["pilot", 1]))
    page.get_by_role("button", name="Show me task 1").click()
    page.wait_for_url("**/tasks/1/")
    (tmp_path / "report.pdf").write_bytes(PDF)
    return m.Episode.objects.get(participant=participant, position=1)


@pytest.fixture
def storage(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {**settings.STORAGES["default"], "OPTIONS": {
        **settings.STORAGES["default"].get("OPTIONS", {}), "location": str(tmp_path / "media")}}}


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_remove_asks_in_the_row_keep_keeps_and_a_removal_is_announced(page, tmp_path, storage):
    page.set_viewport_size({"width": 390, "height": 844})
    episode = _worker_with_task(page, tmp_path, "remove-worker")
    page.locator("#upload-deliverable").set_input_files(str(tmp_path / "report.pdf"))
    row = page.locator(".file-table[data-kind='deliverable'] tr", has_text="report.pdf")
    row.wait_for()
    record = m.EpisodeFile.objects.get(episode=episode)
    page.goto(reverse("worker:episode-file-delete", args=[episode.pk, record.pk]))  # the page without script
    expect(page.get_by_role("heading", level=1)).to_have_text("Remove “report.pdf”?")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.get_by_role("link", name="Keep it").click()

    page.get_by_role("button", name="Remove report.pdf").click()
    expect(row).to_contain_text("Remove “report.pdf”? This cannot be undone.")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "the question fits a phone's width"
    page.get_by_role("button", name="Keep report.pdf").click()
    expect(page.get_by_role("button", name="Remove report.pdf")).to_be_focused()
    assert m.EpisodeFile.objects.filter(episode=episode).count() == 1

    page.get_by_role("button", name="Remove report.pdf").click()
    page.get_by_role("button", name="Yes, remove report.pdf").click()
    expect(row).to_have_count(0)
    expect(page.locator(".file-table-status[data-kind='deliverable']")).to_have_text("“report.pdf” removed.")
    assert not m.EpisodeFile.objects.filter(episode=episode).exists()


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_without_script_remove_opens_a_confirmation_page_and_the_task_page_says_what_went(
        browser, live_server, tmp_path, storage):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        episode = _worker_with_task(page, tmp_path, "plain-worker")
        page.locator("#upload-deliverable").set_input_files(str(tmp_path / "report.pdf"))
        page.locator("form.js-upload[data-kind='deliverable'] button[type=submit]").click()
        page.get_by_role("button", name="Remove report.pdf").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Remove “report.pdf”?")
        page.get_by_role("link", name="Keep it").click()
        expect(page.locator(".file-table[data-kind='deliverable']")).to_contain_text("report.pdf")
        page.get_by_role("button", name="Remove report.pdf").click()
        page.get_by_role("button", name="Remove “report.pdf”").click()
        expect(page.locator(".messages")).to_contain_text("“report.pdf” removed.")
        expect(page.locator(".file-table[data-kind='deliverable']")).to_contain_text("No files yet.")
        assert not m.EpisodeFile.objects.filter(episode=episode).exists()
    finally:
        close_quietly(context)


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_profile_with_both_fields_empty_focuses_the_occupation_search(page):
    world = make_world()
    make_participant(world, user=UserFactory(username="profile-worker", roles=["worker"]),
                     status=m.Participant.Status.CONSENTED, occupation=None, years_experience=None)
    login(page, "profile-worker", "pw-correct-horse")
    page.goto(reverse("worker:profile", args=["pilot"]))
    page.get_by_role("button", name="Save and continue").click()
    expect(page.locator("#occupation-errors")).to_be_visible()
    expect(page.locator("#years-errors")).to_be_visible()
    expect(page.locator("#occupation-query")).to_be_focused()
