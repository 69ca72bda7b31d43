"""In a browser: the collaboration-log form keeps every valid field across an error and a reload.

Notes over the limit used to discard the whole form, a valid share link included, and a reload showed both
empty. Now the link is saved while the notes wait for a correction, and both the autosave and the "Review and
submit" button (the path without script) leave the text on the page after a reload.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from studies import models as m
from tests.e2e.steps import login
from tests.factories import UserFactory
from tests.factories.scenarios import make_participant, make_world

LINK = "https://share.example.org/s/session-42"
LONG = ("Worked through the ledger with the agent. " * 120).strip()  # 5 039 characters: over the 5 000 limit


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_log_form_keeps_the_link_and_the_notes_across_an_error_and_a_reload(page):
    world = make_world()
    m.Agent.objects.update(log_mode=m.Agent.LogMode.EITHER)
    user = UserFactory(username="log-worker", roles=["worker"])
    participant = make_participant(world, user=user)
    login(page, "log-worker", "pw-correct-horse")
    page.goto(reverse("worker:task", args=["pilot", 1]))
    page.get_by_role("button", name="Show me task 1").click()
    page.wait_for_url("**/tasks/1/")
    episode = m.Episode.objects.get(participant=participant, position=1)
    status = page.locator("#log-autosave-status")
    expect(status).to_have_text("Saved automatically as you type.")

    # Autosave: the link is saved, the notes are refused and stay.
    page.locator("#share-url").fill(LINK)
    page.locator("#notes").fill(LONG)
    expect(status).to_contain_text("The link is saved; the notes are not saved yet")
    expect(page.locator("#notes-live-errors")).to_contain_text("Notes can be at most 5000 characters")
    expect(page.locator("#submit-checklist li[data-need='log-form']")).to_be_visible()
    episode.refresh_from_db()
    assert (episode.share_url, episode.notes) == (LINK, "")

    page.reload()
    expect(page.locator("#share-url")).to_have_value(LINK)
    expect(page.locator("#notes")).to_have_value(LONG)
    expect(page.locator("#notes-errors")).to_contain_text(f"yours have {len(LONG)}")
    expect(status).to_contain_text("Not saved: please correct the field marked above")

    # The button's form post (what a page without script sends) refuses the notes the same way.
    page.get_by_role("button", name="Review and submit").click()
    expect(page).to_have_url(re.compile(r"/tasks/1/#log$"))
    expect(page.locator("#notes")).to_be_focused()
    page.reload()
    expect(page.locator("#share-url")).to_have_value(LINK)
    expect(page.locator("#notes")).to_have_value(LONG)

    # Shortened, the notes are saved; the error and the kept text go.
    page.locator("#notes").fill("Worked through the ledger with the agent.")
    expect(status).to_contain_text("Saved (")
    expect(page.locator("#notes-errors")).to_have_count(0)
    expect(page.locator("#notes-live-errors")).to_have_count(0)
    page.reload()
    expect(page.locator("#notes")).to_have_value("Worked through the ledger with the agent.")
    expect(page.locator("#notes-errors")).to_have_count(0)
    episode.refresh_from_db()
    assert (episode.share_url, episode.notes) == (LINK, "Worked through the ledger with the agent.")
