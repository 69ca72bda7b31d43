"""The entry points: read each file with the reader its sniffed kind calls for, then share the budget."""

from __future__ import annotations

import mimetypes
import zipfile
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path

from grading.extract.archives import ZipBudget, extract_zip, office_container_problem
from grading.extract.budget import apply_budget
from grading.extract.limits import ExtractLimits
from grading.extract.readers.images import extract_image
from grading.extract.readers.office import read_docx, read_pptx
from grading.extract.readers.pdf import read_pdf
from grading.extract.readers.spreadsheet import read_xlsx
from grading.extract.readers.text import read_csv, read_text
from grading.extract.results import ExtractedPart, Extraction
from grading.extract.sniffing import EXT_KINDS, OFFICE_KINDS, VIDEO_EXTS, sniff_kind
from grading.extract.sources import (
    Context,
    FileData,
    ReadResult,
    Sink,
    Source,
    describe,
    finish,
    join_notes,
    refused,
    to_source,
)
from studies.sniffing import media_family, sniff_format

DEFAULT_LIMITS = ExtractLimits()  # frozen, so one shared default is safe


def extract_files(
    files: Iterable[tuple[str, FileData]], *, limits: ExtractLimits = DEFAULT_LIMITS
) -> Extraction:
    """Extract every file, then share the character budget fairly and mark each cut."""
    with ExitStack() as stack:
        ctx = Context(limits=limits, images_left=limits.max_images, stack=stack, trim=True)
        parts = [part for name, data in files for part in extract_top(name, data, ctx)]
    budget_cut = apply_budget(parts, limits.max_chars)
    return Extraction(
        parts=parts,
        truncated=budget_cut or any(p.truncated for p in parts),
        total_chars=sum(len(p.text) for p in parts),
    )


def extract_file(
    name: str, data: FileData, *, limits: ExtractLimits = DEFAULT_LIMITS
) -> list[ExtractedPart]:
    """Extract one file (an archive yields several parts) without applying the shared budget."""
    with ExitStack() as stack:
        return extract_top(name, data, Context(limits=limits, images_left=limits.max_images, stack=stack))


def extract_top(name: str, data: FileData, ctx: Context) -> list[ExtractedPart]:
    name = name or "unnamed"
    try:
        src = to_source(name, data, ctx)
    except Exception as exc:  # an unreadable path or stream must not stop the other files
        return [refused(name, 0, f"could not be read: {describe(exc)}")]
    if isinstance(src, ExtractedPart):
        return [src]
    return extract_source(name, src, ctx, depth=0, budget=None)


def extract_source(
    name: str, src: Source, ctx: Context, *, depth: int, budget: ZipBudget | None
) -> list[ExtractedPart]:
    """Dispatch on the sniffed kind; turn any reader failure into a 'could not be read' part."""
    kind = EXT_KINDS.get(Path(name).suffix.lower(), "binary")
    try:
        head = src.head()
        zip_names = None
        if sniff_format(head) in ("zip", "empty-zip"):
            try:
                with src.open() as fh, zipfile.ZipFile(fh) as zf:
                    zip_names = zf.namelist()
            except (zipfile.BadZipFile, OSError, ValueError, EOFError):
                zip_names = None
        kind, note = sniff_kind(name, head, zip_names=zip_names)
        if kind in OFFICE_KINDS:
            problem = office_container_problem(src, ctx.limits)
            if problem:
                return [refused(name, src.size, problem, kind)]
        if kind == "zip":
            return extract_zip(name, src, ctx, depth=depth + 1, budget=budget, note=note, extract=extract_source)
        if kind == "image":
            return [extract_image(name, src, ctx, note)]
        reader = _READERS.get(kind)
        if reader is None:
            return [_unsupported(name, kind, src, head, note)]
        sink = Sink(ctx.limits.max_chars)
        extra = reader(name, src, sink, ctx.limits)
        return [ctx.keep(finish(name, kind, src, sink, join_notes(note, extra.note), extra))]
    except Exception as exc:  # parsers raise anything on malformed input; the judge must still run
        return [refused(name, src.size, f"could not be read: {describe(exc)}", kind)]


def _unsupported(name: str, kind: str, src: Source, head: bytes, note: str) -> ExtractedPart:
    if kind == "media":
        suffix = Path(name).suffix.lower()
        family = media_family(head) or ("video" if suffix in VIDEO_EXTS else "audio")
        mime = mimetypes.guess_type(name)[0] or f"{family}/unknown"
        reason = f"not inspectable: {family} ({mime}) cannot be read by the judges"
        return refused(name, src.size, join_notes(note, reason), "media")
    reason = "not inspectable" if note else "not inspectable: unrecognised binary content"
    return refused(name, src.size, join_notes(note, reason), "binary")


_READERS: dict[str, Callable[[str, Source, Sink, ExtractLimits], ReadResult]] = {
    "docx": read_docx,
    "xlsx": read_xlsx,
    "pptx": read_pptx,
    "pdf": read_pdf,
    "csv": read_csv,
    "text": read_text,
}
