"""``{{ i|interval:2 }}``: an estimate with its interval ("23.33 [15.00, unbounded]"); "—" for no estimate."""

from __future__ import annotations

import math

from django import template

from rating.workflow_costs import Interval

register = template.Library()


def _number(value: float, places: int) -> str:
    return f"{value:,.{places}f}" if math.isfinite(value) else "unbounded"


@register.filter
def interval(value: Interval | None, places: int = 1) -> str:
    """Format an estimate and its bounds; an infinite bound reads "unbounded" (the target may never be reached)."""
    if value is None or value.estimate is None:
        return "—"
    shown = _number(value.estimate, places)
    if value.low is not None and value.high is not None:
        shown += f" [{_number(value.low, places)}, {_number(value.high, places)}]"
    return shown
