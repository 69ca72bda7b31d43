"""Time and cost of every episode, and their means per agent and per task family (sector), with intervals.

Per episode: the worker's time on task from the episode's own timestamps beside the active time the session
file shows (two independent measures, shown side by side, never merged), the worker's pay for it, the
experts' review time, and the model cost of the usage the session files recorded, priced from the dated
price table on the submission date. A cost that cannot be priced is unknown and is left out of the means,
which say over how many episodes they were taken.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import F, Sum
from scipy import stats

from experts.models import ExpertGrade
from grading.costs import UsageCost, usage_cost, usage_tokens
from grading.models import EpisodeTranscript
from grading.selectors import price_table
from studies.models import Episode, Participant, Payment, Study

# Every state an episode reaches once submitted (graded or not): time and cost exist from submission on.
SUBMITTED_STATES = (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED)


@dataclass(frozen=True)
class EpisodeEconomics:
    episode_id: int
    agent: str
    sector: str
    task_uuid: str
    score: float | None
    worker_seconds: float | None
    log_active_seconds: float | None
    pay: Decimal | None
    currency: str
    expert_seconds: float | None
    expert_grades: int
    cost: UsageCost
    tokens: dict[str, int] | None
    condition: str = Episode.Condition.WITH_AGENT
    self_reported_minutes: int | None = None
    hourly_wage: Decimal | None = None  # the worker's occupation's wage, US dollars per hour


def _pay_by_episode(study: Study) -> dict[int, tuple[Decimal, str]]:
    rows = (Payment.objects.filter(episode__study=study, kind=Payment.Kind.TASK)
            .values("episode_id", "currency").annotate(total=Sum("amount")))
    return {row["episode_id"]: (row["total"], row["currency"]) for row in rows}


def _expert_time_by_episode(study: Study) -> dict[int, tuple[float, int]]:
    found: dict[int, tuple[float, int]] = {}
    rows = (ExpertGrade.objects.filter(assignment__episode__study=study, status=ExpertGrade.Status.SUBMITTED)
            .values_list("assignment__episode_id", "time_spent_seconds"))
    for episode_id, seconds in rows:
        total, n = found.get(episode_id, (0.0, 0))
        found[episode_id] = (total + float(seconds or 0), n + 1)
    return found


def _transcripts_by_episode(study: Study) -> dict[int, tuple[float | None, Any]]:
    rows = EpisodeTranscript.objects.filter(episode__study=study).values_list("episode_id", "active_seconds", "usage")
    return {episode_id: (active, usage) for episode_id, active, usage in rows}


def _priced_on(row: dict[str, Any]) -> date:
    """The day an episode's usage is priced: its submission (else its start)."""
    moment = row["submitted_at"] or row["started_at"]
    return moment.date() if moment else date.today()


def episode_economics(study: Study) -> list[EpisodeEconomics]:
    """Return the time and cost of each submitted episode of the study (skipped and open ones have none).

    Withdrawn participants' episodes are left out, as in the exports.
    """
    prices = price_table()
    pay, expert, transcripts = _pay_by_episode(study), _expert_time_by_episode(study), _transcripts_by_episode(study)
    episodes = (Episode.objects.filter(study=study, status__in=SUBMITTED_STATES)
                .exclude(participant__status=Participant.Status.WITHDRAWN)
                .annotate(agent_name=F("agent__name"), sector_name=F("task__sector__name"), task_key=F("task__uuid"),
                          wage=F("participant__occupation__hourly_wage_usd"))
                .order_by("pk").values("pk", "agent_name", "sector_name", "task_key", "score", "started_at",
                                       "submitted_at", "condition", "self_reported_minutes", "wage"))
    found = []
    for row in episodes.iterator(chunk_size=2000):
        active, usage = transcripts.get(row["pk"], (None, None))
        amount, currency = pay.get(row["pk"], (None, ""))
        seconds, grades = expert.get(row["pk"], (None, 0))
        started, submitted = row["started_at"], row["submitted_at"]
        found.append(EpisodeEconomics(
            episode_id=row["pk"], agent=row["agent_name"] or "", sector=row["sector_name"] or "",
            task_uuid=str(row["task_key"]), score=row["score"],
            worker_seconds=(submitted - started).total_seconds() if started and submitted else None,
            log_active_seconds=active, pay=amount, currency=currency, expert_seconds=seconds, expert_grades=grades,
            cost=usage_cost(usage, _priced_on(row), prices), tokens=usage_tokens(usage), condition=row["condition"],
            self_reported_minutes=row["self_reported_minutes"], hourly_wage=row["wage"]))
    return found


def mean_interval(values: Iterable[float | Decimal | None], level: float = 0.95) -> dict[str, Any]:
    """Mean with its t interval over the known values (no interval below two values)."""
    known = [float(v) for v in values if v is not None]
    n = len(known)
    if n == 0:
        return {"n": 0, "mean": None, "low": None, "high": None}
    mean = sum(known) / n
    if n < 2:
        return {"n": 1, "mean": mean, "low": None, "high": None}
    sd = math.sqrt(sum((v - mean) ** 2 for v in known) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half}


# The columns of the summary, in the order the page shows them, with the decimals each is shown with.
SUMMARY_COLUMNS = (("score", 1), ("worker_minutes", 1), ("log_active_minutes", 1), ("pay", 2),
                   ("expert_minutes", 1), ("model_cost", 4))


def _summary(group: str, rows: list[EpisodeEconomics]) -> dict[str, Any]:
    summary = _means(rows)
    return {"group": group, "episodes": len(rows), **summary,
            "cost_unknown": sum(1 for r in rows if r.cost.amount is None),
            "cells": [(summary[name], places) for name, places in SUMMARY_COLUMNS]}


def _minutes(seconds: float | None) -> float | None:
    return seconds / 60 if seconds is not None else None


def _means(rows: list[EpisodeEconomics]) -> dict[str, dict[str, Any]]:
    return {
        "score": mean_interval(r.score for r in rows),
        "worker_minutes": mean_interval(_minutes(r.worker_seconds) for r in rows),
        "log_active_minutes": mean_interval(_minutes(r.log_active_seconds) for r in rows),
        "pay": mean_interval(r.pay for r in rows),
        "expert_minutes": mean_interval(_minutes(r.expert_seconds) for r in rows),
        "model_cost": mean_interval(r.cost.amount for r in rows),
    }


def economics_summary(rows: list[EpisodeEconomics]) -> dict[str, list[dict[str, Any]]]:
    """Return the means per agent and per sector (task family), each with its interval and count."""
    by_agent: dict[str, list[EpisodeEconomics]] = defaultdict(list)
    by_sector: dict[str, list[EpisodeEconomics]] = defaultdict(list)
    for row in rows:
        by_agent[row.agent].append(row)
        by_sector[row.sector].append(row)
    return {"agents": [_summary(name, group) for name, group in sorted(by_agent.items())],
            "sectors": [_summary(name, group) for name, group in sorted(by_sector.items())]}


def unknown_reasons(rows: list[EpisodeEconomics]) -> list[tuple[str, int]]:
    """Return why costs are unknown, most frequent first (what staff can fix: a missing price, say)."""
    counted: dict[str, int] = defaultdict(int)
    for row in rows:
        if row.cost.amount is None:
            counted[row.cost.reason] += 1
    return sorted(counted.items(), key=lambda item: (-item[1], item[0]))
