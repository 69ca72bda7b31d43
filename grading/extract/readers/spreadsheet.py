"""Excel workbooks: every sheet's cells with values beside formulas, shared fairly between sheets.

Small workbooks go through openpyxl's full loader; larger ones through the one-pass XML stream in
`spreadsheet_xml`; both render through `sheet_rendering`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from grading.extract.limits import ExtractLimits
from grading.extract.readers.sheet_rendering import Sheet, cell_line, format_value, render_sheets
from grading.extract.readers.spreadsheet_xml import read_xlsx_stream
from grading.extract.sources import ReadResult, Sink, Source


def read_xlsx(name: str, src: Source, sink: Sink, limits: ExtractLimits) -> ReadResult:
    import openpyxl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # openpyxl warns about every unsupported extension it skips
        if src.size <= limits.xlsx_full_load_bytes:
            with src.open() as fh:
                formulas = openpyxl.load_workbook(fh, data_only=False, keep_links=False)
            if all(ws.max_row * ws.max_column <= 4 * limits.max_xlsx_cells for ws in formulas.worksheets):
                with src.open() as fh:
                    values = openpyxl.load_workbook(fh, data_only=True, keep_links=False)
                sheets = [
                    Sheet(
                        ws.title,
                        ws.sheet_state,
                        _full_rows(ws, values[ws.title]),
                        estimate=ws.max_row * ws.max_column * 40,
                    )
                    for ws in formulas.worksheets
                ]
                charts = [cs.title for cs in formulas.chartsheets]
                return render_sheets(sheets, sink, limits, charts)
        return read_xlsx_stream(src, sink, limits)


def _full_rows(ws: Any, ws_values: Any) -> Iterator[list[str] | None]:
    for row in ws.iter_rows():
        rendered = []
        for cell in row:
            extra = ""
            if cell.hyperlink is not None and (cell.hyperlink.target or cell.hyperlink.location):
                extra += f" (link: {cell.hyperlink.target or cell.hyperlink.location})"
            if cell.comment is not None:
                extra += f" (comment: {format_value(cell.comment.text)})"
            value = ws_values.cell(row=cell.row, column=cell.column).value if cell.data_type == "f" else None
            line = cell_line(cell.coordinate, cell, value, extra)
            if line is not None:
                rendered.append(line)
        if rendered:
            yield rendered
