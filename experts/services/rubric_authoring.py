"""Expert rubric authoring: drafts, optimistic-locked saves, submission and staff review.

A rubric version is immutable once submitted; changing it means a new version (``version = max + 1``,
``origin = expert``, ``based_on`` the source). Drafts are saved whole: the criteria of the draft are
replaced by what the editor sent, and ``lock_version`` goes up by one, so an editor holding an older
``lock_version`` (a second tab, a stale page) is refused instead of silently overwriting newer work.

Points. Expert rubrics must also drive the automated judges once approved, so at submission they must
fit the same structure as generated ones: the four fixed categories with their fixed point totals
(Correctness 40, Completeness 20, Requirements 25, Technical 15; 100 overall). Experts may leave points
blank: the blank criteria of a category share what the category has left equally (rounded to 0.01, the
last one taking the rounding remainder), so a rubric with no points at all gets equal points per category.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import transaction
from django.db.models import Max, ProtectedError

from experts.exceptions import RubricIncomplete, RubricNotEditable, RubricReviewError, StaleRubricEdit
from experts.models import ExpertProfile
from experts.rubric_lint import blocking, criteria_count, lint_rubric
from grading.exceptions import RubricInvalid
from grading.models import Criterion, Rubric
from grading.schemas import CATEGORY_POINTS, POINT_TOLERANCE, RUBRIC_CATEGORIES
from grading.services.rubric_generation import rubric_approve, rubric_used
from studies.models import TaskInstance
from studies.services.audit import audit_record

# Editor rows beyond this are refused outright (a draft may hold more than 20 while the expert trims it).
MAX_DRAFT_ROWS = 40


@dataclass
class CriterionInput:
    """One criterion as the editor sent it; ``points`` is None when left blank."""

    description: str
    label: str = ""
    category: str = Criterion.Category.REQUIREMENTS
    points: float | None = None
    expected_value: str = ""
    evaluation_method: str = ""
    matches_auto: list[int] = field(default_factory=list)


def _profile_for(user: Any) -> ExpertProfile | None:
    return ExpertProfile.objects.filter(user=user, is_active=True).first() if user is not None else None


def _require_domain(user: Any, task: TaskInstance) -> None:
    profile = _profile_for(user)
    if profile is None or not profile.sectors.filter(pk=task.sector_id).exists():
        raise RubricNotEditable("This task is outside your domains.")


def _next_version(task: TaskInstance) -> int:
    return (Rubric.objects.filter(task=task).aggregate(v=Max("version"))["v"] or 0) + 1


def auto_criteria_ids(task: TaskInstance) -> set[int]:
    """Return the ids of every criterion of the task's auto-generated rubrics (valid match targets)."""
    return set(Criterion.objects.filter(rubric__task=task, rubric__origin=Rubric.Origin.AUTO)
               .values_list("pk", flat=True))


def rubric_draft_start(*, task: TaskInstance, author: Any, based_on: Rubric | None = None) -> Rubric:
    """Create a new expert draft for the task, blank or as a copy of ``based_on``.

    Copied criteria keep their text, label, category and points. Copying an auto-generated rubric marks
    each copy as matching its original (the expert can untick that); copying an expert rubric keeps its marks.
    """
    _require_domain(author, task)
    if based_on is not None:
        if based_on.task_id != task.pk:
            raise RubricNotEditable("That rubric belongs to another task.")
        if based_on.status in (Rubric.Status.GENERATING, Rubric.Status.FAILED):
            raise RubricNotEditable("That rubric has no usable criteria to start from.")
    with transaction.atomic():
        # The task row lock serialises version numbers with the generator and other experts.
        TaskInstance.objects.select_for_update().filter(pk=task.pk).first()
        details: dict[str, Any] = {"notes": ""}
        if based_on is not None and based_on.origin == Rubric.Origin.EXPERT:
            details["notes"] = str((based_on.details or {}).get("notes", ""))
        rubric = Rubric.objects.create(task=task, version=_next_version(task), status=Rubric.Status.DRAFT,
                                       origin=Rubric.Origin.EXPERT, based_on=based_on, author=author,
                                       details=details)
        if based_on is not None:
            for order, source in enumerate(based_on.criteria.order_by("order", "pk")):
                copy = Criterion.objects.create(
                    rubric=rubric, order=order, key=f"C{order + 1}", category=source.category,
                    description=source.description, points=source.points, expected_value=source.expected_value,
                    evaluation_method=source.evaluation_method, label=source.label)
                if based_on.origin == Rubric.Origin.AUTO:
                    copy.matches_auto.add(source)
                else:
                    copy.matches_auto.set(source.matches_auto.all())
        audit_record(actor=author, action="rubric.draft_start", obj=rubric,
                     after={"version": rubric.version, "based_on": based_on.pk if based_on else None,
                            "task": str(task.uuid)})
    return rubric


def _lock_draft(rubric_id: int, author: Any, lock_version: int) -> Rubric:
    rubric = Rubric.objects.select_for_update().select_related("task").get(pk=rubric_id)
    if rubric.author_id != getattr(author, "pk", None) or rubric.origin != Rubric.Origin.EXPERT:
        raise RubricNotEditable("Only the expert who started this draft can change it.")
    if rubric.status != Rubric.Status.DRAFT:
        raise RubricNotEditable(f"Version {rubric.version} is {rubric.get_status_display().lower()} and can no "
                                "longer change. Start a new version from it instead.")
    if rubric.lock_version != lock_version:
        raise StaleRubricEdit(
            "This draft was saved elsewhere (another tab or window) after you opened it. Nothing was saved "
            "from this page. Your edits are shown below: compare them with the saved version, then save again "
            "to replace it.", current_lock_version=rubric.lock_version)
    return rubric


def criterion_problems(rows: Sequence[CriterionInput]) -> list[tuple[int | None, str]]:
    """Return what blocks submission: lint errors, then categories and points."""
    problems: list[tuple[int | None, str]] = [
        (hint.index, hint.message)
        for hint in blocking(lint_rubric({"description": r.description, "label": r.label} for r in rows))]
    return problems + category_point_problems(rows)


def category_point_problems(rows: Sequence[CriterionInput]) -> list[tuple[int | None, str]]:
    """Return the category and points rules submission enforces (the editor's live hints show the same)."""
    problems: list[tuple[int | None, str]] = []
    by_category: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        if row.category not in CATEGORY_POINTS:
            problems.append((index, "Choose one of the four categories."))
            continue
        if row.points is not None and row.points <= 0:
            problems.append((index, "Points must be more than 0 (or leave them blank to share the category's "
                                    "points equally)."))
        by_category[row.category].append(index)
    for code, name, required in RUBRIC_CATEGORIES:
        indices = by_category.get(code, [])
        if not indices:
            problems.append((None, f"No criterion is in “{name}”. Every category needs at least one "
                                   f"(it carries {required:g} of the 100 points)."))
            continue
        given = math.fsum(p for i in indices if (p := rows[i].points) is not None)
        blanks = [i for i in indices if rows[i].points is None]
        if blanks and required - given <= POINT_TOLERANCE:
            problems.append((None, f"“{name}”: the points you gave already add up to {given:g} of {required:g}, "
                                   f"leaving nothing for the {criteria_count(len(blanks))} without points."))
        elif not blanks and abs(given - required) > POINT_TOLERANCE:
            problems.append((None, f"“{name}”: points add up to {given:g} but must add up to {required:g} (or "
                                   "leave some blank to share the rest equally)."))
    return problems


def fill_blank_points(rows: Sequence[CriterionInput]) -> list[float]:
    """Return every row's points with blanks given an equal share of their category's remaining total."""
    points = [row.points for row in rows]
    by_category: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        if row.points is None:
            by_category[row.category].append(index)
    for code, blanks in by_category.items():
        given = math.fsum(p for r, p in zip(rows, points, strict=True) if r.category == code and p is not None)
        remaining = CATEGORY_POINTS.get(code, 0.0) - given
        share = math.floor(remaining / len(blanks) * 100) / 100
        for index in blanks[:-1]:
            points[index] = share
        points[blanks[-1]] = round(remaining - share * (len(blanks) - 1), 2)
    return [float(cast(float, p)) for p in points]  # every blank got its share above


def _write_criteria(rubric: Rubric, rows: Sequence[CriterionInput], points: Sequence[float | None]) -> None:
    allowed = auto_criteria_ids(rubric.task)
    try:
        rubric.criteria.all().delete()
    except ProtectedError:
        raise RubricNotEditable("This version was already used for grading; start a new version instead.")
    for order, (row, value) in enumerate(zip(rows, points, strict=True)):
        criterion = Criterion.objects.create(
            rubric=rubric, order=order, key=f"C{order + 1}", category=row.category,
            description=row.description.strip(), points=0.0 if value is None else value, label=row.label,
            expected_value=row.expected_value.strip(), evaluation_method=row.evaluation_method.strip())
        matches = [pk for pk in row.matches_auto if pk in allowed]
        if matches:
            criterion.matches_auto.set(matches)


def _points_blank(rubric: Rubric) -> list[bool]:
    return list((rubric.details or {}).get("blank_points", []))


def rubric_draft_save(
    *,
    rubric: Rubric,
    author: Any,
    lock_version: int,
    criteria: Sequence[CriterionInput],
    notes: str = "",
    submit: bool = False,
) -> Rubric:
    """Save the editor's criteria as the draft's content; with ``submit``, then submit it for approval.

    The save commits before submission is checked, so a refused submission (RubricIncomplete) loses
    nothing: the draft holds exactly what the expert typed and the error lists what is still missing.
    Blank points are stored as 0 with a marker in ``details`` so the editor shows them blank again.
    """
    rows = [row for row in criteria if row.description.strip() or row.label]
    if len(rows) > MAX_DRAFT_ROWS:
        raise RubricNotEditable(f"A draft can hold at most {MAX_DRAFT_ROWS} criteria; a rubric needs 5–20.")
    with transaction.atomic():
        locked = _lock_draft(rubric.pk, author, lock_version)
        if rubric_used(locked):
            raise RubricNotEditable("This version was already used for grading; start a new version instead.")
        _write_criteria(locked, rows, [row.points for row in rows])
        locked.details = {**(locked.details or {}), "notes": notes.strip(),
                          "blank_points": [row.points is None for row in rows]}
        locked.total_points = math.fsum(row.points or 0.0 for row in rows)
        locked.lock_version += 1
        locked.save(update_fields=["details", "total_points", "lock_version", "updated_at"])
        audit_record(actor=author, action="rubric.draft_save", obj=locked,
                     after={"criteria": len(rows), "lock_version": locked.lock_version})
    if submit:
        return rubric_submit(rubric=locked, author=author, lock_version=locked.lock_version)
    return locked


def draft_rows(rubric: Rubric) -> list[CriterionInput]:
    """Return a rubric's criteria as editor rows (blank points shown blank again)."""
    blank = _points_blank(rubric)
    rows = []
    for index, criterion in enumerate(rubric.criteria.order_by("order", "pk").prefetch_related("matches_auto")):
        rows.append(CriterionInput(
            description=criterion.description, label=criterion.label, category=criterion.category,
            points=None if index < len(blank) and blank[index] else criterion.points,
            expected_value=criterion.expected_value, evaluation_method=criterion.evaluation_method,
            matches_auto=[c.pk for c in criterion.matches_auto.all()]))
    return rows


def rubric_submit(*, rubric: Rubric, author: Any, lock_version: int) -> Rubric:
    """Submit a saved draft for staff approval, filling blank points; raise RubricIncomplete if not ready."""
    with transaction.atomic():
        locked = _lock_draft(rubric.pk, author, lock_version)
        rows = draft_rows(locked)
        problems = criterion_problems(rows)
        if problems:
            raise RubricIncomplete("Your draft is saved, but it cannot be submitted yet:", problems=problems)
        points = fill_blank_points(rows)
        for criterion, value in zip(locked.criteria.order_by("order", "pk"), points, strict=True):
            if criterion.points != value:
                criterion.points = value
                criterion.save(update_fields=["points"])
        locked.details = {**(locked.details or {}), "blank_points": []}
        locked.total_points = math.fsum(points)
        locked.status = Rubric.Status.SUBMITTED
        locked.lock_version += 1
        locked.save(update_fields=["details", "total_points", "status", "lock_version", "updated_at"])
        audit_record(actor=author, action="rubric.submit", obj=locked, before={"status": Rubric.Status.DRAFT},
                     after={"status": locked.status, "version": locked.version, "criteria": len(rows)})
    return locked


def rubric_review_approve(*, rubric: Rubric, actor: Any, note: str = "") -> Rubric:
    """Approve a submitted expert rubric; from then on it is the version grading uses for its task."""
    with transaction.atomic():
        locked = Rubric.objects.select_for_update().select_related("task").get(pk=rubric.pk)
        _check_reviewable(locked, actor)
        try:
            # One approval path for every rubric: the grading service re-checks that the points add up.
            return rubric_approve(rubric=locked, actor=actor, note=note.strip())
        except RubricInvalid as exc:
            raise RubricReviewError(exc.reason)


def rubric_review_reject(*, rubric: Rubric, actor: Any, note: str) -> Rubric:
    """Send a submitted rubric back with a note; the expert starts a new version from it."""
    note = (note or "").strip()
    if not note:
        raise RubricReviewError("Say what needs to change: the note is shown to the expert.")
    with transaction.atomic():
        locked = Rubric.objects.select_for_update().select_related("task").get(pk=rubric.pk)
        _check_reviewable(locked, actor)
        locked.status = Rubric.Status.REJECTED
        locked.reviewer_note = note
        locked.save(update_fields=["status", "reviewer_note", "updated_at"])
        audit_record(actor=actor, action="rubric.rejected", obj=locked, before={"status": Rubric.Status.SUBMITTED},
                     after={"status": locked.status, "version": locked.version}, note=note)
    return locked


def _check_reviewable(rubric: Rubric, actor: Any) -> None:
    if rubric.status != Rubric.Status.SUBMITTED:
        raise RubricReviewError(f"Version {rubric.version} is {rubric.get_status_display().lower()}, not waiting "
                                "for review.")
    if rubric.author_id is not None and rubric.author_id == getattr(actor, "pk", None):
        raise RubricReviewError("You wrote this rubric; another staff member must review it.")
