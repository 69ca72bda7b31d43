"""Worker time measured two ways (timestamps and the worker's own report) and expert time per grade and per
comparison, for the Time & cost page.

The timestamps and the self report are never merged: each has its own median over the episodes that have it,
and their difference (self report minus timestamps) is taken only over the episodes that have both, as a mean
paired difference with its t interval.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from console.economics import EpisodeEconomics, mean_interval
from experts.models import ComparisonAssignment, ExpertGrade
from studies.models import Participant, Study

ALL = "All sectors"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _time_report(group: str, rows: list[EpisodeEconomics]) -> dict[str, Any]:
    stamped = [r.worker_seconds / 60 for r in rows if r.worker_seconds is not None]
    reported = [float(r.self_reported_minutes) for r in rows if r.self_reported_minutes is not None]
    paired = [r.self_reported_minutes - r.worker_seconds / 60 for r in rows
              if r.self_reported_minutes is not None and r.worker_seconds is not None]
    return {"group": group, "episodes": len(rows), "stamped_n": len(stamped), "stamped_median": _median(stamped),
            "reported_n": len(reported), "reported_median": _median(reported),
            "difference": mean_interval(paired)}


def time_report_summary(rows: list[EpisodeEconomics]) -> list[dict[str, Any]]:
    """Return the two time measures side by side for the whole study, then per agent (solo tasks apart)."""
    by_agent: dict[str, list[EpisodeEconomics]] = defaultdict(list)
    for row in rows:
        by_agent[row.agent or "Solo (no AI tool)"].append(row)
    groups = (_time_report(name, group) for name, group in sorted(by_agent.items()))
    return [_time_report("All episodes", rows), *groups]


def _grouped(pairs: Iterable[tuple[str | None, int]]) -> dict[str, list[float]]:
    grouped: dict[str, list[float]] = defaultdict(list)
    for sector, seconds in pairs:
        grouped[ALL].append(seconds / 60)
        grouped[sector or ""].append(seconds / 60)
    return grouped


def expert_time(study: Study) -> list[dict[str, Any]]:
    """Return the mean expert minutes per submitted grade and per submitted comparison, overall then per sector.

    Withdrawn participants' episodes are left out of the grades, as in the exports.
    """
    grades = _grouped(ExpertGrade.objects.filter(assignment__episode__study=study,
                                                 status=ExpertGrade.Status.SUBMITTED)
                      .exclude(assignment__episode__participant__status=Participant.Status.WITHDRAWN)
                      .values_list("assignment__episode__task__sector__name", "time_spent_seconds"))
    comparisons = _grouped(ComparisonAssignment.objects
                           .filter(comparison_set__study=study, status=ComparisonAssignment.Status.SUBMITTED)
                           .values_list("comparison_set__task__sector__name", "time_spent_seconds"))
    sectors = sorted((set(grades) | set(comparisons)) - {ALL})
    return [{"group": name, "grade": mean_interval(grades.get(name, [])),
             "comparison": mean_interval(comparisons.get(name, []))} for name in (ALL, *sectors)]
