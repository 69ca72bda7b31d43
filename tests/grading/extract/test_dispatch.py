"""Inputs of every shape are accepted, and oversized ones refused before parsing."""

from __future__ import annotations

import io
from pathlib import Path

from grading.extract import ExtractLimits, extract_file, extract_files
from tests.grading.extract.builders import (
    make_docx,
    make_pdf,
)


def test_path_and_file_object_inputs_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "memo.docx"
    path.write_bytes(make_docx())
    extraction = extract_files([("memo.docx", path), ("valuation.pdf", io.BytesIO(make_pdf()))])
    assert "4.2 million households" in extraction.parts[0].text
    assert "4,210" in extraction.parts[1].text


def test_file_larger_than_the_limit_is_refused_without_parsing() -> None:
    [part] = extract_file("huge.txt", b"x" * 1000, limits=ExtractLimits(max_file_bytes=100))
    assert not part.inspectable and "larger than" in part.note and part.text == ""
