"""How cells and sheets are rendered for the judge, whichever way a workbook was read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from grading.extract.limits import ExtractLimits
from grading.extract.sources import ReadResult, Sink, join_notes


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value).replace("\r\n", "\n").replace("\n", "\\n")


NOT_CALCULATED = "[not calculated]"


def cell_line(coordinate: str, formula_cell: Any, value: Any, extra: str = "") -> str | None:
    """Render `B4 = 1200 (formula: =SUM(B1:B3))`; None for an empty cell."""
    raw = formula_cell.value
    is_formula = getattr(formula_cell, "data_type", None) == "f"
    if raw is None and value is None and not extra:
        return None
    if is_formula:
        formula = getattr(raw, "text", raw)  # ArrayFormula keeps its text in .text
        shown = format_value(value) if value is not None else NOT_CALCULATED
        line = f"{coordinate} = {shown} (formula: {formula})"
    else:
        line = f"{coordinate} = {format_value(raw if raw is not None else value)}"
    return line + extra


@dataclass
class Sheet:
    title: str
    state: str
    rows: Iterator[list[str] | None]  # rendered non-empty cells per row; None: stop (sparse-sheet guard)
    trailer: str | Callable[[], str] = ""  # a callable runs after the rows, when more is known
    estimate: int | None = None  # rough upper bound of the rendered size, so tiny sheets reserve little


def render_sheets(
    sheets: Sequence[Sheet],
    sink: Sink,
    limits: ExtractLimits,
    chartsheets: Sequence[str] = (),
    note: str = "",
) -> ReadResult:
    """Render sheets as separate sections; a huge early sheet may not starve the ones after it.

    Every sheet still to come keeps a reserve of the character and cell budgets, and the final budget
    cut later shares the part's allowance between the same sections.
    """
    count = max(1, len(sheets))
    share_chars, reserve_cells = sink.cap // (2 * count), limits.max_xlsx_cells // (2 * count)
    reserves = [share_chars if s.estimate is None else min(share_chars, s.estimate + 200) for s in sheets]
    used_chars = used_cells = 0
    sections: list[str] = []
    truncated = overflow = False
    for index, sheet in enumerate(sheets):
        later = count - index - 1
        chars_left = sink.cap - used_chars - sum(reserves[index + 1 :])
        cells_left = limits.max_xlsx_cells - used_cells - later * reserve_cells
        header = (
            "## Sheet: " + sheet.title + (f" ({sheet.state})" if sheet.state not in ("", "visible") else "")
        )
        lines, size, cells, stop = [header], len(header), 0, ""
        for row in sheet.rows:
            if row is None:
                stop = f"[[TRUNCATED: rest of sheet '{sheet.title}' omitted: too sparse to scan]]"
                break
            if cells + len(row) > cells_left:
                stop = (
                    f"[[TRUNCATED: rest of sheet '{sheet.title}' omitted: the workbook's "
                    f"{limits.max_xlsx_cells}-cell reading limit was reached]]"
                )
                break
            line = " | ".join(row)
            if size + len(line) + 1 > chars_left:
                stop = f"[[TRUNCATED: rest of sheet '{sheet.title}' omitted to fit the reading budget]]"
                overflow = True
                break
            lines.append(line)
            size += len(line) + 1
            cells += len(row)
        if stop:
            lines.append(stop)
            truncated = True
        trailer = sheet.trailer() if callable(sheet.trailer) else sheet.trailer
        if trailer:
            lines.append(trailer)
        section = "\n".join(lines)
        sections.append(section)
        used_chars += len(section) + 1
        used_cells += cells
    if chartsheets:
        sections.append("Chart sheets (not shown): " + ", ".join(chartsheets))
    sink.lines, sink.size = sections, used_chars
    sink.overflow = overflow
    if any(NOT_CALCULATED in section for section in sections):
        note = join_notes(
            note,
            "formulas were saved without calculated results (the file was never "
            "recalculated in a spreadsheet program), so only the formulas are shown",
        )
    return ReadResult(truncated=truncated, sections=sections, note=note)
