"""Pairwise ToM robustness run: judges say which of two episodes' worker prompts shows more theory of mind.

Where a study asks for it (`Study.tom_pairwise_pairs` > 0, the cap on pairs), pairs of ToM-coded episodes are
drawn reproducibly from a seed and each is shown to both ToM judges in both orders (position bias). The judges
see the two workers' prompts only (the ToM judges' view), never an agent turn. Exactly once like every coding:
one row per pair x order x judge x version, claimed with a lease (grading.services.claims), consent checked for
both workers, the budget and providers as for the single-episode ToM coding.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from grading import llm
from grading.conf import grading_settings
from grading.consent import consent_refusal
from grading.exceptions import CodingInFlight, GradingWaiting, NotGradable, RetryLater
from grading.models import EpisodeTranscript, LLMUsage, ToMPairCoding
from grading.prompts import TOM_PAIR_PROMPT_VERSION, RenderedPrompt, render_tom_pair_prompt
from grading.providers import JudgeSpec, not_configured_note, provider_config, provider_configured
from grading.schemas import ToMPairOut, one_line
from grading.selectors import tom_pair_done, tom_pair_population
from grading.services import claims
from grading.services.budget import budget_ensure_available, llm_usage_record
from grading.services.judging import lease_seconds
from grading.services.leases import LeaseKeeper
from grading.services.process_coding import study_tom_coders
from grading.tom_pairs import draw_pairs
from grading.transcripts.process_view import bounded, worker_prompts
from studies.models import Episode, Study

logger = logging.getLogger(__name__)

Status = ToMPairCoding.Status
Order = ToMPairCoding.Order
PURPOSE = LLMUsage.Purpose.TOM_PAIRWISE
_WINNER = {Order.AB: {"A": "a", "B": "b", "tie": "tie"}, Order.BA: {"A": "b", "B": "a", "tie": "tie"}}


def study_tom_pairs(study: Study, *, seed: int) -> list[tuple[int, int]]:
    """The study's pairs for this seed: up to `tom_pairwise_pairs` of its ToM-coded episodes."""
    if study.tom_pairwise_pairs < 1 or not study.tom_coding:
        raise NotGradable(f"study {study.slug} does not ask for a pairwise ToM run (set its pairwise pairs cap)")
    return draw_pairs(tom_pair_population(study.pk), study.tom_pairwise_pairs, seed)


def _prompts(episode: Episode, budget: int) -> tuple[list[str], bool]:
    transcript = EpisodeTranscript.objects.filter(episode=episode).first()
    if transcript is None:
        return [], False
    kept, cut = bounded(worker_prompts(transcript.files), budget)
    return kept, cut or transcript.truncated


def _pair_prompt(first: Episode, second: Episode) -> RenderedPrompt | None:
    """Set A is `first`'s prompts, set B `second`'s; None when either has none stored."""
    budget = int(grading_settings()["EXTRACT_MAX_CHARS"]) // 2
    (a, cut_a), (b, cut_b) = _prompts(first, budget), _prompts(second, budget)
    if not a or not b:
        return None
    return render_tom_pair_prompt(prompts_a=a, prompts_b=b, truncated=cut_a or cut_b)


def _key(a: Episode, b: Episode, order: str, spec: JudgeSpec) -> dict[str, Any]:
    return {"episode_a": a, "episode_b": b, "order": order, "provider": spec.provider, "model": spec.model,
            "prompt_version": TOM_PAIR_PROMPT_VERSION}


def _store_failed(a: Episode, b: Episode, order: str, spec: JudgeSpec, seed: int, error: str) -> ToMPairCoding:
    """Store a comparison that needed no call (consent refused, no prompts), unless one is stored."""
    with transaction.atomic():
        Episode.objects.select_for_update().filter(pk=a.pk).first()
        row, _ = ToMPairCoding.objects.get_or_create(
            **_key(a, b, order, spec), defaults={"study": a.study, "seed": seed, "family": spec.family,
                                                 "status": Status.FAILED, "error": error[:4000],
                                                 "finished_at": timezone.now()})
    return row


def _claim(a: Episode, b: Episode, order: str, spec: JudgeSpec, seed: int) -> ToMPairCoding:
    with transaction.atomic():
        Episode.objects.select_for_update().filter(pk=a.pk).first()
        if (done := tom_pair_done(**_key(a, b, order, spec))) is not None:
            return done
        return claims.running_claim(
            ToMPairCoding, _key(a, b, order, spec), create={"study": a.study, "seed": seed, "family": spec.family},
            in_flight=f"pair {a.pk}/{b.pk} ({order}) by {spec.label} is in flight")


def _finish(row: ToMPairCoding, token: str, *, responses: Sequence[llm.LLMResponse], accepted: bool,
            **fields: Any) -> ToMPairCoding:
    with transaction.atomic():
        Episode.objects.select_for_update().filter(pk=row.episode_a_id).first()
        cost = llm_usage_record(study=row.study, purpose=PURPOSE, prompt_version=row.prompt_version,
                                responses=responses, accepted_last=accepted)
        if not claims.claim_held(ToMPairCoding, row.pk, token):
            logger.warning("pair coding %s was taken over while its call ran; this reply is not stored", row.pk)
        else:
            ToMPairCoding.objects.filter(pk=row.pk).update(claim="", lease_expires_at=None, cost_usd=cost,
                                                           finished_at=timezone.now(), **fields)
    row.refresh_from_db()
    return row


def _call(row: ToMPairCoding, spec: JudgeSpec, prompt: RenderedPrompt, *, final_attempt: bool) -> ToMPairCoding:
    token = row.claim
    try:
        with LeaseKeeper(lambda: claims.lease_renew(ToMPairCoding, row.pk, token), lease_seconds() / 3):
            out, responses = llm.complete_json(
                provider_config(spec), system=prompt.system, user_text=prompt.user, schema=ToMPairOut,
                repair_attempts=int(grading_settings()["JUDGE_REPAIR_ATTEMPTS"]), max_tokens=2048)
    except llm.LLMError as exc:
        if isinstance(exc, llm.LLMNotConfigured) or (exc.retryable and not final_attempt):
            with transaction.atomic():
                llm_usage_record(study=row.study, purpose=PURPOSE, prompt_version=row.prompt_version,
                                 responses=exc.responses, accepted_last=False)
                claims.lease_drop(ToMPairCoding, row.pk, token)
            if isinstance(exc, llm.LLMNotConfigured):
                raise GradingWaiting(exc.reason) from exc
            raise RetryLater(f"pair {row.episode_a_id}/{row.episode_b_id}: {exc.reason}") from exc
        return _finish(row, token, responses=exc.responses, accepted=False, status=Status.FAILED,
                       error=exc.reason[:4000])
    except BaseException:
        claims.lease_drop(ToMPairCoding, row.pk, token)
        raise
    return _finish(row, token, responses=responses, accepted=True, status=Status.SUCCEEDED, shown_choice=out.choice,
                   winner=_WINNER[ToMPairCoding.Order(row.order)][out.choice], reason=one_line(out.reason, 1500))


def _code_one(a: Episode, b: Episode, order: str, spec: JudgeSpec, seed: int, *,
              final_attempt: bool) -> ToMPairCoding:
    if (done := tom_pair_done(**_key(a, b, order, spec))) is not None:
        return done
    for episode in (a, b):
        if (refusal := consent_refusal(episode.participant, spec.provider)) is not None:
            return _store_failed(a, b, order, spec, seed, f"Prompts not sent to {spec.provider}: {refusal}.")
    first, second = (a, b) if order == Order.AB else (b, a)
    prompt = _pair_prompt(first, second)
    if prompt is None:
        return _store_failed(a, b, order, spec, seed, "An episode of the pair holds no parsed worker prompt.")
    if not provider_configured(spec.provider):
        raise GradingWaiting(not_configured_note((spec.provider,), then="manage.py code_tom_pairs"))
    budget_ensure_available(study=a.study)
    row = _claim(a, b, order, spec, seed)
    if row.status != Status.RUNNING:
        return row
    return _call(row, spec, prompt, final_attempt=final_attempt)


def tom_pair_code(*, study: Study, pair: tuple[int, int], seed: int, final_attempt: bool = True) -> list[ToMPairCoding]:
    """Compare one pair in both orders by both judges; idempotent (stored comparisons are returned, not paid)."""
    low, high = sorted(pair)
    episodes = Episode.objects.select_related("participant__consent_version", "study").in_bulk([low, high])
    if len(episodes) != 2 or any(e.study_id != study.pk for e in episodes.values()):
        raise NotGradable(f"pair {low}/{high} is not two episodes of study {study.slug}")
    coders = study_tom_coders(study)
    return [_code_one(episodes[low], episodes[high], order, spec, seed, final_attempt=final_attempt)
            for order in (Order.AB, Order.BA) for spec in coders]


def study_tom_pairs_code(*, study: Study, seed: int) -> Counter[str]:
    """Code every drawn pair of the study; counts of outcomes (in-flight pairs are left to their holder)."""
    counts: Counter[str] = Counter()
    for pair in study_tom_pairs(study, seed=seed):
        try:
            counts.update(row.status for row in tom_pair_code(study=study, pair=pair, seed=seed))
        except CodingInFlight:
            counts["in flight"] += 1
        except RetryLater:
            counts["retry later"] += 1
    return counts
