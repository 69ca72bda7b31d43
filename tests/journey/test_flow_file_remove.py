"""Removing an uploaded file asks first (on a page of its own without script) and says which file went.

"Remove" used to delete at one click, with no confirmation, undo or message. A removal cannot be undone, so
the table's Remove only opens the question; a post with ``confirm=1`` removes and the worker is told.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from pairing.services import episode_assign
from studies import models as m
from tests.factories.files import PDF, upload
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def uploaded(client):
    world = make_world()
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    episode = m.Episode.objects.get(participant=participant, position=1)
    client.post(reverse("worker:episode-upload", args=[episode.pk]), {"kind": "deliverable",
                                                                       "file": upload("report.pdf", PDF)})
    return episode, m.EpisodeFile.objects.get(episode=episode), world


def test_the_tables_remove_only_opens_the_question(client, uploaded):
    episode, record, _world = uploaded
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    url = reverse("worker:episode-file-delete", args=[episode.pk, record.pk])
    form = re.search(rf'<form[^>]*action="{url}"[^>]*>', html).group(0)
    assert 'method="get"' in form, "one click on Remove cannot delete"
    page = client.get(url)
    text = page.content.decode()
    assert page.status_code == 200 and "Remove “report.pdf”?" in text and "This cannot be undone" in text
    assert 'name="confirm" value="1"' in text and 'href="' + reverse("worker:task", args=["pilot", 1]) + '#uploads"' \
        in text
    assert m.EpisodeFile.objects.filter(pk=record.pk).exists()


def test_an_unconfirmed_post_asks_instead_of_removing(client, uploaded):
    episode, record, _world = uploaded
    url = reverse("worker:episode-file-delete", args=[episode.pk, record.pk])
    page = client.post(url, {})
    assert page.status_code == 200 and "Remove “report.pdf”?" in page.content.decode()
    reply = client.post(url, {}, **JSON)
    assert reply.status_code == 400 and reply.json()["confirm_needed"] is True
    assert m.EpisodeFile.objects.filter(pk=record.pk).exists()


def test_a_confirmed_removal_deletes_the_file_and_says_which(client, uploaded):
    episode, record, _world = uploaded
    page = client.post(reverse("worker:episode-file-delete", args=[episode.pk, record.pk]), {"confirm": "1"},
                       follow=True)
    assert page.redirect_chain[-1][0] == reverse("worker:task", args=["pilot", 1]) + "#uploads"
    assert "“report.pdf” removed." in page.content.decode()
    assert not m.EpisodeFile.objects.filter(pk=record.pk).exists()


def test_a_submitted_tasks_file_cannot_be_asked_about_or_removed(client, uploaded):
    episode, record, _world = uploaded
    m.Episode.objects.filter(pk=episode.pk).update(status=m.Episode.Status.SUBMITTED)
    url = reverse("worker:episode-file-delete", args=[episode.pk, record.pk])
    assert client.get(url).status_code == 302
    assert client.post(url, {"confirm": "1"}).status_code == 302
    assert m.EpisodeFile.objects.filter(pk=record.pk).exists()


def test_another_workers_file_answers_404_to_the_question_too(client, uploaded):
    episode, _record, world = uploaded
    theirs = episode_assign(participant=make_participant(world), position=1)
    their_file = m.EpisodeFile.objects.create(episode=theirs, kind="deliverable", name="x.pdf", size=3, sha256="0",
                                              file="x.pdf")
    assert client.get(reverse("worker:episode-file-delete", args=[theirs.pk, their_file.pk])).status_code == 404
    assert client.get(reverse("worker:episode-file-delete", args=[episode.pk, their_file.pk])).status_code == 404
