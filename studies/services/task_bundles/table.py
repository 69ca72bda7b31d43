"""GDPval-style task tables (CSV or JSONL) with their files beside them, read into task drafts."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from studies.archives import member_path_problem
from studies.byte_format import human_bytes
from studies.models import TaskFile
from studies.services.task_bundles.drafts import Draft, DraftFile
from studies.services.task_bundles.sources import Entry, Tree, join_path, read_bytes
from studies.task_bundle_format import Problem

_MAX_TABLE_BYTES = 256 * 2**20
_TABLE_REQUIRED = ("task_id", "sector", "occupation", "prompt")
_TABLE_OPTIONAL = (
    "title", "source", "reference_files", "hidden_files", "required_software", "expected_deliverables",
    "hidden_info", "time_limit_minutes",
)
# Spec fields named after the table column they came from, so messages point at the column a team edits.
_TABLE_FIELD_NAMES = {"uuid": "task_id", "occupations": "occupation"}


def _split_list(value: Any) -> list[str]:
    """Parse a list cell: a JSON list, a Python-style list literal, or names separated by semicolons."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(item).strip() for item in value if str(item).strip()]
    text = str(value).strip()
    if not text:
        return []
    if text.startswith("["):
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(text)
            except (ValueError, SyntaxError):
                continue
            if isinstance(parsed, list):
                return [str(item).strip() for item in parsed if str(item).strip()]
        raise ValueError("is not a valid list")
    return [item.strip() for item in re.split(r"[;\n]", text) if item.strip()]


def _derive_title(prompt: str) -> str:
    first = next((line.strip() for line in prompt.splitlines() if line.strip()), "Untitled task")
    first = re.sub(r"\s+", " ", first)
    return first if len(first) <= 120 else first[:119].rstrip() + "…"


def _table_rows(entry: Entry, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    if entry.size > _MAX_TABLE_BYTES:
        problems.append(Problem(entry.path, "", f"is larger than {human_bytes(_MAX_TABLE_BYTES)}"))
        return
    raw = read_bytes(entry, _MAX_TABLE_BYTES)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        problems.append(Problem(entry.path, "", "is not UTF-8 text"))
        return
    if entry.path.lower().endswith(".jsonl"):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(Problem(entry.path, f"line {number}", f"is not valid JSON ({exc.msg})"))
                continue
            if not isinstance(row, dict):
                problems.append(Problem(entry.path, f"line {number}", "must be a JSON object"))
                continue
            yield number, {str(k).strip().lower(): v for k, v in row.items()}
        return
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 2**20))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = {(c or "").strip().lower() for c in (reader.fieldnames or [])}
    missing = [c for c in _TABLE_REQUIRED if c not in columns]
    if missing:
        for column in missing:
            problems.append(Problem(entry.path, column, "this column is required"))
        return
    try:
        for row in reader:
            cleaned = {(k or "").strip().lower(): v for k, v in row.items() if k}
            if not any((v or "").strip() for v in cleaned.values() if isinstance(v, str)):
                continue
            yield reader.line_num, cleaned
    except csv.Error as exc:
        problems.append(Problem(entry.path, f"line {reader.line_num}", f"is not valid CSV ({exc})"))


def drafts_from_table(tree: Tree, table_path: str, problems: list[Problem]) -> list[Draft]:
    entry = tree.lookup(table_path)
    if entry is None:
        problems.append(Problem(table_path, "", "could not be read (missing, or a symbolic link)"))
        return []
    base = str(PurePosixPath(table_path).parent) if "/" in table_path else ""
    label = "line" if table_path.lower().endswith(".jsonl") else "row"
    drafts = []
    for number, row in _table_rows(entry, problems):
        prefix = f"{label} {number}."
        missing = [c for c in _TABLE_REQUIRED if not str(row.get(c) or "").strip()]
        for column in missing:
            problems.append(Problem(table_path, prefix + column, "this field is required"))
        if missing:
            continue
        data: dict[str, Any] = {
            "uuid": str(row["task_id"]).strip(),
            "prompt": str(row["prompt"]),
            "sector": str(row["sector"]),
            "source": str(row.get("source") or "gdpval"),
        }
        data["title"] = str(row.get("title") or "").strip() or _derive_title(data["prompt"])
        files: list[DraftFile] = []
        row_ok = True
        list_columns = ("occupation", "required_software", "expected_deliverables", "reference_files",
                        "hidden_files")
        lists: dict[str, list[str]] = {}
        for column in list_columns:
            try:
                lists[column] = _split_list(row.get(column))
            except ValueError as exc:
                problems.append(Problem(table_path, prefix + column, str(exc)))
                row_ok = False
        if not row_ok:
            continue
        data["occupations"] = lists["occupation"]
        data["required_software"] = lists["required_software"]
        data["expected_deliverables"] = lists["expected_deliverables"]
        if "hidden_info" in row:
            data["hidden_info"] = "" if row["hidden_info"] is None else str(row["hidden_info"])
        limit = row.get("time_limit_minutes")
        if limit not in (None, ""):
            data["time_limit_minutes"] = limit
        for column, kind in (("reference_files", TaskFile.Kind.REFERENCE), ("hidden_files", TaskFile.Kind.HIDDEN)):
            for ref in lists[column]:
                found = _resolve_table_file(tree, base, ref, table_path, prefix + column, problems)
                if found is not None:
                    files.append(DraftFile(kind, PurePosixPath(ref).name, found))
        replace_hidden = "hidden_info" in row or "hidden_files" in row
        drafts.append(Draft(table_path, prefix, data, files, replace_hidden=replace_hidden, allow_titles=True))
    return drafts


def _resolve_table_file(tree: Tree, base: str, ref: str, table_path: str, field_name: str,
                        problems: list[Problem]) -> Entry | None:
    reason = member_path_problem(ref)
    if reason:
        problems.append(Problem(table_path, field_name, f"“{ref}” {reason}"))
        return None
    for candidate in (join_path(base, f"files/{ref}"), join_path(base, ref)):
        entry = tree.lookup(candidate)
        if entry is not None:
            return entry
    problems.append(Problem(table_path, field_name, f"“{ref}” was not found in files/ or next to the table"))
    return None



def table_field(field_name: str, prefix: str) -> str:
    rest = field_name[len(prefix):] if field_name.startswith(prefix) else field_name
    head, sep, tail = rest.partition(".")
    head_base = head.split("[", 1)[0]
    renamed = _TABLE_FIELD_NAMES.get(head_base)
    if renamed:
        head = renamed
    return prefix + head + sep + tail
