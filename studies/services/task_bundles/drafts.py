"""Tasks as read from bundle folders (task.json beside reference/ and hidden/), before any check."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from studies.byte_format import human_bytes
from studies.models import TaskFile
from studies.services.task_bundles.sources import Entry, Tree, join_path, read_bytes
from studies.task_bundle_format import (
    HIDDEN_DIR,
    REFERENCE_DIR,
    ROOT_NOTE_PREFIXES,
    TABLE_SUFFIXES,
    TASK_FILE,
    Problem,
)

_KINDS = {REFERENCE_DIR: TaskFile.Kind.REFERENCE, HIDDEN_DIR: TaskFile.Kind.HIDDEN}
_MAX_TASK_JSON_BYTES = 2**20


@dataclass
class DraftFile:
    kind: str
    name: str  # stored name (base name)
    entry: Entry


@dataclass
class Draft:
    """One task as read from the source, before the database and the files are checked."""

    location: str  # where problems with the task's fields are reported (task.json path or table path)
    field_prefix: str  # "" for task.json, "row N." for a table row
    data: dict[str, Any]
    files: list[DraftFile]
    replace_hidden: bool
    allow_titles: bool = False



def drafts_from_bundles(tree: Tree, entries: list[Entry], problems: list[Problem]) -> list[Draft]:
    roots = sorted({str(PurePosixPath(e.path).parent) if "/" in e.path else ""
                    for e in entries if PurePosixPath(e.path).name == TASK_FILE})
    nested = {r for r in roots for outer in roots if r != outer and (outer == "" or r.startswith(outer + "/"))}
    for root in sorted(nested):
        problems.append(Problem(join_path(root, TASK_FILE), "", "is a bundle inside another bundle; bundles "
                                                           "must sit side by side"))
    roots = [r for r in roots if r not in nested]
    members: dict[str, list[tuple[str, Entry]]] = {r: [] for r in roots}
    for entry in entries:
        root = next((r for r in roots if r == "" or entry.path.startswith(r + "/")), None)
        if root is None:
            if _is_root_note(entry.path, roots):
                continue
            problems.append(Problem(entry.path, "", "is not inside a task bundle (a folder holding task.json)"))
            continue
        members[root].append((entry.path[len(root) + 1:] if root else entry.path, entry))
    drafts = []
    for root in roots:
        drafts.extend(_draft_from_bundle(root, members[root], problems))
    return drafts


def _is_root_note(path: str, roots: list[str]) -> bool:
    parts = PurePosixPath(path).parts
    # A note at the top, or at the top of a single wrapping folder that holds the bundles.
    wrapper_levels = {len(PurePosixPath(r).parts) - 1 for r in roots if r}
    return len(parts) - 1 in ({0} | wrapper_levels) and parts[-1].lower().startswith(ROOT_NOTE_PREFIXES)



def _draft_from_bundle(root: str, members: list[tuple[str, Entry]], problems: list[Problem]) -> list[Draft]:
    spec_path = join_path(root, TASK_FILE)
    files: list[DraftFile] = []
    spec_entry = None
    for rel, entry in members:
        if rel == TASK_FILE:
            spec_entry = entry
            continue
        top, _, rest = rel.partition("/")
        if top in _KINDS and rest:
            if "/" in rest:
                problems.append(Problem(entry.path, "", f"sub-folders inside {top}/ are not supported; put the "
                                                        f"files directly in {top}/"))
                continue
            files.append(DraftFile(_KINDS[top], rest, entry))
            continue
        problems.append(Problem(entry.path, "", "does not belong in a bundle: only task.json, reference/ and "
                                                "hidden/ are allowed"))
    assert spec_entry is not None  # roots are found by their task.json
    if spec_entry.size > _MAX_TASK_JSON_BYTES:
        problems.append(Problem(spec_path, "", f"is larger than {human_bytes(_MAX_TASK_JSON_BYTES)}"))
        return []
    raw = read_bytes(spec_entry, _MAX_TASK_JSON_BYTES)
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        problems.append(Problem(spec_path, "", "is not UTF-8 text"))
        return []
    except json.JSONDecodeError as exc:
        problems.append(Problem(spec_path, "", f"is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                                               f"{exc.msg})"))
        return []
    if not isinstance(data, dict):
        problems.append(Problem(spec_path, "", "must hold a JSON object with the task's fields"))
        return []
    has_hidden = "hidden_info" in data or any(f.kind == TaskFile.Kind.HIDDEN for f in files)
    return [Draft(spec_path, "", data, files, replace_hidden=has_hidden)]


def find_table(entries: list[Entry], problems: list[Problem]) -> str | None:
    tables = [e.path for e in entries if e.path.lower().endswith(TABLE_SUFFIXES)]
    if not tables:
        problems.append(Problem("", "", "found no task bundle (a folder with task.json) and no task table "
                                        "(.csv or .jsonl)"))
        return None
    depth = min(len(PurePosixPath(t).parts) for t in tables)
    top = [t for t in tables if len(PurePosixPath(t).parts) == depth]
    if len(top) > 1:
        problems.append(Problem("", "", f"found several task tables ({', '.join(sorted(top))}); import one "
                                        "at a time"))
        return None
    return top[0]
