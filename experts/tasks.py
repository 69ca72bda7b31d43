"""Celery entry points of the expert workspace: the periodic routing sweep, the expert gate and the judges'
comparison-mode rankings."""

from __future__ import annotations

from collections import Counter
from typing import Any

from experts.models import ComparisonSet
from experts.services.gate import gates_reconcile, study_gate_evaluate
from experts.services.judge_comparisons import comparison_set_judge, judge_comparisons_reconcile
from experts.services.routing import episodes_route_pending
from experts.task_names import (
    EVALUATE_EXPERT_GATE,
    JUDGE_COMPARISON_SET,
    RECONCILE_EXPERT_GATES,
    RECONCILE_JUDGE_COMPARISONS,
    ROUTE_EXPERT_REVIEWS,
)
from grading.exceptions import CodingInFlight, GradingWaiting, NotGradable, RetryLater
from studies.instrumented_task import TimeLimits, instrumented_task


# Formerly grading.tasks.route_expert_reviews; a message under that name lost at deploy is harmless: the
# sweep takes no arguments and its next run (every 10 minutes) routes whatever the lost one would have.
@instrumented_task(name=ROUTE_EXPERT_REVIEWS)
def route_expert_reviews() -> dict[str, int]:
    """Hand graded or flagged episodes to experts of their domain (periodic, so nobody has to press a button)."""
    report = episodes_route_pending()
    return {"episodes_routed": report.episodes_routed, "assignments": report.assignments,
            "without_expert": len(report.without_expert)}


@instrumented_task(name=EVALUATE_EXPERT_GATE)
def evaluate_expert_gate(study_id: int) -> dict[str, int]:
    """Recompute a study's expert gate (after an expert grade of a calibration episode, or on request)."""
    rows = study_gate_evaluate(study_id=study_id)
    return {"passing": sum(r.passes for r in rows), "failing": sum(not r.passes for r in rows)}


@instrumented_task(name=RECONCILE_EXPERT_GATES)
def reconcile_expert_gates() -> dict[str, int]:
    """Periodic: gate evaluations and re-grades that a lost message left undone."""
    return gates_reconcile()


@instrumented_task(name=JUDGE_COMPARISON_SET, limits=TimeLimits(soft=15 * 60, hard=20 * 60))
def judge_comparison_set(set_id: int, retry_failed: bool = False) -> dict[str, Any]:
    """Have the study's judges rank one comparison set in both orders (the admin action); idempotent."""
    comparison_set = ComparisonSet.objects.select_related("study", "task").filter(pk=set_id).first()
    if comparison_set is None:
        return {"status": "missing"}
    try:
        rows = comparison_set_judge(comparison_set=comparison_set, retry_failed=retry_failed)
    except (NotGradable, GradingWaiting, CodingInFlight, RetryLater) as exc:
        # Nothing is lost: stored rankings stay, and the command or the action runs the rest again.
        return {"status": type(exc).__name__, "note": exc.reason}
    return {"status": "judged", "rankings": dict(Counter(row.status for row in rows))}


@instrumented_task(name=RECONCILE_JUDGE_COMPARISONS)
def reconcile_judge_comparisons() -> dict[str, int]:
    """Periodic: comparison sets whose judge rankings a killed worker or a lost message left unfinished."""
    return judge_comparisons_reconcile()
