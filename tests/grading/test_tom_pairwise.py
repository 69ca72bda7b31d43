"""Pairwise ToM robustness run through the real SDKs: per pair x order x judge, exactly once, prompts only."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from grading.exceptions import CodingInFlight, NotGradable
from grading.models import LLMUsage, ToMPairCoding
from grading.prompts import TOM_PAIR_PROMPT_VERSION
from grading.selectors import study_tom_pair_results
from grading.services.tom_pairwise import study_tom_pairs, tom_pair_code
from grading.tom_pairs import draw_pairs
from tests.experts.tom_gold_world import AGENT_SAYS, coded_episode, tom_study
from tests.grading.responders import domain_responder
from tests.llm_server import prompt_of

pytestmark = pytest.mark.django_db

WORKER_ONE = ("ONE-PROMPT: you cannot see our ledger, so here is what matters.",)
WORKER_TWO = ("TWO-PROMPT: do it.",)


def _always_a(body):
    system, _user = prompt_of(body)
    if '"title": "ToMPairOut"' in system:
        return json.dumps({"reason": "Set A names what the agent lacks.", "choice": "A"})
    return domain_responder(body)


@pytest.fixture
def pair(llm_server):
    llm_server.default_responder = _always_a
    study = tom_study(tom_pairwise_pairs=5)
    one = coded_episode(study, prompts=WORKER_ONE)
    two = coded_episode(study, prompts=WORKER_TWO)
    return study, one, two


def _pair_requests(server):
    return [r for r in server.requests if '"title": "ToMPairOut"' in prompt_of(r.body)[0]]


def test_each_pair_is_compared_in_both_orders_by_both_judges_and_mapped_back(llm_server, pair):
    study, one, two = pair
    rows = tom_pair_code(study=study, pair=(two.pk, one.pk), seed=0)
    got = sorted((r.order, r.provider, r.status, r.shown_choice, r.winner) for r in rows)
    assert got == [("ab", "anthropic", "succeeded", "A", "a"), ("ab", "openai", "succeeded", "A", "a"),
                   ("ba", "anthropic", "succeeded", "A", "b"), ("ba", "openai", "succeeded", "A", "b")]
    assert {(r.episode_a_id, r.episode_b_id, r.prompt_version) for r in rows} == {
        (one.pk, two.pk, TOM_PAIR_PROMPT_VERSION)}
    assert all(r.cost_usd > 0 for r in rows)
    assert LLMUsage.objects.filter(purpose="tom_pairwise").count() == 4
    results = study_tom_pair_results(study.pk)
    assert [(c.order, c.provider, c.winner) for c in results] == [
        ("ab", "anthropic", "a"), ("ab", "openai", "a"), ("ba", "anthropic", "b"), ("ba", "openai", "b")]


def test_the_judges_see_both_workers_prompts_in_the_shown_order_and_no_agent_turn(llm_server, pair):
    study, one, two = pair
    tom_pair_code(study=study, pair=(one.pk, two.pk), seed=0)
    bodies = _pair_requests(llm_server)
    assert len(bodies) == 4
    for request in bodies:
        raw = json.dumps(request.body)
        _system, user = prompt_of(request.body)
        assert "ONE-PROMPT" in user and "TWO-PROMPT" in user
        assert AGENT_SAYS not in raw and "AGENT-ONLY" not in raw and "reconcile the ledger" not in raw
    orders = {user.index("ONE-PROMPT") < user.index("TWO-PROMPT") for _s, user in
              (prompt_of(r.body) for r in bodies)}
    assert orders == {True, False}


def test_a_duplicate_message_pays_for_nothing_and_a_live_claim_is_left_alone(llm_server, pair):
    study, one, two = pair
    first = tom_pair_code(study=study, pair=(one.pk, two.pk), seed=0)
    again = tom_pair_code(study=study, pair=(one.pk, two.pk), seed=0)
    assert sorted(r.pk for r in again) == sorted(r.pk for r in first)
    assert len(_pair_requests(llm_server)) == 4 and ToMPairCoding.objects.count() == 4
    ToMPairCoding.objects.all().delete()
    held = ToMPairCoding.objects.create(study=study, episode_a=one, episode_b=two, order="ab", seed=0,
                                        prompt_version=TOM_PAIR_PROMPT_VERSION, provider="openai", model="gpt-4.1",
                                        claim="other", lease_expires_at=timezone.now() + timedelta(minutes=5))
    llm_server.reset()
    llm_server.default_responder = _always_a
    with pytest.raises(CodingInFlight):
        tom_pair_code(study=study, pair=(one.pk, two.pk), seed=0)
    held.refresh_from_db()
    assert held.status == "running" and held.claim == "other"
    assert ToMPairCoding.objects.filter(order="ab", provider="openai").count() == 1
    ToMPairCoding.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    # A lapsed claim (a killed worker) is taken over; still one row per pair x order x judge.
    tom_pair_code(study=study, pair=(one.pk, two.pk), seed=0)
    assert ToMPairCoding.objects.count() == 4 and not ToMPairCoding.objects.filter(status="running").exists()


def test_pairs_are_drawn_reproducibly_up_to_the_cap_and_off_by_default(llm_server):
    assert draw_pairs(range(10), 7, seed=3) == draw_pairs(list(range(10))[::-1], 7, seed=3)
    assert len(set(draw_pairs(range(10), 7, seed=3))) == 7
    assert draw_pairs(range(4), 100, seed=1) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert all(a < b for a, b in draw_pairs(range(30), 50, seed=9))
    study = tom_study()
    with pytest.raises(NotGradable, match="does not ask for a pairwise"):
        study_tom_pairs(study, seed=0)
    with pytest.raises(CommandError, match="does not ask for a pairwise"):
        call_command("code_tom_pairs", "--study", study.slug)


def test_the_command_runs_the_study_s_pairs_once(llm_server, pair, capsys):
    study, _one, _two = pair
    coded_episode(study, prompts=("THREE-PROMPT: thanks!",))
    call_command("code_tom_pairs", "--study", study.slug, "--seed", "4")
    assert "12 succeeded" in capsys.readouterr().out
    call_command("code_tom_pairs", "--study", study.slug, "--seed", "4")
    assert len(_pair_requests(llm_server)) == 12 and ToMPairCoding.objects.filter(seed=4).count() == 12


def test_a_worker_who_did_not_consent_to_a_provider_is_never_sent_to_it(llm_server, pair):
    study, one, _two = pair
    shy = coded_episode(study, prompts=("SHY-PROMPT: hello",), providers=("openai",))
    rows = tom_pair_code(study=study, pair=(one.pk, shy.pk), seed=0)
    by_provider = {(r.order, r.provider): r for r in rows}
    assert {k: r.status for k, r in by_provider.items()} == {
        ("ab", "openai"): "succeeded", ("ba", "openai"): "succeeded",
        ("ab", "anthropic"): "failed", ("ba", "anthropic"): "failed"}
    assert "not sent to anthropic" in by_provider[("ab", "anthropic")].error
    assert {r.provider for r in _pair_requests(llm_server)} == {"openai"}
