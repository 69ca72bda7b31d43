"""Which task a worker would get next: the read behind matching, shared by the matching service and pages.

The matching service (:mod:`pairing.services`) reads :func:`task_candidates` first, unlocked, and then
calls :func:`task_pick`, which locks the candidate rows only for the coverage counts and the insert that
follows; :func:`choose_task` is both in one call. :func:`task_available` asks the same for one worker
without locking or assigning anything, and :func:`participants_with_task` for many at once (the staff
overview's stranded workers).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, Q

from studies.conditions import condition_coverage
from studies.exceptions import NoTaskAvailable
from studies.models import Episode, Participant, SectorFallback, Study, TaskInstance


def task_available(*, participant: Participant) -> bool:
    """Whether some task could still be matched to the participant (without locking or assigning)."""
    try:
        choose_task(participant, random.Random(0), lock=False)
    except NoTaskAvailable:
        return False
    return True


def participants_with_task(*, study: Study, participants: Sequence[Participant]) -> set[int]:
    """Return the primary keys of the study's participants some task could still be matched to.

    The rule of :func:`task_available` (own sector, then the study's fallbacks; an active task of the study with
    free capacity that the worker's account never had) for a whole list in three queries, however long it is.
    Load the participants with ``select_related("occupation")``, or reading their sectors costs a query each.
    """
    open_in: dict[int, set[int]] = defaultdict(set)
    open_tasks = (
        TaskInstance.objects.filter(studies=study, is_active=True, sector_id__isnull=False)
        .annotate(taken=Count("episodes", filter=Q(episodes__study=study)
                              & ~Q(episodes__status=Episode.Status.SKIPPED)))
        .filter(taken__lt=study.max_episodes_per_task).values_list("pk", "sector_id")
    )
    for task_id, sector_id in open_tasks:
        open_in[sector_id].add(task_id)
    fallbacks: dict[int, set[int]] = defaultdict(set)
    for from_id, to_id in SectorFallback.objects.filter(study=study).values_list("from_sector_id", "to_sector_id"):
        fallbacks[from_id].add(to_id)
    # A task is never matched twice to one account, whichever study it was done in (as in choose_task).
    had_by_user: dict[int, set[int]] = defaultdict(set)
    had_by_participant: dict[int, set[int]] = defaultdict(set)
    users = {p.user_id for p in participants if p.user_id is not None}
    anonymous = {p.pk for p in participants if p.user_id is None}
    had = (Episode.objects.filter(task__studies=study)
           .filter(Q(participant__user_id__in=users) | Q(participant_id__in=anonymous))
           .values_list("participant_id", "participant__user_id", "task_id"))
    for participant_id, user_id, task_id in had:
        if user_id is None:
            had_by_participant[participant_id].add(task_id)
        else:
            had_by_user[user_id].add(task_id)
    matchable = set()
    for participant in participants:
        occupation = participant.occupation
        if occupation is None or occupation.sector_id is None:
            continue
        done = had_by_user[participant.user_id] if participant.user_id is not None else had_by_participant[
            participant.pk]
        if any(open_in[sector] - done for sector in {occupation.sector_id, *fallbacks[occupation.sector_id]}):
            matchable.add(participant.pk)
    return matchable


def _sectors_for(participant: Participant) -> list[int]:
    """Return the sectors the participant may get tasks from: their occupation's, then the study's fallbacks."""
    occupation = participant.occupation
    if occupation is None or occupation.sector_id is None:
        return []
    fallbacks = (SectorFallback.objects.filter(study=participant.study, from_sector_id=occupation.sector_id)
                 .order_by("priority", "pk").values_list("to_sector_id", flat=True))
    ordered = [occupation.sector_id]
    for sector_id in fallbacks:
        if sector_id not in ordered:
            ordered.append(sector_id)
    return ordered


def choose_task(participant: Participant, rng: random.Random, *, lock: bool = True,
                condition: str | None = None) -> TaskInstance:
    """Return the task the participant gets next (rules in :mod:`pairing.services`).

    With a ``condition`` (a study with solo tasks) the task least covered in that condition comes first, so
    every task is reached in both conditions (:mod:`studies.conditions`).

    With ``lock`` (inside the matching transaction) the candidate rows are locked ``FOR NO KEY UPDATE``; without it
    this is a plain read. Raises :class:`~studies.exceptions.NoTaskAvailable` when nothing fits.
    """
    return task_pick(participant, task_candidates(participant), rng, lock=lock, condition=condition)


@dataclass(frozen=True)
class TaskCandidates:
    """What task choice knows before it looks at other workers' episodes: nothing here changes under them."""

    sectors: list[int]
    rows: list[tuple[int, int]]  # (task, sector), in primary-key order
    exact: frozenset[int]  # candidates tagged with the worker's own occupation


def task_candidates(participant: Participant) -> TaskCandidates:
    """Read the participant's candidate tasks without locking anything (the first, unlocked step of matching).

    Everything that depends only on the worker and the study's task list is read here, so the locked step
    (:func:`task_pick`) holds its locks for the coverage counts and the insert alone.
    """
    sectors = _sectors_for(participant)
    if not sectors or participant.occupation_id is None:  # no occupation gives no sectors
        raise NoTaskAvailable("Your occupation is not linked to a work sector, so no task can be matched. Please "
                              "contact the study team.")
    done = Episode.objects.filter(participant__user_id=participant.user_id) if participant.user_id else \
        Episode.objects.filter(participant=participant)
    rows = list(TaskInstance.objects.filter(studies=participant.study, is_active=True, sector_id__in=sectors)
                .exclude(pk__in=done.values("task_id")).order_by("pk").values_list("pk", "sector_id"))
    exact = frozenset(TaskInstance.occupations.through.objects.filter(
        taskinstance_id__in=[pk for pk, _ in rows], occupation_id=participant.occupation_id
    ).values_list("taskinstance_id", flat=True)) if rows else frozenset()
    return TaskCandidates(sectors, rows, exact)


def task_pick(participant: Participant, candidates: TaskCandidates, rng: random.Random, *, lock: bool,
              condition: str | None) -> TaskInstance:
    """Choose among the candidates by their coverage as it is now (the short, locked step of matching).

    With ``lock`` every candidate row of every sector the worker may fall back to is locked in one statement,
    in primary-key order (sector by sector could deadlock two workers whose fallbacks point at each other);
    a task deactivated since :func:`task_candidates` read it drops out here.
    """
    study = participant.study
    rows = candidates.rows
    if lock and rows:
        live = set(TaskInstance.objects.filter(pk__in=[pk for pk, _ in rows], is_active=True).order_by("pk")
                   .select_for_update(of=("self",), no_key=True).values_list("pk", flat=True))
        rows = [(pk, sector) for pk, sector in rows if pk in live]
    coverage = dict(
        Episode.objects.filter(study=study, task_id__in=[pk for pk, _ in rows])
        .exclude(status=Episode.Status.SKIPPED).values("task_id").annotate(n=Count("id")).values_list("task_id", "n")
    ) if rows else {}
    for sector_id in candidates.sectors:
        capacity = study.max_episodes_per_task
        open_ids = [pk for pk, sector in rows if sector == sector_id and coverage.get(pk, 0) < capacity]
        if not open_ids:
            continue
        crossing = condition_coverage(study=study, task_ids=open_ids, condition=condition) if condition else {}
        # One random number per candidate, drawn in primary-key order, so a seed replays the same choice.
        keyed = [(crossing.get(pk, 0), coverage.get(pk, 0), pk not in candidates.exact, rng.random(), pk)
                 for pk in open_ids]
        return TaskInstance.objects.get(pk=min(keyed)[-1])
    raise NoTaskAvailable("There is no task left that fits your occupation right now. Please come back later or "
                          "contact the study team; nothing you already did is lost.")
