"""What an episode's (or a solo run's) recorded model usage cost, from the dated price table; unknown rather than
guessed.

Pure: prices come in as `Price` values, so the arithmetic is tested without a database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from grading.transcripts.usage import UNKNOWN_MODEL

MILLION = Decimal(1_000_000)
CENT_FRACTION = Decimal("0.000001")
NO_USAGE = "no uploaded session file recorded model usage"


@dataclass(frozen=True)
class Price:
    model: str
    effective_from: date
    input: Decimal
    cache_read: Decimal
    cache_write: Decimal
    output: Decimal
    id: int | None = None
    source: str = ""


@dataclass(frozen=True)
class UsageCost:
    """The cost of one episode's usage: `amount` is None when any part of it cannot be priced."""

    amount: Decimal | None
    per_model: dict[str, Decimal | None] = field(default_factory=dict)
    prices_used: tuple[int, ...] = ()
    reason: str = ""


def price_for(model: str, on: date, prices: Iterable[Price]) -> Price | None:
    """Return the price in force on a date for a model: the longest matching name, then the newest row."""
    matching = [p for p in prices if model.startswith(p.model) and p.effective_from <= on]
    if not matching:
        return None
    return max(matching, key=lambda p: (len(p.model), p.effective_from))


def _model_cost(counts: Mapping[str, int], price: Price) -> Decimal:
    total = (Decimal(counts.get("input", 0)) * price.input + Decimal(counts.get("cache_read", 0)) * price.cache_read
             + Decimal(counts.get("cache_write", 0)) * price.cache_write
             + Decimal(counts.get("output", 0)) * price.output)
    return (total / MILLION).quantize(CENT_FRACTION)


def usage_cost(usage: Mapping[str, Mapping[str, int]] | None, on: date, prices: list[Price]) -> UsageCost:
    """Price an episode's usage per model; one unpriced or unnamed model makes the total unknown."""
    if not usage:
        return UsageCost(amount=None, reason=NO_USAGE)
    per_model: dict[str, Decimal | None] = {}
    used: list[int] = []
    missing: list[str] = []
    for model, counts in sorted(usage.items()):
        price = None if model == UNKNOWN_MODEL else price_for(model, on, prices)
        if price is None:
            per_model[model] = None
            missing.append(model)
            continue
        per_model[model] = _model_cost(counts, price)
        if price.id is not None:
            used.append(price.id)
    if missing:
        reason = (f"no price in the table on {on.isoformat()} for " + ", ".join(missing)
                  if missing != [UNKNOWN_MODEL] else "the session file does not name the model that ran")
        return UsageCost(amount=None, per_model=per_model, prices_used=tuple(sorted(set(used))), reason=reason)
    amount = sum((value for value in per_model.values() if value is not None), Decimal(0))
    return UsageCost(amount=amount, per_model=per_model, prices_used=tuple(sorted(set(used))))


def usage_tokens(usage: Mapping[str, Mapping[str, int]] | None) -> dict[str, int] | None:
    """Return the episode's tokens summed over models, or None when unknown."""
    if not usage:
        return None
    keys = ("calls", "input", "cache_read", "cache_write", "output", "reasoning")
    return {key: sum(int(counts.get(key, 0)) for counts in usage.values()) for key in keys}


ENTERED = "entered"  # the staff-entered amount (a bill)
ESTIMATED = "session_files"  # priced from the usage the session files recorded
NO_RUN_COST = "the solo run has no model cost entered and its session files recorded no usage"


@dataclass(frozen=True)
class RunCost:
    """A solo run's model cost and where it came from (`source` is empty when the cost is unknown)."""

    cost: UsageCost
    source: str = ""


def run_model_cost(entered: Decimal | None, usage: Mapping[str, Mapping[str, int]] | None, on: date,
                   prices: list[Price]) -> RunCost:
    """Return a solo run's model cost: the entered amount when staff gave one, else its priced usage.

    A bill beats an estimate: the provider's bill counts what was charged (retries, discounts, tools), the
    session files only what they recorded. Neither given: unknown with its reason, never zero.
    """
    if entered is not None:
        return RunCost(UsageCost(amount=entered), ENTERED)
    if not usage:
        return RunCost(UsageCost(amount=None, reason=NO_RUN_COST))
    cost = usage_cost(usage, on, prices)
    return RunCost(cost, ESTIMATED if cost.amount is not None else "")
