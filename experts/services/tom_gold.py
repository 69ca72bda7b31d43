"""The expert gold standard for theory of mind: draw a stratified sample of coded episodes, code it blind.

Staff draw one sample per ToM study (size, seed); strata are the LLM judges' mean ToM band crossed with the
condition, and each item keeps n_h, N_h and pi so gold estimates can be weighted. The chosen experts are assigned
round-robin, `raters_per_episode` each, so single-rater and aggregated gold can both be computed. An expert codes
the worker's prompts on the judges' 0-5 scale and markers with a reason; drafts autosave, a submission is final.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from experts.exceptions import ExpertError
from experts.models import ExpertProfile, ToMGoldCode, ToMGoldItem, ToMGoldSample
from experts.services.grading import MAX_VISIBLE_DELTA_SECONDS, NO_REPORT_CAP_SECONDS
from experts.tom_sampling import score_band, stratified_draw
from grading.models import ProcessCoding
from grading.schemas import SCORE_MAX, SCORE_MIN, TOM_MARKER_CODES
from grading.selectors import PROCESS_VERSIONS, study_process_codes
from studies.models import Study

TOM = ProcessCoding.Instrument.TOM
REASON_MAX = 1500


def tom_gold_population(study: Study) -> dict[int, tuple[str, float]]:
    """Episode id -> (stratum, judges' mean) for every episode with a succeeded current ToM coding."""
    out: dict[int, tuple[str, float]] = {}
    for episode in study_process_codes(study.pk):
        scores = [c.score for c in episode.tom.values()
                  if c.status == ProcessCoding.Status.SUCCEEDED and c.score is not None]
        if scores:
            mean = sum(scores) / len(scores)
            out[episode.episode_id] = (f"{score_band(mean)}|{episode.condition}", mean)
    return out


def _check_draw(study: Study, size: int, experts: Sequence[ExpertProfile], raters: int) -> None:
    if not study.tom_coding:
        raise ExpertError("This study does not code theory of mind; turn ToM coding on first.")
    if size < 1:
        raise ExpertError("The sample size must be at least 1.")
    if not experts:
        raise ExpertError("Choose at least one expert to code the sample.")
    if not 1 <= raters <= len(experts):
        raise ExpertError(f"Experts per episode must be between 1 and the {len(experts)} chosen.")
    if any(not e.is_active for e in experts):
        raise ExpertError("A chosen expert is paused; choose active experts only.")


def tom_gold_sample_draw(*, study: Study, size: int, seed: int, experts: Sequence[ExpertProfile],
                         raters_per_episode: int = 1, user: Any = None) -> ToMGoldSample:
    """Draw the study's gold sample and assign it; ExpertError if not possible (nothing is stored then)."""
    _check_draw(study, size, experts, raters_per_episode)
    population = tom_gold_population(study)
    if not population:
        raise ExpertError("No episode of this study has a ToM coding yet; run the coding first.")
    strata: dict[str, list[int]] = {}
    for episode_id, (stratum, _) in population.items():
        strata.setdefault(stratum, []).append(episode_id)
    try:
        drawn = stratified_draw(strata, size, seed)
    except ValueError as exc:
        raise ExpertError(f"Cannot draw this sample: {exc}.") from exc
    try:
        with transaction.atomic():
            sample = ToMGoldSample.objects.create(
                study=study, size=size, seed=seed, population=len(population), raters_per_episode=raters_per_episode,
                prompt_version=PROCESS_VERSIONS[TOM], drawn_by=user if getattr(user, "pk", None) else None)
            _store_items(sample, drawn, population, list(experts), raters_per_episode)
    except IntegrityError as exc:
        raise ExpertError("This study already has a ToM gold sample.") from exc
    return sample


def _store_items(sample: ToMGoldSample, drawn: Sequence[Any], population: dict[int, tuple[str, float]],
                 experts: list[ExpertProfile], raters: int) -> None:
    items = ToMGoldItem.objects.bulk_create([
        ToMGoldItem(sample=sample, episode_id=d.unit, stratum=d.stratum, stratum_population=d.stratum_population,
                    stratum_sample=d.stratum_sample, inclusion_probability=d.inclusion_probability,
                    judge_mean=population[d.unit][1]) for d in drawn])
    ToMGoldCode.objects.bulk_create([
        ToMGoldCode(item=item, expert=experts[(i * raters + j) % len(experts)])
        for i, item in enumerate(items) for j in range(raters)])


# ------------------------------------------------------------------------------------------ expert coding


def _lock_open(code: ToMGoldCode, user: Any) -> ToMGoldCode:
    locked = ToMGoldCode.objects.select_for_update(of=("self",)).select_related("expert").get(pk=code.pk)
    if locked.expert.user_id != getattr(user, "pk", None):
        raise ExpertError("This ToM coding belongs to someone else.")
    if locked.status == ToMGoldCode.Status.SUBMITTED:
        raise ExpertError("This ToM code was already submitted and can no longer change.")
    return locked


def tom_gold_open(*, code: ToMGoldCode, user: Any) -> ToMGoldCode:
    """Start the clock the first time the expert opens the page."""
    if code.expert.user_id != getattr(user, "pk", None):
        raise ExpertError("This ToM coding belongs to someone else.")
    if code.opened_at is None:
        ToMGoldCode.objects.filter(pk=code.pk, opened_at__isnull=True).update(
            opened_at=timezone.now(), status=ToMGoldCode.Status.DRAFT)
        code.refresh_from_db()
    return code


def _clean(score: int | None, markers: Sequence[str], reason: str) -> tuple[int | None, list[str], str]:
    if score is not None and not SCORE_MIN <= score <= SCORE_MAX:
        raise ExpertError(f"The score must be a whole number from {SCORE_MIN} to {SCORE_MAX}.")
    unknown = sorted(set(markers) - set(TOM_MARKER_CODES))
    if unknown:
        raise ExpertError(f"Unknown marker(s): {', '.join(unknown)}; reload the page.")
    if len(reason) > REASON_MAX:
        raise ExpertError(f"The reason is too long ({len(reason)} characters; at most {REASON_MAX}).")
    return score, sorted(set(markers)), reason.strip()


def _add_time(code: ToMGoldCode, visible_seconds: float | None) -> None:
    """Add the page's visible seconds, never beyond the wall time since it was opened (as expert grades do)."""
    started = code.opened_at or timezone.now()
    elapsed = max(0, int((timezone.now() - started).total_seconds()))
    if visible_seconds is None:
        code.time_spent_seconds = max(code.time_spent_seconds, min(elapsed, NO_REPORT_CAP_SECONDS))
        return
    delta = min(max(0.0, float(visible_seconds)), MAX_VISIBLE_DELTA_SECONDS)
    code.time_spent_seconds = int(min(code.time_spent_seconds + round(delta), elapsed))


def tom_gold_save(*, code: ToMGoldCode, user: Any, score: int | None, markers: Sequence[str], reason: str,
                  visible_seconds: float | None = None, submit: bool = False) -> ToMGoldCode:
    """Save a draft, or submit (score and reason required); ExpertError says what is wrong and keeps the draft."""
    score, markers, reason = _clean(score, markers, reason)
    with transaction.atomic():
        locked = _lock_open(code, user)
        locked.score, locked.markers, locked.reason = score, markers, reason
        locked.opened_at = locked.opened_at or timezone.now()
        _add_time(locked, visible_seconds)
        locked.status = ToMGoldCode.Status.DRAFT
        locked.save(update_fields=["score", "markers", "reason", "opened_at", "time_spent_seconds", "status"])
    if submit:
        problems = [text for missing, text in ((score is None, "choose a score"), (not reason, "give a reason"))
                    if missing]
        if problems:
            raise ExpertError(f"Draft saved; to submit, {' and '.join(problems)}.")
        ToMGoldCode.objects.filter(pk=locked.pk, status=ToMGoldCode.Status.DRAFT).update(
            status=ToMGoldCode.Status.SUBMITTED, submitted_at=timezone.now())
        locked.refresh_from_db()
    return locked
