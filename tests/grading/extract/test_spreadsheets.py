"""Excel workbooks, read fully or streamed: values beside formulas, every sheet, fair sharing."""

from __future__ import annotations

import io

import pytest

from grading.extract import ExtractLimits, extract_file, extract_files
from tests.grading.extract.builders import (
    make_xlsx,
    make_zip,
)


@pytest.mark.parametrize("full_load_bytes", [2**30, 0], ids=["loaded-fully", "streamed"])
def test_xlsx_shows_every_sheet_with_values_formulas_and_links(full_load_bytes: int) -> None:
    limits = ExtractLimits(xlsx_full_load_bytes=full_load_bytes)
    [part] = extract_file("budget.xlsx", make_xlsx(), limits=limits)
    assert part.kind == "xlsx" and part.inspectable, part.note
    assert "## Sheet: Budget" in part.text and "## Sheet: Assumptions" in part.text
    assert "B3 = 300 (formula: =SUM(B1:B2))" in part.text
    assert "A1 = Rent | B1 = 100" in part.text
    assert "B1 = 0.035" in part.text
    assert "https://example.org/budget-source" in part.text
    assert "## Sheet: Scratch (hidden)" in part.text


def make_excel_style_xlsx() -> bytes:
    """A workbook written the way Excel writes it: shared strings, shared formulas, date styles, comments."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    pkg = "http://schemas.openxmlformats.org/package/2006/relationships"
    ct = "application/vnd.openxmlformats-officedocument.spreadsheetml"
    parts = {
        "[Content_Types].xml": f"""<Types
xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/xl/workbook.xml" ContentType="{ct}.sheet.main+xml"/>
<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{ct}.worksheet+xml"/>
<Override PartName="/xl/styles.xml" ContentType="{ct}.styles+xml"/>
<Override PartName="/xl/sharedStrings.xml" ContentType="{ct}.sharedStrings+xml"/>
<Override PartName="/xl/comments1.xml" ContentType="{ct}.comments+xml"/></Types>""",
        "_rels/.rels": f"""<Relationships xmlns="{pkg}"><Relationship Id="rId1" Target="xl/workbook.xml"
Type="{rel}/officeDocument"/></Relationships>""",
        "xl/workbook.xml": f"""<workbook xmlns="{main}" xmlns:r="{rel}"><sheets>
<sheet name="Report" sheetId="1" r:id="rId1"/></sheets></workbook>""",
        "xl/_rels/workbook.xml.rels": f"""<Relationships xmlns="{pkg}">
<Relationship Id="rId1" Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/>
<Relationship Id="rId2" Type="{rel}/styles" Target="styles.xml"/>
<Relationship Id="rId3" Type="{rel}/sharedStrings" Target="sharedStrings.xml"/></Relationships>""",
        "xl/styles.xml": f"""<styleSheet xmlns="{main}"><fonts count="1"><font/></fonts>
<fills count="1"><fill><patternFill patternType="none"/></fill></fills>
<borders count="1"><border/></borders><cellStyleXfs count="1"><xf numFmtId="0"/></cellStyleXfs>
<cellXfs count="2"><xf numFmtId="0" xfId="0"/><xf numFmtId="14" xfId="0" applyNumberFormat="1"/></cellXfs>
</styleSheet>""",
        "xl/sharedStrings.xml": f"""<sst xmlns="{main}" count="2" uniqueCount="2">
<si><t>Quarter start</t></si>
<si><r><t>Units </t></r><r><t>sold</t></r></si></sst>""",
        "xl/worksheets/sheet1.xml": f"""<worksheet xmlns="{main}" xmlns:r="{rel}"><sheetData>
<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c>
<c r="C1" t="inlineStr"><is><t>Double</t></is></c></row>
<row r="2"><c r="A2" s="1"><v>45292</v></c><c r="B2"><v>10</v></c>
<c r="C2"><f t="shared" si="0" ref="C2:C3">B2*2</f><v>20</v></c><c r="D2" t="b"><v>1</v></c>
<c r="E2" t="e"><v>#DIV/0!</v></c></row>
<row r="3"><c r="A3" s="1"><v>45383</v></c><c r="B3"><v>12.5</v></c>
<c r="C3"><f t="shared" si="0"/><v>25</v></c></row>
</sheetData><hyperlinks><hyperlink ref="A1" r:id="rId1"/></hyperlinks></worksheet>""",
        "xl/worksheets/_rels/sheet1.xml.rels": f"""<Relationships xmlns="{pkg}">
<Relationship Id="rId1" Type="{rel}/hyperlink" Target="https://example.org/quarters" TargetMode="External"/>
<Relationship Id="rId2" Type="{rel}/comments" Target="../comments1.xml"/></Relationships>""",
        "xl/comments1.xml": f"""<comments xmlns="{main}"><authors><author>Ana</author></authors><commentList>
<comment ref="B3" authorId="0"><text><r><t>Estimate, confirm with finance</t></r></text></comment>
</commentList>
</comments>""",
    }
    return make_zip({name: body.encode() for name, body in parts.items()})


@pytest.mark.parametrize("full_load_bytes", [2**30, 0], ids=["loaded-fully", "streamed"])
def test_excel_written_workbook_resolves_strings_shared_formulas_dates_and_comments(
    full_load_bytes: int,
) -> None:
    limits = ExtractLimits(xlsx_full_load_bytes=full_load_bytes)
    [part] = extract_file("report.xlsx", make_excel_style_xlsx(), limits=limits)
    assert part.inspectable, part.note
    assert "A1 = Quarter start" in part.text and "B1 = Units sold" in part.text and "C1 = Double" in part.text
    assert "A2 = 2024-01-01T00:00:00" in part.text and "A3 = 2024-04-01T00:00:00" in part.text
    assert "C2 = 20 (formula: =B2*2)" in part.text
    assert "C3 = 25 (formula: =B3*2)" in part.text  # the shared formula is translated to its own row
    assert "B3 = 12.5" in part.text and "D2 = TRUE" in part.text and "E2 = #DIV/0!" in part.text
    assert "https://example.org/quarters" in part.text
    assert "Estimate, confirm with finance" in part.text
    assert "not calculated" not in part.note


def test_xlsx_formula_without_cached_value_says_so() -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active["A1"], wb.active["A2"] = 5, "=A1*2"
    buf = io.BytesIO()
    wb.save(buf)
    [part] = extract_file("calc.xlsx", buf.getvalue())
    assert "A2 = [not calculated] (formula: =A1*2)" in part.text
    assert "without calculated results" in part.note


def test_xlsx_stops_at_the_cell_limit_with_a_marker() -> None:
    [part] = extract_file("budget.xlsx", make_xlsx(), limits=ExtractLimits(max_xlsx_cells=3))
    assert (
        "[[TRUNCATED: rest of sheet 'Budget' omitted: the workbook's 3-cell reading limit was reached]]"
        in part.text
    )
    assert part.truncated
    assert "Salaries" not in part.text
    assert sum(line.count(" = ") for line in part.text.splitlines() if not line.startswith("[[")) <= 3


def make_long_then_summary_xlsx(rows: int = 5_000) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    data = wb.active
    data.title = "Data"
    for i in range(1, rows + 1):
        data.append([f"order-{i}", i * 3])
    summary = wb.create_sheet("Summary")
    summary["A1"], summary["B1"] = "Grand total", 42
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


@pytest.mark.parametrize("full_load_bytes", [2**30, 0], ids=["loaded-fully", "streamed"])
def test_a_huge_sheet_does_not_crowd_out_later_sheets(full_load_bytes: int) -> None:
    limits = ExtractLimits(max_chars=4_000, xlsx_full_load_bytes=full_load_bytes)
    extraction = extract_files(
        [("orders.xlsx", make_long_then_summary_xlsx()), ("log.txt", b"x" * 50_000)], limits=limits
    )
    book = extraction.parts[0]
    assert extraction.total_chars <= 4_000
    assert "A1 = order-1 | B1 = 3" in book.text
    assert "## Sheet: Summary" in book.text and "A1 = Grand total | B1 = 42" in book.text
    assert "[[TRUNCATED:" in book.text.split("## Sheet: Summary")[0]
