"""Coding collaboration logs for the 11 AI-fluency behaviours (paper App. H)."""

from __future__ import annotations

import json

import pytest

from grading.exceptions import GradingWaiting, NotGradable, RetryLater
from grading.models import FluencyCoding, LLMUsage
from grading.prompts import FLUENCY_PROMPT_VERSION
from grading.schemas import FLUENCY_CODES
from grading.services.fluency import episode_code_log
from studies.models import Episode
from tests.factories.files import png_bytes
from tests.factories.scenarios import submitted_episode
from tests.grading.responders import fluency_dict
from tests.llm_server import ErrorReply, image_blocks, prompt_of

pytestmark = pytest.mark.django_db

TRANSCRIPT = (b"user: I need a budget summary for the CFO, formal tone, one page.\n"
              b"agent: Here is a draft.\nuser: The Q2 figure looks wrong, check it against the CSV.\n")


def test_a_text_log_is_coded_for_all_eleven_behaviours(llm_server):
    episode = submitted_episode(logs={"session.txt": TRANSCRIPT})
    coding = episode_code_log(episode_id=episode.pk)
    assert coding.status == FluencyCoding.Status.SUCCEEDED and coding.is_current
    assert set(coding.behaviours) == set(FLUENCY_CODES)
    assert coding.behaviours["checks_facts_and_claims"] == {"present": True,
                                                 "reason": "The worker did this in turn 2. Second line."}
    assert coding.behaviours["defines_audience"]["present"] is False
    assert coding.behaviour_count == 3
    assert (coding.provider, coding.model, coding.prompt_version) == ("anthropic", "claude-sonnet-4-6",
                                                                     FLUENCY_PROMPT_VERSION)
    _system, user = prompt_of(llm_server.requests[0].body)
    assert "The Q2 figure looks wrong" in user
    assert LLMUsage.objects.get().purpose == "fluency"


def test_screenshots_of_a_session_reach_the_vision_request(llm_server):
    episode = submitted_episode(logs={"step1.png": png_bytes()})
    coding = episode_code_log(episode_id=episode.pk)
    assert coding.status == "succeeded"
    assert [b["type"] for b in image_blocks(llm_server.requests[0].body)] == ["image"]


def test_a_share_link_alone_is_recorded_but_never_fetched(llm_server):
    episode = submitted_episode(share_url="https://manus.im/share/abc123")
    coding = episode_code_log(episode_id=episode.pk)
    assert coding.status == FluencyCoding.Status.NO_LOG
    assert "https://manus.im/share/abc123" in coding.error and "not fetched" in coding.error
    assert llm_server.requests == []


def test_an_episode_without_any_log_is_marked_no_log(llm_server):
    coding = episode_code_log(episode_id=submitted_episode().pk)
    assert coding.status == "no_log" and coding.error == "No collaboration log file was uploaded."


def test_a_log_that_cannot_be_read_is_marked_no_log_with_the_reason(llm_server):
    episode = submitted_episode(logs={"call.mp3": b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(500)})
    coding = episode_code_log(episode_id=episode.pk)
    assert coding.status == "no_log" and "call.mp3" in coding.error
    assert llm_server.requests == []


def test_coding_is_idempotent_and_force_adds_a_new_current_coding(llm_server):
    episode = submitted_episode(logs={"session.txt": TRANSCRIPT})
    first = episode_code_log(episode_id=episode.pk)
    assert episode_code_log(episode_id=episode.pk) == first
    assert len(llm_server.requests) == 1
    second = episode_code_log(episode_id=episode.pk, force=True)
    first.refresh_from_db()
    assert second != first and second.is_current and not first.is_current


def test_a_coder_outside_the_participants_consent_is_not_sent_the_log(llm_server):
    episode = submitted_episode(providers=["openai"], logs={"session.txt": TRANSCRIPT})
    coding = episode_code_log(episode_id=episode.pk)
    assert coding.status == "failed" and "does not name anthropic" in coding.error
    assert llm_server.requests == []


def test_invalid_coding_is_repaired(llm_server):
    broken = fluency_dict()
    broken.pop("defines_audience")
    llm_server.enqueue("anthropic", json.dumps(broken))
    episode = submitted_episode(logs={"session.txt": TRANSCRIPT})
    assert episode_code_log(episode_id=episode.pk).status == "succeeded"
    assert "defines_audience" in prompt_of(llm_server.requests[1].body)[1]


def test_provider_trouble_asks_for_a_retry_then_fails_on_the_last_attempt(llm_server):
    llm_server.default_responder = lambda body: ErrorReply(502)
    episode = submitted_episode(logs={"session.txt": TRANSCRIPT})
    with pytest.raises(RetryLater):
        episode_code_log(episode_id=episode.pk, final_attempt=False)
    coding = episode_code_log(episode_id=episode.pk, final_attempt=True)
    assert coding.status == "failed" and "HTTP 502" in coding.error


def test_without_a_key_coding_waits(no_llm_keys):
    episode = submitted_episode(logs={"session.txt": TRANSCRIPT})
    with pytest.raises(GradingWaiting, match="No judge is configured.*code_logs --pending"):
        episode_code_log(episode_id=episode.pk)
    assert not FluencyCoding.objects.exists()


def test_unsubmitted_episodes_are_not_coded(llm_server):
    episode = submitted_episode(logs={"session.txt": TRANSCRIPT})
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.IN_PROGRESS)
    with pytest.raises(NotGradable):
        episode_code_log(episode_id=episode.pk)


def test_the_coder_reads_the_normalised_transcript_not_the_raw_session_file(llm_server):
    from tests.grading.transcripts.conftest import SAMPLES

    episode = submitted_episode(logs={"session.jsonl": (SAMPLES / "claude_code_session.jsonl").read_bytes(),
                                      "end.png": png_bytes()})
    coding = episode_code_log(episode_id=episode.pk)
    assert coding.status == "succeeded"
    _system, user = prompt_of(llm_server.requests[0].body)
    assert "WORKER: Fiscal year, starting in April." in user
    assert "SUB-AGENT WORKER: Summarise the columns of sales.csv" in user
    assert "TOOL CALL: Bash" in user and "Claude Code session (JSONL)" in user
    assert '"parentUuid"' not in user  # no raw JSON records
    assert "end.png" in user  # the screenshot is still listed and attached
    assert [b["type"] for b in image_blocks(llm_server.requests[0].body)] == ["image"]
    assert episode.transcript.user_prompts == 4


def test_the_coder_is_told_when_the_transcript_was_shortened(llm_server):
    line = json.dumps({"type": "user", "sessionId": "s", "uuid": "u",
                       "message": {"role": "user", "content": "Please draft the memo. " * 400}})
    episode = submitted_episode(logs={"session.jsonl": line.encode()})
    episode_code_log(episode_id=episode.pk)
    _system, user = prompt_of(llm_server.requests[0].body)
    assert "Some deliverable files were too long" in user
    assert "shortened to fit the reading budget" in user


def test_a_broken_session_file_is_reported_to_the_coder_and_kept(llm_server):
    episode = submitted_episode(logs={"notes.txt": TRANSCRIPT, "session.jsonl": b'{"type": "user", "mess'})
    coding = episode_code_log(episode_id=episode.pk)
    assert coding.status == "succeeded"
    assert episode.transcript.status == "partial"
    assert {f["name"]: f["status"] for f in episode.transcript.files} == {"notes.txt": "parsed",
                                                                           "session.jsonl": "unreadable"}


def test_the_coder_is_told_when_only_screenshots_exist(llm_server):
    episode = submitted_episode(logs={"01.png": png_bytes(), "02.png": png_bytes()})
    episode_code_log(episode_id=episode.pk)
    _system, user = prompt_of(llm_server.requests[0].body)
    assert "Only screenshots of this session were uploaded" in user
    assert episode.transcript.status == "screenshots_only" and episode.transcript.screenshots == 2
