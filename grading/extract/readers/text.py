"""Plain text, Markdown, code and delimited tables, decoded from whatever encoding they arrive in."""

from __future__ import annotations

import codecs
import csv
import io
from pathlib import Path

from grading.extract.limits import ExtractLimits
from grading.extract.readers.html import html_to_text, looks_like_html
from grading.extract.sources import ReadResult, Sink, Source, describe


def decode_text(data: bytes) -> str:
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


def _read_text_prefix(src: Source, cap: int) -> tuple[str, bool]:
    """Decode at most what the cap can use (4 bytes per character); report whether bytes were left."""
    limit = cap * 4 + 4
    raw = src.read(limit + 1)
    return decode_text(raw[:limit]), len(raw) > limit


def read_text(name: str, src: Source, sink: Sink, limits: ExtractLimits) -> ReadResult:
    text, more = _read_text_prefix(src, sink.cap)
    if Path(name).suffix.lower() in (".html", ".htm") or looks_like_html(text):
        text = html_to_text(text)
    sink.lines.append(text)
    sink.size = len(text)
    sink.overflow = more  # a complete text longer than the cap is cut later with an exact count
    return ReadResult()


def read_csv(name: str, src: Source, sink: Sink, limits: ExtractLimits) -> ReadResult:
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
        return ReadResult(note=f"shown as raw text ({describe(exc)})", truncated=more)
    return ReadResult(truncated=more)
