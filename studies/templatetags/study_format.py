"""Number formatting for staff pages: statistics stay readable however small or large they get."""

from __future__ import annotations

import math

from django import template

register = template.Library()


@register.filter
def pvalue(value: object, digits: int = 4) -> str:
    """Format a p-value: four decimals, "< 0.0001" below that (never 8.19e-216 or a misleading 0.0000)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    if math.isnan(number):
        return "—"
    floor = 10.0 ** -int(digits)
    if number < floor:
        return f"< {floor:.{int(digits)}f}"
    return f"{number:.{int(digits)}f}"
