"""Planning the solo condition: boost-interval widths by simulation from variance components."""

from __future__ import annotations

import pytest

from rating.synergy_data import SynergyInputError
from rating.synergy_plan import plan_boost_widths, smallest_design, truth_from_components

COMPONENTS = {"theta_var": 64.0, "kappa_var": 64.0, "theta_kappa_cov": 38.4, "task_solo_var": 36.0,
              "task_agent_extra_var": 9.0, "residual_var": 100.0}


def _plan(**kwargs: object) -> list[dict]:
    args = {"workers": [30, 150], "solo_per_worker": [1, 2], "tasks_per_worker": 5, "n_tasks": 20, "n_agents": 2,
            "replicates": 3, "seed": 3, "max_seconds": 120.0} | kwargs
    return plan_boost_widths(COMPONENTS, **args)


def test_widths_shrink_with_workers_and_are_reproducible() -> None:
    rows = _plan()
    assert [(r["workers"], r["solo_per_worker"]) for r in rows] == [(30, 1), (30, 2), (150, 1), (150, 2)]
    assert all(r["replicates"] == 3 for r in rows)
    by = {(r["workers"], r["solo_per_worker"]): r["mean_width"] for r in rows}
    assert by[(150, 1)] < by[(30, 1)] and by[(150, 2)] < by[(30, 2)]
    assert _plan(workers=[30]) == rows[:2]
    best = smallest_design(rows, by[(150, 2)])
    assert best is not None and best["mean_width"] <= by[(150, 2)]
    assert smallest_design(rows, 0.0) is None


def test_time_budget_bounds_the_replicates_and_says_so() -> None:
    rows = _plan(max_seconds=0.0)
    assert all(r["replicates"] == 0 and r["mean_width"] is None and r["replicates_asked"] == 3 for r in rows)


def test_bad_plans_are_refused() -> None:
    with pytest.raises(SynergyInputError, match="solo tasks"):
        _plan(solo_per_worker=[5])
    with pytest.raises(SynergyInputError, match="missing"):
        truth_from_components({"theta_var": 1.0}, 2)
    truth = truth_from_components(COMPONENTS, 3)
    assert truth.rho == pytest.approx(0.6) and truth.sd_noise == pytest.approx(10.0) and truth.boosts == (0.0,) * 3
