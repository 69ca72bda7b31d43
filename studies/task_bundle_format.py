"""The task-bundle format: what a bundle's ``task.json`` holds, the limits an import enforces, and its errors.

Kept apart from the import service so the format can be read (and documented in docs/task-bundles.md)
without the database or storage code around it.
"""

from __future__ import annotations

import uuid as uuid_lib
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from studies.conf import upload_limits

FORMAT_VERSION = 1
TASK_FILE = "task.json"
REFERENCE_DIR = "reference"
HIDDEN_DIR = "hidden"
TABLE_SUFFIXES = (".csv", ".jsonl")
# Files that operating systems and archivers leave behind; never part of a task.
JUNK_NAMES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})
JUNK_PREFIXES = ("__MACOSX/",)
# Notes a study team may keep next to their bundles; skipped, not reported.
ROOT_NOTE_PREFIXES = ("readme", "license", "changelog")
SOURCES = ("gdpval", "apex", "apex_agents", "custom")


class TaskSpec(BaseModel):
    """The fields of ``task.json`` (format version 1)."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = Field(default=FORMAT_VERSION, ge=1, le=FORMAT_VERSION)
    uuid: uuid_lib.UUID
    title: str = Field(min_length=1, max_length=255)
    prompt: str = Field(min_length=1)
    source: str = "custom"
    sector: str = Field(min_length=1, max_length=200, description="Sector code or exact name.")
    occupations: list[str] = Field(default_factory=list, description="O*NET-SOC codes, e.g. 13-2011.00.")
    required_software: list[str] = Field(default_factory=list)
    expected_deliverables: list[str] = Field(default_factory=list)
    hidden_info: str | None = None
    time_limit_minutes: int | None = Field(default=None, ge=1, le=7 * 24 * 60)

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        # PostgreSQL cannot store NUL in text; refuse it here so the import reports the field, not a crash.
        items = value if isinstance(value, list) else [value]
        if any(isinstance(item, str) and "\x00" in item for item in items):
            raise ValueError("must not contain a NUL character (\\x00)")
        return value

    @field_validator("title", "sector")
    @classmethod
    def _strip(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be blank")
        return value

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Kept exactly as given (no stripping) so an exported prompt imports back byte for byte.
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in SOURCES:
            raise ValueError(f"must be one of {', '.join(SOURCES)}")
        return value

    @field_validator("occupations", "required_software", "expected_deliverables")
    @classmethod
    def _no_blank_items(cls, value: list[str]) -> list[str]:
        cleaned = [item.strip() for item in value]
        if any(not item for item in cleaned):
            raise ValueError("must not contain empty strings")
        if len(set(cleaned)) != len(cleaned):
            raise ValueError("must not repeat an entry")
        return cleaned


def spec_problems(data: Any, *, path: str, prefix: str = "") -> tuple[TaskSpec | None, list[Problem]]:
    """Validate raw task data; return the spec or one problem per invalid field."""
    if not isinstance(data, dict):
        return None, [Problem(path, prefix.rstrip("."), "must be a JSON object with the task's fields")]
    try:
        return TaskSpec.model_validate(data), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = prefix + _loc(err["loc"])
            message = "unknown field" if err["type"] == "extra_forbidden" else _message(err)
            problems.append(Problem(path, field, message))
        return None, problems


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_MESSAGES = {
    "missing": "this field is required",
    "string_type": "must be text",
    "list_type": "must be a list of text values",
    "uuid_parsing": "must be a UUID, e.g. 0b7f1f3e-5d3c-4b8e-9d8a-1c2f3e4d5a6b",
    "uuid_type": "must be a UUID, e.g. 0b7f1f3e-5d3c-4b8e-9d8a-1c2f3e4d5a6b",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
}


def _message(err: dict[str, Any]) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    return str(err["msg"]).removeprefix("Value error, ")


@dataclass(frozen=True)
class Problem:
    """One reason an import cannot go ahead: where (file path and field) and what is wrong."""

    path: str
    field: str
    message: str

    @property
    def location(self) -> str:
        return f"{self.path}:{self.field}" if self.field else self.path

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "field": self.field, "message": self.message}


class TaskBundleInvalid(Exception):
    """An import refused before anything was written; carries every problem found."""

    code = "invalid_task_bundle"

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        count = len(problems)
        super().__init__(f"The import has {count} problem{'s' if count != 1 else ''}; nothing was imported.")

    @property
    def fields(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for problem in self.problems:
            grouped.setdefault(problem.location, []).append(problem.message)
        return grouped


@dataclass(frozen=True)
class BundleLimits:
    """Size and archive-safety limits for one import."""

    max_file_bytes: int
    max_members: int
    max_total_bytes: int
    max_ratio: float
    # Small members may compress far beyond any ratio (a sheet of zeros) and are harmless.
    ratio_floor_bytes: int = 2**20

    @classmethod
    def from_settings(cls) -> BundleLimits:
        uploads = upload_limits()
        return cls(
            max_file_bytes=int(uploads["MAX_FILE_BYTES"]),
            max_members=int(uploads["BUNDLE_MAX_MEMBERS"]),
            max_total_bytes=int(uploads["BUNDLE_MAX_TOTAL_BYTES"]),
            max_ratio=float(uploads["BUNDLE_MAX_RATIO"]),
        )

