"""Blind comparisons: staff build a set of two to four deliverables of one task and give it to experts, who
rank them (ties allowed), say how acceptable each would be to a client, and justify the ranking.

Blinding. Each expert sees the set in an order drawn at random when the set is assigned; the order, its seed
and its probability (1/n! for the uniform draw) are stored with the assignment, so position effects can be
estimated. The page shows the task and the files only, addressed by shown position: no agent, worker,
condition, score, episode id, or whether a deliverable is a solo-agent run. Nothing is revealed after
submission either, because the same expert may later grade one of these deliverables.

Grading first excludes comparing. An expert who holds a (not withdrawn) grading assignment of one of the set's
episodes is never given the set, and a set they were given disappears from their queue as soon as such a
grading assignment exists while the comparison is not submitted (see ``experts.comparison_selectors``). The
converse is allowed: comparing first shows nothing that grading hides, so a later grade stays blind.

Time spent is counted as on the grading page (``experts.services.grading``): the visible seconds the page
reports, never more than the wall time since the comparison was opened.
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from experts.exceptions import ComparisonError, ComparisonIncomplete, ComparisonNotEditable
from experts.models import (
    ComparisonAssignment,
    ComparisonItem,
    ComparisonPlacement,
    ComparisonSet,
    ExpertAssignment,
    ExpertProfile,
)
from experts.services.grading import MAX_VISIBLE_DELTA_SECONDS, NO_REPORT_CAP_SECONDS
from studies.models import Episode, EpisodeFile, SoloRun, SoloRunFile, Study, TaskInstance
from studies.services.audit import audit_record

MIN_ITEMS, MAX_ITEMS = 2, 4
# Episodes whose deliverables are final: submitted, whatever grading has made of them since.
SUBMITTED_STATES = (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED)
ACCEPTABILITY = tuple(ComparisonPlacement.Acceptability.values)
MIN_JUSTIFICATION_CHARS = 20


@dataclass(frozen=True)
class PlacementInput:
    """What the page holds for one shown position; empty values are undecided."""

    rank: int | None = None
    acceptability: str = ""


# --------------------------------------------------------------------------------------------------------
# Building sets
# --------------------------------------------------------------------------------------------------------


def _load_sources(episode_ids: Sequence[int], solo_run_ids: Sequence[int]) -> tuple[list[Episode], list[SoloRun]]:
    if len(set(episode_ids)) != len(episode_ids):
        raise ComparisonError("The same episode was chosen twice; a set compares different deliverables.")
    if len(set(solo_run_ids)) != len(solo_run_ids):
        raise ComparisonError("The same solo-agent run was chosen twice; a set compares different deliverables.")
    episodes = list(Episode.objects.filter(pk__in=episode_ids).select_related("task"))
    runs = list(SoloRun.objects.filter(pk__in=solo_run_ids).select_related("task"))
    if len(episodes) != len(episode_ids) or len(runs) != len(solo_run_ids):
        raise ComparisonError("A chosen deliverable no longer exists; reload the page.")
    return episodes, runs


def _check_sources(study: Study, task: TaskInstance, episodes: list[Episode], runs: list[SoloRun]) -> None:
    count = len(episodes) + len(runs)
    if count < MIN_ITEMS:
        raise ComparisonError(f"A comparison needs at least {MIN_ITEMS} deliverables; {count} chosen.")
    if count > MAX_ITEMS:
        raise ComparisonError(f"A comparison shows at most {MAX_ITEMS} deliverables; {count} chosen.")
    sources: list[Episode | SoloRun] = [*episodes, *runs]
    for source in sources:
        if source.task_id != task.pk:
            raise ComparisonError("All deliverables of a comparison must answer the same task; "
                                  f"one answers “{source.task.title}”.")
        if source.study_id != study.pk:
            raise ComparisonError("All deliverables of a comparison must come from the set's study.")
    for episode in episodes:
        if episode.is_gold or episode.is_simulated:
            raise ComparisonError(f"Episode {episode.pk} is a gold or simulated copy and cannot be compared.")
        if episode.status not in SUBMITTED_STATES:
            raise ComparisonError(f"Episode {episode.pk} has not been submitted; only submitted work is compared.")
    with_files = set(EpisodeFile.objects.filter(episode__in=episodes, kind=EpisodeFile.Kind.DELIVERABLE)
                     .values_list("episode_id", flat=True))
    for episode in episodes:
        if episode.pk not in with_files:
            raise ComparisonError(f"Episode {episode.pk} has no deliverable files to compare.")
    for run in runs:
        if not run.files.filter(kind=SoloRunFile.Kind.DELIVERABLE).exists():
            raise ComparisonError(f"Solo-agent run {run.pk} has no deliverable files to compare.")


def comparison_set_create(*, study: Study, task: TaskInstance, episode_ids: Sequence[int] = (),
                          solo_run_ids: Sequence[int] = (), experts: Sequence[ExpertProfile] = (),
                          actor: Any, note: str = "") -> ComparisonSet:
    """Create a set of the given deliverables and assign it to ``experts``; raise ComparisonError, saving nothing."""
    episodes, runs = _load_sources(list(episode_ids), list(solo_run_ids))
    _check_sources(study, task, episodes, runs)
    with transaction.atomic():
        comparison_set = ComparisonSet.objects.create(study=study, task=task, note=note.strip(), created_by=actor)
        ComparisonItem.objects.bulk_create(
            [ComparisonItem(comparison_set=comparison_set, episode=e) for e in sorted(episodes, key=lambda e: e.pk)]
            + [ComparisonItem(comparison_set=comparison_set, solo_run=r) for r in sorted(runs, key=lambda r: r.pk)])
        audit_record(actor=actor, action="comparison_set.create", obj=comparison_set, study=study,
                     after={"task": str(task.uuid), "episodes": sorted(e.pk for e in episodes),
                            "solo_runs": sorted(r.pk for r in runs)})
        for expert in experts:
            comparison_assign(comparison_set=comparison_set, expert=expert, actor=actor)
    return comparison_set


def comparison_conflicts(*, comparison_set: ComparisonSet, expert: ExpertProfile) -> list[str]:
    """Why ``expert`` may not compare this set (empty when they may)."""
    episode_ids = [i for i in comparison_set.items.values_list("episode_id", flat=True) if i is not None]
    reasons = []
    if not expert.is_active:
        reasons.append("their expert access is paused")
    graded = (ExpertAssignment.objects.filter(expert=expert, episode_id__in=episode_ids)
              .exclude(status=ExpertAssignment.Status.CANCELLED).exists())
    if graded:
        reasons.append("they grade one of its deliverables (a comparison is never shown to its grader)")
    if Episode.objects.filter(pk__in=episode_ids, participant__user_id=expert.user_id).exists():
        reasons.append("one of its deliverables is their own work")
    return reasons


def _draw_order(item_ids: list[int], seed: int) -> list[int]:
    order = sorted(item_ids)
    random.Random(seed).shuffle(order)
    return order


def comparison_assign(*, comparison_set: ComparisonSet, expert: ExpertProfile, actor: Any,
                      seed: int | None = None) -> ComparisonAssignment:
    """Give the set to one expert in a freshly drawn random order; raise ComparisonError when they may not."""
    reasons = comparison_conflicts(comparison_set=comparison_set, expert=expert)
    if reasons:
        raise ComparisonError(f"{expert.user} cannot compare this set: {'; '.join(reasons)}.")
    seed = secrets.randbits(62) if seed is None else seed
    item_ids = list(comparison_set.items.values_list("pk", flat=True))
    order = _draw_order(item_ids, seed)
    try:
        with transaction.atomic():
            assignment = ComparisonAssignment.objects.create(
                comparison_set=comparison_set, expert=expert, assigned_by=actor, order_seed=seed,
                order_probability=1.0 / math.factorial(len(order)))
            ComparisonPlacement.objects.bulk_create(
                [ComparisonPlacement(assignment=assignment, item_id=item_id, position=position)
                 for position, item_id in enumerate(order, start=1)])
    except IntegrityError:
        raise ComparisonError(f"{expert.user} already has this comparison.") from None
    audit_record(actor=actor, action="comparison.assign", obj=assignment, study=comparison_set.study,
                 after={"set": comparison_set.pk, "expert": expert.pk, "shown_order": order})
    return assignment


def comparison_cancel(*, assignment: ComparisonAssignment, actor: Any) -> ComparisonAssignment:
    """Withdraw an open comparison from its expert (a submitted one stays as it is)."""
    with transaction.atomic():
        locked = ComparisonAssignment.objects.select_for_update().get(pk=assignment.pk)
        if locked.status == ComparisonAssignment.Status.SUBMITTED:
            raise ComparisonError("This comparison was already submitted; it stays in the data.")
        before = locked.status
        locked.status = ComparisonAssignment.Status.CANCELLED
        locked.save(update_fields=["status"])
        audit_record(actor=actor, action="comparison.cancel", obj=locked, study=locked.comparison_set.study,
                     before={"status": before}, after={"status": locked.status})
    return locked


# --------------------------------------------------------------------------------------------------------
# The expert's answer
# --------------------------------------------------------------------------------------------------------


def comparison_open(*, assignment: ComparisonAssignment, user: Any) -> ComparisonAssignment:
    """Start the clock the first time the expert opens the comparison; refuse someone else's or a withdrawn one."""
    if assignment.expert.user_id != getattr(user, "pk", None):
        raise ComparisonNotEditable("This comparison is assigned to someone else.")
    if assignment.status == ComparisonAssignment.Status.CANCELLED:
        raise ComparisonNotEditable("This comparison was withdrawn by the study team.")
    if assignment.status == ComparisonAssignment.Status.ASSIGNED:
        now = timezone.now()
        ComparisonAssignment.objects.filter(pk=assignment.pk, status=ComparisonAssignment.Status.ASSIGNED).update(
            status=ComparisonAssignment.Status.IN_PROGRESS, opened_at=now)
        assignment.refresh_from_db()
    return assignment


def _lock_draft(assignment: ComparisonAssignment, user: Any) -> ComparisonAssignment:
    locked = ComparisonAssignment.objects.select_for_update(of=("self",)).select_related(
        "expert", "comparison_set__study").get(pk=assignment.pk)
    if locked.expert.user_id != getattr(user, "pk", None):
        raise ComparisonNotEditable("This comparison belongs to someone else.")
    if locked.status == ComparisonAssignment.Status.SUBMITTED:
        raise ComparisonNotEditable("This comparison was already submitted and can no longer change.")
    if locked.status == ComparisonAssignment.Status.CANCELLED:
        raise ComparisonNotEditable("This comparison was withdrawn by the study team; nothing more can be saved.")
    if locked.opened_at is None:
        raise ComparisonNotEditable("Open the comparison page first.")
    return locked


def _add_time(assignment: ComparisonAssignment, visible_seconds: float | None) -> None:
    opened = assignment.opened_at or timezone.now()  # callers check it is set (_editable); never counted as open
    elapsed = max(0, math.ceil((timezone.now() - opened).total_seconds()))
    if visible_seconds is None:
        assignment.time_spent_seconds = max(assignment.time_spent_seconds, min(elapsed, NO_REPORT_CAP_SECONDS))
        return
    delta = min(max(0.0, float(visible_seconds)), MAX_VISIBLE_DELTA_SECONDS)
    assignment.time_spent_seconds = int(min(assignment.time_spent_seconds + round(delta), elapsed))


def _check_input(placements: Mapping[int, PlacementInput], count: int) -> None:
    for position, given in placements.items():
        if not 1 <= position <= count:
            raise ComparisonError("The page sent a deliverable that is not part of this comparison; "
                                  "reload the page.")
        if given.rank is not None and not 1 <= given.rank <= count:
            raise ComparisonError(f"Deliverable {position}: a rank runs from 1 (best) to {count}.")
        if given.acceptability and given.acceptability not in ACCEPTABILITY:
            raise ComparisonError(f"Deliverable {position}: “{given.acceptability}” is not on the acceptability "
                                  "scale.")


def comparison_save_draft(*, assignment: ComparisonAssignment, user: Any, placements: Mapping[int, PlacementInput],
                          justification: str = "", visible_seconds: float | None = None) -> ComparisonAssignment:
    """Save whatever the page holds, keyed by shown position, without any completeness check."""
    with transaction.atomic():
        locked = _lock_draft(assignment, user)
        rows = {row.position: row for row in locked.placements.all()}
        _check_input(placements, len(rows))
        for position, given in placements.items():
            row = rows[position]
            if (row.rank, row.acceptability) != (given.rank, given.acceptability):
                row.rank, row.acceptability = given.rank, given.acceptability
                row.save(update_fields=["rank", "acceptability"])
        locked.justification = justification
        _add_time(locked, visible_seconds)
        locked.save(update_fields=["justification", "time_spent_seconds"])
    return locked


def comparison_problems(assignment: ComparisonAssignment) -> dict[str, str]:
    """What still blocks submission, keyed by shown position (as text) or by field name."""
    problems: dict[str, str] = {}
    for row in assignment.placements.order_by("position"):
        missing = []
        if row.rank is None:
            missing.append("a rank")
        if not row.acceptability:
            missing.append("how acceptable it would be to a client")
        if missing:
            problems[str(row.position)] = f"Deliverable {row.position}: give {' and '.join(missing)}."
    if len(assignment.justification.strip()) < MIN_JUSTIFICATION_CHARS:
        problems["justification"] = (f"Say why you ranked them this way (at least {MIN_JUSTIFICATION_CHARS} "
                                     "characters).")
    return problems


def comparison_submit(*, assignment: ComparisonAssignment, user: Any, placements: Mapping[int, PlacementInput],
                      justification: str = "", visible_seconds: float | None = None) -> ComparisonAssignment:
    """Save the page's answers, then submit them; raise ComparisonIncomplete (draft kept) when something is missing."""
    comparison_save_draft(assignment=assignment, user=user, placements=placements, justification=justification,
                          visible_seconds=visible_seconds)
    with transaction.atomic():
        locked = _lock_draft(assignment, user)
        problems = comparison_problems(locked)
        if problems:
            count = len(problems)
            raise ComparisonIncomplete(
                "Your answers are saved, but the comparison cannot be submitted yet: "
                f"{count} answer{'' if count == 1 else 's'} below need{'s' if count == 1 else ''} attention "
                "(marked in red).", problems=problems)
        locked.status = ComparisonAssignment.Status.SUBMITTED
        locked.submitted_at = timezone.now()
        locked.save(update_fields=["status", "submitted_at"])
        ranks = {row.position: row.rank for row in locked.placements.all()}
        audit_record(actor=user, action="comparison.submit", obj=locked, study=locked.comparison_set.study,
                     after={"ranks_by_position": ranks, "time_spent_seconds": locked.time_spent_seconds})
    return locked
