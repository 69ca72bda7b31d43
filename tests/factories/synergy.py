"""A study with a solo condition and planted boosts, written straight to the database (fast, for the synergy
service, panel and export tests)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from studies import models as m
from tests.factories.scenarios import World, make_world


@dataclass
class PlantedStudy:
    world: World
    boosts: dict[str, float]  # agent name -> true boost over working alone
    solo_level: float


def planted_synergy_study(*, workers: int = 60, tasks: int = 12, boosts: tuple[float, ...] = (10.0, 3.0),
                          solo_per_worker: int = 2, agent_per_worker: int = 3, seed: int = 5,
                          slug: str = "syn") -> PlantedStudy:
    """Graded episodes of y = solo level (+ boost with agent a) + θ/κ + task + noise, orders counterbalanced."""
    rng = np.random.default_rng(seed)
    world = make_world(tasks=tasks, agents=len(boosts), capacity=10_000, slug=slug,
                       tasks_per_session=solo_per_worker + agent_per_worker, solo_tasks_per_session=solo_per_worker,
                       condition_order=m.Study.ConditionOrder.COUNTERBALANCED)
    solo_level = 55.0
    beta = rng.normal(0, 6, tasks)
    rows = []
    participants = m.Participant.objects.bulk_create([
        m.Participant(study=world.study, pseudonym=f"{slug.upper()}-{i:03d}", status=m.Participant.Status.COMPLETE,
                      occupation=world.occupation, is_simulated=True) for i in range(workers)])
    for participant in participants:
        kappa = rng.normal(0, 8)
        theta = kappa - rng.normal(0, 3)
        order = "solo_first" if rng.random() < 0.5 else "agent_first"
        chosen = rng.choice(tasks, size=solo_per_worker + agent_per_worker, replace=False)
        conditions = ["solo"] * solo_per_worker + ["with_agent"] * agent_per_worker
        if order == "agent_first":
            conditions = conditions[::-1]
        for position, (task_index, condition) in enumerate(zip(chosen, conditions, strict=True), start=1):
            agent_index = int(rng.integers(len(boosts))) if condition == "with_agent" else None
            mean = solo_level + beta[task_index] + (theta if agent_index is None else kappa + boosts[agent_index])
            y = float(np.clip(mean + rng.normal(0, 6), 0, 100))
            rows.append(m.Episode(
                participant=participant, study=world.study, task=world.tasks[int(task_index)], position=position,
                agent=None if agent_index is None else world.agents[agent_index], condition=condition,
                condition_order=order, condition_order_probability=0.5, status=m.Episode.Status.GRADED,
                auto_score=round(y, 2), score=round(y, 2), score_source="auto", is_simulated=True))
    m.Episode.objects.bulk_create(rows)
    return PlantedStudy(world=world, boosts={a.name: b for a, b in zip(world.agents, boosts, strict=True)},
                        solo_level=solo_level)
