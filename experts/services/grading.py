"""Expert grading: open, autosave and submit a criterion-by-criterion grade, then update the episode.

Scores. A submitted grade's score is 100 × passed / evaluated over its criteria, skips left out (UpBench's
rubric score on 0–100); a grade that skipped everything has no score. The episode's ``expert_score`` is
then recomputed from all its submitted grades by :func:`experts.metrics.combine_expert_scores`: only the
latest attempt counts, an adjudication decides when there is one, otherwise primary and second grades are
averaged; gold checks never count. A change is audited and the rating is told on commit.

Time spent. The page reports the seconds it was visible since its last save. The server adds them but
never lets the total exceed the wall time since the grade was opened, so a tampered page cannot inflate
it. A save without a report (no JavaScript) sets the total to at least that wall time, capped at 3 hours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from experts.exceptions import ExpertError, GradeIncomplete, GradeNotEditable, NoGradingRubric
from experts.metrics import FAIL, VERDICTS, combine_expert_scores, evaluated_share
from experts.models import ExpertAssignment, ExpertCriterionGrade, ExpertGrade
from experts.services.gate import episode_gate_follow_up
from grading.selectors import rubric_for_grading
from rating.services.ledger import GradeInput, episode_grades_record, observation_record
from studies.models import Episode
from studies.services.audit import audit_record

MAX_VISIBLE_DELTA_SECONDS = 30 * 60
NO_REPORT_CAP_SECONDS = 3 * 3600


@dataclass(frozen=True)
class VerdictInput:
    """What the page holds for one criterion; ``verdict`` is empty while undecided."""

    verdict: str = ""
    feedback: str = ""


def grade_open(*, assignment: ExpertAssignment, user: Any) -> ExpertGrade:
    """Return the assignment's grade, starting a draft against the task's grading rubric the first time."""
    if assignment.expert.user_id != getattr(user, "pk", None):
        raise GradeNotEditable("This grading task is assigned to someone else.")
    if assignment.status == ExpertAssignment.Status.CANCELLED:
        raise GradeNotEditable("This grading task was withdrawn by the study team.")
    existing = ExpertGrade.objects.filter(assignment=assignment).first()
    if existing is not None:
        if assignment.status == ExpertAssignment.Status.ASSIGNED:
            ExpertAssignment.objects.filter(pk=assignment.pk, status=ExpertAssignment.Status.ASSIGNED).update(
                status=ExpertAssignment.Status.IN_PROGRESS)
        return existing
    rubric = rubric_for_grading(assignment.episode.task)
    if rubric is None:
        raise NoGradingRubric("This task has no rubric yet. It will appear here once one is approved or "
                              "generated; nothing is lost meanwhile.")
    with transaction.atomic():
        locked = ExpertAssignment.objects.select_for_update().get(pk=assignment.pk)
        grade, _ = ExpertGrade.objects.get_or_create(
            assignment=locked, defaults={"episode_id": locked.episode_id, "expert_id": locked.expert_id,
                                         "rubric": rubric})
        if locked.status == ExpertAssignment.Status.ASSIGNED:
            locked.status = ExpertAssignment.Status.IN_PROGRESS
            locked.save(update_fields=["status"])
    return grade


def _lock_draft(grade: ExpertGrade, user: Any) -> ExpertGrade:
    locked = (ExpertGrade.objects.select_for_update(of=("self",)).select_related("assignment", "expert", "rubric")
              .get(pk=grade.pk))
    if locked.expert.user_id != getattr(user, "pk", None):
        raise GradeNotEditable("This grade belongs to someone else.")
    if locked.status != ExpertGrade.Status.DRAFT:
        raise GradeNotEditable("This grade was already submitted and can no longer change.")
    if locked.assignment.status == ExpertAssignment.Status.CANCELLED:
        raise GradeNotEditable("This grading task was withdrawn by the study team; nothing more can be saved.")
    return locked


def _add_time(grade: ExpertGrade, visible_seconds: float | None) -> None:
    elapsed = max(0, math.ceil((timezone.now() - grade.started_at).total_seconds()))
    if visible_seconds is None:
        grade.time_spent_seconds = max(grade.time_spent_seconds, min(elapsed, NO_REPORT_CAP_SECONDS))
        return
    delta = min(max(0.0, float(visible_seconds)), MAX_VISIBLE_DELTA_SECONDS)
    grade.time_spent_seconds = int(min(grade.time_spent_seconds + round(delta), elapsed))


def grade_save_draft(
    *,
    grade: ExpertGrade,
    user: Any,
    verdicts: Mapping[int, VerdictInput],
    overall: str = "",
    feedback: str = "",
    visible_seconds: float | None = None,
) -> ExpertGrade:
    """Save whatever the page holds (undecided criteria included) without any completeness check.

    ``verdicts`` is keyed by criterion id; criteria the page did not send keep their saved answers.
    """
    if overall and overall not in ExpertGrade.Judgement.values:
        raise ExpertError(f"“{overall}” is not an overall judgement.")
    with transaction.atomic():
        locked = _lock_draft(grade, user)
        criterion_ids = set(locked.rubric.criteria.values_list("pk", flat=True))
        saved = {row.criterion_id: row for row in locked.criterion_grades.all()}
        for criterion_id, given in verdicts.items():
            if criterion_id not in criterion_ids:
                raise ExpertError("The page sent a criterion that is not part of this rubric; reload the page.")
            if given.verdict and given.verdict not in VERDICTS:
                raise ExpertError(f"“{given.verdict}” is not a verdict; use pass, fail or skip.")
            row = saved.get(criterion_id)
            if not given.verdict and not given.feedback.strip():
                if row is not None:
                    row.delete()
                continue
            if row is None:
                ExpertCriterionGrade.objects.create(grade=locked, criterion_id=criterion_id, verdict=given.verdict,
                                                    feedback=given.feedback)
            elif (row.verdict, row.feedback) != (given.verdict, given.feedback):
                row.verdict, row.feedback = given.verdict, given.feedback
                row.save(update_fields=["verdict", "feedback"])
        locked.overall = overall
        locked.feedback = feedback
        _add_time(locked, visible_seconds)
        locked.save(update_fields=["overall", "feedback", "time_spent_seconds"])
    return locked


def _problems(grade: ExpertGrade) -> dict[str, str]:
    saved = {row.criterion_id: row for row in grade.criterion_grades.all()}
    problems: dict[str, str] = {}
    for criterion in grade.rubric.criteria.order_by("order", "pk"):
        row = saved.get(criterion.pk)
        if row is None or row.verdict not in VERDICTS:
            problems[str(criterion.pk)] = f"{criterion.key}: choose pass, fail or skip."
        elif row.verdict == FAIL and not row.feedback.strip():
            problems[str(criterion.pk)] = f"{criterion.key}: say what is wrong. Feedback is required on a fail."
    if grade.overall not in ExpertGrade.Judgement.values:
        problems["overall"] = "Give your overall judgement of the deliverable."
    return problems


def _expert_grades(episode: Episode) -> list[GradeInput]:
    """The submitted expert grades of the episode's latest attempt (gold checks never count), one per expert."""
    grades = list(ExpertGrade.objects.filter(episode=episode, status=ExpertGrade.Status.SUBMITTED, score__isnull=False)
                  .exclude(assignment__role=ExpertAssignment.Role.GOLD).order_by("-attempt", "-submitted_at"))
    latest = grades[0].attempt if grades else None
    return [GradeInput(grader=f"expert:{grade.expert_id}", family="", y=float(grade.score), source_id=grade.pk)
            for grade in grades if grade.attempt == latest and grade.score is not None]


def episode_expert_score_refresh(*, episode_id: int, actor: Any = None) -> float | None:
    """Recompute the episode's expert score from its submitted grades; audit and record its observation on change."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update(of=("self",)).select_related("study").get(pk=episode_id)
        grades = (ExpertGrade.objects.filter(episode=episode, status=ExpertGrade.Status.SUBMITTED)
                  .values_list("assignment__role", "attempt", "score"))
        new = combine_expert_scores(grades)
        if new is not None:
            new = round(new, 6)
        if not episode.is_gold:
            # Each expert's grade is an observation of the judge-aware rating (the latest attempt's grades).
            episode_grades_record(episode_id=episode.pk, kind="expert", grades=_expert_grades(episode))
        if new == episode.expert_score:
            return new
        before = episode.expert_score
        # update() touches only this column, so a concurrent judge writing auto_score is not overwritten.
        # An expert score resolves the flag that asked for it (judge disagreement, a missing judge).
        resolved = {"needs_expert_review": False} if new is not None else {}
        Episode.objects.filter(pk=episode.pk).update(expert_score=new, updated_at=timezone.now(), **resolved)
        audit_record(actor=actor, action="episode.expert_score", obj=episode, study=episode.study,
                     before={"expert_score": before}, after={"expert_score": new})
        if not episode.is_gold:
            # The ledger row is written in this transaction: the grade and its observation commit together,
            # with no message to lose on the way (the refresh it schedules runs after the commit).
            observation_record(episode_id=episode.pk)
    return new


def grade_submit(
    *,
    grade: ExpertGrade,
    user: Any,
    verdicts: Mapping[int, VerdictInput],
    overall: str = "",
    feedback: str = "",
    visible_seconds: float | None = None,
    confirm_critical_accept: bool = False,
    accept_despite_critical: bool = False,
) -> ExpertGrade:
    """Save the page's answers, then submit them; raise GradeIncomplete (draft kept) when something is missing.

    Judging a deliverable acceptable while it fails a critical criterion is usually a slip: with
    ``confirm_critical_accept`` (the grading page) that needs ``accept_despite_critical``, a ticked confirmation.
    """
    grade_save_draft(grade=grade, user=user, verdicts=verdicts, overall=overall, feedback=feedback,
                     visible_seconds=visible_seconds)
    with transaction.atomic():
        locked = _lock_draft(grade, user)
        problems = _problems(locked)
        if (confirm_critical_accept and not accept_despite_critical and "overall" not in problems
                and locked.overall == ExpertGrade.Judgement.ACCEPT):
            failed_critical = list(locked.criterion_grades.filter(verdict=FAIL, criterion__label="critical")
                                   .order_by("criterion__order").values_list("criterion__key", flat=True))
            if failed_critical:
                problems["overall"] = (
                    f"You judged the deliverable acceptable although it fails critical criteria "
                    f"({', '.join(failed_critical)}). Tick the confirmation below to submit it as acceptable "
                    "anyway, or change your judgement."
                )
                problems["confirm_accept"] = "1"
        if problems:
            # Each problem is shown once, beside its answer; the banner says how many there are and where.
            count = sum(key != "confirm_accept" for key in problems)
            raise GradeIncomplete(
                "Your answers are saved, but the grade cannot be submitted yet: "
                f"{count} answer{'' if count == 1 else 's'} below need{'s' if count == 1 else ''} attention "
                "(marked in red).", problems=problems)
        # The stored score leaves skipped criteria out (see evaluated_share); UpBench's R is computed on read.
        score = evaluated_share(locked.criterion_grades.values_list("verdict", flat=True))
        locked.score = None if score is None else round(100.0 * score, 6)
        locked.status = ExpertGrade.Status.SUBMITTED
        locked.submitted_at = timezone.now()
        locked.save(update_fields=["score", "status", "submitted_at"])
        ExpertAssignment.objects.filter(pk=locked.assignment_id).update(status=ExpertAssignment.Status.SUBMITTED)
        audit_record(actor=user, action="expert_grade.submit", obj=locked, study=locked.episode.study,
                     after={"score": locked.score, "overall": locked.overall, "attempt": locked.attempt,
                            "role": locked.assignment.role, "time_spent_seconds": locked.time_spent_seconds})
        if locked.assignment.role != ExpertAssignment.Role.GOLD:
            episode_expert_score_refresh(episode_id=locked.episode_id, actor=user)
            episode_gate_follow_up(episode=locked.episode)
    return locked
