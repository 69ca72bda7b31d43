"""``{{ p|share }}``: a probability or proportion (0-1) as a whole percentage ("42 %"); empty for no value."""

from __future__ import annotations

import math

from django import template

register = template.Library()


@register.filter
def share(value: object) -> str:
    """Format a 0-1 share as a percentage; a missing or non-finite value gives "" (the page says why elsewhere)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return f"{100 * number:.0f} %" if math.isfinite(number) else ""
