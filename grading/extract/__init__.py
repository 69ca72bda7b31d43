"""Turn uploaded deliverables into the text and images an LLM judge reads.

Judges see nothing but what this module produces, so it aims for completeness (formulas beside cached
values, link targets, speaker notes, tables) while treating every upload as hostile: a limit breach or a
parse failure becomes a part with a reason, never an exception, and every cut is marked in the text.
No Django imports: the grading pipeline, expert views and benches all call it directly.
"""

from __future__ import annotations

import base64
import codecs
import csv
import datetime as dt
import functools
import hashlib
import io
import mimetypes
import posixpath
import re
import stat
import tempfile
import warnings
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from html.parser import HTMLParser
from itertools import zip_longest
from os import PathLike
from pathlib import Path
from typing import IO, Any, BinaryIO

__all__ = [
    "TRUNCATION_NOTICE",
    "ExtractLimits",
    "ExtractedImage",
    "ExtractedPart",
    "Extraction",
    "extract_file",
    "extract_files",
    "sniff_kind",
]

TRUNCATION_NOTICE = (
    "Some deliverable files were too long to show in full. Wherever text was cut you will see a marker "
    "such as [[TRUNCATED: 1200 characters omitted from report.docx]]. The omitted content exists in the "
    "submission but is hidden from you: do not treat it as missing and do not guess what it says. Score "
    "what you can see, and say in your notes when a criterion could not be checked because of a cut."
)

KIND_LABELS = {
    "docx": "Word document",
    "xlsx": "Excel workbook",
    "pptx": "PowerPoint deck",
    "pdf": "PDF",
    "csv": "delimited table",
    "text": "text",
    "image": "image",
    "zip": "ZIP archive",
    "media": "audio/video",
    "binary": "binary file",
}


def _suffixes(words: str) -> frozenset[str]:
    return frozenset(words.split())


_TEXT_EXTS = _suffixes(
    ".txt .md .markdown .rst .json .jsonl .ipynb .html .htm .xml .yaml .yml .toml .ini .cfg .log .tex .bib "
    ".rtf .svg .css .js .ts .py .r .sql .sh .java .c .h .cpp .go .rs .rb .php .m .jl .scala .kt .swift .vba "
    ".bas .srt .vtt"
)
_AUDIO_EXTS = _suffixes(".mp3 .wav .m4a .aac .flac .ogg .oga .opus .wma .aif .aiff .amr")
_VIDEO_EXTS = _suffixes(".mp4 .m4v .mov .webm .mkv .avi .wmv .mpeg .mpg .3gp .flv")
_EXT_KINDS = {
    **dict.fromkeys((".docx", ".docm", ".dotx"), "docx"),
    **dict.fromkeys((".xlsx", ".xlsm", ".xltx"), "xlsx"),
    **dict.fromkeys((".pptx", ".pptm", ".potx"), "pptx"),
    ".pdf": "pdf",
    ".csv": "csv",
    ".tsv": "csv",
    ".zip": "zip",
    **dict.fromkeys(_suffixes(".png .jpg .jpeg .gif .webp .bmp .tif .tiff .heic"), "image"),
    **dict.fromkeys(_TEXT_EXTS, "text"),
    **dict.fromkeys(_AUDIO_EXTS | _VIDEO_EXTS, "media"),
}

_OFFICE_KINDS = ("docx", "xlsx", "pptx")
_RATIO_FLOOR = 2**20  # small members may compress far beyond any ratio (a sheet of zeros) and are harmless
_SPILL_BYTES = 16 * 2**20  # file-like uploads above this are spooled to disk instead of held in memory
_TEXT_CHUNK = 2**20


@dataclass(frozen=True)
class ExtractLimits:
    """Bounds that keep one hostile or huge upload from exhausting a worker or the judge's context."""

    max_chars: int = 400_000  # judge budget in characters (~4 characters per token)
    max_file_bytes: int = 200 * 2**20
    max_zip_members: int = 500
    max_zip_total_bytes: int = 500 * 2**20  # uncompressed, per top-level archive
    max_zip_ratio: float = 100.0  # uncompressed:compressed, per member above 1 MiB
    max_zip_depth: int = 3
    max_images: int = 8
    max_image_bytes: int = 5 * 2**20
    max_xlsx_cells: int = 200_000
    # Workbooks up to this size go through openpyxl's full loader; larger ones use the one-pass stream.
    xlsx_full_load_bytes: int = 512 * 2**10


@dataclass
class ExtractedImage:
    name: str
    media_type: str
    data: bytes


@dataclass
class ExtractedPart:
    """One file or archive member as the judge will see it."""

    name: str
    kind: str
    text: str
    inspectable: bool
    size: int
    note: str = ""
    images: list[ExtractedImage] = field(default_factory=list)
    truncated: bool = False  # the text is incomplete (a marker in the text says where and why)
    # Blocks of `text` (one per sheet) that a budget cut shares fairly instead of dropping the last ones.
    _sections: list[str] = field(default_factory=list, repr=False, compare=False)
    # (characters before any budget cut, whether those were complete, characters kept) after a cut.
    _cut_state: tuple[int, bool, int] | None = field(default=None, repr=False, compare=False)


@dataclass
class Extraction:
    parts: list[ExtractedPart]
    truncated: bool
    total_chars: int

    def images(self) -> list[ExtractedImage]:
        """Return every image attached for vision-capable judges, in file order."""
        return [image for part in self.parts for image in part.images]

    def as_prompt_text(self, *, images_attached: bool = True) -> str:
        """Render one document: a file summary, what could not be inspected and why, then each file.

        The judge prompt should also carry TRUNCATION_NOTICE when `truncated` is set. Pass
        `images_attached=False` for text-only judges so images are listed as not shown.
        """
        shown: list[ExtractedPart] = []
        hidden: list[tuple[ExtractedPart, str]] = []
        for part in self.parts:
            if part.kind == "image" and part.inspectable and not (images_attached and part.images):
                hidden.append((part, "image not shown to this judge"))
            elif part.inspectable:
                shown.append(part)
            else:
                hidden.append((part, part.note or "not inspectable"))
        lines = [f"Submitted files: {len(self.parts)} ({len(shown)} shown below)."]
        if hidden:
            listed = "; ".join(
                f"{_display(p.name)} ({KIND_LABELS.get(p.kind, p.kind)}, {_human(p.size)}): {reason}"
                for p, reason in hidden
            )
            lines.append(f"Files that could not be inspected: {listed}")
        if self.truncated:
            lines.append("Some content below was cut to fit the reading budget; look for [[TRUNCATED: ...]].")
        for part in shown:
            header = f"{KIND_LABELS.get(part.kind, part.kind)}, {_human(part.size)}"
            if part.note:
                header += f"; {part.note}"
            lines += [
                "",
                f"===== FILE: {_display(part.name)} ({header}) =====",
                part.text if part.text.strip() else "(no text content)",
                f"===== END OF FILE: {_display(part.name)} =====",
            ]
        return "\n".join(lines)

    def to_json(self, *, include_images: bool = False) -> dict[str, Any]:
        """Return a JSON-safe summary for caching; image bytes only on request (they can be 40 MB)."""

        def image(img: ExtractedImage) -> dict[str, Any]:
            out: dict[str, Any] = {
                "name": img.name,
                "media_type": img.media_type,
                "size": len(img.data),
                "sha256": hashlib.sha256(img.data).hexdigest(),
            }
            if include_images:
                out["data"] = base64.b64encode(img.data).decode("ascii")
            return out

        return {
            "version": 1,
            "truncated": self.truncated,
            "total_chars": self.total_chars,
            "parts": [
                {
                    "name": p.name,
                    "kind": p.kind,
                    "text": p.text,
                    "inspectable": p.inspectable,
                    "size": p.size,
                    "note": p.note,
                    "truncated": p.truncated,
                    "images": [image(i) for i in p.images],
                }
                for p in self.parts
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Extraction:
        """Rebuild from `to_json`; images stored without bytes are dropped (re-extract to attach them)."""
        parts = [
            ExtractedPart(
                name=p["name"],
                kind=p["kind"],
                text=p["text"],
                inspectable=p["inspectable"],
                size=p["size"],
                note=p.get("note", ""),
                truncated=p.get("truncated", False),
                images=[
                    ExtractedImage(i["name"], i["media_type"], base64.b64decode(i["data"]))
                    for i in p.get("images", [])
                    if "data" in i
                ],
            )
            for p in data["parts"]
        ]
        return cls(parts=parts, truncated=data["truncated"], total_chars=data["total_chars"])


FileData = BinaryIO | IO[bytes] | bytes | bytearray | memoryview | Path | PathLike[str]


def extract_files(
    files: Iterable[tuple[str, FileData]], *, limits: ExtractLimits = ExtractLimits()
) -> Extraction:
    """Extract every file, then share the character budget fairly and mark each cut."""
    with ExitStack() as stack:
        ctx = _Context(limits=limits, images_left=limits.max_images, stack=stack, trim=True)
        parts = [part for name, data in files for part in _extract_top(name, data, ctx)]
    budget_cut = _apply_budget(parts, limits.max_chars)
    return Extraction(
        parts=parts,
        truncated=budget_cut or any(p.truncated for p in parts),
        total_chars=sum(len(p.text) for p in parts),
    )


def extract_file(
    name: str, data: FileData, *, limits: ExtractLimits = ExtractLimits()
) -> list[ExtractedPart]:
    """Extract one file (an archive yields several parts) without applying the shared budget."""
    with ExitStack() as stack:
        return _extract_top(name, data, _Context(limits=limits, images_left=limits.max_images, stack=stack))


# --------------------------------------------------------------------------------------------- detection


def sniff_kind(name: str, head: bytes, *, zip_names: Sequence[str] | None = None) -> tuple[str, str]:
    """Return (kind, note) from the content's magic bytes and the extension; the note names a mismatch.

    `zip_names` is the archive's member list when `head` starts with a ZIP signature; it tells a .docx,
    .xlsx or .pptx from a plain archive.
    """
    suffix = Path(name).suffix.lower()
    ext_kind = _EXT_KINDS.get(suffix)
    strong, detail = _strong_kind(head, zip_names)
    if strong == "binary":  # recognised but unsupported container (legacy Office, OpenDocument)
        return "binary", detail
    if strong:
        compatible = ext_kind in (None, strong) or (ext_kind == "zip" and strong in _OFFICE_KINDS)
        note = "" if compatible else f"named {suffix or 'without extension'} but the content is {detail}"
        return strong, note
    textual = _looks_textual(head)
    if ext_kind in ("text", "csv"):
        if textual:
            return ext_kind, ""
        return "binary", f"named {suffix} but the content is binary"
    if ext_kind:
        return ext_kind, ""  # office/pdf/zip/image/media that does not parse: the reader will say why
    return ("text" if textual else "binary"), ""


def _strong_kind(head: bytes, zip_names: Sequence[str] | None) -> tuple[str | None, str]:
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        if zip_names is None:  # unreadable archive: let the extension pick the reader that reports why
            return None, ""
        names = set(zip_names)
        if "mimetype" in names and any(n.startswith("META-INF/") for n in names):
            return "binary", "OpenDocument files are not supported (export to .docx, .xlsx, .pptx or .pdf)"
        if "[Content_Types].xml" in names:
            for prefix, kind in (("word/", "docx"), ("xl/", "xlsx"), ("ppt/", "pptx")):
                if any(n.startswith(prefix) for n in names):
                    return kind, f"a {KIND_LABELS[kind]}"
        return "zip", "a ZIP archive"
    if head.lstrip(b"\xef\xbb\xbf\r\n\t ").startswith(b"%PDF-"):
        return "pdf", "a PDF"
    image = _image_type(head)
    if image:
        return "image", f"an image ({image})"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "binary", "legacy Office binary format (.doc/.xls/.ppt) is not supported"
    media = _media_type(head)
    if media:
        return "media", f"{media} content"
    return None, ""


def _image_type(head: bytes) -> str | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _media_type(head: bytes) -> str | None:
    mpeg_sync = len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0
    if head.startswith(b"ID3") or (mpeg_sync and not head.startswith(codecs.BOM_UTF16_LE)):
        return "audio"
    if head[:4] == b"RIFF" and head[8:12] in (b"WAVE", b"AVI "):
        return "audio" if head[8:12] == b"WAVE" else "video"
    if head.startswith((b"OggS", b"fLaC", b"#!AMR")) or (
        head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC")
    ):
        return "audio"
    if head[4:8] == b"ftyp":
        return "audio" if head[8:11] == b"M4A" else "video"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "video"
    return None


def _looks_textual(head: bytes) -> bool:
    """Text in any common encoding: no NUL bytes and hardly any control characters."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return True
    if not head:
        return True
    if b"\x00" in head:
        return False
    controls = sum(1 for b in head if b < 9 or 13 < b < 32)
    return controls <= len(head) // 100


# ---------------------------------------------------------------------------------------------- plumbing


@dataclass
class _Context:
    limits: ExtractLimits
    images_left: int
    stack: ExitStack
    tmpdir: Path | None = None
    trim: bool = False  # apply the budget while extracting, so 500 large members never sit in memory at once
    texts: list[ExtractedPart] = field(default_factory=list)
    held: int = 0

    def keep(self, part: ExtractedPart) -> ExtractedPart:
        """Register a text part; when the texts held exceed three budgets, cut them to their shares now.

        A part's fair share only shrinks as more parts arrive, so an early cut never goes below the final one.
        """
        if self.trim and part.text:
            self.texts.append(part)
            self.held += len(part.text)
            if self.held > 3 * self.limits.max_chars:
                _apply_budget(self.texts, self.limits.max_chars)
                self.held = sum(len(p.text) for p in self.texts)
        return part

    def spill_dir(self) -> Path:
        if self.tmpdir is None:
            self.tmpdir = Path(self.stack.enter_context(tempfile.TemporaryDirectory(prefix="extract-")))
        return self.tmpdir


@dataclass
class _ZipBudget:
    """Shared by an archive and everything nested in it, so nesting cannot multiply the limits."""

    members_left: int
    bytes_left: int


class _Source:
    """Bytes in memory or a file on disk, so large uploads are read by streaming, not copied."""

    def __init__(self, *, data: bytes | None = None, path: Path | None = None) -> None:
        self.data, self.path = data, path
        self.size = len(data) if data is not None else path.stat().st_size  # type: ignore[union-attr]

    def open(self) -> IO[bytes]:
        if self.data is not None:
            return io.BytesIO(self.data)
        return open(self.path, "rb")  # type: ignore[arg-type]  # noqa: SIM115 - the caller closes it

    def head(self, n: int = 8192) -> bytes:
        if self.data is not None:
            return self.data[:n]
        with self.open() as fh:
            return fh.read(n)

    def read(self, limit: int | None = None) -> bytes:
        if self.data is not None:
            return self.data if limit is None else self.data[:limit]
        with self.open() as fh:
            return fh.read() if limit is None else fh.read(limit)


class _Sink:
    """Collect lines up to a character cap so a huge file never becomes one huge string."""

    def __init__(self, cap: int) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.cap = cap
        self.overflow = False

    def add(self, line: str) -> bool:
        """Append a line; return False once the cap is reached so the caller stops reading."""
        if self.size >= self.cap:
            self.overflow = True
            return False
        self.lines.append(line)
        self.size += len(line) + 1
        return True

    @property
    def full(self) -> bool:
        return self.size >= self.cap

    def text(self) -> str:
        return "\n".join(self.lines)


def _part(
    name: str,
    kind: str,
    src_size: int,
    sink: _Sink | str,
    *,
    note: str = "",
    inspectable: bool = True,
    truncated: bool = False,
) -> ExtractedPart:
    text = sink if isinstance(sink, str) else sink.text()
    overflow = not isinstance(sink, str) and sink.overflow
    return ExtractedPart(
        name=name,
        kind=kind,
        text=text,
        inspectable=inspectable,
        size=src_size,
        note=note,
        truncated=truncated or overflow,
    )


def _refused(name: str, size: int, reason: str, kind: str | None = None) -> ExtractedPart:
    kind = kind or _EXT_KINDS.get(Path(name).suffix.lower(), "binary")
    return ExtractedPart(name=name, kind=kind, text="", inspectable=False, size=size, note=reason)


def _join_notes(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:300]


def _human(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            if unit == "bytes":
                return "1 byte" if n == 1 else f"{n} bytes"
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


def _display(name: str) -> str:
    """Make a name safe to print in a prompt: no control characters, bounded length."""
    cleaned = "".join(c if c.isprintable() else "?" for c in name)
    return cleaned if len(cleaned) <= 300 else cleaned[:297] + "..."


def _to_source(name: str, data: FileData, ctx: _Context) -> _Source | ExtractedPart:
    limit = ctx.limits.max_file_bytes
    too_big = f"refused: larger than the {_human(limit)} limit per file"
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        return _refused(name, len(raw), too_big) if len(raw) > limit else _Source(data=raw)
    if isinstance(data, PathLike | Path):
        path = Path(data)
        size = path.stat().st_size
        return _refused(name, size, too_big) if size > limit else _Source(path=path)
    # A file-like object: read it once, spilling to disk beyond a few MB, never past the limit.
    buf = bytearray()
    spill: IO[bytes] | None = None
    spill_path: Path | None = None
    total = 0
    while chunk := data.read(_TEXT_CHUNK):
        total += len(chunk)
        if total > limit:
            if spill:
                spill.close()
            return _refused(name, total, too_big)
        if spill is None and total > _SPILL_BYTES:
            spill = tempfile.NamedTemporaryFile(dir=ctx.spill_dir(), delete=False)  # noqa: SIM115
            spill_path = Path(spill.name)
            spill.write(buf)
            buf = bytearray()
        if spill is not None:
            spill.write(chunk)
        else:
            buf += chunk
    if spill is not None:
        spill.close()
        return _Source(path=spill_path)
    return _Source(data=bytes(buf))


def _extract_top(name: str, data: FileData, ctx: _Context) -> list[ExtractedPart]:
    name = name or "unnamed"
    try:
        src = _to_source(name, data, ctx)
    except Exception as exc:  # an unreadable path or stream must not stop the other files
        return [_refused(name, 0, f"could not be read: {_describe(exc)}")]
    if isinstance(src, ExtractedPart):
        return [src]
    return _extract(name, src, ctx, depth=0, budget=None)


def _extract(
    name: str, src: _Source, ctx: _Context, *, depth: int, budget: _ZipBudget | None
) -> list[ExtractedPart]:
    """Dispatch on the sniffed kind; turn any reader failure into a 'could not be read' part."""
    kind = _EXT_KINDS.get(Path(name).suffix.lower(), "binary")
    try:
        head = src.head()
        zip_names = None
        if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
            try:
                with src.open() as fh, zipfile.ZipFile(fh) as zf:
                    zip_names = zf.namelist()
            except (zipfile.BadZipFile, OSError, ValueError, EOFError):
                zip_names = None
        kind, note = sniff_kind(name, head, zip_names=zip_names)
        if kind in _OFFICE_KINDS:
            problem = _office_container_problem(src, ctx.limits)
            if problem:
                return [_refused(name, src.size, problem, kind)]
        if kind == "zip":
            return _extract_zip(name, src, ctx, depth=depth + 1, budget=budget, note=note)
        if kind == "image":
            return [_extract_image(name, src, ctx, note)]
        reader = _READERS.get(kind)
        if reader is None:
            return [_unsupported(name, kind, src, head, note)]
        sink = _Sink(ctx.limits.max_chars)
        extra = reader(name, src, sink, ctx.limits)
        return [ctx.keep(_finish(name, kind, src, sink, _join_notes(note, extra.note), extra))]
    except Exception as exc:  # parsers raise anything on malformed input; the judge must still run
        return [_refused(name, src.size, f"could not be read: {_describe(exc)}", kind)]


@dataclass
class _ReadResult:
    note: str = ""
    inspectable: bool = True
    truncated: bool = False
    sections: list[str] | None = None  # independent blocks (sheets) that a budget cut should share fairly


def _finish(name: str, kind: str, src: _Source, sink: _Sink, note: str, res: _ReadResult) -> ExtractedPart:
    part = _part(name, kind, src.size, sink, note=note, inspectable=res.inspectable, truncated=res.truncated)
    part._sections = res.sections or []
    return part


def _unsupported(name: str, kind: str, src: _Source, head: bytes, note: str) -> ExtractedPart:
    if kind == "media":
        suffix = Path(name).suffix.lower()
        family = _media_type(head) or ("video" if suffix in _VIDEO_EXTS else "audio")
        mime = mimetypes.guess_type(name)[0] or f"{family}/unknown"
        reason = f"not inspectable: {family} ({mime}) cannot be read by the judges"
        return _refused(name, src.size, _join_notes(note, reason), "media")
    reason = "not inspectable" if note else "not inspectable: unrecognised binary content"
    return _refused(name, src.size, _join_notes(note, reason), "binary")


def _extract_image(name: str, src: _Source, ctx: _Context, note: str) -> ExtractedPart:
    limits = ctx.limits
    media_type = _image_type(src.head(16))
    if media_type is None:
        return _refused(
            name,
            src.size,
            _join_notes(
                note, "not inspectable: only PNG, JPEG, GIF and WEBP images can be shown to the judges"
            ),
            "image",
        )
    if src.size > limits.max_image_bytes:
        return _refused(
            name,
            src.size,
            _join_notes(note, f"not attached: larger than the {_human(limits.max_image_bytes)} image limit"),
            "image",
        )
    if ctx.images_left <= 0:
        return _refused(
            name,
            src.size,
            _join_notes(note, f"not attached: the limit of {limits.max_images} images was reached"),
            "image",
        )
    ctx.images_left -= 1
    text = f"[Image {_display(name)} ({media_type}, {_human(src.size)}) is attached for visual inspection.]"
    return ExtractedPart(
        name=name,
        kind="image",
        text=text,
        inspectable=True,
        size=src.size,
        note=note,
        images=[ExtractedImage(name=name, media_type=media_type, data=src.read())],
    )


# --------------------------------------------------------------------------------------------- budget


def _allocate(demands: Sequence[int], budget: int) -> list[int]:
    """Water-fill: every part may use an equal share; what small parts leave over goes to the large ones."""
    alloc = [0] * len(demands)
    left, remaining = budget, len(demands)
    for i in sorted(range(len(demands)), key=demands.__getitem__):
        alloc[i] = min(demands[i], left // remaining)
        left -= alloc[i]
        remaining -= 1
    return alloc


def _apply_budget(parts: list[ExtractedPart], budget: int) -> bool:
    """Cut texts to a fair share of the budget; return whether anything was cut."""
    demands = [len(p.text) for p in parts]
    if sum(demands) <= budget:
        return False
    cut = False
    for part, allowed in zip(parts, _allocate(demands, budget), strict=True):
        if len(part.text) <= allowed:
            continue
        complete = not part.truncated
        if len(part._sections) > 1:
            shares = _allocate([len(s) for s in part._sections], allowed - len(part._sections) + 1)
            part._sections = [
                _cut(section, share, part.name, complete=complete) if len(section) > share else section
                for section, share in zip(part._sections, shares, strict=True)
            ]
            part.text = "\n".join(part._sections)
        else:
            _cut_part(part, allowed)
        part.truncated = cut = True
    return cut


def _cut_part(part: ExtractedPart, allowed: int) -> None:
    """Cut a part to `allowed` characters; a second cut still counts what was omitted from the original."""
    if part._cut_state is None:
        part._cut_state = (len(part.text), not part.truncated, len(part.text))
    source_chars, complete, kept = part._cut_state
    content = part.text[:kept]
    keep = max(0, allowed - len(_marker(source_chars, part.name, complete=complete)) - 1)
    newline = content.rfind("\n", 0, keep)
    if newline > keep * 0.8:  # end on a whole line when that loses little
        keep = newline
    part.text = f"{content[:keep]}\n{_marker(source_chars - keep, part.name, complete=complete)}".lstrip("\n")
    part._cut_state = (source_chars, complete, keep)


def _marker(omitted: int, name: str, *, complete: bool) -> str:
    amount = f"{omitted}" if complete else f"at least {omitted}"
    return f"[[TRUNCATED: {amount} characters omitted from {_display(name)}]]"


def _cut(text: str, allowed: int, name: str, *, complete: bool) -> str:
    reserve = len(_marker(len(text), name, complete=complete)) + 1
    keep = max(0, allowed - reserve)
    newline = text.rfind("\n", 0, keep)
    if newline > keep * 0.8:  # end on a whole line when that loses little
        keep = newline
    return f"{text[:keep]}\n{_marker(len(text) - keep, name, complete=complete)}".lstrip("\n")


# -------------------------------------------------------------------------------------------- archives


_DRIVE = re.compile(r"^[A-Za-z]:")


def _member_name_problem(filename: str) -> str | None:
    if not filename.strip("/\\"):
        return "refused: empty member name"
    if any(not c.isprintable() for c in filename):
        return "refused: control characters in the member name"
    norm = filename.replace("\\", "/")  # Windows separators must not smuggle '..' or a root past the check
    if norm.startswith("/"):
        return "refused: absolute path in the archive"
    if _DRIVE.match(norm):
        return "refused: drive-letter path in the archive"
    if ".." in norm.split("/"):
        return "refused: path escapes the archive ('..' component)"
    return None


def _extract_zip(
    name: str, src: _Source, ctx: _Context, *, depth: int, budget: _ZipBudget | None, note: str
) -> list[ExtractedPart]:
    limits = ctx.limits
    if depth > limits.max_zip_depth:
        return [
            _refused(
                name, src.size, f"refused: archive nested more than {limits.max_zip_depth} levels deep", "zip"
            )
        ]
    if budget is None:
        budget = _ZipBudget(limits.max_zip_members, limits.max_zip_total_bytes)
    with src.open() as fh, zipfile.ZipFile(fh) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        listing = _Sink(limits.max_chars)
        listing.add(f"Archive with {len(infos)} file(s):")
        for info in infos:
            if not listing.add(f"- {_display(info.filename)} ({_human(info.file_size)})"):
                break
        parts = [ctx.keep(_part(name, "zip", src.size, listing, note=note))]
        for index, info in enumerate(infos):
            if budget.members_left <= 0:
                rest = len(infos) - index
                parts.append(
                    _refused(
                        f"{name}/...",
                        0,
                        f"refused: {rest} further member(s) beyond the limit of "
                        f"{limits.max_zip_members} archive members",
                        "zip",
                    )
                )
                break
            budget.members_left -= 1
            parts.extend(_extract_member(name, zf, info, ctx, depth, budget))
    return parts


def _extract_member(
    archive: str, zf: zipfile.ZipFile, info: zipfile.ZipInfo, ctx: _Context, depth: int, budget: _ZipBudget
) -> list[ExtractedPart]:
    limits = ctx.limits
    member = f"{archive}/{info.filename}"
    problem = _member_name_problem(info.filename)
    if problem:
        return [_refused(member, info.file_size, problem)]
    if stat.S_ISLNK(info.external_attr >> 16):
        return [_refused(member, info.file_size, "refused: symbolic link in the archive")]
    if info.flag_bits & 0x1:
        return [_refused(member, info.file_size, "refused: encrypted archive member")]
    ratio_cap = max(_RATIO_FLOOR, int(info.compress_size * limits.max_zip_ratio))
    declared = info.file_size
    if declared > ratio_cap:
        ratio = declared / max(info.compress_size, 1)
        return [
            _refused(
                member,
                declared,
                f"refused: compression ratio {ratio:.0f}:1 exceeds "
                f"{limits.max_zip_ratio:.0f}:1 (possible zip bomb)",
            )
        ]
    if declared > limits.max_file_bytes:
        return [
            _refused(
                member, declared, f"refused: larger than the {_human(limits.max_file_bytes)} limit per file"
            )
        ]
    if declared > budget.bytes_left:
        return [
            _refused(
                member,
                declared,
                f"refused: archive exceeds {_human(limits.max_zip_total_bytes)} uncompressed in total",
            )
        ]
    cap = min(ratio_cap, limits.max_file_bytes, budget.bytes_left)
    try:
        data = _read_bounded(zf, info, cap)
    except Exception as exc:  # CRC errors, truncated streams, unsupported compression
        return [_refused(member, declared, f"could not be read: {_describe(exc)}")]
    if data is None:  # the header understated the size: treat the liar as a bomb
        budget.bytes_left -= cap
        return [
            _refused(
                member,
                declared,
                "refused: uncompressed data exceeds its declared size or the "
                "archive limits (possible zip bomb)",
            )
        ]
    budget.bytes_left -= len(data)
    return _extract(member, _Source(data=data), ctx, depth=depth, budget=budget)


def _read_bounded(zf: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes | None:
    """Read a member in chunks and stop as soon as it passes `cap`; None means it did."""
    out = bytearray()
    with zf.open(info) as fh:
        while chunk := fh.read(min(_TEXT_CHUNK, cap + 1 - len(out))):
            out += chunk
            if len(out) > cap:
                return None
    return bytes(out)


def _office_container_problem(src: _Source, limits: ExtractLimits) -> str | None:
    """Office files are ZIPs too: refuse ones whose parts would inflate past the archive limits."""
    with src.open() as fh, zipfile.ZipFile(fh) as zf:
        infos = zf.infolist()
        if len(infos) > 20 * limits.max_zip_members:
            return f"refused: {len(infos)} internal parts is implausibly many for an Office file"
        total = sum(i.file_size for i in infos)
        if total > limits.max_zip_total_bytes:
            return (
                f"refused: unpacks to {_human(total)}, over the {_human(limits.max_zip_total_bytes)} "
                "limit (possible zip bomb)"
            )
    return None


# -------------------------------------------------------------------------------------------- readers


def _decode(data: bytes) -> str:
    """Decode UTF-8 (with or without BOM) or UTF-16; otherwise Windows-1252, the usual legacy export."""
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3:  # a character cut by a size cap, not a different encoding
            return data.decode("utf-8", "replace")
        return data.decode("cp1252", "replace")


def _read_text_prefix(src: _Source, cap: int) -> tuple[str, bool]:
    """Decode at most what the cap can use (4 bytes per character); report whether bytes were left."""
    limit = cap * 4 + 4
    raw = src.read(limit + 1)
    return _decode(raw[:limit]), len(raw) > limit


def _read_text(name: str, src: _Source, sink: _Sink, limits: ExtractLimits) -> _ReadResult:
    text, more = _read_text_prefix(src, sink.cap)
    if Path(name).suffix.lower() in (".html", ".htm") or _looks_like_html(text):
        text = _html_to_text(text)
    sink.lines.append(text)
    sink.size = len(text)
    sink.overflow = more  # a complete text longer than the cap is cut later with an exact count
    return _ReadResult()


def _looks_like_html(text: str) -> bool:
    start = text[:512].lstrip().lower()
    return start.startswith(("<!doctype html", "<html"))


class _HTMLText(HTMLParser):
    """Visible text plus link and image targets; scripts and styles are dropped."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "head"})
    _BLOCK = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "tr",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "table",
            "section",
            "article",
            "header",
            "footer",
            "ul",
            "ol",
            "pre",
            "blockquote",
            "hr",
            "title",
            "dt",
            "dd",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.links: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag in self._SKIP and tag != "head":
            self.skip += 1
        elif tag in self._BLOCK:
            self.out.append("\n")
        elif tag in ("td", "th"):
            self.out.append(" | ")
        if tag == "a":
            self.links.append(attr.get("href"))
        elif tag == "img" and not self.skip:
            src = attr.get("src") or ""
            shown = "" if src.startswith("data:") else f" {src}"
            self.out.append(f"[image: {attr.get('alt') or ''}{shown}]")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and tag != "head":
            self.skip = max(0, self.skip - 1)
        elif tag == "a" and self.links:
            href = self.links.pop()
            if href and not href.lower().startswith(("javascript:", "#")):
                self.out.append(f" ({href})")
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data)


def _html_to_text(html: str) -> str:
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.out).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _read_csv(name: str, src: _Source, sink: _Sink, limits: ExtractLimits) -> _ReadResult:
    text, more = _read_text_prefix(src, sink.cap)
    delimiter = "\t" if Path(name).suffix.lower() == ".tsv" else None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:65536], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    try:
        for row in csv.reader(io.StringIO(text), delimiter=delimiter):
            if not sink.add("| " + " | ".join(cell.replace("\n", " / ") for cell in row) + " |"):
                break
    except csv.Error as exc:  # oversized field or stray quote: fall back to the raw text
        sink.lines, sink.size = [text], len(text)
        return _ReadResult(note=f"shown as raw text ({_describe(exc)})", truncated=more)
    return _ReadResult(truncated=more)


def _read_docx(name: str, src: _Source, sink: _Sink, limits: ExtractLimits) -> _ReadResult:
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
    return _ReadResult(note=f"{pictures} embedded picture(s) not shown" if pictures else "")


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


def _docx_table(table: Any, sink: _Sink) -> None:
    sink.add("[Table]")
    for row in table.rows:
        cells = [cell.text.strip().replace("\n", " / ") for cell in row.cells]
        if not sink.add("| " + " | ".join(cells) + " |"):
            return
    sink.add("[End of table]")


def _read_pptx(name: str, src: _Source, sink: _Sink, limits: ExtractLimits) -> _ReadResult:
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
    return _ReadResult(note=f"{pictures} picture(s) not shown" if pictures else "")


def _walk_shapes(shapes: Iterable[Any]) -> Iterator[Any]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _walk_shapes(shape.shapes)
        else:
            yield shape


def _pptx_shape(shape: Any, sink: _Sink) -> int:
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
            pairs = ", ".join(f"{c}={_fmt(v)}" for c, v in zip_longest(categories, values, fillvalue=""))
            series.append(f"{s.name}: {pairs}")
    return f"[Chart{': ' + title if title else ''}] " + "; ".join(series)


def _read_pdf(name: str, src: _Source, sink: _Sink, limits: ExtractLimits) -> _ReadResult:
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
                return _ReadResult(note="refused: encrypted PDF (password protected)", inspectable=False)
            note = "encrypted with an empty password; read anyway"
        any_text = False
        for number, page in enumerate(reader.pages, start=1):
            try:
                text = (page.extract_text() or "").strip()
            except Exception as exc:  # one broken page should not hide the rest
                text = f"[page could not be read: {_describe(exc)}]"
            any_text = any_text or bool(text)
            links = _pdf_links(page)
            body = text + (f"\nLinks on this page: {', '.join(links)}" if links else "")
            if not sink.add(f"## Page {number}\n{body}"):
                break
    if not any_text:
        return _ReadResult(
            note=_join_notes(note, "not inspectable: no extractable text (scanned pages?)"), inspectable=False
        )
    return _ReadResult(note=note)


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


# ----------------------------------------------------------------------------------------------- xlsx


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value).replace("\r\n", "\n").replace("\n", "\\n")


_NOT_CALCULATED = "[not calculated]"


def _cell_line(coordinate: str, formula_cell: Any, value: Any, extra: str = "") -> str | None:
    """Render `B4 = 1200 (formula: =SUM(B1:B3))`; None for an empty cell."""
    raw = formula_cell.value
    is_formula = getattr(formula_cell, "data_type", None) == "f"
    if raw is None and value is None and not extra:
        return None
    if is_formula:
        formula = getattr(raw, "text", raw)  # ArrayFormula keeps its text in .text
        shown = _fmt(value) if value is not None else _NOT_CALCULATED
        line = f"{coordinate} = {shown} (formula: {formula})"
    else:
        line = f"{coordinate} = {_fmt(raw if raw is not None else value)}"
    return line + extra


def _read_xlsx(name: str, src: _Source, sink: _Sink, limits: ExtractLimits) -> _ReadResult:
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
                    _Sheet(
                        ws.title,
                        ws.sheet_state,
                        _full_rows(ws, values[ws.title]),
                        estimate=ws.max_row * ws.max_column * 40,
                    )
                    for ws in formulas.worksheets
                ]
                charts = [cs.title for cs in formulas.chartsheets]
                return _render_sheets(sheets, sink, limits, charts)
        return _xlsx_stream(src, sink, limits)


@dataclass
class _Sheet:
    title: str
    state: str
    rows: Iterator[list[str] | None]  # rendered non-empty cells per row; None: stop (sparse-sheet guard)
    trailer: str | Callable[[], str] = ""  # a callable runs after the rows, when more is known
    estimate: int | None = None  # rough upper bound of the rendered size, so tiny sheets reserve little


def _render_sheets(
    sheets: Sequence[_Sheet],
    sink: _Sink,
    limits: ExtractLimits,
    chartsheets: Sequence[str] = (),
    note: str = "",
) -> _ReadResult:
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
    if any(_NOT_CALCULATED in section for section in sections):
        note = _join_notes(
            note,
            "formulas were saved without calculated results (the file was never "
            "recalculated in a spreadsheet program), so only the formulas are shown",
        )
    return _ReadResult(truncated=truncated, sections=sections, note=note)


def _full_rows(ws: Any, ws_values: Any) -> Iterator[list[str] | None]:
    for row in ws.iter_rows():
        rendered = []
        for cell in row:
            extra = ""
            if cell.hyperlink is not None and (cell.hyperlink.target or cell.hyperlink.location):
                extra += f" (link: {cell.hyperlink.target or cell.hyperlink.location})"
            if cell.comment is not None:
                extra += f" (comment: {_fmt(cell.comment.text)})"
            value = ws_values.cell(row=cell.row, column=cell.column).value if cell.data_type == "f" else None
            line = _cell_line(cell.coordinate, cell, value, extra)
            if line is not None:
                rendered.append(line)
        if rendered:
            yield rendered


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
    """The two attributes `_cell_line` reads, for cells parsed straight from the sheet XML."""

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
            return _cell_line(coordinate, _RawCell(value, "n"), None)
        return _cell_line(coordinate, _RawCell(self._formula(formula, coordinate), "f"), value)

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


def _xlsx_stream(src: _Source, sink: _Sink, limits: ExtractLimits) -> _ReadResult:
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
            rendered.append(_Sheet(sheet.name, sheet.state, stream.rows(), trailer, estimate))
        return _render_sheets(rendered, sink, limits, charts)


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
            f"{c.get('ref', '?')}: {_fmt(''.join(t.text or '' for t in c.iter(f'{_MAIN_NS}t')))}"
            for c in comments.iter(f"{_MAIN_NS}comment")
        ]
        if notes:
            lines.append("Comments: " + "; ".join(notes))
    return "\n".join(lines)


_READERS: dict[str, Callable[[str, _Source, _Sink, ExtractLimits], _ReadResult]] = {
    "docx": _read_docx,
    "xlsx": _read_xlsx,
    "pptx": _read_pptx,
    "pdf": _read_pdf,
    "csv": _read_csv,
    "text": _read_text,
}
