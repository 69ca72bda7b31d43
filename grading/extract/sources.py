"""The plumbing every reader shares: the input as bytes or a file, a capped text sink, part builders."""

from __future__ import annotations

import io
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import IO, BinaryIO

from grading.extract.budget import apply_budget
from grading.extract.limits import CHUNK_BYTES, SPILL_BYTES, ExtractLimits
from grading.extract.results import ExtractedPart
from grading.extract.sniffing import EXT_KINDS
from studies.byte_format import human_bytes

FileData = BinaryIO | IO[bytes] | bytes | bytearray | memoryview | Path | PathLike[str]


@dataclass
class Context:
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
                apply_budget(self.texts, self.limits.max_chars)
                self.held = sum(len(p.text) for p in self.texts)
        return part

    def spill_dir(self) -> Path:
        if self.tmpdir is None:
            self.tmpdir = Path(self.stack.enter_context(tempfile.TemporaryDirectory(prefix="extract-")))
        return self.tmpdir


class Source:
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


class Sink:
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


def make_part(
    name: str,
    kind: str,
    src_size: int,
    sink: Sink | str,
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


def refused(name: str, size: int, reason: str, kind: str | None = None) -> ExtractedPart:
    kind = kind or EXT_KINDS.get(Path(name).suffix.lower(), "binary")
    return ExtractedPart(name=name, kind=kind, text="", inspectable=False, size=size, note=reason)


def join_notes(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:300]


def to_source(name: str, data: FileData, ctx: Context) -> Source | ExtractedPart:
    limit = ctx.limits.max_file_bytes
    too_big = f"refused: larger than the {human_bytes(limit)} limit per file"
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        return refused(name, len(raw), too_big) if len(raw) > limit else Source(data=raw)
    if isinstance(data, PathLike | Path):
        path = Path(data)
        size = path.stat().st_size
        return refused(name, size, too_big) if size > limit else Source(path=path)
    # A file-like object: read it once, spilling to disk beyond a few MB, never past the limit.
    buf = bytearray()
    spill: IO[bytes] | None = None
    spill_path: Path | None = None
    total = 0
    while chunk := data.read(CHUNK_BYTES):
        total += len(chunk)
        if total > limit:
            if spill:
                spill.close()
            return refused(name, total, too_big)
        if spill is None and total > SPILL_BYTES:
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
        return Source(path=spill_path)
    return Source(data=bytes(buf))


@dataclass
class ReadResult:
    note: str = ""
    inspectable: bool = True
    truncated: bool = False
    sections: list[str] | None = None  # independent blocks (sheets) that a budget cut should share fairly


def finish(name: str, kind: str, src: Source, sink: Sink, note: str, res: ReadResult) -> ExtractedPart:
    part = make_part(name, kind, src.size, sink, note=note, inspectable=res.inspectable, truncated=res.truncated)
    part._sections = res.sections or []
    return part
