"""Stored files as the upload services record them, and sample file contents."""

from __future__ import annotations

import hashlib
import struct
import zlib

import factory
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile

# Headers only: enough for the upload checks' content sniffing, not valid documents.
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
PDF = b"%PDF-1.4\n% test document\n"
XLSX = b"PK\x03\x04" + b"\x00" * 64
# The deliverable a submitted episode carries unless told otherwise.
REPORT = b"Quarterly summary\nGrand total: 1,234,567\nPrepared for the finance team.\n"


class StoredFileFactory(factory.django.DjangoModelFactory):
    """Store `content` in private storage and record its size and hash, as the upload services do."""

    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class, *args, content: bytes = b"", **kwargs):
        record = model_class(*args, **kwargs)
        record.file.save(record.name, ContentFile(content), save=False)
        record.size = len(content)
        record.sha256 = hashlib.sha256(content).hexdigest()
        record.save()
        return record


def upload(name: str, content: bytes, content_type: str = "application/octet-stream") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type=content_type)


def png_bytes() -> bytes:
    """A valid 1×1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
            + chunk(b"IEND", b""))
