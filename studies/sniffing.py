"""Recognise a file's format from its first bytes (magic numbers), never from its name (no Django imports).

Upload checks (`studies.files.check_type`), deliverable extraction and transcript detection all ask this
module, so a file one of them calls a PNG or a ZIP is the same file for the others. Each signature is the
strictest one any earlier copy used (e.g. a PDF starts with "%PDF-" and nothing before
it, WEBP and WAVE need their RIFF form type, legacy Office its full eight-byte OLE2 header).
"""

from __future__ import annotations

import codecs

__all__ = [
    "AUDIO_FORMATS",
    "IMAGE_MEDIA_TYPES",
    "VIDEO_FORMATS",
    "image_media_type",
    "looks_textual",
    "media_family",
    "sniff_format",
]

ZIP_LOCAL_HEADER = b"PK\x03\x04"
ZIP_EMPTY_ARCHIVE = b"PK\x05\x06"  # an archive without members holds only its end-of-directory record
OLE2_HEADER = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # legacy .doc/.xls/.ppt
IMAGE_MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
# "mp3": MPEG layer III with an ID3 tag or a layer-III frame; "mpeg-audio": any other MPEG/ADTS frame sync.
AUDIO_FORMATS = frozenset({"mp3", "mpeg-audio", "wav", "ogg", "flac", "amr", "aiff", "m4a"})
VIDEO_FORMATS = frozenset({"avi", "mp4", "matroska"})  # "mp4": any ISO base media file but M4A (MP4, MOV …)


def sniff_format(head: bytes) -> str | None:
    """Return the format the leading bytes announce, or None when no signature matches.

    One of: zip, empty-zip, pdf, png, jpeg, gif, webp, ole2, rtf, and the audio and video formats above.
    """
    if head.startswith(ZIP_LOCAL_HEADER):
        return "zip"
    if head.startswith(ZIP_EMPTY_ARCHIVE):
        return "empty-zip"
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    riff_form = head[8:12] if head[:4] == b"RIFF" else b""
    if riff_form == b"WEBP":
        return "webp"
    if head.startswith(OLE2_HEADER):
        return "ole2"
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if head.startswith((b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2")):
        return "mp3"
    if len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and not head.startswith(codecs.BOM_UTF16_LE):
        return "mpeg-audio"
    if riff_form in (b"WAVE", b"AVI "):
        return "wav" if riff_form == b"WAVE" else "avi"
    for signature, name in ((b"OggS", "ogg"), (b"fLaC", "flac"), (b"#!AMR", "amr")):
        if head.startswith(signature):
            return name
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "aiff"
    if head[4:8] == b"ftyp":
        return "m4a" if head[8:11] == b"M4A" else "mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"  # also WebM
    return None


def image_media_type(head: bytes) -> str | None:
    """Return the media type of a PNG, JPEG, GIF or WEBP image, the formats vision models accept."""
    return IMAGE_MEDIA_TYPES.get(sniff_format(head) or "")


def media_family(head: bytes) -> str | None:
    """Return "audio" or "video" for recognised audio/video content, else None."""
    found = sniff_format(head)
    if found in AUDIO_FORMATS:
        return "audio"
    if found in VIDEO_FORMATS:
        return "video"
    return None


def looks_textual(head: bytes) -> bool:
    """Text in any common encoding: a UTF-16 BOM, or no NUL bytes and hardly any control characters."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return True
    if not head:
        return True
    if b"\x00" in head:
        return False
    controls = sum(1 for b in head if b < 9 or 13 < b < 32)
    return controls <= len(head) // 100
