"""Large Excel workbooks read straight from the package XML in one streaming pass."""

from __future__ import annotations

import functools
import posixpath
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from grading.extract.limits import ExtractLimits
from grading.extract.readers.sheet_rendering import Sheet, cell_line, format_value, render_sheets
from grading.extract.sources import ReadResult, Sink, Source

_MAIN_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL_NS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_META_MAX_BYTES = 32 * 2**20


def _xml(zf: zipfile.ZipFile, path: str) -> ET.Element | None:
    try:
        info = zf.getinfo(path)
    except KeyError:
        return None
    if info.file_size > _META_MAX_BYTES:
        return None
    # CPython's expat (>= 2.4.1) refuses entity-expansion bombs, and the input is size-capped above.
    return ET.fromstring(zf.read(info))  # noqa: S314


def _part_path(base_dir: str, target: str) -> str:
    return (
        target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(base_dir, target))
    )


def _rels(zf: zipfile.ZipFile, part: str) -> list[ET.Element]:
    root = _xml(zf, posixpath.join(posixpath.dirname(part), "_rels", posixpath.basename(part) + ".rels"))
    return [] if root is None else [r for r in root if r.tag == f"{_PKG_REL_NS}Relationship"]


@dataclass
class _BookSheet:
    name: str
    state: str
    path: str
    link_targets: dict[str, str]  # relationship id -> URL
    comments_path: str | None


def _xlsx_package(zf: zipfile.ZipFile) -> tuple[list[_BookSheet], list[str], bool]:
    """Return (worksheets in tab order, chart sheet names, 1904 date system) from the package XML."""
    book = _xml(zf, "xl/workbook.xml")
    if book is None:
        raise ValueError("workbook part xl/workbook.xml is missing")
    targets = {r.get("Id"): (r.get("Type", ""), r.get("Target", "")) for r in _rels(zf, "xl/workbook.xml")}
    properties = book.find(f"{_MAIN_NS}workbookPr")
    date1904 = properties is not None and properties.get("date1904", "0").lower() in ("1", "true")
    sheets: list[_BookSheet] = []
    charts: list[str] = []
    for sheet in book.iter(f"{_MAIN_NS}sheet"):
        kind, target = targets.get(sheet.get(f"{{{_REL_NS}}}id"), ("", ""))
        if kind.endswith("/chartsheet"):
            charts.append(sheet.get("name", ""))
            continue
        path = _part_path("xl", target)
        rels = _rels(zf, path)
        links = {
            r.get("Id", ""): r.get("Target", "") for r in rels if r.get("Type", "").endswith("/hyperlink")
        }
        comments = next(
            (
                _part_path(posixpath.dirname(path), r.get("Target", ""))
                for r in rels
                if r.get("Type", "").endswith("/comments")
            ),
            None,
        )
        sheets.append(_BookSheet(sheet.get("name", ""), sheet.get("state", "visible"), path, links, comments))
    return sheets, charts, date1904


def _xlsx_date_styles(zf: zipfile.ZipFile) -> tuple[set[int], set[int]]:
    """Return the cell style indexes formatted as dates and as durations, so serial numbers read as dates."""
    from openpyxl.styles.numbers import BUILTIN_FORMATS, is_date_format, is_timedelta_format

    styles = _xml(zf, "xl/styles.xml")
    if styles is None:
        return set(), set()
    custom = {int(f.get("numFmtId", -1)): f.get("formatCode", "") for f in styles.iter(f"{_MAIN_NS}numFmt")}
    dates: set[int] = set()
    durations: set[int] = set()
    cell_xfs = styles.find(f"{_MAIN_NS}cellXfs")
    for index, xf in enumerate(cell_xfs if cell_xfs is not None else []):
        number_format_id = int(xf.get("numFmtId", 0))
        code = custom.get(number_format_id) or BUILTIN_FORMATS.get(number_format_id, "General")
        if is_timedelta_format(code):
            durations.add(index)
        elif is_date_format(code):
            dates.add(index)
    return dates, durations


@dataclass
class _RawCell:
    """The two attributes `cell_line` reads, for cells parsed straight from the sheet XML."""

    value: Any
    data_type: str


class _SheetStream:
    """Parse one worksheet's XML once, yielding formulas and cached values together.

    openpyxl's read-only mode needs two passes for that (formulas, then values) and first scans a whole
    sheet for a <dimension> tag when a writer omitted it, as openpyxl's own write-only mode does.
    """

    def __init__(
        self,
        zf: zipfile.ZipFile,
        path: str,
        strings: Sequence[str],
        date_styles: tuple[set[int], set[int]],
        date1904: bool,
    ) -> None:
        from openpyxl.utils.datetime import CALENDAR_MAC_1904, CALENDAR_WINDOWS_1900

        self.zf, self.path, self.strings = zf, path, strings
        self.dates, self.durations = date_styles
        self.epoch = CALENDAR_MAC_1904 if date1904 else CALENDAR_WINDOWS_1900
        self.shared: dict[str, Any] = {}
        self.finished = False  # every row was read, so the hyperlink table after them was seen too
        self.hyperlinks: list[tuple[str, str | None, str | None]] = []  # (ref, relationship id, location)

    def rows(self) -> Iterator[list[str] | None]:
        from openpyxl.utils.cell import column_index_from_string, coordinate_from_string, get_column_letter

        row_tag, cell_tag, data_tag = f"{_MAIN_NS}row", f"{_MAIN_NS}c", f"{_MAIN_NS}sheetData"
        link_tag = f"{_MAIN_NS}hyperlink"
        row_number = 0
        with self.zf.open(self.path) as fh:
            sheet_data: ET.Element | None = None
            for event, element in ET.iterparse(fh, events=("start", "end")):  # noqa: S314 - see _xml
                if event == "start":
                    if element.tag == data_tag:
                        sheet_data = element
                    continue
                if element.tag == row_tag:
                    row_number = int(float(element.get("r") or row_number + 1))
                    rendered, column = [], 0
                    for cell in element.iter(cell_tag):
                        coordinate = cell.get("r")
                        if coordinate is None:  # optional in the format: the next column of this row
                            column += 1
                            coordinate = f"{get_column_letter(column)}{row_number}"
                        else:
                            column = column_index_from_string(coordinate_from_string(coordinate)[0])
                        line = self._render(cell, coordinate)
                        if line is not None:
                            rendered.append(line)
                    if sheet_data is not None:
                        sheet_data.clear()  # processed rows must not pile up under the tree's root
                    if rendered:
                        yield rendered
                elif element.tag == link_tag:
                    self.hyperlinks.append(
                        (element.get("ref", ""), element.get(f"{{{_REL_NS}}}id"), element.get("location"))
                    )
            self.finished = True

    def _render(self, cell: ET.Element, coordinate: str) -> str | None:
        formula = cell.find(f"{_MAIN_NS}f")
        value = self._value(cell)
        if formula is None:
            return cell_line(coordinate, _RawCell(value, "n"), None)
        return cell_line(coordinate, _RawCell(self._formula(formula, coordinate), "f"), value)

    def _formula(self, formula: ET.Element, coordinate: str) -> str:
        from openpyxl.formula.translate import Translator

        text = "=" + (formula.text or "")
        kind = formula.get("t")
        if kind == "shared":
            index = formula.get("si", "")
            if formula.text:
                self.shared[index] = Translator(text, coordinate)
            elif index in self.shared:
                return self.shared[index].translate_formula(coordinate)
        elif kind == "dataTable":
            return "{data table}"
        return text

    def _value(self, cell: ET.Element) -> Any:
        from openpyxl.utils.datetime import from_excel

        kind = cell.get("t", "n")
        if kind == "inlineStr":
            inline = cell.find(f"{_MAIN_NS}is")
            return None if inline is None else "".join(t.text or "" for t in inline.iter(f"{_MAIN_NS}t"))
        raw = cell.findtext(f"{_MAIN_NS}v")
        if raw is None or raw == "":
            return None
        if kind == "s":
            index = int(raw)
            return self.strings[index] if 0 <= index < len(self.strings) else None
        if kind == "b":
            return raw.strip() in ("1", "true")
        if kind in ("str", "e", "d"):
            return raw
        number = float(raw)
        style = int(cell.get("s", 0))
        if style in self.dates or style in self.durations:
            try:
                return from_excel(number, self.epoch, timedelta=style in self.durations)
            except (OverflowError, ValueError):
                return number
        return int(number) if number.is_integer() and "." not in raw and "E" not in raw.upper() else number


def read_xlsx_stream(src: Source, sink: Sink, limits: ExtractLimits) -> ReadResult:
    """Read a large workbook sheet by sheet in one streaming pass, stopping as soon as the caps are hit."""
    from openpyxl.reader.strings import read_string_table

    with src.open() as fh, zipfile.ZipFile(fh) as zf:
        sheets, charts, date1904 = _xlsx_package(zf)
        strings: list[str] = []
        if "xl/sharedStrings.xml" in zf.namelist():
            with zf.open("xl/sharedStrings.xml") as table:
                strings = read_string_table(table)
        date_styles = _xlsx_date_styles(zf)
        rendered = []
        for sheet in sheets:
            try:
                estimate = zf.getinfo(sheet.path).file_size  # rendered text is shorter than the XML
            except KeyError:
                estimate = 0
            stream = _SheetStream(zf, sheet.path, strings, date_styles, date1904)
            trailer = functools.partial(_sheet_trailer, zf, sheet, stream)
            rendered.append(Sheet(sheet.name, sheet.state, stream.rows(), trailer, estimate))
        return render_sheets(rendered, sink, limits, charts)


def _sheet_trailer(zf: zipfile.ZipFile, sheet: _BookSheet, stream: _SheetStream) -> str:
    """Hyperlinks (per cell when the whole sheet was read, else the sheet's targets) and cell comments."""
    lines = []
    if stream.finished and stream.hyperlinks:
        links = [
            f"{ref} -> {sheet.link_targets.get(rid or '') or location or '?'}"
            for ref, rid, location in stream.hyperlinks
        ]
        lines.append("Hyperlinks: " + "; ".join(links))
    elif sheet.link_targets:
        lines.append("Hyperlinks on this sheet: " + ", ".join(sheet.link_targets.values()))
    comments = _xml(zf, sheet.comments_path) if sheet.comments_path else None
    if comments is not None:
        notes = [
            f"{c.get('ref', '?')}: {format_value(''.join(t.text or '' for t in c.iter(f'{_MAIN_NS}t')))}"
            for c in comments.iter(f"{_MAIN_NS}comment")
        ]
        if notes:
            lines.append("Comments: " + "; ".join(notes))
    return "\n".join(lines)
