"""Simulated ToM studies are flagged simulated, code only with-agent episodes, and are reproducible by seed."""

from __future__ import annotations

import numpy as np

from rating.synergy_sim import StudyDesign
from rating.tom_sim import JUDGES, TomTruth, simulate_tom

DESIGN = StudyDesign(workers=20, tasks_per_worker=5, solo_per_worker=2, n_tasks=10, n_agents=2, order="counterbalanced")


def test_solo_episodes_have_no_codes_and_codes_are_on_the_scale() -> None:
    s = simulate_tom(DESIGN, TomTruth(), np.random.default_rng(0))
    solo = ~s.data.team
    assert np.all(np.isnan(s.codes[solo])) and np.all(np.isnan(s.quality[solo]))
    coded = s.codes[~np.isnan(s.codes)]
    assert coded.size and np.all((coded >= 0) & (coded <= 5) & (coded == np.round(coded)))


def test_records_are_flagged_simulated_with_both_judges() -> None:
    s = simulate_tom(DESIGN, TomTruth(), np.random.default_rng(1))
    records = s.episode_records()
    assert len(records) == s.data.n and all(r["simulated"] for r in records)
    assert set(records[0]["tom_codes"]) == set(JUDGES)
    assert all("simulated" in judge for judge in JUDGES)


def test_the_same_seed_gives_the_same_study() -> None:
    a = simulate_tom(DESIGN, TomTruth(), np.random.default_rng(2))
    b = simulate_tom(DESIGN, TomTruth(), np.random.default_rng(2))
    assert np.array_equal(a.data.y, b.data.y) and np.array_equal(a.codes, b.codes, equal_nan=True)
