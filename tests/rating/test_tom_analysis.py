"""The whole analysis runs on a simulated study, says it is simulated, and puts the verdict first."""

from __future__ import annotations

import json

import numpy as np

from rating.synergy_sim import StudyDesign
from rating.tom_analysis import simulated_inputs, tom_analysis
from rating.tom_sim import TomTruth, simulate_tom


def test_the_analysis_of_a_simulated_study_is_flagged_and_json_ready() -> None:
    design = StudyDesign(workers=80, tasks_per_worker=6, solo_per_worker=2, n_tasks=20, n_agents=3,
                         order="counterbalanced")
    study = simulate_tom(design, TomTruth(kappa_per_tom=8.0), np.random.default_rng(0))
    result = tom_analysis(simulated_inputs(study))
    out = result.to_dict()
    assert out["simulated"] is True and list(out)[:2] == ["simulated", "verdict"]
    assert result.verdict.claims["kappa"] == "positive"
    assert result.moderation.kappa["estimate"] > 0 and result.deviation.deviation is not None
    assert result.judges.icc_average is not None and result.gold is None
    assert "deviation" in result.verdict.claims
    json.dumps(out)
