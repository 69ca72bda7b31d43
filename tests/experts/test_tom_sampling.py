"""Stratified sampling for the ToM gold standard: allocation, reproducibility, inclusion probabilities (no DB)."""

from __future__ import annotations

import pytest

from experts.tom_sampling import allocate, score_band, stratified_draw


def test_allocation_is_proportional_with_one_per_stratum_and_sums_to_the_size():
    alloc = allocate({"a": 100, "b": 10, "c": 2}, 20)
    assert sum(alloc.values()) == 20 and alloc["c"] >= 1 and alloc["b"] >= 1
    assert alloc == {"a": 18, "b": 1, "c": 1}  # quotas 17.86, 1.79, 0.36: largest remainder


def test_a_size_at_or_above_the_population_takes_everything():
    assert allocate({"a": 3, "b": 2}, 9) == {"a": 3, "b": 2}


def test_a_size_below_the_number_of_strata_is_refused():
    with pytest.raises(ValueError, match="below the number of strata"):
        allocate({"a": 3, "b": 2, "c": 1}, 2)


def test_sum_of_inverse_inclusion_probabilities_is_the_population_of_each_stratum():
    population = {"low|agent": list(range(0, 37)), "mid|agent": list(range(100, 111)), "high|solo": [500, 501]}
    drawn = stratified_draw(population, 15, seed=7)
    assert len(drawn) == 15 and len({d.unit for d in drawn}) == 15
    for stratum, units in population.items():
        mine = [d for d in drawn if d.stratum == stratum]
        assert all(d.unit in units for d in mine)
        assert sum(1 / d.inclusion_probability for d in mine) == pytest.approx(len(units), abs=1e-9)


def test_the_same_seed_draws_the_same_sample_and_another_seed_another():
    population = {"a": list(range(50)), "b": list(range(50, 80))}
    first = stratified_draw(population, 10, seed=1)
    assert first == stratified_draw(population, 10, seed=1)
    assert [d.unit for d in first] != [d.unit for d in stratified_draw(population, 10, seed=2)]


def test_score_bands():
    assert [score_band(x) for x in (0, 1.99, 2, 3.49, 3.5, 5)] == ["low", "low", "mid", "mid", "high", "high"]
