"""The task page tells workers which of their agent's own session files to upload and where it is."""

from __future__ import annotations

import pytest
from django.urls import reverse

from grading.services.transcripts import episode_transcript_build
from grading.transcripts import Format
from studies import models as m
from studies.log_sources import LOG_SOURCES, LogFormat, agent_log_source
from tests.factories.files import upload
from tests.factories.scenarios import make_participant, make_world
from tests.grading.transcripts.conftest import SAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world(with_files=True)


def _start(client, world, **agent_fields):
    m.Agent.objects.filter(pk__in=[a.pk for a in world.agents]).update(**agent_fields)
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    return m.Episode.objects.get(participant=participant, position=1)


def test_a_claude_code_agent_page_names_the_session_file_and_its_folder(client, world):
    _start(client, world, log_format=LogFormat.CLAUDE_CODE, log_mode=m.Agent.LogMode.UPLOAD)
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "Which file to upload: Claude Code session file (.jsonl)" in html
    assert "<code>~/.claude/projects/&lt;your project folder&gt;/&lt;session id&gt;.jsonl</code>" in html
    assert "%USERPROFILE%\\.claude\\projects" in html


def test_a_terminal_agent_without_a_format_is_recognised_by_its_name(client, world):
    _start(client, world, log_format="", product="OpenAI Codex CLI", interface=m.Agent.Interface.TERMINAL)
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "~/.codex/sessions/&lt;year&gt;/&lt;month&gt;/&lt;day&gt;/rollout-" in html


def test_no_file_guidance_when_the_agent_only_takes_a_share_link(client, world):
    _start(client, world, log_format=LogFormat.GEMINI, log_mode=m.Agent.LogMode.SHARE_URL)
    assert "Which file to upload" not in client.get(reverse("worker:task", args=["pilot", 1])).content.decode()


def test_a_desktop_agent_gets_no_guessed_format():
    agent = m.Agent(name="Claude Cowork", slug="cowork", interface=m.Agent.Interface.DESKTOP)
    assert agent_log_source(agent) is None


def test_every_log_format_is_one_the_parsers_know():
    assert {str(f) for f in LOG_SOURCES} <= {str(f) for f in Format}


def test_a_session_file_uploads_as_a_log_and_its_metrics_never_reach_the_worker(client, world):
    episode = _start(client, world, log_format=LogFormat.CLAUDE_CODE)
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "few", "ready": "1"})
    response = client.post(reverse("worker:episode-upload", args=[episode.pk]),
                           {"kind": "log", "file": upload("abc.jsonl", (SAMPLES / "claude_code_session.jsonl")
                                                          .read_bytes())})
    assert response.status_code in (200, 302), response.content[:300]
    assert episode.files.filter(kind="log", name="abc.jsonl").exists()
    row = episode_transcript_build(episode_id=episode.pk)
    assert row.user_prompts == 4
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "abc.jsonl" in html
    assert "initiative" not in html.lower() and "user_prompts" not in html and "partial" not in html


NESTED_LOG = b'{"a":' * 6000  # 30 KB: the decoder would recurse once per level


@pytest.mark.parametrize("content", [NESTED_LOG, NESTED_LOG + b"1" + b"}" * 6000, b"[" * 30000])
def test_a_deeply_nested_json_log_leaves_every_worker_page_up(client, world, content):
    """Upload, task page and review page answer 200 before the background parse has run, and after it."""
    episode = _start(client, world, log_format=LogFormat.CLAUDE_CODE)
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "few", "ready": "1"})
    uploaded = client.post(reverse("worker:episode-upload", args=[episode.pk]),
                           {"kind": "log", "file": upload("session.json", content)}, HTTP_ACCEPT="application/json")
    assert uploaded.status_code == 200, uploaded.content[:300]
    assert episode.files.filter(kind="log", name="session.json").exists()
    task, review = reverse("worker:task", args=["pilot", 1]), reverse("worker:episode-submit", args=[episode.pk])
    assert client.get(task).status_code == 200
    assert client.get(review).status_code == 200
    row = episode_transcript_build(episode_id=episode.pk)  # the background parse: reported, not raised
    assert [f["status"] for f in row.files] == ["unreadable"]
    assert client.get(task).status_code == 200 and client.get(review).status_code == 200
