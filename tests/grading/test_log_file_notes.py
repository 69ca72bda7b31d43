"""A recognised session file is confirmed to the worker with what it holds, not only a mismatch warned about.

"Claude Code session: 14 prompts, 48 tool calls." once the file is parsed; "Recognised as …" at once, from the
file's first bytes, while the parse is on its way; counts with the right number ("1 prompt").
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from grading import tasks
from grading.models import EpisodeTranscript
from grading.selectors import episode_log_file_notes, log_format_confirmation
from grading.transcripts import Format
from studies import models as m
from studies.log_sources import LogFormat
from tests.factories.files import PNG, upload
from tests.factories.scenarios import make_participant, make_world, submitted_episode
from tests.grading.transcripts.conftest import SAMPLES

CLAUDE = (SAMPLES / "claude_code_session.jsonl").read_bytes()
TERMINAL = (SAMPLES / "terminal_transcript.txt").read_bytes()


def _report(prompts: int, tool_calls: int, status: str = "parsed", bad_lines: int = 0) -> dict:
    return {"status": status, "user_prompts": prompts, "tool_calls": tool_calls, "bad_lines": bad_lines,
            "unknown_records": {"x-new-kind": 2} if status == "partial" else {}}


@pytest.mark.parametrize(("expected", "found", "report", "says"), [
    (LogFormat.CLAUDE_CODE, Format.CLAUDE_CODE, _report(14, 48), "Claude Code session: 14 prompts, 48 tool calls."),
    (LogFormat.CLAUDE_CODE, Format.CLAUDE_CODE, _report(1, 1), "Claude Code session: 1 prompt, 1 tool call."),
    (LogFormat.CODEX, Format.CODEX, _report(0, 2), "Codex CLI session: 0 prompts, 2 tool calls."),
    (LogFormat.GEMINI, Format.GEMINI, _report(3, 0, "partial", bad_lines=2),
     "Gemini CLI saved chat: 3 prompts, 0 tool calls. 2 lines could not be read; the rest is kept."),
    (LogFormat.CODEX, Format.CODEX, _report(3, 4, "partial", bad_lines=1),
     "Codex CLI session: 3 prompts, 4 tool calls. 1 line could not be read; the rest is kept."),
    # Record kinds the parser does not know yet are not the worker's concern.
    (LogFormat.CODEX, Format.CODEX, _report(3, 4, "partial"), "Codex CLI session: 3 prompts, 4 tool calls."),
    (LogFormat.TERMINAL, Format.TERMINAL, _report(1, 0), "Terminal transcript: 1 prompt found in the text."),
    (None, Format.CLAUDE_CODE, _report(2, 5), "Claude Code session: 2 prompts, 5 tool calls."),
    (LogFormat.CLAUDE_CODE, Format.CLAUDE_CODE, None,
     "Recognised as a Claude Code session file (.jsonl). Its prompts are being counted; reload the page in a minute "
     "to see them."),
    # Nothing to confirm: someone else's session file (the warning speaks), an image, any text where the agent
    # writes a session file, a file nothing could be read from.
    (LogFormat.GEMINI, Format.CLAUDE_CODE, _report(2, 5), ""),
    (LogFormat.SCREENSHOT, Format.SCREENSHOT, None, ""),
    (LogFormat.CLAUDE_CODE, Format.TERMINAL, _report(4, 0), ""),
    (None, Format.TERMINAL, _report(4, 0), ""),
    (LogFormat.CLAUDE_CODE, Format.CLAUDE_CODE, _report(0, 0, "unreadable"), ""),
])
def test_a_recognised_session_file_is_confirmed_with_its_counts(expected, found, report, says):
    assert log_format_confirmation(expected=expected, found=found, report=report) == says


@pytest.mark.django_db
def test_the_confirmation_shows_at_once_and_gains_the_counts_once_the_file_is_parsed():
    episode = submitted_episode(status=m.Episode.Status.IN_PROGRESS,
                                logs={"session.jsonl": CLAUDE, "end.png": PNG})
    m.Agent.objects.filter(pk=episode.agent_id).update(log_format=LogFormat.CLAUDE_CODE)
    episode.agent.refresh_from_db()
    files = {f.name: f for f in episode.files.all()}
    before = episode_log_file_notes(episode, files.values())
    assert list(before) == [files["session.jsonl"].pk], "a screenshot gets no note"
    assert not before[files["session.jsonl"].pk].warning
    assert before[files["session.jsonl"].pk].text.startswith("Recognised as a Claude Code session file")

    tasks.parse_log.apply(args=[episode.pk])
    report = next(r for r in EpisodeTranscript.objects.get(episode=episode).files if r["name"] == "session.jsonl")
    prompts, calls, bad = report["user_prompts"], report["tool_calls"], report["bad_lines"]
    assert prompts > 1 and calls > 1 and bad == 1  # the sample holds one broken line
    after = episode_log_file_notes(episode, files.values())[files["session.jsonl"].pk]
    assert after.text == (f"Claude Code session: {prompts} prompts, {calls} tool calls. 1 line could not be read; "
                          "the rest is kept.") and not after.warning


@pytest.mark.django_db
def test_the_task_page_and_the_upload_reply_confirm_a_recognised_file(client, settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {**settings.STORAGES["default"], "OPTIONS": {
        **settings.STORAGES["default"].get("OPTIONS", {}), "location": str(tmp_path)}}}
    world = make_world(agents=1)
    m.Agent.objects.update(name="Claude Code", log_format=LogFormat.TERMINAL, log_mode=m.Agent.LogMode.UPLOAD)
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    episode = m.Episode.objects.get(participant=participant, position=1)
    reply = client.post(reverse("worker:episode-upload", args=[episode.pk]),
                        {"kind": "log", "file": upload("session.txt", TERMINAL)}, HTTP_ACCEPT="application/json")
    body = reply.json()["files"][0]
    assert body["warning"] == "" and body["recognised"].startswith("Recognised as a Terminal transcript (.txt)")
    tasks.parse_log.apply(args=[episode.pk])
    prompts = EpisodeTranscript.objects.get(episode=episode).user_prompts
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    noun = "prompt" if prompts == 1 else "prompts"
    assert f'<p class="file-recognised" role="note">Terminal transcript: {prompts} {noun} found in the text.</p>' \
        in html
