"""The one signature table: each format is recognised from its first bytes, near misses are not."""

from __future__ import annotations

import codecs

import pytest

from studies.files import FileRejected, check_type
from studies.sniffing import image_media_type, looks_textual, media_family, sniff_format


@pytest.mark.parametrize(
    "head, expected",
    [
        (b"PK\x03\x04rest", "zip"),
        (b"PK\x05\x06" + bytes(18), "empty-zip"),
        (b"%PDF-1.7\n", "pdf"),
        (b"\x89PNG\r\n\x1a\n", "png"),
        (b"\xff\xd8\xff\xe0", "jpeg"),
        (b"GIF89a", "gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "webp"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole2"),
        (b"{\\rtf1\\ansi", "rtf"),
        (b"ID3\x04", "mp3"),
        (b"\xff\xfb\x90\x64", "mp3"),
        (b"\xff\xf1\x50\x80", "mpeg-audio"),  # AAC in ADTS frames
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", "wav"),
        (b"RIFF\x00\x00\x00\x00AVI LIST", "avi"),
        (b"OggS\x00", "ogg"),
        (b"fLaC", "flac"),
        (b"#!AMR\n", "amr"),
        (b"FORM\x00\x00\x00\x00AIFF", "aiff"),
        (b"\x00\x00\x00\x20ftypM4A ", "m4a"),
        (b"\x00\x00\x00\x20ftypisom", "mp4"),
        (b"\x1a\x45\xdf\xa3", "matroska"),
    ],
)
def test_each_signature_is_recognised(head: bytes, expected: str) -> None:
    assert sniff_format(head) == expected


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"plain text",
        b" %PDF-1.7",  # nothing may precede the PDF header
        b"%PDF",  # the header needs its version dash
        b"RIFF\x00\x00\x00\x00XXXX",  # RIFF alone says nothing about the form
        b"\xd0\xcf\x11\xe0\x00\x00\x00\x00",  # half an OLE2 header
        codecs.BOM_UTF16_LE + "text".encode("utf-16-le"),  # looks like an MPEG frame sync, is UTF-16 text
    ],
)
def test_near_misses_are_not_recognised(head: bytes) -> None:
    assert sniff_format(head) is None


def test_image_and_media_helpers_follow_the_table() -> None:
    assert image_media_type(b"RIFF\x00\x00\x00\x00WEBP") == "image/webp"
    assert image_media_type(b"%PDF-1.7") is None
    assert media_family(b"fLaC") == "audio" and media_family(b"\x1a\x45\xdf\xa3") == "video"
    assert media_family(b"\x89PNG\r\n\x1a\n") is None


def test_text_is_told_from_binary() -> None:
    assert looks_textual(b"") and looks_textual("naïve café\n".encode())
    assert looks_textual(codecs.BOM_UTF16_LE + "hi".encode("utf-16-le"))
    assert not looks_textual(b"abc\x00def")
    assert not looks_textual(bytes(range(1, 9)) * 10)


@pytest.mark.parametrize(
    "name, head",
    [
        ("a.webp", b"RIFF\x00\x00\x00\x00WAVE"),
        ("a.wav", b"RIFF\x00\x00\x00\x00WEBP"),
        ("a.doc", b"\xd0\xcf\x11\xe0\x00\x00\x00\x00"),
        ("a.pdf", b"%PDF"),
        ("a.docx", b"PK\x05\x06" + bytes(18)),  # an empty archive is no Word document
        ("a.png", b"\xff\xd8\xff"),
        ("a.mp4", b"\x00\x00\x00\x20moov"),
    ],
)
def test_upload_check_uses_the_same_signatures(name: str, head: bytes) -> None:
    with pytest.raises(FileRejected, match="does not match"):
        check_type(name, head, [name.rsplit(".", 1)[1]])


@pytest.mark.parametrize(
    "name, head",
    [
        ("a.zip", b"PK\x05\x06" + bytes(18)),
        ("a.jpg", b"\xff\xd8\xff\xe0"),
        ("a.mov", b"\x00\x00\x00\x14ftypqt  "),
        ("a.m4a", b"\x00\x00\x00\x20ftypM4A "),
        ("a.webm", b"\x1a\x45\xdf\xa3"),
        ("a.csv", b"a,b\n1,2\n"),
    ],
)
def test_upload_check_accepts_matching_content(name: str, head: bytes) -> None:
    assert check_type(name, head, [name.rsplit(".", 1)[1]]) == name.rsplit(".", 1)[1]
