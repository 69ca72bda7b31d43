"""Grade a submission end to end: extract, ensure the rubric, run the judges in parallel, combine.

Idempotent by construction: judge runs are keyed by (subject, rubric version, provider, model, prompt
version) and created with get_or_create; a succeeded run is never redone; combining recomputes from the
stored runs inside one locked transaction and changes nothing when nothing changed. Re-grading (new rubric
version, judge list or prompt) only adds runs and flips which ones are current.

Episode status: submitted → grading → graded | failed; waiting (no key, budget, consent, judge providers
failing through every attempt) keeps `submitted` with a note. A graded episode being re-graded keeps its score
until the new runs are combined.
The same path grades solo-agent baselines (`Subject.for_solo_run`).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from django.db import transaction
from django.utils import timezone

from grading.conf import grading_settings
from grading.consent import ConsentDecision, judges_allowed
from grading.exceptions import (
    BudgetBusy,
    BudgetExhausted,
    GradingWaiting,
    NotGradable,
    RetryLater,
    RetryRefused,
    RubricBusy,
    RubricGenerationFailed,
)
from grading.extract import Extraction
from grading.models import GradingFollowUp, JudgeRun, Rubric
from grading.prompts import JUDGE_PROMPT_VERSION
from grading.providers import JudgeSpec, not_configured_note, provider_configured, study_judges
from grading.selectors import (
    HELD_MARK,
    PROVIDER_DOWN,
    PROVIDER_WAIT_MARK,
    current_fluency_coding,
    rubric_for_grading,
)
from grading.services.budget import budget_ensure_available, budget_reserve
from grading.services.calibration import episode_calibration_draw
from grading.services.extraction import episode_extract, solo_run_extract, task_hidden_text
from grading.services.gated_score import GatedScore, gated_score
from grading.services.judging import (
    JudgeJob,
    judge_call,
    judge_job_build,
    judge_job_estimate,
    judge_run_record,
    judge_runs_claim,
    judge_runs_renew,
    judge_runs_wait,
    lease_seconds,
    lease_wait_seconds,
    rubric_context,
)
from grading.services.leases import LeaseKeeper
from grading.services.rubric_generation import rubric_ensure
from grading.task_names import CODE_LOG, CODE_PROCESS, GRADE_EPISODE, GRADE_SOLO_RUN, RECORD_OBSERVATION
from rating import selectors as rating_selectors
from rating.services.ledger import GradeInput, episode_grades_record
from studies.model_families import judge_family
from studies.models import Episode, Participant, SoloRun
from studies.services.audit import audit_record
from studies.task_sending import send_task_on_commit

logger = logging.getLogger(__name__)

Status = Episode.Status


@dataclass
class GradingOutcome:
    """What one grading pass ended with; `status` is graded/unchanged/pending/waiting/failed/not_gradable."""

    status: str
    note: str = ""
    score: float | None = None
    judge_runs: list[int] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- subject


@dataclass
class Subject:
    """An episode or a solo run, seen through what grading needs from either."""

    obj: Episode | SoloRun

    @classmethod
    def for_episode(cls, episode_id: int) -> Subject:
        return cls(Episode.objects.select_related("study", "task", "agent", "participant__consent_version")
                   .get(pk=episode_id))

    @classmethod
    def for_solo_run(cls, solo_run_id: int) -> Subject:
        return cls(SoloRun.objects.select_related("study", "task", "agent").get(pk=solo_run_id))

    @property
    def is_episode(self) -> bool:
        return isinstance(self.obj, Episode)

    @property
    def study(self) -> Any:
        return self.obj.study

    @property
    def task(self) -> Any:
        return self.obj.task

    @property
    def participant(self) -> Participant | None:
        return self.obj.participant if isinstance(self.obj, Episode) else None

    @property
    def run_filter(self) -> dict[str, Any]:
        return {"episode": self.obj} if self.is_episode else {"solo_run": self.obj}

    @property
    def label(self) -> str:
        return f"episode {self.obj.pk}" if self.is_episode else f"solo run {self.obj.pk}"

    def model(self) -> type[Episode] | type[SoloRun]:
        return type(self.obj)

    def extract(self) -> Extraction:
        if isinstance(self.obj, Episode):
            return episode_extract(episode=self.obj)
        return solo_run_extract(solo_run=self.obj)

    def score_of(self, obj: Any) -> float | None:
        return obj.auto_score if self.is_episode else obj.score


# ------------------------------------------------------------------------------------ status changes


def _save_status(subject: Subject, *, status: str | None, note: str) -> None:
    fields: dict[str, Any] = {"grading_note": note[:4000]}
    if status is not None:
        fields["status"] = status
    if subject.is_episode:
        fields["updated_at"] = timezone.now()
    subject.model().objects.filter(pk=subject.obj.pk).update(**fields)
    for name, value in fields.items():
        setattr(subject.obj, name, value)


def _mark_grading(subject: Subject) -> None:
    if subject.obj.status == Status.SUBMITTED:
        _save_status(subject, status=Status.GRADING, note="")


def _wait(subject: Subject, note: str) -> GradingOutcome:
    """Leave the submission waiting (not failed) with a note; a graded one keeps its score."""
    with transaction.atomic():
        if subject.obj.status == Status.GRADED:
            _save_status(subject, status=None, note=f"Re-grading waits: {note}")
        else:
            _save_status(subject, status=Status.SUBMITTED, note=note)
    logger.info("%s waits: %s", subject.label, note)
    return GradingOutcome("waiting", note=note)


def _fail(subject: Subject, reason: str) -> GradingOutcome:
    """Record a terminal failure with its reason; staff retry it from the admin."""
    with transaction.atomic():
        if subject.obj.status == Status.GRADED:
            _save_status(subject, status=None, note=f"Re-grading failed: {reason}")
        else:
            _save_status(subject, status=Status.FAILED, note=reason)
        audit_record(actor=None, action="grading.failed", obj=subject.obj, study=subject.study, note=reason[:2000])
    logger.warning("%s failed: %s", subject.label, reason)
    return GradingOutcome("failed", note=reason)


# ------------------------------------------------------------------------------------------- combine


def _threshold(subject: Subject) -> float:
    value = subject.study.disagreement_threshold
    return float(value if value is not None else grading_settings()["DISAGREEMENT_THRESHOLD"])


def _total(run: JudgeRun) -> float:
    """A succeeded run's total (judge_run_record writes it together with the succeeded status)."""
    assert run.total is not None, f"judge run {run.pk} succeeded without a total"
    return float(run.total)


def _reasons(runs: list[JudgeRun]) -> str:
    return "; ".join(f"{r.provider}/{r.model}: {r.error or r.get_status_display()}" for r in runs)


HELD_PREFIX = HELD_MARK


def _hold(subject: Subject, obj: Any, succeeded: list[JudgeRun], failed: list[JudgeRun]) -> GradingOutcome:
    """A partial panel under the study's 'hold' policy: no score enters the rating, an expert is asked.

    The episode waits (submitted with the reason; a graded one keeps its previous score) and the sweep retries
    the missing judge at the waiting cadence; staff may accept single-judge scores for the study instead.
    """
    judges = ", ".join(f"{r.provider}/{r.model} {_total(r):g}" for r in succeeded)
    note = (f"{HELD_PREFIX}: only {len(succeeded)} of {len(succeeded) + len(failed)} judges scored it ({judges}); "
            f"missing: {_reasons(failed)}. The missing judge is retried; an expert grade or the study's "
            "'accept partial panels' policy releases it.")
    if subject.is_episode and not obj.needs_expert_review:
        subject.model().objects.filter(pk=obj.pk).update(needs_expert_review=True)
    outcome = _wait(subject, note)
    return GradingOutcome("held", note=outcome.note, judge_runs=[r.pk for r in succeeded])


def _wait_for_providers(subject: Subject, outage: list[JudgeRun], failed: list[JudgeRun]) -> GradingOutcome:
    """No judge scored because their providers kept failing: wait for a provider, never fail for an outage.

    The sweep probes each waiting provider once per sweep and sends grading again once one answers
    (grading.services.outages); staff see the submission waiting with this note, not failed.
    """
    providers = ", ".join(dict.fromkeys(r.provider for r in outage))
    note = (f"{PROVIDER_WAIT_MARK} ({providers}): {_reasons([*outage, *failed])}. Grading resumes by itself once "
            "a provider answers again (checked every sweep); nothing needs to be done.")
    return _wait(subject, note)


def _gate_hold(subject: Subject, obj: Episode, gate: GatedScore, runs: list[JudgeRun]) -> GradingOutcome:
    """Some rubric category has no judge that passes the enforced expert gate: no automated score.

    A previous automated score stops counting (its ledger row follows), the episode goes to experts first,
    and the waiting sweep combines it again, so a judge that passes later releases it. The runs are the
    current panel's grades all the same (the gate compares exactly these with the experts), so they are marked
    current.
    """
    blocked = "; ".join(f"{category} ({why})" for category, why in gate.blocked.items())
    note = (f"{HELD_PREFIX}: no judge passes the expert gate for {blocked}. Sent to experts; a judge that passes "
            "the gate later, or the expert grade under the blended or expert score source, releases it.")
    with transaction.atomic():
        had_score = obj.auto_score is not None
        new_ids = {r.pk for r in runs}
        JudgeRun.objects.filter(**subject.run_filter, is_current=True).exclude(pk__in=new_ids).update(
            is_current=False)
        JudgeRun.objects.filter(pk__in=new_ids).update(is_current=True)
        Episode.objects.filter(pk=obj.pk).update(auto_score=None, needs_expert_review=True, status=Status.SUBMITTED,
                                                 grading_note=note[:4000], updated_at=timezone.now())
        for name, value in (("auto_score", None), ("status", Status.SUBMITTED), ("grading_note", note[:4000])):
            setattr(subject.obj, name, value)
        # The judges did score it, so it belongs to the population the calibration sample is drawn from.
        episode_calibration_draw(episode=obj)
        if had_score:
            audit_record(actor=None, action="grading.gate_hold", obj=obj, study=subject.study,
                         before={"score": obj.auto_score}, after={"score": None}, note=note[:2000])
            GradingFollowUp.objects.create(episode_id=obj.pk, kind=GradingFollowUp.Kind.OBSERVATION)
            send_task_on_commit(RECORD_OBSERVATION, [obj.pk])
    return GradingOutcome("held", note=note)


def _judge_grades(subject: Subject, runs: list[JudgeRun]) -> list[GradeInput]:
    """The current judges' totals as grades, each with the judge's model family from the study's judge list."""
    families = {(spec.provider, spec.model): spec.family for spec in study_judges(subject.study)}
    return [GradeInput(grader=f"{run.provider}/{run.model}", y=_total(run), source_id=run.pk,
                       family=families.get((run.provider, run.model))
                       or judge_family(provider=run.provider, model=run.model))
            for run in runs]


def _owe_observation_if_missing(episode: Episode) -> None:
    """A graded episode without its ledger row (a follow-up lost before the outbox existed) is owed one."""
    if rating_selectors.episode_has_observation(episode.pk) or GradingFollowUp.objects.filter(
            episode_id=episode.pk, kind=GradingFollowUp.Kind.OBSERVATION, done_at__isnull=True).exists():
        return
    GradingFollowUp.objects.create(episode_id=episode.pk, kind=GradingFollowUp.Kind.OBSERVATION)
    send_task_on_commit(RECORD_OBSERVATION, [episode.pk])


def subject_combine(subject: Subject, *, run_ids: list[int], notes: list[str]) -> GradingOutcome:
    """Turn the planned runs into the current score in one transaction (or report why not yet)."""
    with transaction.atomic():
        obj = subject.model().objects.select_for_update().get(pk=subject.obj.pk)
        subject.obj.status = obj.status
        runs = list(JudgeRun.objects.filter(pk__in=run_ids).order_by("provider", "model"))
        if any(r.status in (JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING) for r in runs):
            return GradingOutcome("pending", judge_runs=run_ids)
        outage = [r for r in runs if r.status == JudgeRun.Status.WAITING and r.error.startswith(PROVIDER_DOWN)]
        waiting = [r for r in runs if r.status == JudgeRun.Status.WAITING and r not in outage]
        if waiting:
            return _wait(subject, " ".join(dict.fromkeys(r.error for r in waiting if r.error)) or "Judges wait.")
        succeeded = [r for r in runs if r.status == JudgeRun.Status.SUCCEEDED]
        failed = [r for r in runs if r.status == JudgeRun.Status.FAILED]
        if not succeeded and outage:
            return _wait_for_providers(subject, outage, failed)
        if not succeeded:
            return _fail(subject, "Every judge failed. " + _reasons(failed))
        failed = [*failed, *outage]  # a judge waiting for its provider is missing from the panel for now
        if failed and subject.study.partial_panel == subject.study.PartialPanel.HOLD:
            return _hold(subject, obj, succeeded, failed)
        gate = gated_score(study=subject.study, runs=succeeded) if isinstance(obj, Episode) else None
        if gate is not None and gate.blocked and isinstance(obj, Episode):
            return _gate_hold(subject, obj, gate, succeeded)
        totals = [_total(r) for r in succeeded]
        score = round(fmean(totals), 4) if gate is None or gate.score is None else gate.score
        if gate is not None and gate.left_out:
            notes = [*notes, "Expert gate: left out " + ", ".join(gate.left_out) + "."]
        flags = []
        spread = max(totals) - min(totals)
        threshold = _threshold(subject)
        if spread > threshold:
            flags.append(f"Judges disagree by {spread:.1f} points (threshold {threshold:g}); flagged for expert "
                         "review.")
        if failed:
            flags.append(f"Only {len(succeeded)} of {len(runs)} judges produced a score ({_reasons(failed)}); "
                         "flagged for expert review.")
        new_ids = {r.pk for r in succeeded}
        old_ids = set(JudgeRun.objects.filter(**subject.run_filter, is_current=True).values_list("pk", flat=True))
        old_score = subject.score_of(obj)
        note = " ".join(n for n in [*notes, *flags] if n)
        if obj.status == Status.GRADED and old_ids == new_ids and old_score == score:
            if isinstance(obj, Episode):
                _owe_observation_if_missing(obj)
                episode_grades_record(episode_id=obj.pk, kind="judge", grades=_judge_grades(subject, succeeded))
            return GradingOutcome("unchanged", note=obj.grading_note, score=score, judge_runs=sorted(new_ids))
        JudgeRun.objects.filter(**subject.run_filter, is_current=True).exclude(pk__in=new_ids).update(
            is_current=False)
        JudgeRun.objects.filter(pk__in=new_ids).update(is_current=True)
        updates: dict[str, Any] = {"status": Status.GRADED, "grading_note": note[:4000]}
        if isinstance(obj, Episode):
            updates.update(auto_score=score, updated_at=timezone.now(),
                           needs_expert_review=obj.needs_expert_review or bool(flags))
        else:
            updates["score"] = score
        subject.model().objects.filter(pk=obj.pk).update(**updates)
        for name, value in updates.items():
            setattr(subject.obj, name, value)
        audit_record(
            actor=None, action="grading.scored", obj=obj, study=subject.study,
            before={"score": old_score, "judge_runs": sorted(old_ids)},
            after={"score": score, "judge_runs": sorted(new_ids), "totals": totals,
                   "rubric": succeeded[0].rubric_id, "prompt_version": succeeded[0].prompt_version,
                   "flagged": bool(flags)},
            note=note[:2000])
        if isinstance(obj, Episode):
            episode_calibration_draw(episode=obj)
            # Each judge's grade is also an observation of the judge-aware rating, committed with the score.
            episode_grades_record(episode_id=obj.pk, kind="judge", grades=_judge_grades(subject, succeeded))
            # The outbox rows commit with the grade; the messages are only the fast path (see reconcile.py).
            GradingFollowUp.objects.create(episode_id=obj.pk, kind=GradingFollowUp.Kind.OBSERVATION)
            send_task_on_commit(RECORD_OBSERVATION, [obj.pk])
            if current_fluency_coding(obj) is None:
                GradingFollowUp.objects.create(episode_id=obj.pk, kind=GradingFollowUp.Kind.FLUENCY)
                send_task_on_commit(CODE_LOG, [obj.pk])
            if subject.study.tom_coding and not GradingFollowUp.objects.filter(
                    episode_id=obj.pk, kind=GradingFollowUp.Kind.PROCESS, done_at__isnull=True).exists():
                # ToM and response quality: the coding itself skips whatever is already coded (per judge).
                GradingFollowUp.objects.create(episode_id=obj.pk, kind=GradingFollowUp.Kind.PROCESS)
                send_task_on_commit(CODE_PROCESS, [obj.pk])
    return GradingOutcome("graded", note=note, score=score, judge_runs=sorted(new_ids))


# --------------------------------------------------------------------------------------------- grade


def _plan_runs(subject: Subject, rubric: Rubric, judges: list[JudgeSpec]) -> list[JudgeRun]:
    runs = []
    for spec in judges:
        run, _created = JudgeRun.objects.get_or_create(
            **subject.run_filter, rubric=rubric, provider=spec.provider, model=spec.model,
            prompt_version=JUDGE_PROMPT_VERSION)
        runs.append(run)
    return runs


def _release(run_ids: list[int], reason: str) -> None:
    JudgeRun.objects.filter(pk__in=run_ids, status=JudgeRun.Status.RUNNING).update(
        status=JudgeRun.Status.QUEUED, error=reason, started_at=None, lease_expires_at=None, reserved_usd=None)


def _reserve(subject: Subject, jobs: list[JudgeJob], *, final_attempt: bool) -> list[JudgeJob]:
    """Reserve the round's cost estimates on the study budget; return the jobs that may call their judge.

    Refused because the cap is reached, the runs wait with the budget note; refused because the rest of the cap
    is held by calls in flight, they go back to the queue (the task retries) or, on the last attempt, wait for
    the sweep's next look.
    """
    ids = [job.run_id for job in jobs]
    try:
        budget_reserve(study=subject.study, amounts={job.run_id: judge_job_estimate(job) for job in jobs})
    except BudgetExhausted as exc:
        judge_runs_wait([JudgeRun(pk=pk) for pk in ids], exc.reason)
        return []
    except BudgetBusy as exc:
        if final_attempt:
            judge_runs_wait([JudgeRun(pk=pk) for pk in ids], exc.reason)
        else:
            _release(ids, exc.reason)
        return []
    return jobs


def _run_judges(subject: Subject, claimed: list[JudgeRun], specs: dict[tuple[str, str], JudgeSpec],
                rubric: Rubric, *, final_attempt: bool) -> float | None:
    """Extract once, call every claimed judge in parallel threads, then record each outcome.

    Return the longest Retry-After a provider asked for, so the task's next attempt honours it.
    """
    ids = [r.pk for r in claimed]
    try:
        submission = subject.extract()
        hidden = task_hidden_text(subject.task)
        context = rubric_context(rubric)
        jobs = [judge_job_build(run=run, spec=specs[(run.provider, run.model)], task=subject.task,
                                context=context, hidden=hidden, submission=submission) for run in claimed]
        jobs = _reserve(subject, jobs, final_attempt=final_attempt)
    except BaseException:
        _release(ids, "Interrupted while preparing the judge request.")
        raise
    if not jobs:
        return None
    ids = [job.run_id for job in jobs]
    pool = ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="judge")
    try:
        with LeaseKeeper(lambda: judge_runs_renew(ids), lease_seconds() / 3):
            outcomes = list(pool.map(judge_call, jobs))
    except BaseException:  # soft time limit or shutdown: free the runs so a retry need not wait
        pool.shutdown(wait=False, cancel_futures=True)
        _release(ids, "Interrupted while waiting for the judge.")
        raise
    pool.shutdown(wait=True)
    for outcome in outcomes:
        judge_run_record(outcome=outcome, study=subject.study, final_attempt=final_attempt)
    hints = [o.error.retry_after for o in outcomes if o.error is not None and o.error.retry_after]
    return max(hints) if hints else None


def _judges_for(subject: Subject) -> tuple[ConsentDecision, list[str]]:
    decision = judges_allowed(participant=subject.participant, judges=study_judges(subject.study))
    return decision, ([decision.note()] if decision.refused else [])


def _ensure_rubric(subject: Subject, *, final_attempt: bool) -> Rubric | GradingOutcome:
    rubric = rubric_for_grading(subject.task)
    if rubric is not None:
        return rubric
    _mark_grading(subject)
    try:
        return rubric_ensure(task=subject.task, study=subject.study)
    except GradingWaiting as exc:
        return _wait(subject, exc.reason)
    except RubricGenerationFailed as exc:
        return _fail(subject, exc.reason)
    except RubricBusy:
        if final_attempt:
            return _wait(subject, "The task's rubric is being generated by another worker; grading resumes "
                                  "with `manage.py grade --pending`.")
        raise
    except RetryLater as exc:
        if final_attempt:
            return _fail(subject, exc.reason)
        raise


def subject_grade(subject: Subject, *, final_attempt: bool = True) -> GradingOutcome:
    """Grade a submission as far as possible now; raise RetryLater when a later attempt should continue."""
    if subject.obj.status not in (Status.SUBMITTED, Status.GRADING, Status.GRADED):
        raise NotGradable(f"{subject.label} is {subject.obj.get_status_display().lower()}, not submitted")
    participant = subject.participant
    if participant is not None and participant.status == Participant.Status.WITHDRAWN:
        raise NotGradable(f"{subject.label}: the participant withdrew; their work is not graded")
    decision, notes = _judges_for(subject)
    if not decision.allowed:
        return _wait(subject, "No judge may receive this participant's files. " + decision.note())
    rubric = _ensure_rubric(subject, final_attempt=final_attempt)
    if isinstance(rubric, GradingOutcome):
        return rubric
    runs = _plan_runs(subject, rubric, decision.allowed)
    todo = [r for r in runs if r.status != JudgeRun.Status.SUCCEEDED]
    unconfigured = [r for r in todo if not provider_configured(r.provider)]
    if unconfigured:
        judge_runs_wait(unconfigured, not_configured_note(tuple(dict.fromkeys(r.provider for r in unconfigured))))
    callable_runs = [r for r in todo if r not in unconfigured]
    if callable_runs:
        try:
            budget_ensure_available(study=subject.study)
        except BudgetExhausted as exc:
            judge_runs_wait(callable_runs, exc.reason)
            callable_runs = []
    claimed, busy = judge_runs_claim(callable_runs)
    retry_after = None
    if claimed:
        _mark_grading(subject)
        specs = {(s.provider, s.model): s for s in decision.allowed}
        retry_after = _run_judges(subject, claimed, specs, rubric, final_attempt=final_attempt)
    outcome = subject_combine(subject, run_ids=[r.pk for r in runs], notes=notes)
    retry = JudgeRun.objects.filter(pk__in=[r.pk for r in claimed], status=JudgeRun.Status.QUEUED)
    if outcome.status == "pending" and retry.exists():
        reasons = "; ".join(retry.values_list("error", flat=True))
        raise RetryLater(f"{subject.label}: provider trouble, retrying: {reasons}", countdown=retry_after)
    if outcome.status == "pending" and busy and not final_attempt:
        # Another worker holds a live lease (or did, and died): look again just after it would lapse.
        raise RetryLater(f"{subject.label}: a judge call is in flight elsewhere",
                         countdown=lease_wait_seconds(busy) + 1.0)
    return outcome


def episode_grade(*, episode_id: int, final_attempt: bool = True) -> GradingOutcome:
    """Grade one episode (the body of `grading.tasks.grade_episode`)."""
    return subject_grade(Subject.for_episode(episode_id), final_attempt=final_attempt)


def subject_grading_fail(subject: Subject, *, reason: str) -> GradingOutcome:
    """Mark a submission failed for a reason found outside the normal path (crash, retries exhausted)."""
    JudgeRun.objects.filter(**subject.run_filter, status__in=[JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING]
                            ).update(status=JudgeRun.Status.FAILED, error=reason[:4000], finished_at=timezone.now(),
                                     reserved_usd=None)
    return _fail(subject, reason)


def episode_grading_fail(*, episode_id: int, reason: str) -> GradingOutcome:
    return subject_grading_fail(Subject.for_episode(episode_id), reason=reason)


# -------------------------------------------------------------------------------------- staff actions


def run_in_current_plan(run: JudgeRun) -> bool:
    """True when re-grading the run's submission now would redo this run (same rubric, judge and prompt)."""
    obj = run.episode if run.episode_id else run.solo_run
    assert obj is not None, "the judge_run_has_one_subject constraint gives every run an episode or a solo run"
    subject = Subject(obj)
    decision, _notes = _judges_for(subject)
    return (run.prompt_version == JUDGE_PROMPT_VERSION
            and rubric_for_grading(subject.task) == run.rubric
            and any((s.provider, s.model) == (run.provider, run.model) for s in decision.allowed))


RETRYABLE_STATUSES = (Status.FAILED, Status.SUBMITTED, Status.GRADING, Status.GRADED)


def episode_grading_retry(*, episode: Episode, actor: Any) -> Episode:
    """Send a failed, waiting, stuck or graded episode back to grading (failed judge runs are redone); audited.

    The one retry of an episode's grading: the dashboard's grading queue, the admin action and a judge run's
    retry all come here. A failed or stuck episode goes back to *submitted*; a graded one keeps its score until
    the regrade replaces it. Raises :class:`RetryRefused` for work that was never submitted or was skipped.
    """
    with transaction.atomic():
        locked = Episode.objects.select_for_update().get(pk=episode.pk)
        if locked.status not in RETRYABLE_STATUSES:
            raise RetryRefused(f"Task {locked.pk} is “{locked.get_status_display()}”; there is no grading to retry.")
        before = {"status": locked.status, "grading_note": locked.grading_note}
        if locked.status in (Status.FAILED, Status.GRADING):
            locked.status, locked.grading_note = Status.SUBMITTED, ""
            locked.save(update_fields=["status", "grading_note", "updated_at"])
        audit_record(actor=actor, action="grading.retry", obj=locked, study=locked.study, before=before,
                     after={"status": locked.status})
        send_task_on_commit(GRADE_EPISODE, [locked.pk])
    return locked


def solo_run_grading_retry(*, solo_run: SoloRun, actor: Any) -> bool:
    """Send a solo run back to grading (same rules as episodes)."""
    if solo_run.status not in RETRYABLE_STATUSES:
        return False
    with transaction.atomic():
        before = {"status": solo_run.status, "note": solo_run.grading_note}
        if solo_run.status in (Status.FAILED, Status.GRADING):
            SoloRun.objects.filter(pk=solo_run.pk).update(status=Status.SUBMITTED, grading_note="")
        audit_record(actor=actor, action="grading.retry", obj=solo_run, study=solo_run.study, before=before)
        send_task_on_commit(GRADE_SOLO_RUN, [solo_run.pk])
    return True


def judge_run_retry(*, run: JudgeRun, actor: Any) -> bool:
    """Redo one failed, waiting or abandoned (lease lapsed) judge run by re-enqueueing its submission's grading.

    Return False when the run succeeded, is running under a live lease, or is no longer part of the current
    plan (an older rubric version, judge or prompt), since re-grading would not redo it.
    """
    abandoned = (run.status == JudgeRun.Status.RUNNING
                 and (run.lease_expires_at is None or run.lease_expires_at < timezone.now()))
    if (run.status not in (JudgeRun.Status.FAILED, JudgeRun.Status.WAITING) and not abandoned) or (
            not run_in_current_plan(run)):
        return False
    if run.episode is not None:
        try:
            episode_grading_retry(episode=run.episode, actor=actor)
        except RetryRefused:
            return False
        return True
    assert run.solo_run is not None, "the judge_run_has_one_subject constraint gives every run a subject"
    return solo_run_grading_retry(solo_run=run.solo_run, actor=actor)
