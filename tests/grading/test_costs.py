"""Pricing recorded usage: the dated price table, longest-name matching, and unknown instead of a guess."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from grading.costs import (
    ENTERED,
    ESTIMATED,
    NO_RUN_COST,
    NO_USAGE,
    Price,
    price_for,
    run_model_cost,
    usage_cost,
    usage_tokens,
)
from grading.transcripts.usage import UNKNOWN_MODEL

D = Decimal
SONNET_OLD = Price("claude-sonnet-4", date(2025, 1, 1), D("3"), D("0.3"), D("3.75"), D("15"), id=1)
SONNET_NEW = Price("claude-sonnet-4", date(2025, 9, 1), D("2"), D("0.2"), D("2.5"), D("10"), id=2)
SONNET_45 = Price("claude-sonnet-4-5", date(2025, 9, 29), D("3"), D("0.3"), D("3.75"), D("15"), id=3)
GPT5 = Price("gpt-5", date(2025, 8, 7), D("1.25"), D("0.125"), D("0"), D("10"), id=4)
PRICES = [SONNET_OLD, SONNET_NEW, SONNET_45, GPT5]


def test_the_price_in_force_is_the_newest_row_on_or_before_the_date():
    assert price_for("claude-sonnet-4-20250514", date(2025, 6, 1), PRICES) is SONNET_OLD
    assert price_for("claude-sonnet-4-20250514", date(2025, 9, 1), PRICES) is SONNET_NEW
    assert price_for("claude-sonnet-4-20250514", date(2024, 12, 31), PRICES) is None


def test_the_longest_matching_name_wins():
    assert price_for("claude-sonnet-4-5-20250929", date(2025, 10, 1), PRICES) is SONNET_45
    # Before its own row exists, the shorter name still prices it.
    assert price_for("claude-sonnet-4-5-20250929", date(2025, 9, 10), PRICES) is SONNET_NEW


def test_a_cost_worked_by_hand():
    usage = {"claude-sonnet-4-20250514": {"calls": 3, "input": 2000, "cache_read": 100000, "cache_write": 4000,
                                          "output": 1500, "reasoning": 0},
             "gpt-5-codex": {"calls": 2, "input": 10000, "cache_read": 20000, "cache_write": 0, "output": 3000,
                             "reasoning": 1000}}
    cost = usage_cost(usage, date(2025, 8, 10), PRICES)
    sonnet = (2000 * D(3) + 100000 * D("0.3") + 4000 * D("3.75") + 1500 * D(15)) / 1_000_000  # 0.0735
    gpt = (10000 * D("1.25") + 20000 * D("0.125") + 3000 * D(10)) / 1_000_000  # 0.045
    assert cost.per_model == {"claude-sonnet-4-20250514": sonnet, "gpt-5-codex": gpt}
    assert cost.amount == D("0.1185") and cost.prices_used == (1, 4) and cost.reason == ""


def test_one_unpriced_model_makes_the_total_unknown_but_keeps_what_is_known():
    usage = {"gpt-5-codex": {"input": 1_000_000}, "mystery-model": {"input": 5}}
    cost = usage_cost(usage, date(2025, 9, 1), PRICES)
    assert cost.amount is None and cost.per_model == {"gpt-5-codex": D("1.25"), "mystery-model": None}
    assert "mystery-model" in cost.reason and "2025-09-01" in cost.reason


def test_no_usage_or_no_model_name_is_unknown_never_zero():
    assert usage_cost(None, date(2025, 9, 1), PRICES).amount is None
    assert usage_cost(None, date(2025, 9, 1), PRICES).reason == NO_USAGE
    unnamed = usage_cost({UNKNOWN_MODEL: {"input": 10}}, date(2025, 9, 1), PRICES)
    assert unnamed.amount is None and "does not name the model" in unnamed.reason
    assert usage_tokens(None) is None


def test_tokens_are_summed_over_models():
    usage = {"a": {"calls": 1, "input": 5, "output": 2}, "b": {"calls": 2, "input": 1, "cache_read": 4, "output": 3}}
    assert usage_tokens(usage) == {"calls": 3, "input": 6, "cache_read": 4, "cache_write": 0, "output": 5,
                                   "reasoning": 0}


RUN_USAGE = {"gpt-5-codex": {"calls": 1, "input": 2096, "cache_read": 1024, "cache_write": 0, "output": 212,
                             "reasoning": 64}}


def test_a_solo_run_s_entered_cost_beats_the_estimate_from_its_usage():
    found = run_model_cost(D("0.42"), RUN_USAGE, date(2025, 10, 1), PRICES)
    assert found.source == ENTERED and found.cost.amount == D("0.42")


def test_without_an_entered_cost_a_solo_run_s_usage_is_priced_on_its_date():
    found = run_model_cost(None, RUN_USAGE, date(2025, 10, 1), PRICES)
    # 2096 input at $1.25, 1024 cached at $0.125, 212 output at $10 per million
    assert found.source == ESTIMATED and found.cost.amount == D("0.004868")
    assert found.cost.prices_used == (4,)


def test_a_solo_run_with_neither_or_an_unpriced_model_is_unknown_with_its_reason():
    neither = run_model_cost(None, None, date(2025, 10, 1), PRICES)
    assert neither.cost.amount is None and neither.cost.reason == NO_RUN_COST and neither.source == ""
    early = run_model_cost(None, RUN_USAGE, date(2025, 8, 1), PRICES)  # before the gpt-5 price row
    assert early.cost.amount is None and "gpt-5-codex" in early.cost.reason and early.source == ""
    assert run_model_cost(D("0"), None, date(2025, 10, 1), PRICES).cost.amount == D("0")  # a zero bill is known
