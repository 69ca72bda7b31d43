"""Server-side SVG charts for the staff dashboard.

Every chart is inline SVG with a <title> and <desc> for screen readers; every label passes through
``escape`` so a participant-controlled string can never become markup. Pages print the same numbers in a
table next to each chart, so nothing is conveyed by colour or shape alone. No JavaScript, no CDN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

_FONT = 'font-family="system-ui, sans-serif" font-size="12"'
_INK = "#1d2330"
_MUTED = "#5b6577"
_ACCENT = "#2456c7"
_GRID = "#d9dde5"


def _num(value: float) -> str:
    """Format a coordinate compactly."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _svg(chart_id: str, width: float, height: float, title: str, desc: str, body: list[str]) -> SafeString:
    safe_id = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in chart_id)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dash-chart" viewBox="0 0 {_num(width)} {_num(height)}" '
        f'width="{_num(width)}" height="{_num(height)}" role="img" '
        f'aria-labelledby="{safe_id}-title {safe_id}-desc" {_FONT}>'
        f'<title id="{safe_id}-title">{escape(title)}</title><desc id="{safe_id}-desc">{escape(desc)}</desc>'
    )
    return mark_safe(head + "".join(body) + "</svg>")  # noqa: S308 - every interpolated string is escaped


def _text(x: float, y: float, text: str, *, anchor: str = "start", fill: str = _INK, extra: str = "") -> str:
    return (
        f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" fill="{fill}" {extra}>{escape(text)}</text>'
    )


def _truncate(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


_NARROW = set("iljtf.,:;'|!()[] ")
_WIDE = set("mwMW@%…")


def _text_width(text: str) -> float:
    """Return a generous estimate of a label's width in px at the charts' 12 px sans-serif font.

    Layout reserves room from this; the browser test (tests/e2e/test_chart_text_bounds.py) measures the real
    widths, so an estimate that runs short fails there rather than clipping a label in front of staff.
    """
    width = 0.0
    for ch in text:
        if ch in _NARROW:
            width += 4.0
        elif ch in _WIDE:
            width += 11.5
        elif ch.isupper() or ch.isdigit():
            width += 8.4
        else:
            width += 7.2
    return width


def _fit(label: str, limit: int, room: float) -> str:
    """Return the label truncated to ``limit`` characters and to the ``room`` (px) it is drawn in."""
    text = _truncate(label, limit)
    while len(text) > 2 and _text_width(text) > room:
        text = text[:-2] + "…"
    return text


def stars(p: float | None) -> str:
    """Return the paper's significance marks: ** for p < 0.01, * for p < 0.05."""
    if p is None:
        return ""
    return "**" if p < 0.01 else "*" if p < 0.05 else ""


# ------------------------------------------------------------------------------------------ bar charts


def hbar_chart(chart_id: str, title: str, rows: Sequence[tuple[str, float]], *, unit: str = "") -> SafeString:
    """Return horizontal bars, one per (label, value), scaled to the largest value (funnel, counts)."""
    label_w, bar_w, row_h, top = 170.0, 360.0, 26.0, 8.0
    width, height = label_w + bar_w + 70.0, top * 2 + row_h * max(len(rows), 1)
    peak = max((value for _, value in rows), default=0) or 1
    body = []
    for index, (label, value) in enumerate(rows):
        y = top + index * row_h
        length = bar_w * max(value, 0) / peak
        body.append(_text(label_w - 8, y + 17, _truncate(label, 26), anchor="end"))
        body.append(
            f'<rect x="{_num(label_w)}" y="{_num(y + 4)}" width="{_num(length)}" height="{_num(row_h - 8)}" '
            f'fill="{_ACCENT}" rx="2"><title>{escape(label)}: {escape(_fmt(value))}{escape(unit)}</title></rect>'
        )
        body.append(_text(label_w + length + 6, y + 17, f"{_fmt(value)}{unit}", fill=_MUTED))
    desc = "; ".join(f"{label}: {_fmt(value)}{unit}" for label, value in rows) or "No data."
    return _svg(chart_id, width, height, title, desc, body)


def _fmt(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.2f}"


@dataclass(frozen=True)
class RateBar:
    """One bar of a 0-1 rate chart with the counts behind it."""

    label: str
    rate: float | None
    detail: str = ""


def rate_bars(chart_id: str, title: str, bars: Sequence[RateBar], *, reference: float | None = 0.5) -> SafeString:
    """Return vertical bars of rates in [0, 1] with an optional reference line (Figure 2: win rate by quartile)."""
    left, bottom, top, plot_h, slot = 44.0, 40.0, 24.0, 200.0, 90.0
    width, height = left + slot * max(len(bars), 1) + 20.0, top + plot_h + bottom
    body = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - tick)
        body.append(f'<line x1="{_num(left)}" x2="{_num(width - 10)}" y1="{_num(y)}" y2="{_num(y)}" stroke="{_GRID}"/>')
        body.append(_text(left - 6, y + 4, f"{tick:.0%}", anchor="end", fill=_MUTED))
    if reference is not None:
        y = top + plot_h * (1 - reference)
        body.append(
            f'<line x1="{_num(left)}" x2="{_num(width - 10)}" y1="{_num(y)}" y2="{_num(y)}" stroke="{_MUTED}" '
            'stroke-dasharray="4 3"/>'
        )
    for index, bar in enumerate(bars):
        x = left + index * slot + 18
        if bar.rate is not None:
            bar_h = plot_h * min(max(bar.rate, 0.0), 1.0)
            body.append(
                f'<rect x="{_num(x)}" y="{_num(top + plot_h - bar_h)}" width="{_num(slot - 36)}" '
                f'height="{_num(bar_h)}" fill="{_ACCENT}"><title>{escape(bar.label)}: {bar.rate:.0%} '
                f"{escape(bar.detail)}</title></rect>"
            )
            body.append(_text(x + (slot - 36) / 2, top + plot_h - bar_h - 4, f"{bar.rate:.0%}", anchor="middle"))
        else:
            body.append(_text(x + (slot - 36) / 2, top + plot_h - 4, "n/a", anchor="middle", fill=_MUTED))
        body.append(_text(x + (slot - 36) / 2, top + plot_h + 16, _truncate(bar.label, 14), anchor="middle"))
        if bar.detail:
            body.append(
                _text(x + (slot - 36) / 2, top + plot_h + 31, _truncate(bar.detail, 16), anchor="middle", fill=_MUTED)
            )
    desc = "; ".join(
        f"{bar.label}: {'n/a' if bar.rate is None else f'{bar.rate:.0%}'} {bar.detail}".strip() for bar in bars
    )
    return _svg(chart_id, width, height, title, desc or "No data.", body)


# --------------------------------------------------------------------------------------------- heatmap


def _heat_colour(p: float) -> str:
    """Blend from blue (0) through white (0.5) to red (1); text stays readable on every cell."""
    p = min(max(p, 0.0), 1.0)
    if p >= 0.5:
        t = (p - 0.5) * 2
        start, end = (255, 255, 255), (200, 60, 50)
    else:
        t = (0.5 - p) * 2
        start, end = (255, 255, 255), (50, 100, 200)
    r, g, b = (round(s + (e - s) * t) for s, e in zip(start, end, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(chart_id: str, title: str, labels: Sequence[str], matrix: Sequence[Sequence[float]]) -> SafeString:
    """Return a square heatmap where cell (row, column) is P(row agent > column agent)."""
    n = len(labels)
    cell = 58.0 if n <= 8 else max(26.0, 460.0 / max(n, 1))
    longest = max((_text_width(_truncate(label, 18)) for label in labels), default=8.0)
    # Column labels are rotated 40°: their height grows by sin 40° of their length…
    label_w = 12.0 + max((_text_width(_truncate(label, 22)) for label in labels), default=40.0)
    label_h = 18.0 + 0.65 * longest
    # …and they reach right by cos 40° of their length, past the last column: leave room.
    overhang = max(0.0, 0.77 * longest - cell / 2)
    width, height = label_w + cell * n + 10 + overhang, label_h + cell * n + 10
    body = []
    for j, label in enumerate(labels):
        x = label_w + j * cell + cell / 2
        body.append(
            _text(x, label_h - 6, _truncate(label, 18), extra=f'transform="rotate(-40 {_num(x)} {_num(label_h - 6)})"')
        )
    for i, row_label in enumerate(labels):
        y = label_h + i * cell
        body.append(_text(label_w - 6, y + cell / 2 + 4, _truncate(row_label, 22), anchor="end"))
        for j, col_label in enumerate(labels):
            p = float(matrix[i][j])
            x = label_w + j * cell
            body.append(
                f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(cell)}" height="{_num(cell)}" '
                f'fill="{_heat_colour(p)}" stroke="#fff"><title>P({escape(row_label)} &gt; {escape(col_label)}) = '
                f"{p:.3f}</title></rect>"
            )
            if cell >= 34 and i != j:
                body.append(_text(x + cell / 2, y + cell / 2 + 4, f"{p:.2f}", anchor="middle"))
    desc = (
        f"Probability that the row agent's skill exceeds the column agent's, for {n} agents; "
        "red above one half, blue below. The table below lists every value."
    )
    return _svg(chart_id, width, height, title, desc, body)


# ----------------------------------------------------------------------------------------- forest plot


@dataclass(frozen=True)
class ForestRow:
    """One estimate with its interval; missing values draw as 'not computed'."""

    label: str
    estimate: float | None
    low: float | None
    high: float | None
    p: float | None = None


def forest_plot(
    chart_id: str, title: str, rows: Sequence[ForestRow], *, domain: tuple[float, float] = (-1.0, 1.0)
) -> SafeString:
    """Return a forest plot: a dot per estimate, a bar per confidence interval, a line at zero (Figure 4a/b)."""
    plot_w, row_h, top, axis_h = 340.0, 24.0, 10.0, 30.0
    label_w = min(260.0, 16.0 + max((_text_width(_truncate(row.label, 32)) for row in rows), default=40.0))
    right = 16.0 + max((_text_width(f"{row.estimate:.2f}{stars(row.p)}") for row in rows if row.estimate is not None),
                       default=40.0)
    lo, hi = domain
    width, height = label_w + plot_w + right, top + row_h * max(len(rows), 1) + axis_h

    def sx(value: float) -> float:
        return label_w + plot_w * (min(max(value, lo), hi) - lo) / (hi - lo)

    body = []
    zero = sx(0.0) if lo < 0 < hi else None
    plot_bottom = top + row_h * max(len(rows), 1)
    for tick in _ticks(lo, hi):
        body.append(
            f'<line x1="{_num(sx(tick))}" x2="{_num(sx(tick))}" y1="{_num(top)}" y2="{_num(plot_bottom)}" '
            f'stroke="{_GRID}"/>'
        )
        body.append(_text(sx(tick), plot_bottom + 16, f"{tick:g}", anchor="middle", fill=_MUTED))
    if zero is not None:
        body.append(
            f'<line x1="{_num(zero)}" x2="{_num(zero)}" y1="{_num(top)}" y2="{_num(plot_bottom)}" stroke="{_MUTED}"/>'
        )
    for index, row in enumerate(rows):
        y = top + index * row_h + row_h / 2
        body.append(_text(label_w - 8, y + 4, _fit(row.label, 32, label_w - 12), anchor="end"))
        if row.estimate is None:
            body.append(_text(label_w + 6, y + 4, "not computed", fill=_MUTED))
            continue
        if row.low is not None and row.high is not None:
            body.append(
                f'<line x1="{_num(sx(row.low))}" x2="{_num(sx(row.high))}" y1="{_num(y)}" y2="{_num(y)}" '
                f'stroke="{_INK}" stroke-width="2"/>'
            )
        interval = "" if row.low is None or row.high is None else f" [{row.low:.2f}, {row.high:.2f}]"
        body.append(
            f'<circle cx="{_num(sx(row.estimate))}" cy="{_num(y)}" r="5" fill="{_ACCENT}">'
            f"<title>{escape(row.label)}: {row.estimate:.3f}{interval}</title></circle>"
        )
        body.append(_text(label_w + plot_w + 8, y + 4, f"{row.estimate:.2f}{stars(row.p)}"))
    desc = "; ".join(
        f"{row.label}: " + ("not computed" if row.estimate is None else f"{row.estimate:.2f}")
        + ("" if row.low is None or row.high is None else f" (CI {row.low:.2f} to {row.high:.2f})")
        for row in rows
    )
    return _svg(chart_id, width, height, title, desc or "No data.", body)


def _ticks(lo: float, hi: float) -> list[float]:
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / 4)) if span > 0 else 1
    for factor in (1, 2, 2.5, 5, 10):
        if span / (step * factor) <= 6:
            step *= factor
            break
    first = math.ceil(lo / step) * step
    ticks, value = [], first
    while value <= hi + 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


# ----------------------------------------------------------------------------------- pre/post means


@dataclass(frozen=True)
class PrePostRow:
    """Pre and post means of one item with standard errors."""

    label: str
    pre: float | None
    se_pre: float | None
    post: float | None
    se_post: float | None
    p: float | None = None


def prepost_plot(
    chart_id: str, title: str, rows: Sequence[PrePostRow], *, domain: tuple[float, float] = (1.0, 7.0)
) -> SafeString:
    """Return pre (hollow) and post (filled) means with ±1 SE bars per item (Figure 4c)."""
    plot_w, row_h, top, axis_h = 340.0, 30.0, 24.0, 30.0
    label_w = min(260.0, 16.0 + max((_text_width(_truncate(row.label, 32)) for row in rows), default=40.0))
    right = 16.0 + max((_text_width(f"Δ {row.post - row.pre:+.2f}{stars(row.p)}") for row in rows
                        if row.pre is not None and row.post is not None), default=40.0)
    lo, hi = domain
    width, height = label_w + plot_w + right, top + row_h * max(len(rows), 1) + axis_h

    def sx(value: float) -> float:
        return label_w + plot_w * (min(max(value, lo), hi) - lo) / (hi - lo)

    plot_bottom = top + row_h * max(len(rows), 1)
    body = [
        f'<circle cx="{_num(label_w + 6)}" cy="10" r="4" fill="#fff" stroke="{_INK}"/>',
        _text(label_w + 14, 14, "pre", fill=_MUTED),
        f'<circle cx="{_num(label_w + 56)}" cy="10" r="4" fill="{_ACCENT}"/>',
        _text(label_w + 64, 14, "post", fill=_MUTED),
    ]
    for tick in _ticks(lo, hi):
        body.append(
            f'<line x1="{_num(sx(tick))}" x2="{_num(sx(tick))}" y1="{_num(top)}" y2="{_num(plot_bottom)}" '
            f'stroke="{_GRID}"/>'
        )
        body.append(_text(sx(tick), plot_bottom + 16, f"{tick:g}", anchor="middle", fill=_MUTED))
    for index, row in enumerate(rows):
        y = top + index * row_h + row_h / 2
        body.append(_text(label_w - 8, y + 4, _fit(row.label, 32, label_w - 12), anchor="end"))
        for value, se, offset, fill in ((row.pre, row.se_pre, -5, "#fff"), (row.post, row.se_post, 5, _ACCENT)):
            if value is None:
                continue
            if se is not None:
                body.append(
                    f'<line x1="{_num(sx(value - se))}" x2="{_num(sx(value + se))}" y1="{_num(y + offset)}" '
                    f'y2="{_num(y + offset)}" stroke="{_INK}"/>'
                )
            body.append(
                f'<circle cx="{_num(sx(value))}" cy="{_num(y + offset)}" r="4.5" fill="{fill}" stroke="{_INK}">'
                f"<title>{escape(row.label)}: {value:.2f}{'' if se is None else f' ± {se:.2f}'}</title></circle>"
            )
        if row.pre is not None and row.post is not None:
            body.append(_text(label_w + plot_w + 8, y + 4, f"Δ {row.post - row.pre:+.2f}{stars(row.p)}"))
    desc = "; ".join(
        f"{row.label}: pre {'n/a' if row.pre is None else f'{row.pre:.2f}'}, "
        f"post {'n/a' if row.post is None else f'{row.post:.2f}'}"
        for row in rows
    )
    return _svg(chart_id, width, height, title, desc or "No data.", body)


# ----------------------------------------------------------------------------------------- line charts

_SERIES_COLOURS = ("#2456c7", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#4338ca")
_SERIES_DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4")


@dataclass(frozen=True)
class CurveSeries:
    """One line of a curve chart: a label and one y value (or None) per x category."""

    label: str
    values: Sequence[float | None]


def curve_chart(chart_id: str, title: str, categories: Sequence[str], series: Sequence[CurveSeries], *,
                y_range: tuple[float, float] = (0.0, 100.0), x_label: str = "", y_label: str = "") -> SafeString:
    """Return lines over categorical x (effort-scaling curves); series differ by colour, dash and marker label."""
    left, top, bottom, plot_h = 48.0, 14.0, 44.0, 220.0
    right = 62.0 + max((_text_width(_truncate(line.label, 18)) for line in series), default=60.0)
    slot = 70.0
    plot_w = slot * max(len(categories) - 1, 1)
    width, height = left + plot_w + right, top + plot_h + bottom
    low, high = y_range
    span = (high - low) or 1.0

    def y_of(value: float) -> float:
        return top + plot_h * (1 - (min(max(value, low), high) - low) / span)

    body = []
    for tick in _ticks(low, high):
        y = y_of(tick)
        body.append(f'<line x1="{_num(left)}" x2="{_num(left + plot_w)}" y1="{_num(y)}" y2="{_num(y)}" '
                    f'stroke="{_GRID}"/>')
        body.append(_text(left - 6, y + 4, _fmt(tick), anchor="end", fill=_MUTED))
    for index, category in enumerate(categories):
        body.append(_text(left + index * slot, top + plot_h + 16, _truncate(category, 10), anchor="middle"))
    if x_label:
        body.append(_text(left + plot_w / 2, top + plot_h + 36, x_label, anchor="middle", fill=_MUTED))
    if y_label:
        body.append(_text(12, top + plot_h / 2, y_label, anchor="middle", fill=_MUTED,
                          extra=f'transform="rotate(-90 12 {_num(top + plot_h / 2)})"'))
    descriptions = []
    for number, line in enumerate(series):
        colour = _SERIES_COLOURS[number % len(_SERIES_COLOURS)]
        dash = _SERIES_DASHES[number % len(_SERIES_DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        marks = [(left + index * slot, y_of(value), categories[index], value)
                 for index, value in enumerate(line.values) if value is not None and index < len(categories)]
        if len(marks) > 1:
            path = " ".join(f"{_num(x)},{_num(y)}" for x, y, _c, _v in marks)
            body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash_attr}/>')
        for x, y, category, value in marks:
            body.append(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="3.5" fill="{colour}"><title>'
                        f'{escape(line.label)}, {escape(category)}: {escape(_fmt(value))}</title></circle>')
        legend_y = top + 10 + number * 18
        body.append(f'<line x1="{_num(left + plot_w + 16)}" x2="{_num(left + plot_w + 40)}" y1="{_num(legend_y)}" '
                    f'y2="{_num(legend_y)}" stroke="{colour}" stroke-width="2"{dash_attr}/>')
        body.append(_text(left + plot_w + 46, legend_y + 4, _truncate(line.label, 18)))
        shown = ", ".join(f"{c} {_fmt(v)}" for c, v in zip(categories, line.values, strict=False) if v is not None)
        descriptions.append(f"{line.label}: {shown or 'no data'}")
    return _svg(chart_id, width, height, title, "; ".join(descriptions) or "No data.", body)


# ------------------------------------------------------------------------------------ residual QQ plot


def qq_plot(chart_id: str, title: str, theoretical: Sequence[float], observed: Sequence[float]) -> SafeString:
    """Return standardized residuals against normal quantiles with the identity line.

    Points on the line mean the model's noise level is right; a slope above 1 means the residuals are wider
    than the model assumes (its intervals too narrow), curvature means heavy tails or skew.
    """
    size, pad = 320.0, 40.0
    values = [v for v in (*theoretical, *observed) if math.isfinite(v)]
    bound = max(3.0, math.ceil(max((abs(v) for v in values), default=3.0)))
    lo, hi = -bound, bound
    plot = size - 2 * pad

    def sx(value: float) -> float:
        return pad + plot * (min(max(value, lo), hi) - lo) / (hi - lo)

    def sy(value: float) -> float:
        return size - pad - plot * (min(max(value, lo), hi) - lo) / (hi - lo)

    body = []
    for tick in _ticks(lo, hi):
        body.append(f'<line x1="{_num(sx(tick))}" x2="{_num(sx(tick))}" y1="{_num(pad)}" y2="{_num(size - pad)}" '
                    f'stroke="{_GRID}"/>')
        body.append(f'<line x1="{_num(pad)}" x2="{_num(size - pad)}" y1="{_num(sy(tick))}" y2="{_num(sy(tick))}" '
                    f'stroke="{_GRID}"/>')
        body.append(_text(sx(tick), size - pad + 14, f"{tick:g}", anchor="middle", fill=_MUTED))
        body.append(_text(pad - 4, sy(tick) + 4, f"{tick:g}", anchor="end", fill=_MUTED))
    body.append(f'<line x1="{_num(sx(lo))}" y1="{_num(sy(lo))}" x2="{_num(sx(hi))}" y2="{_num(sy(hi))}" '
                f'stroke="{_MUTED}" stroke-dasharray="4 3"/>')
    for x, y in zip(theoretical, observed, strict=True):
        body.append(f'<circle cx="{_num(sx(x))}" cy="{_num(sy(y))}" r="2.5" fill="{_ACCENT}"/>')
    body.append(_text(size / 2, size - 6, "normal quantile", anchor="middle", fill=_MUTED))
    body.append(_text(12, size / 2, "standardized residual", anchor="middle", fill=_MUTED,
                      extra=f'transform="rotate(-90 12 {_num(size / 2)})"'))
    n = len(observed)
    desc = (
        f"{n} quantiles of the standardized residuals against the normal distribution"
        + (f", from {min(observed):.2f} to {max(observed):.2f}" if n else "")
        + "; points on the dashed line mean the model's noise level fits."
    )
    return _svg(chart_id, size, size, title, desc, body)
