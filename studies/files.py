"""Private files: safe names, type checks by extension and content, and attachment-only serving."""

from __future__ import annotations

import hashlib
import mimetypes
import re
import unicodedata
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import IO

from django.core.files.storage import default_storage
from django.http import FileResponse

from studies.sniffing import sniff_format

_UNSAFE = re.compile(r"[^\w.\- ()\[\]+,@=]", re.UNICODE)
MAX_NAME_LENGTH = 180

# Formats (as `studies.sniffing.sniff_format` names them) each extension's content must have; text-like
# extensions are checked for NUL bytes instead.
_CONTENT_FORMATS: dict[str, frozenset[str]] = {
    **{ext: frozenset({ext}) for ext in ("pdf", "png", "gif", "webp", "rtf", "mp3", "wav")},
    "jpg": frozenset({"jpeg"}),
    "jpeg": frozenset({"jpeg"}),
    "zip": frozenset({"zip", "empty-zip"}),
    **dict.fromkeys(("docx", "xlsx", "xlsm", "pptx", "odt", "ods", "odp"), frozenset({"zip"})),
    **dict.fromkeys(("doc", "xls", "ppt"), frozenset({"ole2"})),
    "webm": frozenset({"matroska"}),
    **dict.fromkeys(("mp4", "mov", "m4a"), frozenset({"mp4", "m4a"})),  # ISO base media: 'ftyp' box at offset 4
}
_TEXT_EXTENSIONS = {"csv", "tsv", "txt", "md", "json", "jsonl", "html", "htm", "xml", "py", "r", "sql", "log", "ipynb"}


class FileRejected(ValueError):
    """An uploaded file that cannot be accepted; the message is shown to the person who sent it."""


def sanitize_filename(name: str) -> str:
    """Return a safe display/storage name: no folders, no control characters, NFC, bounded length."""
    name = unicodedata.normalize("NFC", name or "")
    name = name.replace("\\", "/")
    name = PurePosixPath(name).name
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = _UNSAFE.sub("_", name).strip(" .")
    if not name or set(name) <= {"_", "."}:
        raise FileRejected("The file name is empty or has no usable characters.")
    if len(name) > MAX_NAME_LENGTH:
        stem, dot, ext = name.rpartition(".")
        keep = MAX_NAME_LENGTH - len(ext) - 1
        name = (stem[:keep] + dot + ext) if dot and len(ext) <= 10 else name[:MAX_NAME_LENGTH]
    return name


def extension_of(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def check_type(name: str, head: bytes, allowed: Iterable[str]) -> str:
    """Check the extension is allowed and the leading bytes fit it; return the extension."""
    ext = extension_of(name)
    allowed = {a.lower() for a in allowed}
    if not ext or ext not in allowed:
        raise FileRejected(
            f"“{name}”: files of type “.{ext or '?'}” are not accepted. Allowed: {', '.join(sorted(allowed))}."
        )
    if not head:
        raise FileRejected(f"“{name}” is empty.")
    if ext in _TEXT_EXTENSIONS:
        if b"\x00" in head:
            raise FileRejected(f"“{name}” does not look like a text file.")
    elif ext in _CONTENT_FORMATS and sniff_format(head) not in _CONTENT_FORMATS[ext]:
        raise FileRejected(f"“{name}”'s content does not match its .{ext} extension.")
    return ext


def sha256_and_size(stream: IO[bytes], chunk_size: int = 1 << 20) -> tuple[str, int]:
    """Hash a stream in chunks (never all in memory) and rewind it."""
    digest, size = hashlib.sha256(), 0
    stream.seek(0)
    while chunk := stream.read(chunk_size):
        digest.update(chunk)
        size += len(chunk)
    stream.seek(0)
    return digest.hexdigest(), size


def serve_private_file(field_file, download_name: str) -> FileResponse:
    """Stream a stored file as an attachment; never inline, so HTML/SVG can't run in our origin."""
    handle = default_storage.open(field_file.name, "rb") if hasattr(field_file, "name") else field_file
    content_type = mimetypes.guess_type(download_name)[0] or "application/octet-stream"
    if content_type.startswith(("text/html", "image/svg", "application/xhtml", "text/xml", "application/xml")):
        content_type = "application/octet-stream"
    response = FileResponse(handle, as_attachment=True, filename=download_name, content_type=content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, no-store"
    return response
