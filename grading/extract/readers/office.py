"""Word documents and PowerPoint decks: text in reading order, tables, links, charts, speaker notes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import zip_longest
from typing import Any

from grading.extract.limits import ExtractLimits
from grading.extract.readers.sheet_rendering import format_value
from grading.extract.sources import ReadResult, Sink, Source


def read_docx(name: str, src: Source, sink: Sink, limits: ExtractLimits) -> ReadResult:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    with src.open() as fh:
        document = docx.Document(fh)
    seen: set[str] = set()
    for section in document.sections:
        for label, part in (("Header", section.header), ("Footer", section.footer)):
            text = "\n".join(p.text for p in part.paragraphs if p.text.strip())
            if text and text not in seen:
                seen.add(text)
                sink.add(f"[{label}] {text}")
    for block in document.iter_inner_content():
        if sink.full:
            sink.overflow = True
            break
        if isinstance(block, Paragraph):
            line = _docx_paragraph(block)
            if line:
                sink.add(line)
        elif isinstance(block, Table):
            _docx_table(block, sink)
    pictures = len(document.inline_shapes)
    return ReadResult(note=f"{pictures} embedded picture(s) not shown" if pictures else "")


def _docx_paragraph(paragraph: Any) -> str:
    text = paragraph.text
    if not text.strip():
        return ""
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if style.startswith("Heading"):
        level = style.removeprefix("Heading").strip()
        text = "#" * (int(level) if level.isdigit() else 1) + " " + text
    elif style == "Title":
        text = "# " + text
    links = [h.address for h in paragraph.hyperlinks if h.address]
    return text + (f" (links: {', '.join(links)})" if links else "")


def _docx_table(table: Any, sink: Sink) -> None:
    sink.add("[Table]")
    for row in table.rows:
        cells = [cell.text.strip().replace("\n", " / ") for cell in row.cells]
        if not sink.add("| " + " | ".join(cells) + " |"):
            return
    sink.add("[End of table]")


def read_pptx(name: str, src: Source, sink: Sink, limits: ExtractLimits) -> ReadResult:
    import pptx

    with src.open() as fh:
        deck = pptx.Presentation(fh)
    pictures = 0
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = (
            title_shape.text_frame.text.strip()
            if title_shape is not None and title_shape.has_text_frame
            else ""
        )
        if not sink.add(f"## Slide {number}" + (f": {title}" if title else "")):
            break
        title_id = title_shape.shape_id if title_shape is not None else None
        for shape in _walk_shapes(slide.shapes):
            if title and shape.shape_id == title_id:  # already printed in the slide heading
                continue
            pictures += _pptx_shape(shape, sink)
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            notes = frame.text.strip() if frame is not None else ""
            if notes:
                sink.add(f"Speaker notes: {notes}")
    return ReadResult(note=f"{pictures} picture(s) not shown" if pictures else "")


def _walk_shapes(shapes: Iterable[Any]) -> Iterator[Any]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _walk_shapes(shape.shapes)
        else:
            yield shape


def _pptx_shape(shape: Any, sink: Sink) -> int:
    """Render one shape; return 1 for a picture so the caller can report how many were skipped."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if shape.has_text_frame:
        text = shape.text_frame.text.strip()
        links = [
            run.hyperlink.address
            for p in shape.text_frame.paragraphs
            for run in p.runs
            if run.hyperlink.address
        ]
        if text:
            sink.add(text + (f" (links: {', '.join(links)})" if links else ""))
    if shape.has_table:
        sink.add("[Table]")
        for row in shape.table.rows:
            sink.add("| " + " | ".join(c.text.strip().replace("\n", " / ") for c in row.cells) + " |")
        sink.add("[End of table]")
    if shape.has_chart:
        sink.add(_pptx_chart(shape.chart))
    return 1 if shape.shape_type == MSO_SHAPE_TYPE.PICTURE else 0


def _pptx_chart(chart: Any) -> str:
    title = chart.chart_title.text_frame.text if chart.has_title else ""
    series = []
    for plot in chart.plots:
        categories = [str(c) for c in plot.categories]
        for s in plot.series:
            values = list(s.values)
            pairs = ", ".join(f"{c}={format_value(v)}" for c, v in zip_longest(categories, values, fillvalue=""))
            series.append(f"{s.name}: {pairs}")
    return f"[Chart{': ' + title if title else ''}] " + "; ".join(series)
