"""The kind of a file comes from its content; the extension is only a fallback."""

from __future__ import annotations

from grading.extract import extract_file, extract_files
from grading.extract.sniffing import sniff_kind
from tests.grading.extract.builders import (
    MP3,
    make_pdf,
    make_png,
)


def test_audio_is_listed_with_metadata_as_not_inspectable() -> None:
    extraction = extract_files([("interview.mp3", MP3), ("memo.txt", b"hello")])
    media = extraction.parts[0]
    assert media.kind == "media" and not media.inspectable
    assert "not inspectable" in media.note and "audio" in media.note and media.size == len(MP3)
    prompt = extraction.as_prompt_text()
    assert "Files that could not be inspected: interview.mp3 (audio/video" in prompt
    assert "===== FILE: memo.txt" in prompt and "===== FILE: interview.mp3" not in prompt


def test_unknown_binary_is_listed_as_not_inspectable() -> None:
    [part] = extract_file("blob.dat", b"\x00\x01\x02\x03" * 100)
    assert part.kind == "binary" and not part.inspectable and "not inspectable" in part.note


def test_utf16_text_is_read_as_text_not_mistaken_for_audio() -> None:
    [part] = extract_file("notes.txt", "\ufeffQuarterly notes: margin 12%".encode("utf-16-le"))
    assert part.kind == "text" and part.text == "Quarterly notes: margin 12%"


def test_legacy_office_files_are_listed_as_unsupported() -> None:
    [part] = extract_file("old.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    assert part.kind == "binary" and not part.inspectable
    assert "legacy Office binary format" in part.note


def test_corrupt_docx_is_reported_as_unreadable() -> None:
    [part] = extract_file("report.docx", b"this is not a zip file at all")
    assert part.kind == "docx" and not part.inspectable
    assert part.note.startswith("could not be read:")


def test_content_wins_over_a_misleading_extension_and_the_mismatch_is_noted() -> None:
    [part] = extract_file("notes.docx", make_pdf())
    assert part.kind == "pdf"
    assert "named .docx but the content is a PDF" in part.note
    assert "Net present value" in part.text
    assert sniff_kind("photo.txt", make_png())[0] == "image"
