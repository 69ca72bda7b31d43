"""Images: PNG, JPEG, GIF and WEBP are attached for vision judges, within the image limits."""

from __future__ import annotations

from grading.extract.results import ExtractedImage, ExtractedPart, display_name
from grading.extract.sources import Context, Source, join_notes, refused
from studies.byte_format import human_bytes
from studies.sniffing import image_media_type


def extract_image(name: str, src: Source, ctx: Context, note: str) -> ExtractedPart:
    limits = ctx.limits
    media_type = image_media_type(src.head(16))
    if media_type is None:
        return refused(
            name,
            src.size,
            join_notes(
                note, "not inspectable: only PNG, JPEG, GIF and WEBP images can be shown to the judges"
            ),
            "image",
        )
    if src.size > limits.max_image_bytes:
        return refused(
            name,
            src.size,
            join_notes(note, f"not attached: larger than the {human_bytes(limits.max_image_bytes)} image limit"),
            "image",
        )
    if ctx.images_left <= 0:
        return refused(
            name,
            src.size,
            join_notes(note, f"not attached: the limit of {limits.max_images} images was reached"),
            "image",
        )
    ctx.images_left -= 1
    text = f"[Image {display_name(name)} ({media_type}, {human_bytes(src.size)}) is attached for visual inspection.]"
    return ExtractedPart(
        name=name,
        kind="image",
        text=text,
        inspectable=True,
        size=src.size,
        note=note,
        images=[ExtractedImage(name=name, media_type=media_type, data=src.read())],
    )
