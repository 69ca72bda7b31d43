"""Celery entry points for grading: ids in, one service call, retries and time limits only.

Retries: the LLM client already retries 429/5xx/timeouts with backoff inside one attempt; when it gives
up the service raises RetryLater and the task retries later with exponential backoff and full jitter, up to
GRADING["TASK_RETRIES"] times. The last attempt is told it is the last, so it records a terminal failure
with the reason instead of asking again. Any other exception marks the submission failed with the reason
(staff retry it from the admin). Late acknowledgement + `reject_on_worker_lost` (global settings, see
`studies.instrumented_task`): a worker killed mid-task leaves the message to be redelivered, and the services'
idempotency makes the rerun safe.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from grading import task_names
from grading.conf import grading_settings
from grading.exceptions import CodingInFlight, GradingWaiting, NotGradable, RetryLater, RubricGenerationFailed
from grading.services import fluency, follow_ups, pipeline, process_coding, rubric_generation, solo_runs, transcripts
from grading.services.judging import judge_runs_hold_for_retry
from studies.instrumented_task import DATABASE_RETRY, TimeLimits, instrumented_task
from studies.models import Episode, SoloRun, TaskInstance

logger = logging.getLogger(__name__)

# Late acknowledgement and reject_on_worker_lost are global (settings); these tasks pass their own retry bound.
_COMMON: dict[str, Any] = {"bind": True, "max_retries": None}
# Longest wait before a retry; with Redis it must stay below the broker's visibility timeout (settings).
MAX_COUNTDOWN = 1800.0
# One grading attempt's wall-time budget: past it the attempt frees its judge runs and retries later.
ATTEMPT = float(grading_settings()["ATTEMPT_SECONDS"])
_GRADING_LIMITS = TimeLimits(soft=ATTEMPT, hard=ATTEMPT + 60)


_SWEEP_LIMITS = TimeLimits(soft=240, hard=300)


def _countdown(retries: int, hint: float | None = None) -> float:
    """Exponential backoff with jitter (at least a quarter of the step, so retries never stampede)."""
    if hint is not None:  # a provider's Retry-After (or a lease's end) is a floor, never shortened by jitter
        return min(hint, MAX_COUNTDOWN) + random.uniform(0, min(hint, MAX_COUNTDOWN) / 4)  # noqa: S311 - jitter
    base = float(grading_settings()["TASK_RETRY_DELAY"])
    step = min(base * 2**retries, MAX_COUNTDOWN)
    return random.uniform(step / 4, step)  # noqa: S311 - jitter, not security


def _attempt(task: Any) -> tuple[bool, int]:
    limit = int(grading_settings()["TASK_RETRIES"])
    return task.request.retries >= limit, limit


def _run_grading(task: Any, run: Callable[[bool], pipeline.GradingOutcome],
                 fail: Callable[[str], Any], label: str, runs: dict[str, int]) -> dict[str, Any]:
    final, limit = _attempt(task)
    try:
        return asdict(run(final))
    except NotGradable as exc:
        logger.info("%s not graded: %s", label, exc.reason)
        return {"status": "not_gradable", "note": exc.reason}
    except (RetryLater, SoftTimeLimitExceeded) as exc:
        reason = getattr(exc, "reason", "the task ran out of time")
        if final:
            fail(f"Gave up after {task.request.retries + 1} attempts: {reason}")
            return {"status": "failed", "note": reason}
        countdown = _countdown(task.request.retries, getattr(exc, "countdown", None))
        # Until this retry is due the submission is "grading" with QUEUED runs and no call in flight: held, so the
        # sweep does not start a second retry loop beside this one.
        judge_runs_hold_for_retry(run_filter=runs, seconds=countdown)
        raise task.retry(exc=exc, countdown=countdown, max_retries=limit + 1)
    except Exception as exc:
        logger.exception("%s crashed", label)
        fail(f"Internal error while grading: {type(exc).__name__}: {exc}"[:2000])
        raise


@instrumented_task(name=task_names.GRADE_EPISODE, limits=_GRADING_LIMITS, **_COMMON)
def grade_episode(self: Any, episode_id: int) -> dict[str, Any]:
    """Grade one submitted episode: extract, ensure the rubric, run the judges, combine, enqueue rating."""
    if not Episode.objects.filter(pk=episode_id).exists():
        return {"status": "missing"}
    return _run_grading(
        self, lambda final: pipeline.episode_grade(episode_id=episode_id, final_attempt=final),
        lambda reason: pipeline.episode_grading_fail(episode_id=episode_id, reason=reason),
        f"episode {episode_id}", {"episode_id": episode_id})


@instrumented_task(name=task_names.GRADE_SOLO_RUN, limits=_GRADING_LIMITS, **_COMMON)
def grade_solo_run(self: Any, solo_run_id: int) -> dict[str, Any]:
    """Grade one solo-agent baseline through the same pipeline."""
    if not SoloRun.objects.filter(pk=solo_run_id).exists():
        return {"status": "missing"}
    return _run_grading(
        self, lambda final: solo_runs.solo_run_grade(solo_run_id=solo_run_id, final_attempt=final),
        lambda reason: pipeline.subject_grading_fail(pipeline.Subject.for_solo_run(solo_run_id), reason=reason),
        f"solo run {solo_run_id}", {"solo_run_id": solo_run_id})


@instrumented_task(name=task_names.GENERATE_RUBRIC, limits=_GRADING_LIMITS, **_COMMON)
def generate_rubric(self: Any, task_id: int) -> dict[str, Any]:
    """Generate a new rubric version for a task (staff action or command)."""
    task = TaskInstance.objects.filter(pk=task_id).first()
    if task is None:
        return {"status": "missing"}
    final, limit = _attempt(self)
    try:
        rubric = rubric_generation.rubric_generate(task=task)
    except GradingWaiting as exc:
        return {"status": "waiting", "note": exc.reason}
    except RubricGenerationFailed as exc:
        return {"status": "failed", "note": exc.reason}
    except RetryLater as exc:
        if final:
            return {"status": "failed", "note": exc.reason}
        raise self.retry(exc=exc, countdown=_countdown(self.request.retries, exc.countdown), max_retries=limit + 1)
    return {"status": "generated", "rubric": rubric.pk, "version": rubric.version}


@instrumented_task(name=task_names.CODE_LOG, limits=TimeLimits(soft=10 * 60, hard=15 * 60), **_COMMON)
def code_log(self: Any, episode_id: int) -> dict[str, Any]:
    """Code one episode's collaboration log for the AI-fluency behaviours."""
    if not Episode.objects.filter(pk=episode_id).exists():
        return {"status": "missing"}
    final, limit = _attempt(self)
    try:
        coding = fluency.episode_code_log(episode_id=episode_id, final_attempt=final)
    except (NotGradable, GradingWaiting) as exc:
        return {"status": "skipped", "note": exc.reason}
    except CodingInFlight as exc:  # a duplicate message: the coding under the lease finishes the work
        return {"status": "in_flight", "note": exc.reason}
    except RetryLater as exc:
        raise self.retry(exc=exc, countdown=_countdown(self.request.retries, exc.countdown), max_retries=limit + 1)
    return {"status": coding.status, "coding": coding.pk, "behaviours": coding.behaviour_count}


@instrumented_task(name=task_names.CODE_PROCESS, limits=TimeLimits(soft=15 * 60, hard=20 * 60), **_COMMON)
def code_process(self: Any, episode_id: int) -> dict[str, Any]:
    """Code one episode for theory of mind and response quality by the study's two judges."""
    if not Episode.objects.filter(pk=episode_id).exists():
        return {"status": "missing"}
    final, limit = _attempt(self)
    try:
        codings = process_coding.episode_code_process(episode_id=episode_id, final_attempt=final)
    except (NotGradable, GradingWaiting) as exc:
        return {"status": "skipped", "note": exc.reason}
    except CodingInFlight as exc:  # a duplicate message: the codings under their leases finish the work
        return {"status": "in_flight", "note": exc.reason}
    except RetryLater as exc:
        raise self.retry(exc=exc, countdown=_countdown(self.request.retries, exc.countdown), max_retries=limit + 1)
    return {"status": "coded", "codings": [c.pk for c in codings]}


@instrumented_task(name=task_names.PARSE_LOG, limits=TimeLimits(soft=5 * 60, hard=6 * 60), **_COMMON)
def parse_log(self: Any, episode_id: int) -> dict[str, Any]:
    """Parse one episode's collaboration-log files into its transcript (deterministic: no LLM, no retries).

    Idempotent: unchanged files are not parsed again, so a duplicate or re-sent message costs one query.
    """
    if not Episode.objects.filter(pk=episode_id).exists():
        return {"status": "missing"}
    row = transcripts.episode_transcript_build(episode_id=episode_id)
    return {"status": row.status, "transcript": row.pk, "prompts": row.user_prompts}


@instrumented_task(name=task_names.RECORD_OBSERVATION, retry=DATABASE_RETRY)
def record_observation(episode_id: int) -> dict[str, Any]:
    """Record a graded episode's rating observation and close the follow-up the grade wrote for it."""
    if not Episode.objects.filter(pk=episode_id).exists():
        return {"status": "missing"}
    follow_ups.observation_record_and_close(episode_id=episode_id)
    return {"status": "recorded"}


@instrumented_task(name=task_names.RECONCILE, limits=_SWEEP_LIMITS)
def reconcile() -> dict[str, int]:
    """Beat sweep (every minute): finish whatever a lost message, dead worker or broker outage left undone."""
    from grading.services.reconcile import grading_reconcile
    from grading.sweep_counts import sweep_counts_add

    report = grading_reconcile()
    sweep_counts_add(report)  # the totals /metrics shows as collabskill_sweep_repairs_total
    return asdict(report)


@instrumented_task(name=task_names.GRADE_PENDING, limits=_SWEEP_LIMITS)
def grade_pending() -> dict[str, int]:
    """The former name of the sweep, kept so messages queued before an upgrade still run."""
    return reconcile()

