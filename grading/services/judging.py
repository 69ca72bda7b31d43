"""One judge run: claim it, build its request, call the provider, record the verdict atomically.

The provider call (`judge_call`) touches no database, so the pipeline can run several judges in threads
while every read and write stays on the task's own connection. A run is written in one transaction —
criterion scores, recomputed totals, tokens, cost and status together — so a worker killed mid-call
leaves a RUNNING run with no score, whose lease (renewed while the call is in flight) lapses within a minute;
the redelivered message or the reconciliation sweep then claims it again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from grading import llm
from grading.conf import grading_settings
from grading.extract import ExtractedImage, Extraction
from grading.models import Criterion, CriterionScore, JudgeRun, LLMUsage, Rubric
from grading.prompts import JudgeCriterion, RenderedPrompt, RubricContext, render_judge_prompt
from grading.providers import JudgeSpec, price_of, provider_config
from grading.schemas import CriterionSpec, JudgeOut, judge_problems, judge_totals
from grading.selectors import PROVIDER_DOWN
from grading.services.budget import call_cost_estimate, llm_usage_record, usd
from studies.models import Study, TaskInstance

logger = logging.getLogger(__name__)

DONE = (JudgeRun.Status.SUCCEEDED,)


def outage_attempt_limit() -> int:
    """Attempts a run may make across provider outages before it fails for good (the cost bound)."""
    conf = grading_settings()
    return (int(conf["TASK_RETRIES"]) + 1) * int(conf["PROVIDER_OUTAGE_ROUNDS"])


def rubric_context(rubric: Rubric) -> RubricContext:
    """The rubric as judges see it: criteria plus expected values, critical requirements and notes."""
    details = rubric.details or {}
    expected = [(str(v.get("item", "")), str(v.get("value", "")))
                for v in details.get("expected_specific_values", []) if isinstance(v, dict)]
    return RubricContext(
        criteria=[JudgeCriterion(key=c.key, category=c.category, points=c.points, description=c.description,
                                 expected_value=c.expected_value, evaluation_method=c.evaluation_method,
                                 label=c.label)
                  for c in rubric.criteria.order_by("order", "pk")],
        expected_values=expected,
        critical_requirements=[str(r) for r in details.get("critical_requirements", [])],
        evaluation_notes=str(details.get("evaluation_notes", "")),
    )


def lease_seconds() -> float:
    """How long a claim holds without renewal; a dead worker's claim lapses after this."""
    return float(grading_settings()["LEASE_SECONDS"])


def judge_runs_claim(runs: Sequence[JudgeRun]) -> tuple[list[JudgeRun], list[JudgeRun]]:
    """Atomically mark runs RUNNING under a fresh lease; return (claimed, busy).

    Any run that has not succeeded can be claimed; a RUNNING one only once its lease has lapsed (its worker
    died mid-call). Busy runs are RUNNING under a live lease, renewed by the worker calling the provider.
    """
    claimable = Q(status__in=[JudgeRun.Status.QUEUED, JudgeRun.Status.FAILED, JudgeRun.Status.WAITING]) | Q(
        status=JudgeRun.Status.RUNNING, lease_expires_at__lt=timezone.now()) | Q(
        status=JudgeRun.Status.RUNNING, lease_expires_at__isnull=True)
    claimed, busy = [], []
    for run in runs:
        now = timezone.now()
        won = JudgeRun.objects.filter(claimable, pk=run.pk).update(
            status=JudgeRun.Status.RUNNING, started_at=now, finished_at=None, attempts=F("attempts") + 1,
            lease_expires_at=now + timedelta(seconds=lease_seconds()), reserved_usd=None)
        if won:
            run.refresh_from_db()
            claimed.append(run)
        elif JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.RUNNING).exists():
            run.refresh_from_db()
            busy.append(run)
    return claimed, busy


def judge_runs_hold_for_retry(*, run_filter: dict[str, Any], seconds: float) -> int:
    """Mark the QUEUED runs a scheduled task retry will take up, so the sweep leaves them alone meanwhile.

    The hold lasts until the retry is due plus one lease: if the retry is lost with its worker, the sweep takes
    the work over after that. The retry claims QUEUED runs whatever their hold.
    """
    until = timezone.now() + timedelta(seconds=seconds + lease_seconds())
    return JudgeRun.objects.filter(**run_filter, status=JudgeRun.Status.QUEUED).update(lease_expires_at=until)


def judge_runs_renew(run_ids: Sequence[int]) -> int:
    """Extend the leases of runs this worker still holds; return how many it still holds."""
    return JudgeRun.objects.filter(pk__in=run_ids, status=JudgeRun.Status.RUNNING).update(
        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds()))


def lease_wait_seconds(runs: Sequence[JudgeRun]) -> float:
    """Seconds until the last of these busy runs' leases lapses (when a retry could claim them)."""
    now = timezone.now()
    left = [(r.lease_expires_at - now).total_seconds() for r in runs if r.lease_expires_at is not None]
    return max([0.0, *left])


def judge_runs_wait(runs: Sequence[JudgeRun], note: str) -> None:
    """Park runs that cannot be called now (no key, budget) with the reason staff will see."""
    JudgeRun.objects.filter(pk__in=[r.pk for r in runs]).exclude(status=JudgeRun.Status.SUCCEEDED).update(
        status=JudgeRun.Status.WAITING, error=note, finished_at=timezone.now(), reserved_usd=None)


@dataclass
class JudgeJob:
    """Everything one provider call needs; plain data, safe to hand to a thread."""

    run_id: int
    config: llm.ProviderConfig
    prompt: RenderedPrompt
    images: Sequence[ExtractedImage]
    criteria: list[CriterionSpec]
    repair_attempts: int
    max_tokens: int


@dataclass
class JudgeOutcome:
    job: JudgeJob
    verdict: JudgeOut | None = None
    responses: list[llm.LLMResponse] = field(default_factory=list)
    error: llm.LLMError | None = None


def judge_job_build(*, run: JudgeRun, spec: JudgeSpec, task: TaskInstance, context: RubricContext,
                    hidden: str, submission: Extraction) -> JudgeJob:
    """Build the request for one judge: images go only to vision-capable judges."""
    config = provider_config(spec)
    images = submission.images() if config.vision else []
    prompt = render_judge_prompt(
        title=task.title, prompt=task.prompt, rubric=context, hidden=hidden,
        submission=submission.as_prompt_text(images_attached=bool(images)),
        truncated=submission.truncated, images_attached=len(images))
    conf = grading_settings()
    return JudgeJob(run_id=run.pk, config=config, prompt=prompt, images=images,
                    criteria=[CriterionSpec(c.key, c.category, c.points) for c in context.criteria],
                    repair_attempts=int(conf["JUDGE_REPAIR_ATTEMPTS"]), max_tokens=int(conf["JUDGE_MAX_TOKENS"]))


def judge_job_estimate(job: JudgeJob) -> Decimal:
    """An upper bound of the job's cost (every repair round at full length), reserved before the call."""
    return call_cost_estimate(config=job.config, system=job.prompt.system, user_text=job.prompt.user,
                              images=len(job.images), max_tokens=job.max_tokens,
                              repair_attempts=job.repair_attempts, schema=JudgeOut.model_json_schema())


def judge_call(job: JudgeJob) -> JudgeOutcome:
    """Call the provider and validate the verdict (with bounded repairs); never raises an LLMError."""
    try:
        verdict, responses = llm.complete_json(
            job.config, system=job.prompt.system, user_text=job.prompt.user, schema=JudgeOut,
            images=job.images, repair_attempts=job.repair_attempts, max_tokens=job.max_tokens,
            extra_validate=lambda out: judge_problems(out, job.criteria))
    except llm.LLMError as exc:
        return JudgeOutcome(job=job, responses=list(exc.responses), error=exc)
    return JudgeOutcome(job=job, verdict=verdict, responses=responses)


def _usage_fields(responses: Sequence[llm.LLMResponse]) -> dict[str, Any]:
    return {"input_tokens": sum(r.input_tokens for r in responses),
            "output_tokens": sum(r.output_tokens for r in responses),
            "cost_usd": sum((usd(r.cost_usd) for r in responses), usd(0)),
            "latency_ms": sum(r.latency_ms for r in responses)}


def judge_run_record(*, outcome: JudgeOutcome, study: Study | None, final_attempt: bool) -> JudgeRun:
    """Write the outcome of one call in a single transaction and return the run.

    Success: criterion scores, recomputed category totals and total, SUCCEEDED. A retryable provider error
    on a non-final attempt puts the run back to QUEUED (the task retries later); on the final attempt it
    WAITS for the provider (`PROVIDER_DOWN`; the sweep's probe sends it again once the provider answers) until
    `outage_attempt_limit()` attempts are spent; anything else is FAILED with the reason. Every paid reply is
    added to the study's LLM spend either way.
    """
    job = outcome.job
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=job.run_id)
        accepted = outcome.verdict is not None
        # Every paid reply is spend, even one that lost a race with a duplicate delivery.
        llm_usage_record(study=study, purpose=LLMUsage.Purpose.JUDGE, prompt_version=run.prompt_version,
                         responses=outcome.responses, accepted_last=accepted)
        for name, value in _usage_fields(outcome.responses).items():
            setattr(run, name, getattr(run, name) + value)  # a run's totals add up all its attempts
        if run.status == JudgeRun.Status.SUCCEEDED:  # a duplicate delivery got here first; keep its result
            run.save(update_fields=["input_tokens", "output_tokens", "cost_usd", "latency_ms"])
            return run
        run.reserved_usd = None  # settled: the usage rows above now count instead, in the same commit
        run.raw_response = outcome.responses[-1].text if outcome.responses else ""
        run.finished_at = timezone.now()
        if outcome.verdict is not None:  # accepted
            verdict = outcome.verdict
            totals = judge_totals(verdict, job.criteria)
            criteria = {c.key: c for c in Criterion.objects.filter(rubric_id=run.rubric_id)}
            CriterionScore.objects.filter(judge_run=run).delete()
            CriterionScore.objects.bulk_create([
                CriterionScore(judge_run=run, criterion=criteria[item.key], earned=item.earned,
                               reason=item.reason) for item in verdict.criteria])
            run.status = JudgeRun.Status.SUCCEEDED
            run.lease_expires_at = None
            run.total = totals.total
            run.category_totals = totals.category_totals
            run.summary = verdict.summary
            run.error = ("" if price_of(run.model) is not None
                         else f"Note: no price is configured for {run.model}; its cost is recorded as 0.")
        else:
            error = outcome.error
            assert error is not None
            retry = error.retryable and not final_attempt
            outage = error.retryable and final_attempt and run.attempts < outage_attempt_limit()
            run.status = JudgeRun.Status.QUEUED if retry else JudgeRun.Status.FAILED
            if isinstance(error, llm.LLMNotConfigured):
                run.status = JudgeRun.Status.WAITING
            run.lease_expires_at = None
            run.total = None
            run.category_totals = {}
            run.error = (f"{error.reason} (will retry)" if retry else error.reason)[:4000]
            if outage:  # the provider is down, not the request wrong: wait for it (grading.services.outages)
                run.status = JudgeRun.Status.WAITING
                run.error = f"{PROVIDER_DOWN}: {error.reason}"[:4000]
            elif error.retryable and final_attempt:
                run.error = f"Gave up after {run.attempts} attempts while the provider kept failing: {run.error}"[:4000]
            if isinstance(error, llm.LLMInvalidOutput) and error.errors:
                run.error = (run.error + "\nLast problems: " + "; ".join(error.errors[:10]))[:4000]
        run.save()
    if not accepted:
        logger.warning("judge run %s (%s/%s) %s: %s", run.pk, run.provider, run.model, run.status, run.error)
    return run
