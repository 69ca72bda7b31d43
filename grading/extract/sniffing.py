"""Which reader a file gets: its kind from the content's signature, the extension as a fallback."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grading.extract.results import KIND_LABELS
from studies.sniffing import AUDIO_FORMATS, IMAGE_MEDIA_TYPES, VIDEO_FORMATS, looks_textual, sniff_format


def _suffixes(words: str) -> frozenset[str]:
    return frozenset(words.split())


_TEXT_EXTS = _suffixes(
    ".txt .md .markdown .rst .json .jsonl .ipynb .html .htm .xml .yaml .yml .toml .ini .cfg .log .tex .bib "
    ".rtf .svg .css .js .ts .py .r .sql .sh .java .c .h .cpp .go .rs .rb .php .m .jl .scala .kt .swift .vba "
    ".bas .srt .vtt"
)
_AUDIO_EXTS = _suffixes(".mp3 .wav .m4a .aac .flac .ogg .oga .opus .wma .aif .aiff .amr")
VIDEO_EXTS = _suffixes(".mp4 .m4v .mov .webm .mkv .avi .wmv .mpeg .mpg .3gp .flv")
EXT_KINDS = {
    **dict.fromkeys((".docx", ".docm", ".dotx"), "docx"),
    **dict.fromkeys((".xlsx", ".xlsm", ".xltx"), "xlsx"),
    **dict.fromkeys((".pptx", ".pptm", ".potx"), "pptx"),
    ".pdf": "pdf",
    ".csv": "csv",
    ".tsv": "csv",
    ".zip": "zip",
    **dict.fromkeys(_suffixes(".png .jpg .jpeg .gif .webp .bmp .tif .tiff .heic"), "image"),
    **dict.fromkeys(_TEXT_EXTS, "text"),
    **dict.fromkeys(_AUDIO_EXTS | VIDEO_EXTS, "media"),
}

OFFICE_KINDS = ("docx", "xlsx", "pptx")


def sniff_kind(name: str, head: bytes, *, zip_names: Sequence[str] | None = None) -> tuple[str, str]:
    """Return (kind, note) from the content's magic bytes and the extension; the note names a mismatch.

    `zip_names` is the archive's member list when `head` starts with a ZIP signature; it tells a .docx,
    .xlsx or .pptx from a plain archive.
    """
    suffix = Path(name).suffix.lower()
    ext_kind = EXT_KINDS.get(suffix)
    strong, detail = _strong_kind(head, zip_names)
    if strong == "binary":  # recognised but unsupported container (legacy Office, OpenDocument)
        return "binary", detail
    if strong:
        compatible = ext_kind in (None, strong) or (ext_kind == "zip" and strong in OFFICE_KINDS)
        note = "" if compatible else f"named {suffix or 'without extension'} but the content is {detail}"
        return strong, note
    textual = looks_textual(head)
    if ext_kind in ("text", "csv"):
        if textual:
            return ext_kind, ""
        return "binary", f"named {suffix} but the content is binary"
    if ext_kind:
        return ext_kind, ""  # office/pdf/zip/image/media that does not parse: the reader will say why
    return ("text" if textual else "binary"), ""


def _strong_kind(head: bytes, zip_names: Sequence[str] | None) -> tuple[str | None, str]:
    found = sniff_format(head)
    if found in ("zip", "empty-zip"):
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
    if found == "pdf":
        return "pdf", "a PDF"
    image = IMAGE_MEDIA_TYPES.get(found or "")
    if image:
        return "image", f"an image ({image})"
    if found == "ole2":
        return "binary", "legacy Office binary format (.doc/.xls/.ppt) is not supported"
    if found in AUDIO_FORMATS or found in VIDEO_FORMATS:
        return "media", f"{'audio' if found in AUDIO_FORMATS else 'video'} content"
    return None, ""
