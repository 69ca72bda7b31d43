"""Check task drafts against the database and their files; a clean import becomes a list of plans."""

from __future__ import annotations

import hashlib
import zipfile
from collections import Counter
from dataclasses import dataclass
from typing import Any

from studies.byte_format import human_bytes
from studies.conf import upload_limits
from studies.files import FileRejected, check_type, sanitize_filename
from studies.models import Occupation, Sector
from studies.services.task_bundles.drafts import Draft
from studies.services.task_bundles.sources import CHUNK_BYTES, Entry
from studies.services.task_bundles.table import table_field
from studies.task_bundle_format import BundleLimits, Problem, TaskSpec, spec_problems

_HEAD_BYTES = 8192


@dataclass
class PlannedFile:
    kind: str
    name: str
    entry: Entry
    sha256: str
    size: int


@dataclass
class Plan:
    spec: TaskSpec
    sector: Sector
    occupations: list[Occupation]
    files: list[PlannedFile]
    replace_hidden: bool
    location: str



def _hash_entry(entry: Entry, limits: BundleLimits) -> tuple[bytes, str, int]:
    """Read a file once: its first bytes (for the type check), SHA-256 and true size, up to the limit."""
    digest, size, head = hashlib.sha256(), 0, b""
    with entry.opener() as handle:
        while chunk := handle.read(CHUNK_BYTES):
            if len(head) < _HEAD_BYTES:
                head += chunk[: _HEAD_BYTES - len(head)]
            size += len(chunk)
            if size > limits.max_file_bytes:
                break
            digest.update(chunk)
    return head, digest.hexdigest(), size


def _check_files(draft: Draft, limits: BundleLimits, problems: list[Problem]) -> list[PlannedFile]:
    planned: list[PlannedFile] = []
    seen: dict[tuple[str, str], str] = {}
    allowed = upload_limits()["ALLOWED_EXTENSIONS"]
    for draft_file in draft.files:
        path = draft_file.entry.path
        try:
            safe = sanitize_filename(draft_file.name)
        except FileRejected as exc:
            problems.append(Problem(path, "", str(exc)))
            continue
        if safe != draft_file.name:
            problems.append(Problem(path, "", f"the file name is not allowed as it is; rename it to “{safe}”"))
            continue
        key = (draft_file.kind, safe)
        if key in seen:
            problems.append(Problem(path, "", f"has the same name as {seen[key]}; file names must be unique"))
            continue
        seen[key] = path
        if draft_file.entry.size > limits.max_file_bytes:
            problems.append(Problem(path, "", f"is {human_bytes(draft_file.entry.size)}, more than the "
                                              f"{human_bytes(limits.max_file_bytes)} per-file limit"))
            continue
        try:
            head, sha256, size = _hash_entry(draft_file.entry, limits)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            problems.append(Problem(path, "", f"could not be read ({exc})"))
            continue
        if size > limits.max_file_bytes:
            problems.append(Problem(path, "", f"is more than the {human_bytes(limits.max_file_bytes)} "
                                              "per-file limit"))
            continue
        try:
            check_type(safe, head, allowed)
        except FileRejected as exc:
            problems.append(Problem(path, "", str(exc)))
            continue
        planned.append(PlannedFile(draft_file.kind, safe, draft_file.entry, sha256, size))
    return planned


def resolve_drafts(drafts: list[Draft], limits: BundleLimits, problems: list[Problem]) -> list[Plan]:
    """Check every draft against the database and its files; build the plans of a clean import.

    Sector, occupations and files are checked even when other fields are invalid, so one run reports
    everything a team has to fix.
    """
    sectors = list(Sector.objects.all())
    by_code = {s.code: s for s in sectors}
    by_name = {s.name.casefold(): s for s in sectors}
    checked: list[tuple[Draft, TaskSpec | None]] = []
    for draft in drafts:
        spec, found = spec_problems(draft.data, path=draft.location, prefix=draft.field_prefix)
        if draft.allow_titles:
            found = [Problem(p.path, table_field(p.field, draft.field_prefix), p.message) for p in found]
        problems.extend(found)
        checked.append((draft, spec))
    uuids = Counter(spec.uuid for _, spec in checked if spec is not None)
    locations: dict[Any, list[str]] = {}
    for draft, spec in checked:
        if spec is not None:
            locations.setdefault(spec.uuid, []).append(
                draft.location + (f" {draft.field_prefix.rstrip('.')}" if draft.field_prefix else ""))
    codes = {code for draft, _ in checked for code in _raw_list(draft.data.get("occupations"))}
    occupations = {o.soc_code: o for o in Occupation.objects.filter(soc_code__in=codes)}
    plans = []
    total = 0
    for draft, spec in checked:
        prefix = draft.field_prefix
        ok = spec is not None
        if spec is not None and uuids[spec.uuid] > 1:
            problems.append(Problem(draft.location, prefix + ("task_id" if draft.allow_titles else "uuid"),
                                    f"{spec.uuid} appears {uuids[spec.uuid]} times in this upload "
                                    f"({'; '.join(locations[spec.uuid])})"))
            ok = False
        raw_sector = draft.data.get("sector")
        sector = None
        if isinstance(raw_sector, str) and raw_sector.strip():
            sector = by_code.get(raw_sector.strip()) or by_name.get(raw_sector.strip().casefold())
            if sector is None:
                problems.append(Problem(draft.location, prefix + "sector",
                                        f"unknown sector “{raw_sector.strip()}”; use an existing sector code or name"))
                ok = False
        resolved = []
        column = "occupation" if draft.allow_titles else "occupations"
        for index, code in enumerate(_raw_list(draft.data.get("occupations"))):
            occupation = occupations.get(code) or (_occupation_by_title(code) if draft.allow_titles else None)
            if occupation is None:
                where = prefix + (column if draft.allow_titles else f"{column}[{index}]")
                problems.append(Problem(draft.location, where, f"unknown occupation “{code}”; load it with "
                                                                "import_onet or use an existing O*NET-SOC code"))
                ok = False
            else:
                resolved.append(occupation)
        files = _check_files(draft, limits, problems)
        if len(files) != len(draft.files):
            ok = False
        total += sum(f.size for f in files)
        if ok and spec is not None and sector is not None:
            plans.append(Plan(spec, sector, resolved, files, draft.replace_hidden, draft.location))
    if total > limits.max_total_bytes:
        problems.append(Problem("", "", f"the task files total {human_bytes(total)}, more than the "
                                        f"{human_bytes(limits.max_total_bytes)} import limit"))
    return plans


def _raw_list(value: Any) -> list[str]:
    """Return the stripped text items of a raw list field (invalid items are reported by the spec check)."""
    if not isinstance(value, list):
        return []
    return [item.strip() for item in value if isinstance(item, str) and item.strip() and "\x00" not in item]


def _occupation_by_title(title: str) -> Occupation | None:
    matches = list(Occupation.objects.filter(title__iexact=title)[:2])
    return matches[0] if len(matches) == 1 else None
