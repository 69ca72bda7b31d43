"""Logs are parsed on upload by a task sent on commit; the sweep re-sends a lost parse; nothing needs an LLM."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from grading import tasks
from grading.models import EpisodeTranscript
from grading.selectors import episode_log_format_warnings, episodes_owing_transcript, log_format_warning
from grading.services.reconcile import grading_reconcile
from grading.services.transcripts import episode_transcript_build
from grading.task_names import PARSE_LOG
from grading.transcripts import Format
from studies import models as m
from studies.log_sources import LogFormat
from studies.services.uploads import episode_file_add, episode_file_remove
from tests.factories.files import PNG, upload
from tests.factories.scenarios import submitted_episode
from tests.grading.transcripts.conftest import SAMPLES

pytestmark = pytest.mark.django_db

CLAUDE = (SAMPLES / "claude_code_session.jsonl").read_bytes()
CODEX = (SAMPLES / "codex_reduced_rollout.jsonl").read_bytes()


def _open_episode(agent_format: str = LogFormat.CODEX, **logs: bytes) -> m.Episode:
    episode = submitted_episode(status=m.Episode.Status.IN_PROGRESS, logs=logs or None)
    m.Agent.objects.filter(pk=episode.agent_id).update(log_format=agent_format)
    episode.agent.refresh_from_db()
    return episode


def _age_uploads(seconds: float = 600) -> None:
    m.EpisodeFile.objects.update(uploaded_at=timezone.now() - timedelta(seconds=seconds))


def test_a_log_upload_sends_one_parse_on_commit_and_a_deliverable_sends_none(
        sent_tasks, django_capture_on_commit_callbacks):
    episode = _open_episode()
    with django_capture_on_commit_callbacks(execute=True):
        episode_file_add(episode=episode, kind=m.EpisodeFile.Kind.DELIVERABLE, upload=upload("a.pdf", b"%PDF-1.4\n"))
    assert sent_tasks == []
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        episode_file_add(episode=episode, kind=m.EpisodeFile.Kind.LOG, upload=upload("rollout.jsonl", CODEX))
        assert sent_tasks == []  # nothing leaves before the row is committed
    assert len(callbacks) == 1 and sent_tasks == [(PARSE_LOG, [episode.pk])]


def test_removing_a_log_parses_again_so_the_transcript_forgets_the_file(
        sent_tasks, django_capture_on_commit_callbacks):
    episode = _open_episode(**{"rollout.jsonl": CODEX})
    assert episode_transcript_build(episode_id=episode.pk).user_prompts == 3
    log = episode.files.get(kind=m.EpisodeFile.Kind.LOG)
    with django_capture_on_commit_callbacks(execute=True):
        episode_file_remove(episode=episode, file_id=log.pk)
    assert sent_tasks == [(PARSE_LOG, [episode.pk])]
    assert tasks.parse_log.apply(args=[episode.pk]).get()["status"] == "no_log"
    row = EpisodeTranscript.objects.get(episode=episode)
    assert row.files == [] and row.user_prompts is None


def test_the_parse_task_writes_the_transcript_once_and_a_repeat_is_a_no_op():
    episode = _open_episode(**{"rollout.jsonl": CODEX})
    result = tasks.parse_log.apply(args=[episode.pk]).get()
    assert result["status"] == "parsed" and result["prompts"] == 3
    first = EpisodeTranscript.objects.get(episode=episode)
    assert tasks.parse_log.apply(args=[episode.pk]).get()["transcript"] == first.pk
    assert EpisodeTranscript.objects.get(episode=episode).parsed_at == first.parsed_at
    assert tasks.parse_log.apply(args=[10**9]).get() == {"status": "missing"}


def test_the_sweep_sends_a_parse_the_upload_message_lost_and_nothing_once_it_is_stored(sent_tasks):
    episode = _open_episode(**{"rollout.jsonl": CODEX})
    assert grading_reconcile().parses_sent == 0  # a fresh upload: its own message is on its way
    _age_uploads()
    report = grading_reconcile()
    assert report.parses_sent == 1 and sent_tasks == [(PARSE_LOG, [episode.pk])]
    tasks.parse_log.apply(args=[episode.pk])
    sent_tasks.clear()
    assert grading_reconcile().parses_sent == 0 and sent_tasks == []


def test_a_web_clock_ahead_of_the_workers_does_not_make_the_sweep_send_the_same_parse_forever(sent_tasks):
    episode = submitted_episode(logs={"session.jsonl": CLAUDE})
    row = episode_transcript_build(episode_id=episode.pk)
    ahead = row.parsed_at + timedelta(seconds=30)  # the upload's time, stamped by a clock running ahead
    m.EpisodeFile.objects.filter(episode=episode).update(uploaded_at=ahead)
    settled = ahead + timedelta(minutes=5)
    assert episodes_owing_transcript(settled_before=settled, recent_since=settled, limit=10) == [episode.pk]
    tasks.parse_log.apply(args=[episode.pk])
    assert episodes_owing_transcript(settled_before=settled, recent_since=settled, limit=10) == []
    assert EpisodeTranscript.objects.get(episode=episode).parsed_at == ahead


def test_the_sweep_reparses_an_older_parser_version_and_a_file_added_or_removed_since(sent_tasks):
    submitted = submitted_episode(logs={"session.jsonl": CLAUDE})
    episode_transcript_build(episode_id=submitted.pk)
    EpisodeTranscript.objects.filter(episode=submitted).update(parser_version="1")
    opened = _open_episode(**{"rollout.jsonl": CODEX, "extra.jsonl": CLAUDE})
    episode_transcript_build(episode_id=opened.pk)
    _age_uploads()
    opened.files.get(name="extra.jsonl").delete()  # removed while its parse message was lost
    grading_reconcile()
    assert sorted(args[0] for _name, args in sent_tasks) == sorted([submitted.pk, opened.pk])
    for pk in (submitted.pk, opened.pk):
        tasks.parse_log.apply(args=[pk])
    sent_tasks.clear()
    grading_reconcile()
    assert sent_tasks == []
    assert EpisodeTranscript.objects.get(episode=opened).formats == ["codex"]


@pytest.mark.parametrize(("expected", "found", "says"), [
    (LogFormat.GEMINI, Format.CLAUDE_CODE, "looks like a Claude Code session file (.jsonl), but this task's agent"),
    (LogFormat.CLAUDE_CODE, Format.CODEX, "looks like a Codex CLI session file (.jsonl)"),
    (LogFormat.TERMINAL, Format.GEMINI, "looks like a Gemini CLI saved chat (.json)"),
    (LogFormat.CODEX, Format.TERMINAL, "This is plain text, not the Codex CLI session file (.jsonl)"),
    (LogFormat.CODEX, Format.UNKNOWN, "could not recognise this file as a Codex CLI session file (.jsonl)"),
    (LogFormat.CODEX, Format.CODEX, ""),
    (LogFormat.CODEX, Format.SCREENSHOT, ""),
    (LogFormat.TERMINAL, Format.UNKNOWN, ""),
    (LogFormat.SCREENSHOT, Format.TERMINAL, ""),
    (None, Format.CLAUDE_CODE, ""),
])
def test_a_log_that_is_not_the_agents_session_file_gets_a_warning_that_allows_submitting(expected, found, says):
    warning = log_format_warning(expected=expected, found=found, agent_name="The agent")
    if says:
        assert says in warning and "you can still submit" in warning
    else:
        assert warning == ""


def test_the_warning_is_read_from_the_file_before_the_parse_and_from_the_transcript_after():
    episode = _open_episode(LogFormat.GEMINI, **{"session.jsonl": CLAUDE, "chat.json": (
        SAMPLES / "gemini_checkpoint.json").read_bytes(), "end.png": PNG})
    files = list(episode.files.all())
    by_name = {f.name: f.pk for f in files}
    before = episode_log_format_warnings(episode, files)
    assert list(before) == [by_name["session.jsonl"]] and "Claude Code" in before[by_name["session.jsonl"]]
    row = episode_transcript_build(episode_id=episode.pk)
    # The stored parse answers now: make it say something else to see which source is read.
    EpisodeTranscript.objects.filter(pk=row.pk).update(files=[
        {**f, "format": "gemini"} if f["name"] == "session.jsonl" else f for f in row.files])
    assert episode_log_format_warnings(episode, files) == {}
    m.EpisodeFile.objects.filter(pk=by_name["end.png"]).delete()  # the stored parse no longer matches the files
    assert list(episode_log_format_warnings(episode, list(episode.files.all()))) == [by_name["session.jsonl"]]


def test_the_transcript_admin_lists_an_upload_at_once_and_says_when_it_is_not_the_agents_log(client):
    from django.urls import reverse

    from tests.factories import UserFactory

    matching = _open_episode(LogFormat.CODEX, **{"rollout.jsonl": CODEX})
    wrong = _open_episode(LogFormat.GEMINI, **{"session.jsonl": CLAUDE})
    for episode in (matching, wrong):
        tasks.parse_log.apply(args=[episode.pk])
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    html = client.get(reverse("admin:grading_episodetranscript_changelist")).content.decode()
    assert "2 episode transcripts" in html
    assert "not for 1 file(s): session.jsonl" in html and html.count(">yes<") == 1


@pytest.mark.parametrize(("expected", "instead"), [
    (LogFormat.SCREENSHOT, "upload screenshots of your work instead"),
    (LogFormat.TERMINAL, "upload a copy of the terminal text instead"),
])
def test_the_warning_for_an_agent_without_a_session_file_says_what_to_upload_instead(expected, instead):
    warning = log_format_warning(expected=expected, found=Format.CLAUDE_CODE, agent_name="Manus")
    assert "Manus, which saves no session file" in warning and instead in warning
    assert "writes a" not in warning and "session file instead" not in warning
