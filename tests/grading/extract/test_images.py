"""Images are attached for vision judges within the image limits."""

from __future__ import annotations

from grading.extract import ExtractLimits, extract_files
from tests.grading.extract.builders import (
    make_png,
)


def test_images_are_attached_for_vision_judges() -> None:
    extraction = extract_files([("chart.png", make_png())])
    [part] = extraction.parts
    assert part.kind == "image" and part.inspectable
    assert [(i.name, i.media_type, i.data) for i in extraction.images()] == [
        ("chart.png", "image/png", make_png())
    ]
    assert "chart.png" in part.text
    assert "could not be inspected" not in extraction.as_prompt_text()
    assert "chart.png (image, 69 bytes): image not shown" in extraction.as_prompt_text(images_attached=False)


def test_images_beyond_the_limit_are_listed_but_not_attached() -> None:
    extraction = extract_files(
        [(f"shot{i}.png", make_png()) for i in range(4)], limits=ExtractLimits(max_images=2)
    )
    assert len(extraction.images()) == 2
    assert [p.inspectable for p in extraction.parts] == [True, True, False, False]
    assert "limit of 2 images" in extraction.parts[3].note
