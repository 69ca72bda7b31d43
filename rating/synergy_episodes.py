"""Reads behind the synergy analysis: a study's scored episodes, solo and with an agent, coded for the synergy
model (:mod:`rating.synergy`), its solo-agent runs, and a fingerprint of both (the stored fit's cache key).

Which episodes count: scored, not skipped, not a gold QA copy, of a participant who did not withdraw or decline
(the CollabSkill ledger's rules), solo and with an agent alike. A solo episode whose worker said they used an AI
tool anyway is left out (it is neither condition) and counted, so the page can say how many.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from rating.synergy import AgentBaseline, SynergyData
from studies.models import Agent, Episode, Participant, SoloRun, Study

# The CollabSkill ledger's exclusions (rating/services/ledger.py); a read may not import that service.
EXCLUDED_PARTICIPANT_STATUSES = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED)

SOLO_LABEL = "solo"


@dataclass(frozen=True)
class SynergyEpisodes:
    """The study's episodes as the model's codes, with what each code stands for."""

    data: SynergyData
    episode_ids: np.ndarray
    participant_ids: list[int]  # human code -> Participant pk
    pseudonyms: list[str]
    task_ids: list[int]  # task code -> TaskInstance pk
    task_titles: list[str]
    task_uuids: list[str]
    agent_ids: list[int | None]  # arm code -> Agent pk (None for solo)
    n_used_ai_anyway: int


def _scored_episodes(study: Study) -> Any:
    return (Episode.objects.filter(study=study, score__isnull=False, is_gold=False)
            .exclude(status=Episode.Status.SKIPPED)
            .exclude(participant__status__in=EXCLUDED_PARTICIPANT_STATUSES))


def synergy_episodes(study: Study) -> SynergyEpisodes | None:
    """Return the study's scored episodes coded for the synergy model; ``None`` when none is scored."""
    rows = list(_scored_episodes(study).order_by("pk").values_list(
        "pk", "score", "agent_id", "participant_id", "participant__pseudonym", "task_id", "task__title",
        "position", "condition", "used_ai_anyway", "task__uuid"))
    n_anyway = sum(1 for r in rows if r[8] == Episode.Condition.SOLO and r[9])
    rows = [r for r in rows if not (r[8] == Episode.Condition.SOLO and r[9])]
    if not rows:
        return None
    agents = sorted({r[2] for r in rows if r[8] != Episode.Condition.SOLO})
    names = dict(Agent.objects.filter(pk__in=agents).values_list("pk", "name"))
    arm_of = {pk: i + 1 for i, pk in enumerate(agents)}
    participants = sorted({r[3] for r in rows})
    human_of = {pk: i for i, pk in enumerate(participants)}
    pseudonym = {r[3]: r[4] for r in rows}
    tasks = sorted({r[5] for r in rows})
    task_of = {pk: i for i, pk in enumerate(tasks)}
    title = {r[5]: r[6] for r in rows}
    uuid = {r[5]: str(r[10]) for r in rows}
    data = SynergyData(
        y=np.array([r[1] for r in rows], dtype=float),
        arm=np.array([0 if r[8] == Episode.Condition.SOLO else arm_of[r[2]] for r in rows], dtype=np.int64),
        human=np.array([human_of[r[3]] for r in rows], dtype=np.int64),
        task=np.array([task_of[r[5]] for r in rows], dtype=np.int64),
        position=np.array([r[7] for r in rows], dtype=np.int64),
        arm_labels=(SOLO_LABEL, *(_unique_label(names.get(pk, f"agent {pk}"), pk, names) for pk in agents)),
    )
    return SynergyEpisodes(
        data=data, episode_ids=np.array([r[0] for r in rows], dtype=np.int64), participant_ids=participants,
        pseudonyms=[pseudonym[pk] for pk in participants], task_ids=tasks, task_titles=[title[pk] for pk in tasks],
        task_uuids=[uuid[pk] for pk in tasks],
        agent_ids=[None, *agents], n_used_ai_anyway=n_anyway,
    )


def _unique_label(name: str, pk: int, names: dict[int, str]) -> str:
    """Agent names label the arms; two agents of one name (or one called "solo") get their id added."""
    clash = name == SOLO_LABEL or sum(1 for other in names.values() if other == name) > 1
    return f"{name} (#{pk})" if clash else name


def synergy_fingerprint(study: Study) -> str | None:
    """Return a stamp that changes whenever the episodes behind the analysis may have; ``None`` without a solo
    episode scored (then the model has nothing to compare with)."""
    rows = list(_scored_episodes(study).values_list("pk", "score", "condition", "used_ai_anyway", "position"))
    if not any(r[2] == Episode.Condition.SOLO for r in rows):
        return None
    solo_runs = list(SoloRun.objects.filter(study=study, score__isnull=False).values_list("pk", "score"))
    digest = hashlib.sha256(repr((sorted(rows), sorted(solo_runs))).encode()).hexdigest()[:16]
    return f"{len(rows)}.{len(solo_runs)}.{digest}"


def agent_baseline(study: Study, coded: SynergyEpisodes) -> AgentBaseline | None:
    """Return the scored solo-agent runs (the agent alone) coded like the episodes; ``None`` without any.

    Runs of an agent or on a task no episode has are left out: the model has no level to compare them with.
    """
    arm_of = {pk: i for i, pk in enumerate(coded.agent_ids) if pk is not None}
    task_of = {pk: i for i, pk in enumerate(coded.task_ids)}
    rows = [(float(score), arm_of[agent_id], task_of[task_id]) for agent_id, task_id, score in
            SoloRun.objects.filter(study=study, score__isnull=False).order_by("pk")
            .values_list("agent_id", "task_id", "score") if agent_id in arm_of and task_id in task_of]
    if not rows:
        return None
    return AgentBaseline(y=np.array([r[0] for r in rows]), arm=np.array([r[1] for r in rows], dtype=np.int64),
                         task=np.array([r[2] for r in rows], dtype=np.int64))
