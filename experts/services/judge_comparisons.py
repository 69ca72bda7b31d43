"""LLM judges in comparison mode: each of the study's judges ranks a comparison set's deliverables, as experts do.

Each set is shown to each judge (`grading.providers.study_judges`, the rubric judges) in its recorded order (items
by id) and reversed, so the judge's position bias can be measured (every pair of deliverables is seen in both
relative orders). The judge sees what an expert sees: the task's request, the reference files given with it and
the deliverables' text, numbered by shown position and under the experts' neutral file names; never an agent,
worker, condition, score or evaluator-only information. The reply is a ranking with ties and a short reason,
checked strictly (one rank per deliverable, 1 is best); a reply still wrong after the bounded repair rounds is
stored as failed with the problems, never mended.

Exactly once like every paid coding (`grading.services.claims`): one row per set x order x judge x prompt version,
claimed RUNNING with a lease under the set's row lock, so a duplicate run finds it done or in flight and a killed
worker's claim lapses and is taken over. Consent and budget as for rubric judging: a deliverable of a participant
whose consent does not name the provider (or who withdrew) is never sent to it, and no call starts once the
study's LLM budget is spent. The calls go through grading's JSON client; this module lives in experts because it
reads comparison sets, which grading may not import.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from experts.comparison_selectors import shown_file_name
from experts.models import ComparisonItem, ComparisonSet, JudgeComparison
from experts.task_names import JUDGE_COMPARISON_SET
from grading import llm
from grading.conf import grading_settings
from grading.consent import consent_refusal
from grading.exceptions import CodingInFlight, GradingWaiting, NotGradable, RetryLater
from grading.models import LLMUsage
from grading.prompts import COMPARE_PROMPT_VERSION, RenderedPrompt, render_comparison_prompt
from grading.providers import JudgeSpec, not_configured_note, provider_config, provider_configured, study_judges
from grading.schemas import ComparisonOut, comparison_problems, one_line
from grading.services import claims
from grading.services.budget import budget_ensure_available, llm_usage_record
from grading.services.extraction import extraction_limits, stored_files_extract, task_reference_text
from grading.services.judging import lease_seconds
from grading.services.leases import LeaseKeeper
from studies.models import EpisodeFile, Participant, SoloRunFile, Study
from studies.task_sending import send_task_on_commit

logger = logging.getLogger(__name__)

Status = JudgeComparison.Status
Order = JudgeComparison.Order
PURPOSE = LLMUsage.Purpose.JUDGE_COMPARISON
ORDERS = (Order.RECORDED, Order.REVERSED)


def study_comparison_judges(study: Study) -> list[JudgeSpec]:
    """The study's rubric judges; a misconfigured list waits with the reason."""
    try:
        return study_judges(study)
    except ImproperlyConfigured as exc:
        raise GradingWaiting(f"The study's judges are not configured: {exc}") from exc


# ------------------------------------------------------------------------------------------ what is shown


def _set_items(comparison_set: ComparisonSet) -> list[ComparisonItem]:
    """The set's items in recorded order (by id), with what consent and the prompt need."""
    return list(comparison_set.items.select_related("episode__participant__consent_version").order_by("pk"))


def _item_files(item: ComparisonItem, position: int) -> list[tuple[str, Any]]:
    """The item's deliverable files under the neutral names the experts see (a stored name can tell the arm)."""
    rows: Any  # episode files, or a solo run's files (the database holds one source per item)
    if item.episode_id is not None:
        rows = EpisodeFile.objects.filter(episode_id=item.episode_id, kind=EpisodeFile.Kind.DELIVERABLE)
    else:
        rows = SoloRunFile.objects.filter(run_id=item.solo_run_id, kind=SoloRunFile.Kind.DELIVERABLE)
    return [(shown_file_name(position, index, row.name), row.file)
            for index, row in enumerate(rows.order_by("name", "pk"), start=1)]


def _deliverable_texts(shown: Sequence[ComparisonItem]) -> tuple[list[str], bool]:
    """Each shown deliverable's text (text only, the reading budget shared between them), and whether any was
    cut."""
    limits = extraction_limits(max_chars=max(1, int(grading_settings()["EXTRACT_MAX_CHARS"]) // len(shown)))
    texts, cut = [], False
    for position, item in enumerate(shown, start=1):
        extraction = stored_files_extract(_item_files(item, position), limits=limits)
        texts.append(extraction.as_prompt_text(images_attached=False))
        cut = cut or extraction.truncated
    return texts, cut


def shown_order(items: Sequence[ComparisonItem], order: str) -> list[ComparisonItem]:
    return list(items) if order == Order.RECORDED else list(reversed(items))


def _prompt(comparison_set: ComparisonSet, shown: Sequence[ComparisonItem], reference: str) -> RenderedPrompt:
    """The request for one shown order (files are named by shown position, so each order reads them anew)."""
    task = comparison_set.task
    texts, cut = _deliverable_texts(shown)
    return render_comparison_prompt(title=task.title, prompt=task.prompt, reference=reference, deliverables=texts,
                                    truncated=cut)


def _refusal(items: Sequence[ComparisonItem], spec: JudgeSpec) -> str | None:
    """Why the set may not go to this judge's provider (None when every deliverable may)."""
    for position, item in enumerate(items, start=1):
        if item.episode is None:
            continue
        participant = item.episode.participant
        if participant.status == Participant.Status.WITHDRAWN:
            return f"deliverable {position}: the participant withdrew"
        if (refusal := consent_refusal(participant, spec.provider)) is not None:
            return f"deliverable {position}: {refusal}"
    return None


# ------------------------------------------------------------------------------------------------ writes


def _key(comparison_set: ComparisonSet, order: str, spec: JudgeSpec) -> dict[str, Any]:
    return {"comparison_set": comparison_set, "order": order, "provider": spec.provider, "model": spec.model,
            "prompt_version": COMPARE_PROMPT_VERSION}


def _lock(comparison_set_id: int) -> None:
    ComparisonSet.objects.select_for_update().filter(pk=comparison_set_id).first()


def _stored(comparison_set: ComparisonSet, order: str, spec: JudgeSpec, *,
            retry_failed: bool) -> JudgeComparison | None:
    """The stored ranking that leaves nothing to do: succeeded, or failed and not to be retried.

    Only a failed call is retried (a refusal made no call and would be refused again).
    """
    row = JudgeComparison.objects.filter(**_key(comparison_set, order, spec)).exclude(status=Status.RUNNING).first()
    if row is None or row.status == Status.SUCCEEDED or not retry_failed or row.attempts == 0:
        return row
    return None


def _store_refused(comparison_set: ComparisonSet, shown: Sequence[ComparisonItem], order: str, spec: JudgeSpec,
                   error: str) -> JudgeComparison:
    """Store a ranking that needed no call (consent refused), unless one is stored."""
    with transaction.atomic():
        _lock(comparison_set.pk)
        row, _ = JudgeComparison.objects.get_or_create(
            **_key(comparison_set, order, spec),
            defaults={"study_id": comparison_set.study_id, "family": spec.family, "status": Status.FAILED,
                      "shown_items": [item.pk for item in shown], "error": error[:4000],
                      "finished_at": timezone.now()})
    return row


def _claim(comparison_set: ComparisonSet, shown: Sequence[ComparisonItem], order: str, spec: JudgeSpec, *,
           retry_failed: bool) -> JudgeComparison:
    """Return a stored ranking (nothing to do) or a RUNNING row this worker now holds; CodingInFlight if held."""
    key = _key(comparison_set, order, spec)
    with transaction.atomic():
        _lock(comparison_set.pk)
        if (done := _stored(comparison_set, order, spec, retry_failed=retry_failed)) is not None:
            return done
        # A failed call being retried becomes a lapsed claim, which running_claim takes over.
        JudgeComparison.objects.filter(**key, status=Status.FAILED).update(status=Status.RUNNING, claim="",
                                                                           lease_expires_at=None)
        shown_ids = [item.pk for item in shown]
        return claims.running_claim(
            JudgeComparison, key, take_over={"error": "", "shown_items": shown_ids},
            create={"study_id": comparison_set.study_id, "family": spec.family, "shown_items": shown_ids},
            in_flight=f"comparison set {comparison_set.pk} ({order}) by {spec.label} is in flight")


def _finish(row: JudgeComparison, token: str, *, responses: Sequence[llm.LLMResponse], accepted: bool,
            **fields: Any) -> JudgeComparison:
    """Record the paid replies and, if this worker still holds the claim, store the outcome."""
    with transaction.atomic():
        _lock(row.comparison_set_id)
        cost = llm_usage_record(study=row.study, purpose=PURPOSE, prompt_version=row.prompt_version,
                                responses=responses, accepted_last=accepted)
        if not claims.claim_held(JudgeComparison, row.pk, token):
            logger.warning("judge comparison %s was taken over while its call ran; this reply is not stored", row.pk)
        else:
            JudgeComparison.objects.filter(pk=row.pk).update(
                claim="", lease_expires_at=None, cost_usd=F("cost_usd") + cost, attempts=F("attempts") + 1,
                finished_at=timezone.now(), **fields)
    row.refresh_from_db()
    return row


def _release(row: JudgeComparison, token: str, responses: Sequence[llm.LLMResponse]) -> None:
    """Give the claim back for a retry (the row stays RUNNING with no lease); record what was paid."""
    with transaction.atomic():
        llm_usage_record(study=row.study, purpose=PURPOSE, prompt_version=row.prompt_version,
                         responses=responses, accepted_last=False)
        claims.lease_drop(JudgeComparison, row.pk, token)


def _call(row: JudgeComparison, spec: JudgeSpec, prompt: RenderedPrompt, *, final_attempt: bool) -> JudgeComparison:
    """Make the paid call under the claim's lease and store its outcome."""
    token, shown = row.claim, len(row.shown_items)
    try:
        with LeaseKeeper(lambda: claims.lease_renew(JudgeComparison, row.pk, token), lease_seconds() / 3):
            out, responses = llm.complete_json(
                provider_config(spec), system=prompt.system, user_text=prompt.user, schema=ComparisonOut,
                repair_attempts=int(grading_settings()["JUDGE_REPAIR_ATTEMPTS"]), max_tokens=2048,
                extra_validate=lambda reply: comparison_problems(reply, shown))
    except llm.LLMError as exc:
        if isinstance(exc, llm.LLMNotConfigured) or (exc.retryable and not final_attempt):
            _release(row, token, exc.responses)
            if isinstance(exc, llm.LLMNotConfigured):
                raise GradingWaiting(exc.reason) from exc
            raise RetryLater(f"comparison set {row.comparison_set_id}: {exc.reason}") from exc
        problems = "; ".join(getattr(exc, "errors", None) or [])
        error = exc.reason + (f"\nLast problems: {problems}" if problems else "")
        logger.warning("judge comparison %s by %s failed: %s", row.pk, spec.label, exc.reason)
        return _finish(row, token, responses=exc.responses, accepted=False, status=Status.FAILED, ranks=[],
                       error=error[:4000])
    except BaseException:  # a time limit or shutdown: the next run takes the claim over at once
        claims.lease_drop(JudgeComparison, row.pk, token)
        raise
    return _finish(row, token, responses=responses, accepted=True, status=Status.SUCCEEDED, ranks=list(out.ranks),
                   reason=one_line(out.reason, 1500), error="")


# ------------------------------------------------------------------------------------------------ entry points


def _judge_one(comparison_set: ComparisonSet, shown: Sequence[ComparisonItem], order: str, spec: JudgeSpec,
               prompt: RenderedPrompt, *, retry_failed: bool, final_attempt: bool) -> JudgeComparison:
    if (done := _stored(comparison_set, order, spec, retry_failed=retry_failed)) is not None:
        return done
    if (refusal := _refusal(shown, spec)) is not None:
        return _store_refused(comparison_set, shown, order, spec, f"Deliverables not sent to {spec.provider}: "
                                                                  f"{refusal}.")
    if not provider_configured(spec.provider):
        raise GradingWaiting(not_configured_note((spec.provider,), then="manage.py judge_comparisons --study SLUG"))
    budget_ensure_available(study=comparison_set.study)
    row = _claim(comparison_set, shown, order, spec, retry_failed=retry_failed)
    if row.status != Status.RUNNING:
        return row  # stored since the first look
    return _call(row, spec, prompt, final_attempt=final_attempt)


def comparison_set_judge(*, comparison_set: ComparisonSet, retry_failed: bool = False,
                         final_attempt: bool = True) -> list[JudgeComparison]:
    """Rank one set by every judge in both orders; idempotent (stored rankings are returned, not paid again).

    ``retry_failed`` calls again where a call failed (a bad reply or a provider error), within the budget.
    Raises NotGradable (fewer than two deliverables), GradingWaiting (no key, budget spent, judges
    misconfigured), and, once every other ranking of the set is done, RetryLater (provider trouble on a
    non-final attempt) or CodingInFlight (another worker holds a ranking of the set).
    """
    items = _set_items(comparison_set)
    if len(items) < 2:
        raise NotGradable(f"comparison set {comparison_set.pk} has {len(items)} deliverable(s); at least 2 are "
                          "compared")
    judges = study_comparison_judges(comparison_set.study)
    stored = [_stored(comparison_set, order, spec, retry_failed=retry_failed) for order in ORDERS for spec in judges]
    if all(row is not None for row in stored):
        return [row for row in stored if row is not None]  # nothing owed: no file is read
    reference = task_reference_text(comparison_set.task)
    results: list[JudgeComparison] = []
    held: RetryLater | CodingInFlight | None = None
    for order in ORDERS:
        shown = shown_order(items, order)
        prompt = _prompt(comparison_set, shown, reference)
        for spec in judges:
            try:
                results.append(_judge_one(comparison_set, shown, order, spec, prompt, retry_failed=retry_failed,
                                          final_attempt=final_attempt))
            except (RetryLater, CodingInFlight) as exc:
                held = exc if held is None or isinstance(exc, RetryLater) else held
    if held is not None:
        raise held
    return results


def study_comparisons_judge(*, study: Study, retry_failed: bool = False) -> Counter[str]:
    """Rank every comparison set of the study by every judge in both orders; counts of outcomes."""
    counts: Counter[str] = Counter()
    sets = ComparisonSet.objects.filter(study=study).select_related("study", "task").order_by("pk")
    for comparison_set in sets:
        try:
            counts.update(row.status for row in comparison_set_judge(comparison_set=comparison_set,
                                                                     retry_failed=retry_failed))
        except NotGradable:
            counts["not comparable"] += 1
        except CodingInFlight:
            counts["in flight"] += 1
        except RetryLater:
            counts["retry later"] += 1
    return counts


def judge_comparisons_reconcile() -> dict[str, int]:
    """Queue every comparison set again that holds a judge ranking whose claim lapsed (a killed worker, a lost
    message, a worker that gave its claim back for a retry and never came): the queued run takes the claim over,
    so nobody has to run the command again. A live claim is left to its holder; failed rankings are retried only
    on request (``--retry-failed``), as their calls were paid."""
    now = timezone.now()
    lapsed = (JudgeComparison.objects.filter(status=Status.RUNNING)
              .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
              .order_by("comparison_set_id").values_list("comparison_set_id", flat=True).distinct())
    sets = list(lapsed)
    with transaction.atomic():
        for set_id in sets:
            send_task_on_commit(JUDGE_COMPARISON_SET, [set_id])
    return {"sets_queued": len(sets)}

