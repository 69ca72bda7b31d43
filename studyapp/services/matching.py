"""Matching a worker to a task and pairing the task with an agent.

Tasks are assigned one at a time, when the worker reaches each position of the session (not all five at the
start). A worker who stops after two tasks then never holds capacity for three tasks they will not do, and
every choice sees the coverage and agent counts as they are at that moment, which keeps both balanced.

Task choice (paper §3.1):
  1. candidates are active tasks of the study in the worker's O*NET sector; when none is left the study's
     fallback sectors (``SectorFallback``, lowest priority number first) are tried in turn;
  2. never a task this account already has an episode for (in any study);
  3. a task is full once it has ``study.max_episodes_per_task`` episodes that were not skipped;
  4. least-covered first; among equals a task tagged with the worker's exact occupation first; then random.

Agent pairing (``studyapp.services.design.agent_pair``): among active agents linked to the study (all active
agents if the study links none), the agents this worker has used least (so a worker's tasks spread over
several agents, which connects the human–agent graph the rating needs); then, by the study's design mode,
uniformly at random (``uniform``), the agent with the fewest non-skipped episodes in the study, ties at
random (``balanced``), or at random with probabilities favouring information about the agent ranking
(``adaptive``). The probability of the chosen agent is stored on the episode.

Randomness comes from ``random.Random(seed)``; the seed is drawn per assignment and stored in
``Episode.pairing_seed``, so every draw can be replayed from the same database state.

Concurrency: the whole choice runs in one transaction. On PostgreSQL the participant row, the candidate
task rows and the agent rows are locked with ``SELECT … FOR UPDATE`` (always in this order and by primary
key, so two transactions cannot deadlock), so two workers starting together are serialised and a task's
capacity is never exceeded. On SQLite the settings open every transaction as ``BEGIN IMMEDIATE``, which
serialises writers the same way.
"""

from __future__ import annotations

import random
import secrets
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from studyapp.exceptions import NoTaskAvailable, StepNotAvailable
from studyapp.models import Episode, Participant, SectorFallback, Study, TaskInstance
from studyapp.services.design import agent_pair

_FINISHED = (
    Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED,
    Episode.Status.SKIPPED,
)


def episode_assign(*, participant: Participant, position: int, seed: int | None = None) -> Episode:
    """Return the participant's episode at ``position``, matching a task and an agent if it has none yet."""
    with transaction.atomic():
        locked = (Participant.objects.select_for_update(of=("self",))
                  .select_related("study", "occupation").get(pk=participant.pk))
        existing = Episode.objects.filter(participant=locked, position=position).first()
        if existing is not None:
            return existing
        _check_may_start(locked, position)
        seed = secrets.randbits(63) if seed is None else seed
        rng = random.Random(seed)
        task = _choose_task(locked, rng)
        # The agent comes from the study's pairing design (studyapp/services/design.py), which also says how
        # likely this agent was, for weighted analyses.
        pairing = agent_pair(participant=locked, rng=rng)
        return Episode.objects.create(
            participant=locked, study=locked.study, agent=pairing.agent, task=task, position=position,
            pairing_seed=seed, design_mode=pairing.design_mode, assignment_probability=pairing.probability,
            status=Episode.Status.ASSIGNED,
            started_at=timezone.now(), deadline_at=_deadline(locked.study, task),
        )


def task_available(*, participant: Participant) -> bool:
    """Whether some task could still be matched to the participant (without locking or assigning)."""
    try:
        _choose_task(participant, random.Random(0), lock=False)
    except NoTaskAvailable:
        return False
    return True


def _deadline(study: Study, task: TaskInstance) -> datetime | None:
    """The clock starts when the task is assigned, which is when its prompt is first shown."""
    minutes = task.time_limit_minutes or study.task_time_limit_minutes
    return timezone.now() + timedelta(minutes=minutes) if minutes else None


def _check_may_start(participant: Participant, position: int) -> None:
    if participant.status != Participant.Status.WORKING:
        raise StepNotAvailable("Tasks open once the consent form, your profile and the first survey are done.")
    positions = list(Episode.objects.filter(participant=participant).values_list("position", "status"))
    study = participant.study
    limit = study.tasks_per_session
    if study.post_survey_gate == Study.PostSurveyGate.ALL_SUBMITTED:
        # Every skipped task is replaced, so the worker can still submit the full number.
        limit += sum(1 for _, status in positions if status == Episode.Status.SKIPPED)
    if not 1 <= position <= limit:
        raise StepNotAvailable(f"This study has {study.tasks_per_session} tasks per session.")
    if any(status not in _FINISHED for _, status in positions):
        raise StepNotAvailable("Please finish (or skip) your current task before starting the next one.")
    if position != len(positions) + 1:
        raise StepNotAvailable("Tasks are taken in order; please continue with your next task.")


def _sectors_for(participant: Participant) -> list[int]:
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


def _choose_task(participant: Participant, rng: random.Random, *, lock: bool = True) -> TaskInstance:
    study = participant.study
    sectors = _sectors_for(participant)
    if not sectors or participant.occupation_id is None:  # no occupation gives no sectors
        raise NoTaskAvailable("Your occupation is not linked to a work sector, so no task can be matched. Please "
                              "contact the study team.")
    done = Episode.objects.filter(participant__user_id=participant.user_id) if participant.user_id else \
        Episode.objects.filter(participant=participant)
    # Lock every candidate of every sector the worker may fall back to in one statement, in primary-key
    # order: locking sector by sector could deadlock two workers whose fallbacks point at each other.
    candidates = (TaskInstance.objects.filter(studies=study, is_active=True, sector_id__in=sectors)
                  .exclude(pk__in=done.values("task_id")).order_by("pk"))
    if lock:
        candidates = candidates.select_for_update(of=("self",))
    rows = list(candidates.values_list("pk", "sector_id"))
    coverage = dict(
        Episode.objects.filter(study=study, task_id__in=[pk for pk, _ in rows])
        .exclude(status=Episode.Status.SKIPPED).values("task_id").annotate(n=Count("id")).values_list("task_id", "n")
    )
    for sector_id in sectors:
        capacity = study.max_episodes_per_task
        open_ids = [pk for pk, sector in rows if sector == sector_id and coverage.get(pk, 0) < capacity]
        if not open_ids:
            continue
        exact = set(TaskInstance.occupations.through.objects.filter(
            taskinstance_id__in=open_ids, occupation_id=participant.occupation_id
        ).values_list("taskinstance_id", flat=True))
        # One random number per candidate, drawn in primary-key order, so a seed replays the same choice.
        keyed = [(coverage.get(pk, 0), pk not in exact, rng.random(), pk) for pk in open_ids]
        return TaskInstance.objects.get(pk=min(keyed)[3])
    raise NoTaskAvailable("There is no task left that fits your occupation right now. Please come back later or "
                          "contact the study team; nothing you already did is lost.")
