"""Theory-of-mind and response-quality coding of parsed logs, by two judges of different families (issue 39)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from grading.exceptions import CodingInFlight, GradingWaiting, NotGradable
from grading.models import GradingFollowUp, LLMUsage, ProcessCoding
from grading.prompts import QUALITY_PROMPT_VERSION, TOM_PROMPT_VERSION
from grading.selectors import study_process_codes
from grading.services.process_coding import _claim, episode_code_process
from grading.services.reconcile import grading_reconcile
from grading.task_names import CODE_PROCESS
from grading.transcripts.effort import levenshtein
from tests.factories import StudyFactory
from tests.factories.files import png_bytes
from tests.factories.scenarios import submitted_episode
from tests.factories.tasks import TaskFactory, TaskFileFactory
from tests.grading.responders import purpose_of
from tests.llm_server import prompt_of

pytestmark = pytest.mark.django_db

GOLD = "GOLD-SECRET-TOTAL 9,876,543"
HIDDEN_FILE = "HIDDEN-FILE-SECRET quarterly gold sheet"
AGENT_SAYS = "AGENT-ONLY: I will compute the totals from the ledger."
TOOL_OUTPUT = "TOOL-ONLY-OUTPUT row1,row2"


def _session(*prompts: str) -> bytes:
    """A Claude Code session: the worker's prompts, each answered by the agent, with a tool call and a sub-agent."""
    records = []
    for i, text in enumerate(prompts):
        records.append({"type": "user", "sessionId": "s", "uuid": f"u{i}", "timestamp": f"2025-06-02T10:0{i}:00Z",
                        "message": {"role": "user", "content": text}})
        records.append({"type": "assistant", "sessionId": "s", "uuid": f"a{i}", "timestamp": f"2025-06-02T10:0{i}:05Z",
                        "message": {"id": f"m{i}", "role": "assistant", "content": [
                            {"type": "text", "text": AGENT_SAYS},
                            {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "cat x"}}]}})
        records.append({"type": "user", "sessionId": "s", "uuid": f"r{i}", "timestamp": f"2025-06-02T10:0{i}:06Z",
                        "message": {"role": "user", "content": [
                            {"type": "tool_result", "tool_use_id": f"t{i}", "content": TOOL_OUTPUT}]}})
    records.append({"type": "user", "sessionId": "s", "uuid": "side", "isSidechain": True,
                    "timestamp": "2025-06-02T10:09:00Z",
                    "message": {"role": "user", "content": "SUBAGENT-PROMPT summarise the ledger"}})
    return "\n".join(json.dumps(r) for r in records).encode()


PROMPTS = ("Hi! I'm an accountant; you can't see our ledger, so here is what matters: Q2 is April to June. tom: 4",
           "Thanks. I think you assumed calendar quarters, could you be wrong? Please check against the CSV.")


def _study(**fields):
    return StudyFactory(tom_coding=True, **fields)


def _episode(study=None, logs=None, **fields):
    study = study or _study()
    task = TaskFactory(hidden_info=GOLD)
    TaskFileFactory(task=task, kind="hidden", name="gold.txt", content=HIDDEN_FILE.encode())
    return submitted_episode(study=study, task=task, logs={"session.jsonl": _session(*PROMPTS)} if logs is None
                             else logs, **fields)


def _bodies(server, purpose):
    return [r for r in server.requests if purpose_of(r.body) == purpose]


def test_each_instrument_is_coded_once_by_each_of_the_two_judges(llm_server):
    episode = _episode()
    codings = episode_code_process(episode_id=episode.pk)
    got = sorted((c.instrument, c.provider, c.family, c.status, c.score, c.is_current) for c in codings)
    assert got == [("response_quality", "anthropic", "anthropic", "succeeded", 4, True),
                   ("response_quality", "openai", "openai", "succeeded", 4, True),
                   ("tom", "anthropic", "anthropic", "succeeded", 4, True),
                   ("tom", "openai", "openai", "succeeded", 4, True)]
    tom = ProcessCoding.objects.get(instrument="tom", provider="openai")
    assert tom.markers == ["challenges_ai", "rapport"] and tom.prompt_version == TOM_PROMPT_VERSION
    assert tom.reason == "The worker shows 2 markers. Second line."
    assert ProcessCoding.objects.get(instrument="response_quality", provider="openai").prompt_version == \
        QUALITY_PROMPT_VERSION
    assert sorted(LLMUsage.objects.values_list("purpose", "provider")) == [
        ("response_quality", "anthropic"), ("response_quality", "openai"), ("tom", "anthropic"), ("tom", "openai")]
    assert tom.cost_usd > 0
    # Idempotent: a second message pays for nothing.
    assert sorted(c.pk for c in episode_code_process(episode_id=episode.pk)) == sorted(c.pk for c in codings)
    assert len(llm_server.requests) == 4


def test_the_tom_coder_sees_only_the_workers_prompts_and_no_hidden_information(llm_server):
    episode = _episode()
    episode_code_process(episode_id=episode.pk)
    tom = _bodies(llm_server, "tom")
    assert len(tom) == 2 and {r.provider for r in tom} == {"openai", "anthropic"}
    for request in tom:
        raw = json.dumps(request.body)
        _system, user = prompt_of(request.body)
        assert PROMPTS[0].split(";")[0] in user and "could you be wrong?" in user
        for secret in (AGENT_SAYS.split(":")[0], "compute the totals", TOOL_OUTPUT, "SUBAGENT-PROMPT", GOLD,
                       HIDDEN_FILE, "GOLD:", episode.task.title, episode.task.prompt):
            assert secret not in raw, secret
    for request in _bodies(llm_server, "response_quality"):
        raw = json.dumps(request.body)
        assert "compute the totals from the ledger" in raw and "could you be wrong?" in raw
        for secret in (TOOL_OUTPUT, "SUBAGENT-PROMPT", GOLD, HIDDEN_FILE, episode.task.prompt):
            assert secret not in raw, secret


@pytest.mark.parametrize(("logs", "reason"), [
    ({}, "No collaboration log file was uploaded."),
    ({"01.png": png_bytes()}, "Only screenshots of the session were uploaded"),
    ({"call.mp3": b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(500)}, "No log file could be parsed (call.mp3"),
])
def test_an_episode_without_a_parsable_log_is_not_coded_never_scored_zero(llm_server, logs, reason):
    episode = _episode(logs=logs)
    codings = episode_code_process(episode_id=episode.pk)
    assert len(codings) == 4 and llm_server.requests == []
    for coding in codings:
        assert coding.status == "not_coded" and coding.score is None and coding.error.startswith(reason)
    rows = study_process_codes(episode.study_id)
    assert [r.tom["openai/gpt-4.1"].score for r in rows] == [None]


def test_a_log_with_prompts_but_no_agent_reply_codes_tom_and_not_quality(llm_server):
    episode = _episode(logs={"session.txt": b"user: Hello, I'm new to this; please draft the memo.\n"})
    codings = {(c.instrument, c.provider): c for c in episode_code_process(episode_id=episode.pk)}
    assert codings[("tom", "openai")].status == "succeeded"
    assert codings[("response_quality", "openai")].status == "not_coded"
    assert "no reply from the agent" in codings[("response_quality", "openai")].error


@pytest.mark.parametrize("pair", [
    [{"provider": "openai", "model": "gpt-4.1"}, {"provider": "openai", "model": "gpt-4.1-mini"}],
    [{"provider": "openai", "model": "gpt-4.1"}],
])
def test_two_judges_of_one_family_or_not_two_are_refused_with_the_reason(llm_server, pair):
    study = _study()
    study.tom_coders = pair
    with pytest.raises(ValidationError, match="tom_coders"):
        study.full_clean()
    study.save()
    episode = _episode(study=study)
    with pytest.raises(GradingWaiting, match=f"study {study.slug} tom_coders") as caught:
        episode_code_process(episode_id=episode.pk)
    assert ("same" in caught.value.reason or "family" in caught.value.reason or "exactly two" in caught.value.reason)
    assert llm_server.requests == [] and not ProcessCoding.objects.exists()


def test_the_default_pair_from_settings_is_checked_too(llm_server, settings):
    settings.GRADING = {**settings.GRADING, "TOM_CODERS": [{"provider": "anthropic", "model": "claude-sonnet-4-6"},
                                                           {"provider": "anthropic", "model": "claude-haiku-4-5"}]}
    episode = _episode()
    with pytest.raises(GradingWaiting, match=r"GRADING\['TOM_CODERS'\].*both ToM judges are of the anthropic"):
        episode_code_process(episode_id=episode.pk)


def test_a_study_that_does_not_code_tom_is_refused_and_untouched(llm_server):
    episode = _episode(study=StudyFactory())
    with pytest.raises(NotGradable, match="does not code theory of mind"):
        episode_code_process(episode_id=episode.pk)
    assert llm_server.requests == []


def test_a_live_claim_makes_a_duplicate_message_pay_nothing_and_a_lapsed_one_is_taken_over(llm_server, settings):
    from grading.providers import tom_coders

    episode = _episode()
    first, second = tom_coders(episode.study)
    held = _claim(episode, "tom", first, force=False)  # another worker is mid-call for this judge
    codings = episode_code_process(episode_id=episode.pk)
    assert ("tom", first.provider) not in {(c.instrument, c.provider) for c in codings}
    assert len(llm_server.requests) == 3
    again = episode_code_process(episode_id=episode.pk, instruments=("tom",))  # a duplicate message
    assert [(c.instrument, c.provider) for c in again] == [("tom", second.provider)]
    assert len(llm_server.requests) == 3
    with pytest.raises(CodingInFlight):  # a second claim on the held coding is refused
        _claim(episode, "tom", first, force=True)
    ProcessCoding.objects.filter(pk=held.pk).update(lease_expires_at=None)  # the holder died
    taken = episode_code_process(episode_id=episode.pk, instruments=("tom",))
    assert any(c.pk == held.pk and c.status == "succeeded" for c in taken)
    assert ProcessCoding.objects.filter(instrument="tom", provider=first.provider).count() == 1
    assert len(llm_server.requests) == 4


def test_a_reply_whose_claim_was_taken_over_is_paid_but_not_stored_twice(llm_server):
    from grading.providers import tom_coders
    from grading.services.process_coding import _call, _prompt
    from grading.services.transcripts import episode_transcript_build

    episode = _episode()
    spec = tom_coders(episode.study)[0]
    stale = _claim(episode, "tom", spec, force=False)
    ProcessCoding.objects.filter(pk=stale.pk).update(lease_expires_at=None)
    _claim(episode, "tom", spec, force=False)  # a second worker took the lapsed claim over
    prompt, _ = _prompt("tom", episode, episode_transcript_build(episode_id=episode.pk))
    row = _call(stale, spec, prompt, final_attempt=True)  # the slow first worker's reply arrives
    assert row.status == "running" and not row.is_current
    assert LLMUsage.objects.filter(purpose="tom").count() == 1  # its cost is on the books


def test_a_staff_rerun_adds_a_new_current_coding_and_keeps_the_old_one(llm_server):
    episode = _episode()
    episode_code_process(episode_id=episode.pk)
    call_command("code_processes", episode=episode.pk, sync=True, force=True, instrument=["tom"])
    rows = ProcessCoding.objects.filter(episode=episode, instrument="tom", provider="openai").order_by("pk")
    assert [r.is_current for r in rows] == [False, True]
    assert ProcessCoding.objects.filter(episode=episode, instrument="response_quality").count() == 2


def test_consent_that_does_not_name_a_judges_provider_keeps_the_log_from_it(llm_server):
    episode = _episode(providers=["openai"])
    codings = {(c.instrument, c.provider): c for c in episode_code_process(episode_id=episode.pk)}
    assert codings[("tom", "anthropic")].status == "failed"
    assert "does not name anthropic" in codings[("tom", "anthropic")].error
    assert {r.provider for r in llm_server.requests} == {"openai"}


def test_the_sweep_opens_and_sends_a_coding_for_graded_episodes_that_owe_one(llm_server, sent_tasks, settings):
    settings.GRADING = {**settings.GRADING, "FOLLOW_UP_GRACE_SECONDS": 0.0}
    owing = _episode(status="graded")
    _episode(study=StudyFactory(), status="graded")  # a study without ToM coding: left alone
    report = grading_reconcile()
    assert report.process_codings_opened == 1 and report.process_codings_sent == 1
    assert [args for name, args in sent_tasks if name == CODE_PROCESS] == [[owing.pk]]
    episode_code_process(episode_id=owing.pk)  # the message's work closes the row
    assert not GradingFollowUp.objects.filter(kind="process", done_at__isnull=True).exists()
    assert grading_reconcile().process_codings_opened == 0


def test_the_selector_gives_the_stats_module_plain_rows(llm_server):
    episode = _episode()
    episode_code_process(episode_id=episode.pk)
    [row] = study_process_codes(episode.study_id)
    assert (row.episode_id, row.worker_id, row.condition) == (episode.pk, episode.participant_id, "with_agent")
    assert row.worker_turns == 2 and row.worker_chars == sum(len(p) for p in PROMPTS)
    expected = levenshtein("\n".join(PROMPTS), episode.task.prompt) / max(len("\n".join(PROMPTS)),
                                                                          len(episode.task.prompt))
    assert row.edit_ratio == pytest.approx(expected) and 0 < row.edit_ratio <= 1
    assert {k: v.score for k, v in row.tom.items()} == {"anthropic/claude-sonnet-4-6": 4, "openai/gpt-4.1": 4}
    assert {k: v.family for k, v in row.response_quality.items()} == {"anthropic/claude-sonnet-4-6": "anthropic",
                                                                      "openai/gpt-4.1": "openai"}


def test_a_grade_in_a_tom_study_asks_for_the_coding_and_other_studies_are_untouched(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    from grading.services.pipeline import episode_grade

    coded, plain = _episode(), _episode(study=StudyFactory())
    for episode in (coded, plain):
        with django_capture_on_commit_callbacks(execute=True):
            assert episode_grade(episode_id=episode.pk).status == "graded"
    assert (CODE_PROCESS, [coded.pk]) in sent_tasks and (CODE_PROCESS, [plain.pk]) not in sent_tasks
    assert list(GradingFollowUp.objects.filter(kind="process").values_list("episode_id", flat=True)) == [coded.pk]
    assert not _bodies(llm_server, "tom")  # grading itself codes nothing


def test_the_consent_page_names_the_tom_judges_providers(db):
    from grading.consent import consent_providers
    from tests.factories.studies import ConsentVersionFactory

    study = _study(judges=[{"provider": "openai", "model": "gpt-4.1"}, {"provider": "openai", "model": "gpt-4o"}],
                   tom_coders=[{"provider": "openai", "model": "gpt-4.1"},
                               {"provider": "anthropic", "model": "claude-sonnet-4-6"}])
    consent = ConsentVersionFactory(study=study, llm_providers=[])
    assert consent_providers(consent) == ["OpenAI", "Anthropic"]


def test_the_command_queues_owing_episodes_and_refuses_a_study_without_tom_coding(llm_server, sent_tasks):
    from django.core.management.base import CommandError

    episode = _episode(status="graded")
    call_command("code_processes", study=episode.study.slug)
    assert sent_tasks == [(CODE_PROCESS, [episode.pk])]
    with pytest.raises(CommandError, match="does not code theory of mind"):
        call_command("code_processes", study=StudyFactory().slug)
    with pytest.raises(CommandError, match="need --sync"):
        call_command("code_processes", pending=True, force=True)


def test_the_task_reports_in_flight_and_skipped_without_raising(llm_server):
    from grading.tasks import code_process

    episode = _episode(study=StudyFactory())
    assert code_process.apply(args=[episode.pk]).get()["status"] == "skipped"
    coded = _episode()
    result = code_process.apply(args=[coded.pk]).get()
    assert result["status"] == "coded" and len(result["codings"]) == 4
