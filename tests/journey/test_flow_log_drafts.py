"""Task page: a refused field never takes the valid ones with it, and its text survives a reload.

Notes over the limit used to discard the whole log form, a valid share link included, and a reload showed both
empty while the page said nothing was lost. Every valid field is now saved; the refused text is kept for
correction (journey/drafts.py) and shown again, marked, on the next visit.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.urls import reverse

from journey.drafts import DRAFT_CUT_NOTE, DRAFT_MAX_CHARS, form_draft, form_draft_keep
from journey.forms import LogForm
from studies import models as m
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db
JSON = {"HTTP_ACCEPT": "application/json"}
LINK = "https://share.example.org/s/abc123"
LONG = "n" * 5001


@pytest.fixture
def episode(client):
    world = make_world()
    m.Agent.objects.update(log_mode=m.Agent.LogMode.EITHER)
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    return m.Episode.objects.get(participant=participant, position=1)


def _task_page(client) -> str:
    response = client.get(reverse("worker:task", args=["pilot", 1]))
    assert response.status_code == 200
    return response.content.decode()


def _field(html: str, element_id: str) -> str:
    return re.search(rf'<(?:input|textarea)[^>]*id="{element_id}"[^>]*>', html).group(0)


def test_notes_over_the_limit_save_the_valid_link_and_keep_the_notes_across_a_reload(client, episode):
    page = client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": LINK, "notes": LONG})
    assert page.status_code == 400
    episode.refresh_from_db()
    assert (episode.share_url, episode.notes) == (LINK, ""), "the valid link is saved, the refused notes are not"

    html = _task_page(client)  # the reload
    assert LONG in html and "Notes can be at most 5000 characters; yours have 5001" in html
    assert 'aria-invalid="true"' in _field(html, "notes") and f'value="{LINK}"' in _field(html, "share-url")
    assert "Not saved: please correct the field marked above. The other fields here are saved" in html
    assert "also if you reload it" in html and "Nothing you typed was lost" not in html
    assert 'data-need="log-form"' in html and 'id="submit-checklist" class="is-complete"' not in html
    assert "autofocus" not in _field(html, "notes"), "a later visit does not jump to the field"
    assert re.search(r'<form[^>]*id="log-form"[^>]*data-kept-draft', html), "nor does the page script focus it"
    assert "data-kept-draft" not in page.content.decode(), "the refused form's own answer lands on the field"


def test_corrected_notes_are_saved_and_the_kept_text_is_forgotten(client, episode):
    client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": LINK, "notes": LONG})
    done = client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": LINK, "notes": "Short."})
    assert done.status_code == 302
    episode.refresh_from_db()
    assert episode.notes == "Short."
    html = _task_page(client)
    assert LONG not in html and "Notes can be at most" not in html and 'data-need="log-form"' not in html


def test_a_wrong_link_saves_the_notes_and_keeps_the_link_with_its_reason_across_a_reload(client, episode):
    wrong = "https://elsewhere.example.com/x"
    page = client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": wrong, "notes": "Halfway."})
    assert page.status_code == 400
    episode.refresh_from_db()
    assert (episode.share_url, episode.notes) == ("", "Halfway.")
    html = _task_page(client)
    link = _field(html, "share-url")
    assert f'value="{wrong}"' in link and 'aria-invalid="true"' in link
    assert "That link points to elsewhere.example.com" in html and 'id="share-url-errors"' in html
    assert "Halfway." in html


def test_autosave_saves_the_link_while_the_notes_are_too_long_and_the_reload_shows_them(client, episode):
    reply = client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": LINK, "notes": LONG}, **JSON)
    body = reply.json()
    assert reply.status_code == 400 and body["saved"] == ["share_url"] and body["share_url_saved"] is True
    assert "at most 5000" in body["errors"]["notes"][0]
    episode.refresh_from_db()
    assert episode.share_url == LINK
    assert LONG in _task_page(client)


def test_the_page_claims_automatic_saving_only_where_its_script_does_it(client, episode):
    html = _task_page(client)
    assert "Saved automatically" not in html, "without script nothing is saved until Save is pressed"
    assert "Press Save to keep the link and notes." in html


def test_the_review_page_says_which_refused_text_is_not_part_of_the_submission(client, episode):
    client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": LINK, "notes": LONG})
    html = client.get(reverse("worker:episode-submit", args=[episode.pk])).content.decode()
    notice = re.search(r'<p[^>]*id="unsaved-drafts"[^>]*>(.*?)</p>', html, re.S).group(1)
    assert "a correction is needed on the task page: your notes." in notice and "shared-session link" not in notice
    assert "Submitting now sends what was saved before" in notice
    assert f'href="{reverse("worker:task", args=["pilot", 1])}#log"' in notice


def test_a_submitted_task_shows_no_kept_draft(client, episode):
    client.post(reverse("worker:episode-log", args=[episode.pk]), {"notes": LONG})
    assert LONG in _task_page(client)
    m.Episode.objects.filter(pk=episode.pk).update(status=m.Episode.Status.SUBMITTED)
    assert LONG not in _task_page(client)


def test_solo_notes_over_the_limit_keep_the_answer_saved_and_the_notes_across_a_reload(client):
    world = make_world(solo_tasks_per_session=1, condition_order="solo_first")
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    episode = m.Episode.objects.get(participant=participant, position=1)
    assert episode.is_solo
    page = client.post(reverse("worker:episode-solo", args=[episode.pk]), {"used_ai_anyway": "1", "notes": LONG})
    assert page.status_code == 400
    episode.refresh_from_db()
    assert episode.used_ai_anyway and episode.notes == ""
    html = _task_page(client)
    assert LONG in html and 'aria-invalid="true"' in _field(html, "solo-notes")
    assert "checked" in _field(html, "used-ai-anyway") and 'id="solo-save-status"' in html
    assert 'data-need="solo-form"' in html
    client.post(reverse("worker:episode-solo", args=[episode.pk]), {"used_ai_anyway": "1", "notes": "Fine."})
    assert LONG not in _task_page(client)


def test_text_far_over_the_limit_is_kept_up_to_a_bound_and_the_page_says_so():
    session = SessionStore()
    form = LogForm(data={"share_url": "", "notes": "x" * (DRAFT_MAX_CHARS + 10)})
    assert not form.is_valid()
    form_draft_keep(session, episode_id=7, form_name="log", form=form)
    again = form_draft(session, episode_id=7, form_name="log", form_class=LogForm, saved={"share_url": LINK})
    assert len(again["notes"].value()) == DRAFT_MAX_CHARS and again["share_url"].value() == LINK
    assert DRAFT_CUT_NOTE in again.errors["notes"]
    assert f"yours have {DRAFT_MAX_CHARS}" in again.errors["notes"][0], "the count is of the text shown"
    assert form_draft(session, episode_id=8, form_name="log", form_class=LogForm, saved={}) is None
