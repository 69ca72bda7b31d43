"""PDF text page by page, with link targets; encrypted and image-only PDFs are reported, not guessed."""

from __future__ import annotations

from typing import Any

from grading.extract.limits import ExtractLimits
from grading.extract.sources import ReadResult, Sink, Source, describe, join_notes


def read_pdf(name: str, src: Source, sink: Sink, limits: ExtractLimits) -> ReadResult:
    import pypdf

    with src.open() as fh:
        reader = pypdf.PdfReader(fh)
        note = ""
        if reader.is_encrypted:
            try:
                opened = bool(reader.decrypt(""))
            except Exception:  # unsupported cipher: as unreadable as a real password
                opened = False
            if not opened:
                return ReadResult(note="refused: encrypted PDF (password protected)", inspectable=False)
            note = "encrypted with an empty password; read anyway"
        any_text = False
        for number, page in enumerate(reader.pages, start=1):
            try:
                text = (page.extract_text() or "").strip()
            except Exception as exc:  # one broken page should not hide the rest
                text = f"[page could not be read: {describe(exc)}]"
            any_text = any_text or bool(text)
            links = _pdf_links(page)
            body = text + (f"\nLinks on this page: {', '.join(links)}" if links else "")
            if not sink.add(f"## Page {number}\n{body}"):
                break
    if not any_text:
        return ReadResult(
            note=join_notes(note, "not inspectable: no extractable text (scanned pages?)"), inspectable=False
        )
    return ReadResult(note=note)


def _pdf_links(page: Any) -> list[str]:
    links: list[str] = []
    try:
        for annot in page.get("/Annots") or []:
            action = annot.get_object().get("/A") or {}
            uri = action.get("/URI") if hasattr(action, "get") else None
            if uri:
                links.append(str(uri))
    except Exception:  # annotations are a bonus; malformed ones are ignored
        return links
    return links
