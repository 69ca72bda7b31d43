"""What extraction hands the judges: parts, images, the prompt rendering and the JSON cache form."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

from studies.byte_format import human_bytes

TRUNCATION_NOTICE = (
    "Some deliverable files were too long to show in full. Wherever text was cut you will see a marker "
    "such as [[TRUNCATED: 1200 characters omitted from report.docx]]. The omitted content exists in the "
    "submission but is hidden from you: do not treat it as missing and do not guess what it says. Score "
    "what you can see, and say in your notes when a criterion could not be checked because of a cut."
)

KIND_LABELS = {
    "docx": "Word document",
    "xlsx": "Excel workbook",
    "pptx": "PowerPoint deck",
    "pdf": "PDF",
    "csv": "delimited table",
    "text": "text",
    "image": "image",
    "zip": "ZIP archive",
    "media": "audio/video",
    "binary": "binary file",
}


@dataclass
class ExtractedImage:
    name: str
    media_type: str
    data: bytes


@dataclass
class ExtractedPart:
    """One file or archive member as the judge will see it."""

    name: str
    kind: str
    text: str
    inspectable: bool
    size: int
    note: str = ""
    images: list[ExtractedImage] = field(default_factory=list)
    truncated: bool = False  # the text is incomplete (a marker in the text says where and why)
    # Blocks of `text` (one per sheet) that a budget cut shares fairly instead of dropping the last ones.
    _sections: list[str] = field(default_factory=list, repr=False, compare=False)
    # (characters before any budget cut, whether those were complete, characters kept) after a cut.
    _cut_state: tuple[int, bool, int] | None = field(default=None, repr=False, compare=False)


@dataclass
class Extraction:
    parts: list[ExtractedPart]
    truncated: bool
    total_chars: int

    def images(self) -> list[ExtractedImage]:
        """Return every image attached for vision-capable judges, in file order."""
        return [image for part in self.parts for image in part.images]

    def as_prompt_text(self, *, images_attached: bool = True) -> str:
        """Render one document: a file summary, what could not be inspected and why, then each file.

        The judge prompt should also carry TRUNCATION_NOTICE when `truncated` is set. Pass
        `images_attached=False` for text-only judges so images are listed as not shown.
        """
        shown: list[ExtractedPart] = []
        hidden: list[tuple[ExtractedPart, str]] = []
        for part in self.parts:
            if part.kind == "image" and part.inspectable and not (images_attached and part.images):
                hidden.append((part, "image not shown to this judge"))
            elif part.inspectable:
                shown.append(part)
            else:
                hidden.append((part, part.note or "not inspectable"))
        lines = [f"Submitted files: {len(self.parts)} ({len(shown)} shown below)."]
        if hidden:
            listed = "; ".join(
                f"{display_name(p.name)} ({KIND_LABELS.get(p.kind, p.kind)}, {human_bytes(p.size)}): {reason}"
                for p, reason in hidden
            )
            lines.append(f"Files that could not be inspected: {listed}")
        if self.truncated:
            lines.append("Some content below was cut to fit the reading budget; look for [[TRUNCATED: ...]].")
        for part in shown:
            header = f"{KIND_LABELS.get(part.kind, part.kind)}, {human_bytes(part.size)}"
            if part.note:
                header += f"; {part.note}"
            lines += [
                "",
                f"===== FILE: {display_name(part.name)} ({header}) =====",
                part.text if part.text.strip() else "(no text content)",
                f"===== END OF FILE: {display_name(part.name)} =====",
            ]
        return "\n".join(lines)

    def to_json(self, *, include_images: bool = False) -> dict[str, Any]:
        """Return a JSON-safe summary for caching; image bytes only on request (they can be 40 MB)."""

        def image(img: ExtractedImage) -> dict[str, Any]:
            out: dict[str, Any] = {
                "name": img.name,
                "media_type": img.media_type,
                "size": len(img.data),
                "sha256": hashlib.sha256(img.data).hexdigest(),
            }
            if include_images:
                out["data"] = base64.b64encode(img.data).decode("ascii")
            return out

        return {
            "version": 1,
            "truncated": self.truncated,
            "total_chars": self.total_chars,
            "parts": [
                {
                    "name": p.name,
                    "kind": p.kind,
                    "text": p.text,
                    "inspectable": p.inspectable,
                    "size": p.size,
                    "note": p.note,
                    "truncated": p.truncated,
                    "images": [image(i) for i in p.images],
                }
                for p in self.parts
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Extraction:
        """Rebuild from `to_json`; images stored without bytes are dropped (re-extract to attach them)."""
        parts = [
            ExtractedPart(
                name=p["name"],
                kind=p["kind"],
                text=p["text"],
                inspectable=p["inspectable"],
                size=p["size"],
                note=p.get("note", ""),
                truncated=p.get("truncated", False),
                images=[
                    ExtractedImage(i["name"], i["media_type"], base64.b64decode(i["data"]))
                    for i in p.get("images", [])
                    if "data" in i
                ],
            )
            for p in data["parts"]
        ]
        return cls(parts=parts, truncated=data["truncated"], total_chars=data["total_chars"])


def display_name(name: str) -> str:
    """Make a name safe to print in a prompt: no control characters, bounded length."""
    cleaned = "".join(c if c.isprintable() else "?" for c in name)
    return cleaned if len(cleaned) <= 300 else cleaned[:297] + "..."
