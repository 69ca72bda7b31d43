"""Extraction results survive the JSON cache."""

from __future__ import annotations

import json

from grading.extract import Extraction, extract_files
from tests.grading.extract.builders import (
    MP3,
    make_docx,
    make_png,
)


def test_extraction_round_trips_through_json() -> None:
    extraction = extract_files([("memo.docx", make_docx()), ("chart.png", make_png()), ("song.mp3", MP3)])
    cached = json.loads(json.dumps(extraction.to_json()))
    restored = Extraction.from_json(cached)
    assert [p.text for p in restored.parts] == [p.text for p in extraction.parts]
    assert [p.note for p in restored.parts] == [p.note for p in extraction.parts]
    assert restored.images() == []  # bytes are not cached unless asked for
    assert "data" not in cached["parts"][1]["images"][0]
    with_images = Extraction.from_json(json.loads(json.dumps(extraction.to_json(include_images=True))))
    assert with_images.images()[0].data == make_png()
