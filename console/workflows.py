"""The GDPval-style comparison of four workflows, per agent and per task family (sector).

Each workflow's attempts are priced as follows (time is the platform's own timestamps, never the worker's
self report, so the two time measures stay apart):

- **Human alone**: a solo-condition episode; its cost is the worker's time (episode start to submission) at the
  hourly wage of the worker's occupation.
- **Agent alone, then expert review**: a solo-agent run; its cost is the run's model cost plus the expert time
  spent reviewing it at the expert wage staff give. The review time is each submitted comparison that showed
  the run, divided equally among the deliverables of its set (an expert reviews all of them in that time).
  The platform records no separate fixing time, so none is added: a run below the target counts as a failed
  attempt to be tried again, which the expected cost already prices.
  The model cost is the amount staff entered on the run when they did (a bill beats an estimate), else the
  usage its session files recorded, priced from the price table on the run's creation date
  (`grading/costs.py:run_model_cost`).
- **Agent alone, then expert review; done by hand when it misses** (GDPval's own workflow): each solo-agent run,
  priced as above, is reviewed; a run below the target is not tried again but done by hand, at the human-alone
  workflow's expected cost at the target, so it has no attempts of its own: its runs and the human-alone
  attempts (the agent-free reference in each agent's block) are combined in
  `rating/workflow_fallback.py:fallback_estimate`.
- **Human with agent**: an episode with an agent; its cost is the worker's time at the occupation's wage plus
  the model cost of the usage its session files recorded.

A cost with any unknown part is unknown (counted, with its reason), never guessed. The numerics are in
`rating/workflow_costs.py`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count

from console.economics import EpisodeEconomics
from experts.models import ComparisonAssignment, ComparisonItem
from grading.costs import ENTERED, ESTIMATED, Price, run_model_cost
from grading.selectors import price_table
from rating.workflow_costs import WorkflowEstimate, workflow_estimate
from rating.workflow_fallback import fallback_estimate
from studies.models import Episode, SoloRun, Study

HUMAN_ALONE, AGENT_THEN_EXPERT, HUMAN_WITH_AGENT = "human_alone", "agent_then_expert", "human_with_agent"
AGENT_THEN_BY_HAND = "agent_then_by_hand"
WORKFLOW_NAMES = {HUMAN_ALONE: "Human alone", AGENT_THEN_EXPERT: "Agent alone, then expert review",
                  AGENT_THEN_BY_HAND: "Agent alone, then expert review; done by hand when it misses",
                  HUMAN_WITH_AGENT: "Human with agent"}
SECONDS_PER_HOUR = Decimal(3600)
NO_WAGE = "the worker's occupation has no hourly wage in the table"
NO_TIME = "the episode has no start or submission time"
NO_REVIEW = "no submitted comparison reviewed the solo run"
NO_EXPERT_WAGE = "no expert wage was given"


@dataclass(frozen=True)
class Attempt:
    workflow: str
    agent: str
    sector: str
    task_uuid: str
    score: float | None
    cost: Decimal | None
    reason: str = ""  # why the cost is unknown
    cost_source: str = ""  # a solo run's model cost: ENTERED (a bill) or ESTIMATED (its session files)


def _worker_cost(row: EpisodeEconomics) -> tuple[Decimal | None, str]:
    if row.hourly_wage is None:
        return None, NO_WAGE
    if row.worker_seconds is None:
        return None, NO_TIME
    return Decimal(str(row.worker_seconds)) / SECONDS_PER_HOUR * row.hourly_wage, ""


def episode_attempts(rows: Iterable[EpisodeEconomics]) -> list[Attempt]:
    """Price each episode as an attempt of the human-alone or the human-with-agent workflow."""
    found = []
    for row in rows:
        cost, reason = _worker_cost(row)
        solo = row.condition == Episode.Condition.SOLO
        if cost is not None and not solo:
            cost, reason = (cost + row.cost.amount, "") if row.cost.amount is not None else (None, row.cost.reason)
        found.append(Attempt(HUMAN_ALONE if solo else HUMAN_WITH_AGENT, row.agent, row.sector, row.task_uuid,
                             row.score, cost, reason))
    return found


def solo_run_review_seconds(study: Study) -> dict[int, float]:
    """Return each solo run's share of the expert time of the submitted comparisons that showed it."""
    sizes = dict(ComparisonItem.objects.filter(comparison_set__study=study).values("comparison_set_id")
                 .annotate(n=Count("pk")).values_list("comparison_set_id", "n"))
    spent: dict[int, float] = defaultdict(float)
    for set_id, seconds in (ComparisonAssignment.objects
                            .filter(comparison_set__study=study, status=ComparisonAssignment.Status.SUBMITTED)
                            .values_list("comparison_set_id", "time_spent_seconds")):
        spent[set_id] += seconds
    shares: dict[int, float] = defaultdict(float)
    reviewed: set[int] = set()
    for run_id, set_id in (ComparisonItem.objects.filter(comparison_set__study=study, solo_run__isnull=False)
                           .values_list("solo_run_id", "comparison_set_id")):
        if set_id in spent:
            shares[run_id] += spent[set_id] / sizes[set_id]
            reviewed.add(run_id)
    return {run_id: shares[run_id] for run_id in reviewed}


def _run_cost(model_cost: Decimal, review: float | None, wage: Decimal | None) -> tuple[Decimal | None, str]:
    if review is None:
        return None, NO_REVIEW
    if wage is None:
        return None, NO_EXPERT_WAGE
    return model_cost + Decimal(str(review)) / SECONDS_PER_HOUR * wage, ""


def solo_run_attempts(study: Study, expert_wage: Decimal | None, prices: list[Price] | None = None
                      ) -> list[Attempt]:
    """Price each graded solo run as an attempt of the agent-alone-then-expert-review workflow.

    The run's model cost is the staff-entered `SoloRun.model_cost_usd` when given (a bill beats an estimate),
    else its session files' usage priced on its creation date; unknown, with the reason, when neither.
    """
    prices = price_table() if prices is None else prices
    review = solo_run_review_seconds(study)
    runs = (SoloRun.objects.filter(study=study, score__isnull=False)
            .values_list("pk", "agent__name", "task__sector__name", "task__uuid", "score", "model_cost_usd",
                         "usage", "created_at"))
    found = []
    for pk, agent, sector, task_uuid, score, entered, usage, created in runs.order_by("pk"):
        model = run_model_cost(entered, usage, created.date(), prices)
        if model.cost.amount is None:
            cost, reason = None, model.cost.reason
        else:
            cost, reason = _run_cost(model.cost.amount, review.get(pk), expert_wage)
        found.append(Attempt(AGENT_THEN_EXPERT, agent or "", sector or "", str(task_uuid), score, cost, reason,
                             model.source))
    return found


def _arrays(attempts: list[Attempt]) -> tuple[list[str], list[float], list[float]]:
    nan = float("nan")
    return ([a.task_uuid for a in attempts], [a.score if a.score is not None else nan for a in attempts],
            [float(a.cost) if a.cost is not None else nan for a in attempts])


def _estimate(attempts: list[Attempt], target: float) -> WorkflowEstimate:
    return workflow_estimate(*_arrays(attempts), target=target)


def _unknown(attempts: list[Attempt]) -> list[tuple[str, int]]:
    counted: dict[str, int] = defaultdict(int)
    for attempt in attempts:
        if attempt.cost is None:
            counted[attempt.reason] += 1
    return sorted(counted.items(), key=lambda item: (-item[1], item[0]))


def _sources(attempts: list[Attempt]) -> dict[str, int]:
    """How many solo runs' model costs were entered (a bill) and how many priced from session files."""
    return {source: n for source in (ENTERED, ESTIMATED)
            if (n := sum(1 for a in attempts if a.cost_source == source))}


def _row(workflow: str, attempts: list[Attempt], target: float) -> dict[str, Any]:
    return {"workflow": workflow, "name": WORKFLOW_NAMES[workflow], "attempts": len(attempts),
            "estimate": _estimate(attempts, target), "unknown": _unknown(attempts),
            "cost_sources": _sources(attempts)}


def _by_hand_row(runs: list[Attempt], alone: list[Attempt], target: float) -> dict[str, Any]:
    """The runs are this row's attempts; a miss costs the human-alone row's expected cost (its unknowns are there)."""
    return {"workflow": AGENT_THEN_BY_HAND, "name": WORKFLOW_NAMES[AGENT_THEN_BY_HAND], "attempts": len(runs),
            "estimate": fallback_estimate(*_arrays(runs), *_arrays(alone), target=target),
            "unknown": _unknown(runs), "cost_sources": {}}


def _block(group: str, attempts: list[Attempt], target: float, workflows: Iterable[str]) -> dict[str, Any]:
    def of(workflow: str) -> list[Attempt]:
        return [a for a in attempts if a.workflow == workflow]

    return {"group": group, "rows": [_by_hand_row(of(AGENT_THEN_EXPERT), of(HUMAN_ALONE), target)
                                     if w == AGENT_THEN_BY_HAND else _row(w, of(w), target) for w in workflows]}


def workflow_comparison(attempts: list[Attempt], *, target: float) -> dict[str, list[dict[str, Any]]]:
    """Return the four workflows' estimates per agent (human alone as the agent-free reference) and per sector."""
    order = (HUMAN_ALONE, AGENT_THEN_EXPERT, AGENT_THEN_BY_HAND, HUMAN_WITH_AGENT)
    alone = [a for a in attempts if a.workflow == HUMAN_ALONE]
    agents = sorted({a.agent for a in attempts if a.workflow != HUMAN_ALONE})
    by_agent = [_block(name, [*alone, *(a for a in attempts if a.agent == name and a.workflow != HUMAN_ALONE)],
                       target, order) for name in agents]
    sectors = sorted({a.sector for a in attempts})
    by_sector = [_block(name, [a for a in attempts if a.sector == name], target, order) for name in sectors]
    return {"agents": by_agent, "sectors": by_sector}
