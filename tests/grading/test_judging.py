"""Judge runs against the fake OpenAI and Anthropic servers: requests, validation, repair, records."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from grading.extract import TRUNCATION_NOTICE
from grading.models import CriterionScore, Extraction, JudgeRun, LLMUsage, Rubric
from grading.prompts import JUDGE_PROMPT_VERSION
from grading.services.pipeline import episode_grade
from tests.factories import StudyFactory, TaskFactory
from tests.factories.files import png_bytes
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode
from tests.grading.responders import judge_reply
from tests.llm_server import ErrorReply, image_blocks, prompt_of

pytestmark = pytest.mark.django_db


def one_judge_episode(provider: str, model: str, **kwargs):
    study = StudyFactory(judges=[{"provider": provider, "model": model, **kwargs.pop("judge", {})}])
    episode = submitted_episode(study=study, **kwargs)
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    return episode


@pytest.mark.parametrize(("provider", "model", "path"), [("openai", "gpt-4.1", "/v1/chat/completions"),
                                                         ("anthropic", "claude-sonnet-4-6", "/v1/messages")])
def test_a_judge_scores_every_criterion_through_each_providers_wire_format(llm_server, sent_tasks, provider, model,
                                                                            path):
    episode = one_judge_episode(provider, model)
    outcome = episode_grade(episode_id=episode.pk)
    assert outcome.status == "graded" and outcome.score == 80
    run = JudgeRun.objects.get()
    assert (run.provider, run.model, run.status, run.total) == (provider, model, "succeeded", 80)
    assert run.prompt_version == JUDGE_PROMPT_VERSION and run.rubric == episode.task.rubrics.get()
    assert run.criterion_scores.count() == 8
    assert all(s.reason for s in run.criterion_scores.all())
    assert run.summary == "Solid work with minor gaps."
    assert run.input_tokens > 0 and run.output_tokens > 0 and run.cost_usd > 0
    assert json.loads(run.raw_response)["criteria"][0]["key"] == "C1"
    assert [r.path for r in llm_server.requests] == [path]
    request = llm_server.requests[0]
    assert request.body["model"] == model


def test_the_judge_sees_the_task_rubric_hidden_info_and_deliverable_text(llm_server):
    episode = one_judge_episode("openai", "gpt-4.1")
    episode_grade(episode_id=episode.pk)
    _system, user = prompt_of(llm_server.requests[0].body)
    assert episode.task.prompt in user
    assert "GOLD: the correct total is 1,234,567." in user
    assert "Grand total: 1,234,567" in user  # the deliverable's text
    assert '"key": "C8"' in user
    assert TRUNCATION_NOTICE not in user


def test_cost_tokens_and_latency_are_recorded_per_call(llm_server):
    episode = one_judge_episode("anthropic", "claude-sonnet-4-6")
    episode_grade(episode_id=episode.pk)
    run = JudgeRun.objects.get()
    usage = LLMUsage.objects.get()
    assert (usage.study, usage.purpose, usage.provider, usage.model) == (episode.study, "judge", "anthropic",
                                                                         "claude-sonnet-4-6")
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (run.input_tokens, run.output_tokens,
                                                                         run.cost_usd)
    expected = (Decimal(run.input_tokens) * 3 + Decimal(run.output_tokens) * 15) / Decimal(1_000_000)
    assert abs(run.cost_usd - expected) < Decimal("0.000002")
    assert usage.prompt_version == JUDGE_PROMPT_VERSION and run.error == ""


def test_a_model_without_a_price_is_recorded_at_zero_cost_with_a_note(llm_server):
    episode = one_judge_episode("openai", "local-llama")
    episode_grade(episode_id=episode.pk)
    run = JudgeRun.objects.get()
    assert run.status == "succeeded" and run.cost_usd == 0 and "no price is configured" in run.error


def test_a_rate_limit_is_retried_and_then_succeeds(llm_server):
    episode = one_judge_episode("openai", "gpt-4.1")
    llm_server.enqueue("openai", ErrorReply(429, "slow down", retry_after=0))
    assert episode_grade(episode_id=episode.pk).status == "graded"
    assert len(llm_server.requests) == 2
    assert JudgeRun.objects.get().status == "succeeded"


def test_sums_claimed_by_the_judge_are_ignored_and_recomputed(llm_server):
    episode = one_judge_episode("openai", "gpt-4.1")
    llm_server.enqueue("openai", judge_reply(earned={"C1": 5, "C2": 0}, fraction=1.0))  # C1, C2: correctness
    episode_grade(episode_id=episode.pk)
    run = JudgeRun.objects.get()
    assert run.category_totals == {"correctness": 5, "completeness": 20, "requirements": 25, "technical": 15}
    assert run.total == 65
    assert json.loads(run.raw_response)["total"] == 999


def test_earned_above_the_maximum_is_sent_back_for_repair(llm_server):
    episode = one_judge_episode("anthropic", "claude-sonnet-4-6")
    llm_server.enqueue("anthropic", judge_reply(earned={"C1": 25}))  # C1 is worth 20
    assert episode_grade(episode_id=episode.pk).status == "graded"
    second = prompt_of(llm_server.requests[1].body)[1]
    assert 'criterion "C1": earned 25 exceeds its maximum of 20' in second
    assert CriterionScore.objects.get(criterion__key="C1").earned == 16
    assert list(LLMUsage.objects.order_by("pk").values_list("succeeded", flat=True)) == [False, True]


def test_a_judge_that_keeps_exceeding_the_maximum_fails_with_the_reason(llm_server):
    episode = one_judge_episode("openai", "gpt-4.1")
    llm_server.enqueue("openai", *[judge_reply(earned={"C3": 50})] * 3)
    outcome = episode_grade(episode_id=episode.pk)
    run = JudgeRun.objects.get()
    assert run.status == "failed" and "exceeds its maximum" in run.error
    assert run.total is None and not run.criterion_scores.exists()
    assert outcome.status == "failed" and "exceeds its maximum" in outcome.note
    assert LLMUsage.objects.filter(succeeded=False).count() == 3


def test_unknown_and_missing_criteria_are_rejected(llm_server):
    episode = one_judge_episode("openai", "gpt-4.1")
    llm_server.enqueue("openai", judge_reply(drop=["C2"], extra=[{"key": "C99", "earned": 1, "reason": "?"}]))
    episode_grade(episode_id=episode.pk)
    repair = prompt_of(llm_server.requests[1].body)[1]
    assert '"C99" is not in the rubric' in repair and "no score for criteria: C2" in repair
    assert JudgeRun.objects.get().status == "succeeded"


def test_malformed_json_is_repaired(llm_server):
    episode = one_judge_episode("anthropic", "claude-sonnet-4-6")
    llm_server.enqueue("anthropic", "Sure! {\"criteria\": [")
    assert episode_grade(episode_id=episode.pk).status == "graded"
    assert len(llm_server.requests) == 2


@pytest.mark.parametrize(("provider", "model", "kind"), [("openai", "gpt-4.1", "image_url"),
                                                         ("anthropic", "claude-sonnet-4-6", "image")])
def test_deliverable_images_reach_the_vision_request(llm_server, provider, model, kind):
    episode = one_judge_episode(provider, model, files={"chart.png": png_bytes(), "report.txt": b"See chart."})
    episode_grade(episode_id=episode.pk)
    blocks = image_blocks(llm_server.requests[0].body)
    assert [b["type"] for b in blocks] == [kind]
    assert "1 image file(s) from the submission are attached" in prompt_of(llm_server.requests[0].body)[1]


def test_a_text_only_judge_gets_no_images_and_is_told_so(llm_server):
    episode = one_judge_episode("openai", "gpt-4.1", judge={"vision": False}, files={"chart.png": png_bytes()})
    episode_grade(episode_id=episode.pk)
    assert image_blocks(llm_server.requests[0].body) == []
    assert "image not shown to this judge" in prompt_of(llm_server.requests[0].body)[1]


def test_long_deliverables_are_cut_with_the_truncation_notice_and_stored_for_audit(llm_server, settings):
    settings.GRADING = {**settings.GRADING, "EXTRACT_MAX_CHARS": 2000}
    episode = one_judge_episode("openai", "gpt-4.1", files={"long.txt": b"line of text\n" * 5000})
    episode_grade(episode_id=episode.pk)
    user = prompt_of(llm_server.requests[0].body)[1]
    assert TRUNCATION_NOTICE in user and "[[TRUNCATED:" in user
    stored = Extraction.objects.get(episode=episode)
    assert stored.truncated and stored.content["parts"][0]["name"] == "long.txt"


def test_a_judge_list_entry_from_an_unknown_provider_is_a_configuration_error(llm_server):
    from django.core.exceptions import ImproperlyConfigured

    study = StudyFactory(judges=[{"provider": "gemini", "model": "g-1"}])
    episode = submitted_episode(study=study, task=TaskFactory())
    with pytest.raises(ImproperlyConfigured, match="unknown provider 'gemini'"):
        episode_grade(episode_id=episode.pk)
