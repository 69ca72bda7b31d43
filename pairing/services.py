"""Assigning a worker's next episode: the task (matching), the agent (the study's pairing design) and the
cached posterior adaptive pairing reads. ``episode_assign`` is where every episode is created.

Tasks are assigned one at a time, when the worker reaches each position of the session (not all five at the
start). A worker who stops after two tasks then never holds capacity for three tasks they will not do, and
every choice sees the coverage and agent counts as they are at that moment, which keeps both balanced.

Task choice (paper §3.1):
  1. candidates are active tasks of the study in the worker's O*NET sector; when none is left the study's
     fallback sectors (``SectorFallback``, lowest priority number first) are tried in turn;
  2. never a task this account already has an episode for (in any study);
  3. a task is full once it has ``study.max_episodes_per_task`` episodes that were not skipped;
  4. least-covered first; among equals a task tagged with the worker's exact occupation first; then random.

Agent pairing (:func:`agent_pair`): among active agents linked to the study (all active
agents if the study links none), the agents this worker has used least (so a worker's tasks spread over
several agents, which connects the human–agent graph the rating needs); then, by the study's design mode,
uniformly at random (``uniform``), the agent with the fewest non-skipped episodes in the study, ties at
random (``balanced``), or at random with probabilities favouring information about the agent ranking
(``adaptive``). The probability of the chosen agent is stored on the episode.

Randomness comes from ``random.Random(seed)``; the seed is drawn per assignment and stored in
``Episode.pairing_seed``, so every draw can be replayed from the same database state.

Concurrency: the whole choice runs in one transaction, in two steps. First everything that depends on this
worker alone is read with only the participant row locked (sectors, candidate tasks, occupation tags, the
agents, the worker's own history, the cached posterior). Then, on PostgreSQL, the candidate task rows and
-- in ``balanced`` mode only, the one mode that reads the study's agent counts -- the agent rows are locked
with ``SELECT … FOR NO KEY UPDATE`` (always participant, tasks, agents, each by primary key, so two
transactions cannot deadlock) for the coverage and balance counts and the insert, which is all that is left
before the commit. ``NO KEY`` leaves the key-share locks of other inserts' foreign-key checks free, so an
episode, solo run or grade that merely points at a locked task or agent never waits. Two workers who could
get the same task are serialised only for those few statements, a task's capacity is never exceeded, and
the balance stays exact; workers of other sectors never wait for each other in ``uniform`` or ``adaptive``
mode. On SQLite the settings open every transaction as ``BEGIN IMMEDIATE``, which serialises writers the
same way.

A web request never fits the rating model: adaptive pairing reads the agents' calibrated posterior (mean,
joint covariance, worker spread, noise) from the cache, written by ``design_posterior_refresh`` from the
active ledger (a background task, enqueued when the cached copy is missing or older than the latest
snapshot). Until one exists the request uses the planning prior (``DESIGN_PRIOR``), so adaptive pairing
still draws at random with a floor -- it only knows less.
"""

from __future__ import annotations

import logging
import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from pairing import design
from pairing.task_names import REFRESH_DESIGN_POSTERIOR
from rating import selectors as rating_selectors
from rating.fit import ModelSpec, fit_model
from studies.conditions import condition_draw
from studies.exceptions import NoAgentAvailable, StepNotAvailable
from studies.models import Agent, Episode, Participant, Study, TaskInstance
from studies.services.audit import audit_record
from studies.task_choice import task_candidates, task_pick
from studies.task_sending import send_task_on_commit

logger = logging.getLogger(__name__)

# Planning defaults on the 0-100 score scale (paper-like spreads); a study's own calibrated fit replaces them.
DESIGN_PRIOR = {"agent_sd": 3.0, "human_sd": 8.0, "noise_sd": 15.0, "level_mean": 50.0, "level_sd": 20.0}
_CACHE_SECONDS = 7 * 24 * 3600


class DesignError(ValueError):
    """A design change that cannot be made (unknown mode, bad floor)."""


def posterior_cache_key(study_id: int) -> str:
    return f"design:posterior:{study_id}"


def _pending_key(study_id: int) -> str:
    return f"design:posterior-pending:{study_id}"


# ------------------------------------------------------------------------------------------------ assignment


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
        # A study with solo tasks first decides this task's condition (studies/conditions.py); without them
        # nothing is drawn, so a seed replays the pairing it always gave.
        drawn = condition_draw(participant=locked, rng=rng)
        solo = drawn.condition == Episode.Condition.SOLO
        # Everything that does not depend on other workers' episodes is read first, locking nothing; the
        # locks that keep capacity and balance exact are taken last, for the counts and the insert alone.
        tasks = task_candidates(locked)
        agents = None if solo else agent_candidates(participant=locked)
        task = task_pick(locked, tasks, rng, lock=True, condition=drawn.condition if drawn.order else None)
        # The agent comes from the study's pairing design (studies/services/design.py), which also says how
        # likely this agent was, for weighted analyses.
        pairing = None if agents is None else agent_pick(participant=locked, candidates=agents, rng=rng)
        return Episode.objects.create(
            participant=locked, study=locked.study, agent=pairing.agent if pairing else None, task=task,
            position=position, pairing_seed=seed, design_mode=pairing.design_mode if pairing else None,
            assignment_probability=pairing.probability if pairing else None, status=Episode.Status.ASSIGNED,
            condition=drawn.condition, condition_order=drawn.order,
            condition_order_probability=drawn.order_probability,
            started_at=timezone.now(), deadline_at=_deadline(locked.study, task),
        )


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


# ------------------------------------------------------------------------------------------- mode switch


def design_mode_set(*, study: Study, mode: str, actor: Any, floor: float | None = None,
                    repeat_limit: int | None = None, note: str = "") -> Study:
    """Switch the study's pairing design (and optionally its floor and repeat limit); every change is audited."""
    if mode not in Study.DesignMode.values:
        raise DesignError(f"Unknown design mode “{mode}”; choose one of {', '.join(Study.DesignMode.values)}.")
    if floor is not None and not 0.01 <= float(floor) <= 1.0:
        raise DesignError("The floor must be between 0.01 and 1.")
    if repeat_limit is not None and not 1 <= int(repeat_limit) <= 50:
        raise DesignError("The repeat limit must be between 1 and 50.")
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        before = {"design_mode": locked.design_mode, "design_floor": locked.design_floor,
                  "design_repeat_limit": locked.design_repeat_limit}
        locked.design_mode = mode
        if floor is not None:
            locked.design_floor = float(floor)
        if repeat_limit is not None:
            locked.design_repeat_limit = int(repeat_limit)
        after = {"design_mode": locked.design_mode, "design_floor": locked.design_floor,
                 "design_repeat_limit": locked.design_repeat_limit}
        if after == before:
            return locked
        locked.save(update_fields=["design_mode", "design_floor", "design_repeat_limit", "updated_at"])
        audit_record(actor=actor, action="study.design_changed", obj=locked, study=locked, before=before,
                     after=after, note=note)
    return locked


# ------------------------------------------------------------------------------------- cached posterior


def design_posterior_refresh(*, study_id: int) -> dict[str, Any] | None:
    """Fit the calibrated model to the study's active ledger and cache what pairing needs; ``None`` without data."""
    cache.delete(_pending_key(study_id))
    snapshot = rating_selectors.latest_snapshot(study_id)
    arrays = rating_selectors.observations_arrays(study_id, tasks=False)  # the calibrated model: no tasks
    if arrays.n == 0:
        return None
    fit = fit_model(arrays.agent_ids.astype(str), arrays.participant_ids.astype(str), arrays.y,
                    spec=ModelSpec(kind="calibrated"), weights=arrays.w)
    hyper = fit.hyper or {}
    human_sd = float(hyper.get("sigma_human", {}).get("estimate", DESIGN_PRIOR["human_sd"]))
    noise_sd = float(hyper.get("beta", {}).get("estimate", DESIGN_PRIOR["noise_sd"]))
    agent_sd = float(hyper.get("sigma_agent", {}).get("estimate", DESIGN_PRIOR["agent_sd"]))
    value = {
        "version": snapshot.version if snapshot else 0, "n_observations": int(arrays.n),
        "agent_ids": [str(a) for a in fit.agent_ids.tolist()], "mu": np.asarray(fit.agent_mu).tolist(),
        "cov": np.asarray(fit.agent_cov).tolist(), "human_sd": max(human_sd, 1e-6),
        "noise_sd": max(noise_sd, 1e-6), "agent_sd": max(agent_sd, 1e-6),
    }
    cache.set(posterior_cache_key(study_id), value, _CACHE_SECONDS)
    return value


def design_posterior_get(study: Study) -> dict[str, Any] | None:
    """Return the cached design posterior; enqueue a refresh (once) when it is missing or older than the
    latest snapshot. Never fits in the request."""
    value = cache.get(posterior_cache_key(study.pk))
    snapshot = rating_selectors.latest_snapshot(study)
    stale = value is None or (snapshot is not None and value.get("version", 0) < snapshot.version)
    if stale and (snapshot is not None or value is None) and cache.add(_pending_key(study.pk), 1, 300):
        send_task_on_commit(REFRESH_DESIGN_POSTERIOR, [study.pk])
    return value


def _posterior_for(
    agent_ids: list[int], posterior: dict[str, Any] | None
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Return mean and covariance for these agents, with agents the posterior does not know at the prior."""
    a = len(agent_ids)
    if posterior is None:
        mu, cov = design.prior_state(a, agent_sd=DESIGN_PRIOR["agent_sd"], level_mean=DESIGN_PRIOR["level_mean"],
                                     level_sd=DESIGN_PRIOR["level_sd"])
        return mu, cov, DESIGN_PRIOR["human_sd"], DESIGN_PRIOR["noise_sd"]
    known = {str(pk): i for i, pk in enumerate(posterior["agent_ids"])}
    mu_all = np.asarray(posterior["mu"], dtype=float)
    cov_all = np.asarray(posterior["cov"], dtype=float)
    level_var = float(np.mean(np.diag(cov_all)))
    mu = np.full(a, float(mu_all.mean()))
    cov = np.eye(a) * (level_var + posterior.get("agent_sd", DESIGN_PRIOR["agent_sd"]) ** 2)
    idx = [known.get(str(pk)) for pk in agent_ids]
    have = [i for i, k in enumerate(idx) if k is not None]
    src = [k for k in idx if k is not None]
    mu[have] = mu_all[src]
    cov[np.ix_(have, have)] = cov_all[np.ix_(src, src)]
    return mu, cov, float(posterior["human_sd"]), float(posterior["noise_sd"])


# ------------------------------------------------------------------------------------------------ pairing


@dataclass(frozen=True)
class Pairing:
    agent: Agent
    design_mode: str
    probability: float


def agent_pair(*, participant: Participant, rng: Any) -> Pairing:
    """Choose the agent for the participant's next task under the study's design (both steps in one call)."""
    return agent_pick(participant=participant, candidates=agent_candidates(participant=participant), rng=rng)


@dataclass(frozen=True)
class AgentCandidates:
    """What pairing knows before it looks at other workers' episodes."""

    agent_ids: list[int]  # primary-key order
    earlier: Sequence[tuple[int | None, str]]  # this worker's (agent, status) by position (None: solo)
    posterior: dict[str, Any] | None  # the cached design posterior (adaptive mode only)


def agent_candidates(*, participant: Participant) -> AgentCandidates:
    """Read the study's agents, the worker's own history and (adaptive) the cached posterior, locking nothing.

    None of it depends on other workers' assignments, so it is read before the locked step of matching.
    """
    study = participant.study
    agents = Agent.objects.filter(is_active=True, studies=study)
    if not agents.exists():
        agents = Agent.objects.filter(is_active=True)
    agent_ids = list(agents.order_by("pk").values_list("pk", flat=True))
    earlier = list(Episode.objects.filter(participant=participant).order_by("position").values_list(
        "agent_id", "status"))
    posterior = design_posterior_get(study) if study.design_mode == Study.DesignMode.ADAPTIVE else None
    return AgentCandidates(agent_ids, earlier, posterior)


def agent_pick(*, participant: Participant, candidates: AgentCandidates, rng: Any) -> Pairing:
    """Draw the agent; only ``balanced`` reads the study's counts, with the agent rows locked in primary-key
    order for that read and the insert after it (the other modes depend on this worker alone, so lock nothing).

    Exactly one random number per candidate agent is drawn first, in primary-key order, as pairing always
    did, so ``uniform`` and ``balanced`` replay the earlier least-used-first choices for the same seed.
    """
    study = participant.study
    agent_ids = candidates.agent_ids
    mode = study.design_mode
    if agent_ids and mode == Study.DesignMode.BALANCED:
        live = set(Agent.objects.filter(pk__in=agent_ids, is_active=True).order_by("pk")
                   .select_for_update(of=("self",), no_key=True).values_list("pk", flat=True))
        agent_ids = [pk for pk in agent_ids if pk in live]
    if not agent_ids:
        raise NoAgentAvailable("No AI agent is available for this study right now. Please try again later or "
                               "contact the study team.")
    earlier = candidates.earlier
    used_counts: dict[int | None, int] = {}
    for agent_id, _status in earlier:
        used_counts[agent_id] = used_counts.get(agent_id, 0) + 1
    counts = _study_counts(study, agent_ids) if mode == Study.DesignMode.BALANCED else {}
    draws = [rng.random() for _ in agent_ids]
    used = np.array([used_counts.get(pk, 0) for pk in agent_ids], dtype=np.int64)
    study_counts = np.array([counts.get(pk, 0) for pk in agent_ids], dtype=np.int64)
    if mode == Study.DesignMode.ADAPTIVE:
        mu, cov, human_sd, noise_sd = _posterior_for(agent_ids, candidates.posterior)
        summary = design.design_summary([str(pk) for pk in agent_ids], mu, cov, human_sd=human_sd,
                                        noise_sd=noise_sd)
        index_of = {pk: i for i, pk in enumerate(agent_ids)}
        worker = [index_of[a] for a, status in earlier if a in index_of and status != Episode.Status.SKIPPED]
        gains = design.information_gains(summary, worker)
        p = design.assignment_probabilities(mode=mode, used=used, gains=gains, floor=study.design_floor,
                                            max_per_worker=study.design_repeat_limit)
        chosen = design.draw_index(p, rng.random())
    else:
        p = design.assignment_probabilities(mode=mode, used=used, study_counts=study_counts)
        balance = study_counts if mode == Study.DesignMode.BALANCED else np.zeros_like(study_counts)
        keyed = [(int(used[i]), int(balance[i]), draws[i], pk) for i, pk in enumerate(agent_ids)]
        chosen = agent_ids.index(min(keyed)[3])
    return Pairing(Agent.objects.get(pk=agent_ids[chosen]), mode, float(p[chosen]))


def _study_counts(study: Study, agent_ids: list[int]) -> dict[int, int]:
    """Non-skipped episodes per agent in the study (the balance count)."""
    return dict(
        Episode.objects.filter(study=study, agent_id__in=agent_ids).exclude(status=Episode.Status.SKIPPED)
        .values("agent_id").annotate(n=Count("id")).values_list("agent_id", "n")
    )
