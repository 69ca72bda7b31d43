"""The solo condition: which of a worker's tasks are done without an agent, in which order, and how well the
study's tasks are crossed between the two conditions (seed 004, the synergy model in rating/synergy.py).

A study with ``solo_tasks_per_session = 0`` never reaches this module's draws: every episode is with an agent,
no random number is spent, so seeds replay exactly the pairings they always did.

Order: ``solo_first`` gives a worker's first k tasks solo, ``agent_first`` the last k; ``counterbalanced``
draws one of the two per worker with probability 1/2 at their first task, and every later episode of the worker
repeats the order drawn (stored on each episode with its probability, so order and learning can be separated
from the agent's effect). Where skipped tasks are replaced (``post_survey_gate = all_submitted``) a skip does not
count towards its condition, so the replacement keeps the worker's split; where a skip uses up its place in the
session (the default gate), it counts where it stood, so the solo tasks keep their positions in either order
(otherwise a skipped agent task under "agent first" would cost the worker a solo task, and one order would lose
solo tasks the other keeps).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count

from studies.models import Episode, Participant, Study

SOLO = Episode.Condition.SOLO.value
WITH_AGENT = Episode.Condition.WITH_AGENT.value
ORDERS = (Study.ConditionOrder.SOLO_FIRST.value, Study.ConditionOrder.AGENT_FIRST.value)


@dataclass(frozen=True)
class ConditionDraw:
    """The condition of a worker's next task, with the order of conditions it follows."""

    condition: str
    order: str  # solo_first / agent_first; empty in a study without solo tasks
    order_probability: float | None


def condition_of_next(*, solo_total: int, session_total: int, order: str, solo_done: int, agent_done: int) -> str:
    """Return the condition of the next task given how many of each the worker has done (replaced skips excluded)."""
    agent_total = max(session_total - solo_total, 0)
    if solo_total <= 0:
        return WITH_AGENT
    if order == Study.ConditionOrder.SOLO_FIRST:
        return SOLO if solo_done < solo_total else WITH_AGENT
    return WITH_AGENT if agent_done < agent_total else SOLO


def condition_draw(*, participant: Participant, rng: Any) -> ConditionDraw:
    """Return the condition of the participant's next task; draws the order (one number) for a new worker.

    Runs inside the matching transaction, after the participant row is locked, so two requests of one worker
    cannot draw two orders.
    """
    study = participant.study
    if not study.solo_tasks_per_session:
        return ConditionDraw(WITH_AGENT, "", None)
    earlier = list(Episode.objects.filter(participant=participant, is_gold=False).order_by("position")
                   .values_list("condition", "condition_order", "condition_order_probability", "status"))
    drawn = next(((o, p) for _, o, p, _ in earlier if o), None)
    if drawn is not None:
        order, probability = drawn
    elif study.condition_order == Study.ConditionOrder.COUNTERBALANCED:
        order, probability = (ORDERS[0] if rng.random() < 0.5 else ORDERS[1]), 0.5
    else:
        order, probability = study.condition_order, 1.0
    replaced = study.post_survey_gate == Study.PostSurveyGate.ALL_SUBMITTED
    counted = [c for c, _, _, status in earlier if not (replaced and status == Episode.Status.SKIPPED)]
    condition = condition_of_next(
        solo_total=study.solo_tasks_per_session, session_total=study.tasks_per_session, order=order,
        solo_done=counted.count(SOLO), agent_done=counted.count(WITH_AGENT))
    return ConditionDraw(condition, order, probability)


def condition_coverage(*, study: Study, task_ids: list[int], condition: str) -> dict[int, int]:
    """Return the non-skipped episodes per task in one condition (task choice fills the thinner side first)."""
    return dict(
        Episode.objects.filter(study=study, task_id__in=task_ids, condition=condition)
        .exclude(status=Episode.Status.SKIPPED).values("task_id").annotate(n=Count("id"))
        .values_list("task_id", "n")
    )


def crossing_summary(*, study: Study) -> dict[str, Any]:
    """Return how well the study's tasks are crossed between the conditions, for the staff pages.

    A task seen in only one condition gives the synergy model no way to tell its difficulty alone (β) from its
    extra difficulty with an agent (γ); the page lists those tasks.
    """
    counts: dict[int, dict[str, int]] = defaultdict(lambda: {SOLO: 0, WITH_AGENT: 0})
    titles: dict[int, str] = {}
    rows = (Episode.objects.filter(study=study, is_gold=False).exclude(status=Episode.Status.SKIPPED)
            .values("task_id", "task__title", "condition").annotate(n=Count("id")))
    for row in rows:
        counts[row["task_id"]][row["condition"]] += row["n"]
        titles[row["task_id"]] = row["task__title"]
    one_sided = [
        {"task_id": pk, "title": titles[pk], "solo": c[SOLO], "with_agent": c[WITH_AGENT]}
        for pk, c in sorted(counts.items()) if (c[SOLO] == 0) != (c[WITH_AGENT] == 0)
    ]
    crossed = sum(1 for c in counts.values() if c[SOLO] and c[WITH_AGENT])
    return {"enabled": bool(study.solo_tasks_per_session), "solo_tasks_per_session": study.solo_tasks_per_session,
            "order": study.condition_order, "tasks_seen": len(counts), "tasks_crossed": crossed,
            "one_sided": one_sided}
