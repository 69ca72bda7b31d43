"""Which task a worker would get next: the read behind matching, shared by the matching service and pages.

The matching service (:mod:`pairing.services`) calls :func:`choose_task` inside its transaction, which locks
only the chosen task's row; :func:`task_available` asks the same for one worker without locking or assigning anything,
and :func:`participants_with_task` for many at once (the staff overview's stranded workers).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Q

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


@dataclass(frozen=True)
class _Candidates:
    """What a choice reads besides coverage: the sectors in order, the candidate tasks and the exact matches."""

    sectors: list[int]
    rows: list[tuple[int, int]]  # (task pk, sector pk), in primary-key order
    exact: frozenset[int]


def _candidates(participant: Participant) -> _Candidates:
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
    return _Candidates(sectors, rows, exact)


def _coverage(study: Study, task_ids: list[int]) -> dict[int, int]:
    """Non-skipped episodes of the study per task (what capacity and least-covered-first count)."""
    if not task_ids:
        return {}
    return dict(
        Episode.objects.filter(study=study, task_id__in=task_ids)
        .exclude(status=Episode.Status.SKIPPED).values("task_id").annotate(n=Count("id")).values_list("task_id", "n")
    )


def _pick(candidates: _Candidates, coverage: dict[int, int], capacity: int, rng: random.Random) -> int:
    for sector_id in candidates.sectors:
        open_ids = [pk for pk, sector in candidates.rows if sector == sector_id and coverage.get(pk, 0) < capacity]
        if not open_ids:
            continue
        # One random number per candidate, drawn in primary-key order, so a seed replays the same choice.
        keyed = [(coverage.get(pk, 0), pk not in candidates.exact, rng.random(), pk) for pk in open_ids]
        return min(keyed)[3]
    raise NoTaskAvailable("There is no task left that fits your occupation right now. Please come back later or "
                          "contact the study team; nothing you already did is lost.")


# Each try locks one task; another try is needed only when a concurrent assignment took the chosen task's last
# place or made another task less covered meanwhile, so a handful always suffice short of a pathological race.
_LOCK_TRIES = 20


def choose_task(participant: Participant, rng: random.Random, *, lock: bool = True) -> TaskInstance:
    """Return the task the participant gets next (rules in :mod:`pairing.services`).

    Without ``lock`` this is a plain read. With it (inside the matching transaction) only the chosen task's row
    is locked ``FOR UPDATE``, then its coverage is counted again: the choice stands when the same rule, over
    the counts as they are once the row is held, still picks it (so capacity and least-covered-first stay
    exact); otherwise that lock is released (savepoint rollback) and the rule's new pick is tried. A
    transaction thus holds at most one task row at a time, so assignments of other tasks never wait, and two
    cannot deadlock. Every evaluation starts from the same random state, so the seed still replays the choice
    against the database state it was made in. Raises :class:`~studies.exceptions.NoTaskAvailable`.
    """
    study = participant.study
    candidates = _candidates(participant)
    task_ids = [pk for pk, _ in candidates.rows]
    state = rng.getstate()
    chosen = _pick(candidates, _coverage(study, task_ids), study.max_episodes_per_task, rng)
    if not lock:
        return TaskInstance.objects.get(pk=chosen)
    for _attempt in range(_LOCK_TRIES):
        try:
            with transaction.atomic():
                task = TaskInstance.objects.select_for_update(of=("self",), no_key=True).get(pk=chosen)
                rng.setstate(state)
                again = _pick(candidates, _coverage(study, task_ids), study.max_episodes_per_task, rng)
                if again == chosen:
                    return task
                raise _ChoiceMoved(again)
        except _ChoiceMoved as moved:
            chosen = moved.task_id
    raise NoTaskAvailable("Many participants are starting tasks at this moment. Please reload the page; nothing "
                          "you already did is lost.")


class _ChoiceMoved(Exception):
    """A concurrent assignment changed the pick while the row was locked: roll back to release it."""

    def __init__(self, task_id: int) -> None:
        super().__init__(task_id)
        self.task_id = task_id
