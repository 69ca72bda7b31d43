"""Celery entry points of the expert workspace: the periodic routing sweep and the expert gate."""

from __future__ import annotations

from experts.services.gate import gates_reconcile, study_gate_evaluate
from experts.services.routing import episodes_route_pending
from experts.task_names import EVALUATE_EXPERT_GATE, RECONCILE_EXPERT_GATES, ROUTE_EXPERT_REVIEWS
from studies.instrumented_task import instrumented_task


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
