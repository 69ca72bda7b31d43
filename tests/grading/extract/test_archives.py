"""ZIP deliverables: members are read recursively inside the archive limits, unsafe ones refused."""

from __future__ import annotations

import os
import stat
import zipfile

import pytest

from grading.extract import ExtractLimits, extract_file
from tests.grading.extract.builders import (
    by_name,
    make_docx,
    make_zip,
    texts,
)


def test_zip_members_are_extracted_recursively() -> None:
    inner = make_zip({"figures/summary.csv": b"metric,value\nchurn,4%\n"})
    outer = make_zip({"report/memo.docx": make_docx(), "data/inner.zip": inner, "folder/": b""})
    parts = extract_file("submission.zip", outer)
    names = [p.name for p in parts]
    assert names == [
        "submission.zip",
        "submission.zip/report/memo.docx",
        "submission.zip/data/inner.zip",
        "submission.zip/data/inner.zip/figures/summary.csv",
    ]
    assert "4.2 million households" in by_name(parts, "memo.docx").text
    assert "| churn | 4% |" in by_name(parts, "summary.csv").text
    assert "report/memo.docx" in parts[0].text  # the archive part lists its members


@pytest.mark.parametrize(
    "evil_name",
    ["../evil.txt", "docs/../../evil.txt", "..\\evil.txt", "/etc/cron.d/evil", "\\windows\\evil.txt",
     "C:/Users/evil.txt"],
)
def test_zip_slip_member_names_are_refused(evil_name: str) -> None:
    """Each rejected form is tested on `studies.archives`; here: a refused member is never read."""
    parts = extract_file("bundle.zip", make_zip({evil_name: b"pwned", "ok.txt": b"fine"}))
    refused = [p for p in parts if "refused: unsafe archive member" in p.note]
    assert len(refused) == 1 and not refused[0].inspectable
    assert "pwned" not in texts(parts)
    assert "fine" in by_name(parts, "ok.txt").text


def test_symlink_members_are_refused() -> None:
    link = zipfile.ZipInfo("latest.txt")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    parts = extract_file("bundle.zip", make_zip({link: b"/etc/passwd"}))
    assert "symbolic link" in by_name(parts, "latest.txt").note
    assert "/etc/passwd" not in by_name(parts, "latest.txt").text


def test_encrypted_members_are_refused() -> None:
    data = bytearray(make_zip({"secret.txt": b"classified"}))
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x1  # set the 'encrypted' general-purpose flag in the central directory
    parts = extract_file("bundle.zip", bytes(data))
    assert "encrypted" in by_name(parts, "secret.txt").note
    assert "classified" not in texts(parts)


def test_highly_compressed_member_is_refused_as_a_bomb() -> None:
    bomb = make_zip({"zeros.bin": bytes(50 * 2**20), "readme.txt": b"still read"})
    assert len(bomb) < 200_000
    parts = extract_file("bomb.zip", bomb)
    assert "compression ratio" in by_name(parts, "zeros.bin").note
    assert not by_name(parts, "zeros.bin").inspectable
    assert by_name(parts, "readme.txt").text == "still read"


def test_archive_total_uncompressed_size_is_capped() -> None:
    members = {f"part{i}.bin": os.urandom(2**20) for i in range(3)}
    parts = extract_file(
        "big.zip", make_zip(members), limits=ExtractLimits(max_zip_total_bytes=int(2.5 * 2**20))
    )
    assert "uncompressed in total" in by_name(parts, "part2.bin").note
    assert "uncompressed in total" not in by_name(parts, "part1.bin").note


def test_members_beyond_the_count_limit_are_refused() -> None:
    archive = make_zip({f"file{i}.txt": f"content {i}".encode() for i in range(5)})
    parts = extract_file("many.zip", archive, limits=ExtractLimits(max_zip_members=3))
    assert [p.text for p in parts[1:4]] == ["content 0", "content 1", "content 2"]
    assert "2 further member(s) beyond the limit of 3" in parts[4].note
    assert "content 3" not in texts(parts)


def test_archives_nested_deeper_than_the_limit_are_refused() -> None:
    archive = make_zip({"deep.txt": b"deep secret"})
    for level in (4, 3, 2):
        archive = make_zip({f"level{level}.zip": archive})
    parts = extract_file("outer.zip", archive, limits=ExtractLimits(max_zip_depth=3))
    assert "deep secret" not in texts(parts)
    refused = by_name(parts, "level4.zip")
    assert "nested more than 3 levels" in refused.note and not refused.inspectable
    assert by_name(parts, "level3.zip").inspectable


def test_corrupt_archive_is_reported_not_raised() -> None:
    [part] = extract_file("broken.zip", b"PK\x03\x04 truncated garbage")
    assert part.note.startswith("could not be read") and not part.inspectable
