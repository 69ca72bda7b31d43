"""The Time & cost page: episode time and cost, the two time measures, expert time and the workflow comparison."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console import economics, time_reports, workflows
from console.dashboard.forms import WorkflowForm
from studies.models import Study


def _workflow_context(study: Study, rows: list[economics.EpisodeEconomics], query: Mapping[str, Any]
                      ) -> dict[str, Any]:
    """Bind the target form; compare the workflows only once a valid target is given."""
    form = WorkflowForm(query) if "target" in query else WorkflowForm()
    if not form.is_bound or not form.is_valid():
        return {"workflow_form": form, "workflows": None}
    attempts = [*workflows.episode_attempts(rows),
                *workflows.solo_run_attempts(study, form.cleaned_data["expert_wage"])]
    return {"workflow_form": form, "target": form.cleaned_data["target"],
            "expert_wage": form.cleaned_data["expert_wage"],
            "workflows": workflows.workflow_comparison(attempts, target=form.cleaned_data["target"])}


def costs_page(study: Study, query: Mapping[str, Any]) -> dict[str, Any]:
    """Return the page's context (the workflow part from the GET parameters ``target`` and ``expert_wage``)."""
    rows = economics.episode_economics(study)
    return {"view": economics.economics_summary(rows), "n_episodes": len(rows),
            "n_cost_unknown": sum(1 for r in rows if r.cost.amount is None),
            "unknown_reasons": economics.unknown_reasons(rows), "prices": economics.price_table(),
            "time_reports": time_reports.time_report_summary(rows), "expert_time": time_reports.expert_time(study),
            **_workflow_context(study, rows, query)}
