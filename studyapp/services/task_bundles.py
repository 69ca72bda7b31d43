"""Import and export task bundles (docs/task-bundles.md): one service behind the API and the commands.

An import reads a bundle folder, a folder of bundles, a ZIP of one or many bundles, or a GDPval-style table
(CSV/JSONL) with its reference files beside it. Every problem — invalid fields, unknown sectors or
occupations, unsafe archive members, oversize or mistyped files, repeated UUIDs — is collected first and
raised together as :class:`TaskBundleInvalid`; only a clean import writes, in one transaction, keyed by the
task UUID so importing the same bundle again updates the task instead of duplicating it.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import mimetypes
import os
import re
import shutil
import stat
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction

from studyapp.conf import upload_limits
from studyapp.files import FileRejected, check_type, sanitize_filename
from studyapp.models import Occupation, Sector, Study, TaskFile, TaskInstance
from studyapp.services.audit import audit_record
from studyapp.task_bundle_format import (
    FORMAT_VERSION,
    HIDDEN_DIR,
    JUNK_NAMES,
    JUNK_PREFIXES,
    REFERENCE_DIR,
    ROOT_NOTE_PREFIXES,
    TABLE_SUFFIXES,
    TASK_FILE,
    BundleLimits,
    Problem,
    TaskBundleInvalid,
    TaskSpec,
    human_bytes,
    spec_problems,
)

__all__ = ["ExportReport", "ImportReport", "TaskOutcome", "task_bundles_export", "task_bundles_import"]

_KINDS = {REFERENCE_DIR: TaskFile.Kind.REFERENCE, HIDDEN_DIR: TaskFile.Kind.HIDDEN}
_MAX_TASK_JSON_BYTES = 2**20
_MAX_TABLE_BYTES = 256 * 2**20
_HEAD_BYTES = 8192
_CHUNK = 1 << 20
_TABLE_REQUIRED = ("task_id", "sector", "occupation", "prompt")
_TABLE_OPTIONAL = (
    "title", "source", "reference_files", "hidden_files", "required_software", "expected_deliverables",
    "hidden_info", "time_limit_minutes",
)
# Spec fields named after the table column they came from, so messages point at the column a team edits.
_TABLE_FIELD_NAMES = {"uuid": "task_id", "occupations": "occupation"}


# --------------------------------------------------------------------------------------------------- reports
@dataclass
class TaskOutcome:
    """What an import did (or, in a dry run, would do) to one task."""

    uuid: str
    title: str
    action: str  # created | updated | unchanged
    files_added: list[str] = field(default_factory=list)
    files_replaced: list[str] = field(default_factory=list)
    files_removed: list[str] = field(default_factory=list)
    files_unchanged: int = 0
    attached_to_study: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ImportReport:
    dry_run: bool
    study: str | None
    tasks: list[TaskOutcome]

    def count(self, action: str) -> int:
        return sum(1 for outcome in self.tasks if outcome.action == action)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "study": self.study,
            "created": self.count("created"),
            "updated": self.count("updated"),
            "unchanged": self.count("unchanged"),
            "tasks": [outcome.to_dict() for outcome in self.tasks],
        }


@dataclass
class ExportReport:
    destination: Path
    tasks: int
    files: int


# --------------------------------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class _Entry:
    """A regular file in the source, addressed by its POSIX path relative to the source root."""

    path: str
    size: int
    opener: Callable[[], IO[bytes]]


def _is_junk(path: str) -> bool:
    name = PurePosixPath(path).name
    return path.startswith(JUNK_PREFIXES) or name in JUNK_NAMES or name.startswith("._")


def _unsafe_reason(path: str) -> str | None:
    """Return why a relative path may not be used, or None when it stays inside the source."""
    if "\\" in path:
        return "uses backslashes; paths inside a bundle must use forward slashes"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return "is an absolute path"
    if any(part == ".." for part in path.split("/")):
        return "points outside the upload (“..”)"
    if "\x00" in path:
        return "contains a NUL character"
    return None


class _Tree:
    """Files of one import source; problems found while listing are appended to ``problems``."""

    def __init__(self, limits: BundleLimits, problems: list[Problem]) -> None:
        self.limits = limits
        self.problems = problems

    def entries(self) -> list[_Entry]:
        raise NotImplementedError

    def lookup(self, path: str) -> _Entry | None:
        raise NotImplementedError


class _FolderTree(_Tree):
    def __init__(self, root: Path, limits: BundleLimits, problems: list[Problem]) -> None:
        super().__init__(limits, problems)
        self.root = root
        self._listed: list[_Entry] | None = None

    def _entry(self, rel: str, path: Path, st: os.stat_result) -> _Entry:
        return _Entry(rel, st.st_size, lambda: path.open("rb"))

    def entries(self) -> list[_Entry]:
        if self._listed is not None:
            return self._listed
        listed: list[_Entry] = []
        total = 0
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            base = Path(dirpath)
            for name in list(dirnames):
                if (base / name).is_symlink():
                    rel = (base / name).relative_to(self.root).as_posix()
                    self.problems.append(Problem(rel, "", "is a symbolic link; links are not followed"))
                    dirnames.remove(name)
            dirnames.sort()
            for name in sorted(filenames):
                path = base / name
                rel = path.relative_to(self.root).as_posix()
                if _is_junk(rel):
                    continue
                st = path.lstat()
                if stat.S_ISLNK(st.st_mode):
                    self.problems.append(Problem(rel, "", "is a symbolic link; links are not followed"))
                    continue
                if not stat.S_ISREG(st.st_mode):
                    self.problems.append(Problem(rel, "", "is not a regular file"))
                    continue
                if len(listed) >= self.limits.max_members:
                    self.problems.append(Problem(
                        "", "", f"the folder holds more than {self.limits.max_members} files; import it in parts"))
                    self._listed = listed
                    return listed
                total += st.st_size
                listed.append(self._entry(rel, path, st))
        if total > self.limits.max_total_bytes:
            self.problems.append(Problem("", "", f"the files total {human_bytes(total)}, more than the "
                                                 f"{human_bytes(self.limits.max_total_bytes)} import limit"))
        self._listed = listed
        return listed

    def lookup(self, path: str) -> _Entry | None:
        if _unsafe_reason(path):
            return None
        current = self.root
        for part in PurePosixPath(path).parts:
            current = current / part
            if current.is_symlink() or not current.exists():
                return None
        st = current.lstat()
        if not stat.S_ISREG(st.st_mode):
            return None
        return self._entry(path, current, st)


class _ZipTree(_Tree):
    def __init__(self, archive: zipfile.ZipFile, limits: BundleLimits, problems: list[Problem]) -> None:
        super().__init__(limits, problems)
        self.archive = archive
        self._by_path: dict[str, _Entry] = {}
        self._scan()

    def _scan(self) -> None:
        limits = self.limits
        infos = self.archive.infolist()
        if len(infos) > limits.max_members:
            self.problems.append(Problem(
                "", "", f"the archive has {len(infos)} members, more than the limit of {limits.max_members}"))
            return
        declared_total = 0
        seen: set[str] = set()
        for info in infos:
            name = info.filename
            reason = _unsafe_reason(name)
            if reason:
                self.problems.append(Problem(name, "", f"unsafe archive path: it {reason}"))
                continue
            if info.is_dir() or _is_junk(name):
                continue
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                self.problems.append(Problem(name, "", "is a symbolic link; links are not allowed in archives"))
                continue
            if info.flag_bits & 0x1:
                self.problems.append(Problem(name, "", "is encrypted; upload an archive without a password"))
                continue
            if name in seen:
                self.problems.append(Problem(name, "", "appears more than once in the archive"))
                continue
            seen.add(name)
            if info.file_size > limits.max_file_bytes:
                self.problems.append(Problem(name, "", f"is {human_bytes(info.file_size)}, more than the "
                                                       f"{human_bytes(limits.max_file_bytes)} per-file limit"))
                continue
            ratio_cap = max(limits.ratio_floor_bytes, int(info.compress_size * limits.max_ratio))
            if info.file_size > ratio_cap:
                ratio = info.file_size / max(info.compress_size, 1)
                self.problems.append(Problem(name, "", f"compresses {ratio:.0f}:1, beyond the "
                                                       f"{limits.max_ratio:.0f}:1 limit (possible zip bomb)"))
                continue
            declared_total += info.file_size
            self._by_path[name] = _Entry(name, info.file_size, lambda info=info: self.archive.open(info))
        if declared_total > limits.max_total_bytes:
            self.problems.append(Problem("", "", f"the archive unpacks to {human_bytes(declared_total)}, more "
                                                 f"than the {human_bytes(limits.max_total_bytes)} import limit"))

    def entries(self) -> list[_Entry]:
        return list(self._by_path.values())

    def lookup(self, path: str) -> _Entry | None:
        return self._by_path.get(path)


class _SingleFileTree(_Tree):
    """An uploaded table on its own: nothing lies beside it."""

    def __init__(self, entry: _Entry, limits: BundleLimits, problems: list[Problem]) -> None:
        super().__init__(limits, problems)
        self.entry = entry

    def entries(self) -> list[_Entry]:
        return [self.entry]

    def lookup(self, path: str) -> _Entry | None:
        return self.entry if path == self.entry.path else None


@contextlib.contextmanager
def _open_tree(source: Path | IO[bytes], name: str | None, limits: BundleLimits,
               problems: list[Problem]) -> Iterator[tuple[_Tree | None, str | None]]:
    """Yield the source's file tree and, when the source is a table file itself, the table's path."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.name == TASK_FILE and path.is_file():
            path = path.parent  # pointing at a bundle's task.json means the bundle
        name = name or path.name
        if path.is_dir():
            yield _FolderTree(path, limits, problems), None
            return
        if not path.is_file():
            problems.append(Problem(name, "", "does not exist or is not a file or folder"))
            yield None, None
            return
        if name.lower().endswith(TABLE_SUFFIXES):
            yield _FolderTree(path.parent, limits, problems), path.name
            return
        with path.open("rb") as handle, _open_zip(handle, name, limits, problems) as tree:
            yield tree, None
        return
    name = name or getattr(source, "name", "") or "upload"
    if name.lower().endswith(TABLE_SUFFIXES):
        base = PurePosixPath(name.replace("\\", "/")).name
        size = _stream_size(source)
        yield _SingleFileTree(_Entry(base, size, lambda: _Unclosing(source)), limits, problems), base
        return
    with _open_zip(source, name, limits, problems) as tree:
        yield tree, None


@contextlib.contextmanager
def _open_zip(handle: IO[bytes], name: str, limits: BundleLimits,
              problems: list[Problem]) -> Iterator[_Tree | None]:
    if not name.lower().endswith(".zip"):
        problems.append(Problem(name, "", "is not a bundle folder, a .zip archive or a .csv/.jsonl task table"))
        yield None
        return
    if _stream_size(handle) > limits.max_total_bytes:
        problems.append(Problem(name, "", f"is larger than the {human_bytes(limits.max_total_bytes)} import limit"))
        yield None
        return
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        problems.append(Problem(name, "", "is not a readable ZIP archive"))
        yield None
        return
    with archive:
        yield _ZipTree(archive, limits, problems)


def _stream_size(handle: IO[bytes]) -> int:
    position = handle.tell()
    handle.seek(0, io.SEEK_END)
    size = handle.tell()
    handle.seek(position)
    return size


class _Unclosing(io.RawIOBase):
    """A read view of an upload that rewinds it and leaves it open when closed."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream = stream
        stream.seek(0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


# --------------------------------------------------------------------------------------------------- drafts
@dataclass
class _DraftFile:
    kind: str
    name: str  # stored name (base name)
    entry: _Entry


@dataclass
class _Draft:
    """One task as read from the source, before the database and the files are checked."""

    location: str  # where problems with the task's fields are reported (task.json path or table path)
    field_prefix: str  # "" for task.json, "row N." for a table row
    data: dict[str, Any]
    files: list[_DraftFile]
    replace_hidden: bool
    allow_titles: bool = False


@dataclass
class _PlannedFile:
    kind: str
    name: str
    entry: _Entry
    sha256: str
    size: int


@dataclass
class _Plan:
    spec: TaskSpec
    sector: Sector
    occupations: list[Occupation]
    files: list[_PlannedFile]
    replace_hidden: bool
    location: str


def _read_bytes(entry: _Entry, limit: int) -> bytes:
    """Read a small file whole, in chunks, never more than ``limit + 1`` bytes."""
    parts: list[bytes] = []
    size = 0
    with entry.opener() as handle:
        while size <= limit and (chunk := handle.read(min(_CHUNK, limit + 1 - size))):
            parts.append(chunk)
            size += len(chunk)
    return b"".join(parts)


def _drafts_from_bundles(tree: _Tree, entries: list[_Entry], problems: list[Problem]) -> list[_Draft]:
    roots = sorted({str(PurePosixPath(e.path).parent) if "/" in e.path else ""
                    for e in entries if PurePosixPath(e.path).name == TASK_FILE})
    nested = {r for r in roots for outer in roots if r != outer and (outer == "" or r.startswith(outer + "/"))}
    for root in sorted(nested):
        problems.append(Problem(_join(root, TASK_FILE), "", "is a bundle inside another bundle; bundles "
                                                           "must sit side by side"))
    roots = [r for r in roots if r not in nested]
    members: dict[str, list[tuple[str, _Entry]]] = {r: [] for r in roots}
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


def _join(root: str, rel: str) -> str:
    return f"{root}/{rel}" if root else rel


def _draft_from_bundle(root: str, members: list[tuple[str, _Entry]], problems: list[Problem]) -> list[_Draft]:
    spec_path = _join(root, TASK_FILE)
    files: list[_DraftFile] = []
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
            files.append(_DraftFile(_KINDS[top], rest, entry))
            continue
        problems.append(Problem(entry.path, "", "does not belong in a bundle: only task.json, reference/ and "
                                                "hidden/ are allowed"))
    assert spec_entry is not None  # roots are found by their task.json
    if spec_entry.size > _MAX_TASK_JSON_BYTES:
        problems.append(Problem(spec_path, "", f"is larger than {human_bytes(_MAX_TASK_JSON_BYTES)}"))
        return []
    raw = _read_bytes(spec_entry, _MAX_TASK_JSON_BYTES)
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
    return [_Draft(spec_path, "", data, files, replace_hidden=has_hidden)]


def _find_table(entries: list[_Entry], problems: list[Problem]) -> str | None:
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


def _table_rows(entry: _Entry, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    if entry.size > _MAX_TABLE_BYTES:
        problems.append(Problem(entry.path, "", f"is larger than {human_bytes(_MAX_TABLE_BYTES)}"))
        return
    raw = _read_bytes(entry, _MAX_TABLE_BYTES)
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


def _drafts_from_table(tree: _Tree, table_path: str, problems: list[Problem]) -> list[_Draft]:
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
        files: list[_DraftFile] = []
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
                    files.append(_DraftFile(kind, PurePosixPath(ref).name, found))
        replace_hidden = "hidden_info" in row or "hidden_files" in row
        drafts.append(_Draft(table_path, prefix, data, files, replace_hidden=replace_hidden, allow_titles=True))
    return drafts


def _resolve_table_file(tree: _Tree, base: str, ref: str, table_path: str, field_name: str,
                        problems: list[Problem]) -> _Entry | None:
    reason = _unsafe_reason(ref)
    if reason:
        problems.append(Problem(table_path, field_name, f"“{ref}” {reason}"))
        return None
    for candidate in (_join(base, f"files/{ref}"), _join(base, ref)):
        entry = tree.lookup(candidate)
        if entry is not None:
            return entry
    problems.append(Problem(table_path, field_name, f"“{ref}” was not found in files/ or next to the table"))
    return None


# --------------------------------------------------------------------------------------------------- checks
def _hash_entry(entry: _Entry, limits: BundleLimits) -> tuple[bytes, str, int]:
    """Read a file once: its first bytes (for the type check), SHA-256 and true size, up to the limit."""
    digest, size, head = hashlib.sha256(), 0, b""
    with entry.opener() as handle:
        while chunk := handle.read(_CHUNK):
            if len(head) < _HEAD_BYTES:
                head += chunk[: _HEAD_BYTES - len(head)]
            size += len(chunk)
            if size > limits.max_file_bytes:
                break
            digest.update(chunk)
    return head, digest.hexdigest(), size


def _check_files(draft: _Draft, limits: BundleLimits, problems: list[Problem]) -> list[_PlannedFile]:
    planned: list[_PlannedFile] = []
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
        planned.append(_PlannedFile(draft_file.kind, safe, draft_file.entry, sha256, size))
    return planned


def _resolve(drafts: list[_Draft], limits: BundleLimits, problems: list[Problem]) -> list[_Plan]:
    """Check every draft against the database and its files; build the plans of a clean import.

    Sector, occupations and files are checked even when other fields are invalid, so one run reports
    everything a team has to fix.
    """
    sectors = list(Sector.objects.all())
    by_code = {s.code: s for s in sectors}
    by_name = {s.name.casefold(): s for s in sectors}
    checked: list[tuple[_Draft, TaskSpec | None]] = []
    for draft in drafts:
        spec, found = spec_problems(draft.data, path=draft.location, prefix=draft.field_prefix)
        if draft.allow_titles:
            found = [Problem(p.path, _table_field(p.field, draft.field_prefix), p.message) for p in found]
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
            plans.append(_Plan(spec, sector, resolved, files, draft.replace_hidden, draft.location))
    if total > limits.max_total_bytes:
        problems.append(Problem("", "", f"the task files total {human_bytes(total)}, more than the "
                                        f"{human_bytes(limits.max_total_bytes)} import limit"))
    return plans


def _raw_list(value: Any) -> list[str]:
    """Return the stripped text items of a raw list field (invalid items are reported by the spec check)."""
    if not isinstance(value, list):
        return []
    return [item.strip() for item in value if isinstance(item, str) and item.strip() and "\x00" not in item]


def _table_field(field_name: str, prefix: str) -> str:
    rest = field_name[len(prefix):] if field_name.startswith(prefix) else field_name
    head, sep, tail = rest.partition(".")
    head_base = head.split("[", 1)[0]
    renamed = _TABLE_FIELD_NAMES.get(head_base)
    if renamed:
        head = renamed
    return prefix + head + sep + tail


def _occupation_by_title(title: str) -> Occupation | None:
    matches = list(Occupation.objects.filter(title__iexact=title)[:2])
    return matches[0] if len(matches) == 1 else None


# --------------------------------------------------------------------------------------------------- writes
def _field_values(plan: _Plan) -> dict[str, Any]:
    spec = plan.spec
    values: dict[str, Any] = {
        "title": spec.title,
        "prompt": spec.prompt,
        "source": spec.source,
        "sector": plan.sector,
        "required_software": spec.required_software,
        "expected_deliverables": spec.expected_deliverables,
        "time_limit_minutes": spec.time_limit_minutes,
    }
    if plan.replace_hidden:
        values["hidden_info"] = spec.hidden_info or ""
    return values


def _diff(plan: _Plan, task: TaskInstance | None, study: Study | None) -> tuple[TaskOutcome, dict[str, Any]]:
    """Compare a plan with the stored task; return the outcome and the changed field values."""
    outcome = TaskOutcome(uuid=str(plan.spec.uuid), title=plan.spec.title, action="created")
    values = _field_values(plan)
    desired = {(f.kind, f.name): f for f in plan.files}
    if task is None:
        outcome.files_added = sorted(f"{kind}/{name}" for kind, name in desired)
        outcome.attached_to_study = study is not None
        return outcome, values
    changed = {k: v for k, v in values.items() if getattr(task, k if k != "sector" else "sector_id")
               != (v.pk if k == "sector" else v)}
    wanted_occupations = {o.pk for o in plan.occupations}
    if set(task.occupations.values_list("pk", flat=True)) != wanted_occupations:
        changed["occupations"] = plan.occupations
    for stored in task.files.all():
        if stored.kind == TaskFile.Kind.HIDDEN and not plan.replace_hidden:
            continue
        label = f"{stored.kind}/{stored.name}"
        wanted = desired.pop((stored.kind, stored.name), None)
        if wanted is None:
            outcome.files_removed.append(label)
        elif wanted.sha256 != stored.sha256 or wanted.size != stored.size:
            outcome.files_replaced.append(label)
        else:
            outcome.files_unchanged += 1
    outcome.files_added = sorted(f"{kind}/{name}" for kind, name in desired)
    outcome.attached_to_study = study is not None and not task.studies.filter(pk=study.pk).exists()
    touched = changed or outcome.files_added or outcome.files_removed or outcome.files_replaced
    outcome.action = "updated" if touched else "unchanged"
    return outcome, changed


def _store(task_file: TaskFile, planned: _PlannedFile, saved: list[str]) -> None:
    with planned.entry.opener() as handle:
        task_file.file.save(planned.name, File(handle, name=planned.name), save=False)
    saved.append(task_file.file.name)
    task_file.size = planned.size
    task_file.sha256 = planned.sha256
    task_file.content_type = mimetypes.guess_type(planned.name)[0] or ""
    task_file.save()


def _apply(plan: _Plan, study: Study | None, saved: list[str], doomed: list[str]) -> TaskOutcome:
    task = TaskInstance.objects.select_for_update().filter(uuid=plan.spec.uuid).first()
    outcome, values = _diff(plan, task, study)
    if task is None:
        occupations = values.pop("occupations", plan.occupations)
        task = TaskInstance.objects.create(uuid=plan.spec.uuid, **values)
        task.occupations.set(occupations)
    elif values:
        occupations = values.pop("occupations", None)
        for name, value in values.items():
            setattr(task, name, value)
        if values:
            task.save()
        if occupations is not None:
            task.occupations.set(occupations)
    if outcome.action != "unchanged":
        _apply_files(task, plan, saved, doomed)
    if study is not None:
        task.studies.add(study)
    return outcome


def _apply_files(task: TaskInstance, plan: _Plan, saved: list[str], doomed: list[str]) -> None:
    desired = {(f.kind, f.name): f for f in plan.files}
    for stored in list(task.files.all()):
        if stored.kind == TaskFile.Kind.HIDDEN and not plan.replace_hidden:
            continue
        wanted = desired.pop((stored.kind, stored.name), None)
        if wanted is None:
            doomed.append(stored.file.name)
            stored.delete()
        elif wanted.sha256 != stored.sha256 or wanted.size != stored.size:
            doomed.append(stored.file.name)
            _store(stored, wanted, saved)
    for (kind, name), planned in sorted(desired.items()):
        _store(TaskFile(task=task, kind=kind, name=name), planned, saved)


def task_bundles_import(
    *,
    source: Path | IO[bytes],
    name: str | None = None,
    study: Study | None = None,
    actor: Any = None,
    dry_run: bool = False,
    limits: BundleLimits | None = None,
) -> ImportReport:
    """Validate a bundle source completely, then create or update its tasks in one transaction.

    ``source`` is a path (bundle folder, folder of bundles, .zip, or .csv/.jsonl table) or an open binary
    upload whose ``name`` ends in .zip, .csv or .jsonl. Raises :class:`TaskBundleInvalid` listing every
    problem; in that case nothing has been written. With ``dry_run`` the report says what would change.
    """
    limits = limits or BundleLimits.from_settings()
    problems: list[Problem] = []
    with _open_tree(source, name, limits, problems) as (tree, table_path):
        plans: list[_Plan] = []
        if tree is not None:
            if table_path is not None:
                drafts = _drafts_from_table(tree, table_path, problems)
            else:
                entries = tree.entries()
                if any(PurePosixPath(e.path).name == TASK_FILE for e in entries):
                    drafts = _drafts_from_bundles(tree, entries, problems)
                else:
                    found = _find_table(entries, problems)
                    drafts = _drafts_from_table(tree, found, problems) if found else []
            if not drafts and not problems:
                problems.append(Problem("", "", "the upload holds no tasks"))
            plans = _resolve(drafts, limits, problems)
        if problems:
            raise TaskBundleInvalid(sorted(problems, key=lambda p: p.path))
        if dry_run:
            outcomes = []
            for plan in plans:
                task = TaskInstance.objects.filter(uuid=plan.spec.uuid).prefetch_related("files").first()
                outcomes.append(_diff(plan, task, study)[0])
            return ImportReport(dry_run=True, study=study.slug if study else None, tasks=outcomes)
        return _write(plans, study=study, actor=actor)


def _write(plans: list[_Plan], *, study: Study | None, actor: Any) -> ImportReport:
    saved: list[str] = []
    doomed: list[str] = []
    try:
        with transaction.atomic():
            outcomes = [_apply(plan, study, saved, doomed) for plan in plans]
            changed = [o for o in outcomes if o.action != "unchanged" or o.attached_to_study]
            if changed:
                audit_record(
                    actor=actor, action="tasks.import", object_type="task_import",
                    object_id=study.slug if study else "", study=study,
                    after={"created": [o.uuid for o in outcomes if o.action == "created"],
                           "updated": [o.uuid for o in outcomes if o.action == "updated"],
                           "attached": [o.uuid for o in outcomes if o.attached_to_study]},
                    note=f"{len(plans)} task(s) in the import",
                )
            # Replaced and removed files leave storage only once the rows pointing at them are gone for good.
            transaction.on_commit(lambda: _delete_stored(doomed))
    except IntegrityError:
        _delete_stored(saved)
        # Two imports creating the same task at once: the loser writes nothing and can simply run again.
        raise TaskBundleInvalid([Problem("", "", "another import changed the same tasks at the same time; "
                                                 "run this import again")]) from None
    except BaseException:
        _delete_stored(saved)
        raise
    return ImportReport(dry_run=False, study=study.slug if study else None, tasks=outcomes)


def _delete_stored(names: Iterable[str]) -> None:
    for stored_name in names:
        with contextlib.suppress(OSError):
            default_storage.delete(stored_name)


# --------------------------------------------------------------------------------------------------- export
def _spec_payload(task: TaskInstance, include_hidden: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "uuid": str(task.uuid),
        "title": task.title,
        "prompt": task.prompt,
        "source": task.source,
        "sector": task.sector.code,
        "occupations": sorted(o.soc_code for o in task.occupations.all()),
        "required_software": list(task.required_software or []),
        "expected_deliverables": list(task.expected_deliverables or []),
        "time_limit_minutes": task.time_limit_minutes,
    }
    if include_hidden:
        payload["hidden_info"] = task.hidden_info
    return payload


def task_bundles_export(
    *, tasks: Iterable[TaskInstance], destination: Path, include_hidden: bool = True
) -> ExportReport:
    """Write each task as a bundle folder named by its UUID, into a folder or (``*.zip``) an archive.

    Bundles written with ``include_hidden`` import back identically; without it they carry no hidden
    information, and importing them leaves a task's hidden information and files as they are.
    """
    destination = Path(destination)
    as_zip = destination.suffix.lower() == ".zip"
    if as_zip and destination.exists():
        raise FileExistsError(f"{destination} already exists")
    if not as_zip and destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise FileExistsError(f"{destination} exists and is not an empty folder")
    tasks = list(tasks)
    n_files = 0
    if as_zip:
        destination.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.localtime()[:6]
        with zipfile.ZipFile(destination, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for task in tasks:
                root = str(task.uuid)
                archive.writestr(f"{root}/{TASK_FILE}", _dump(_spec_payload(task, include_hidden)))
                for task_file in _export_files(task, include_hidden):
                    member = zipfile.ZipInfo(f"{root}/{_dir_of(task_file)}/{task_file.name}", stamp)
                    member.compress_type = zipfile.ZIP_DEFLATED
                    with default_storage.open(task_file.file.name, "rb") as src, \
                            archive.open(member, "w", force_zip64=task_file.size > 2**31 - 1) as dst:
                        shutil.copyfileobj(src, dst, _CHUNK)
                    n_files += 1
        return ExportReport(destination, len(tasks), n_files)
    destination.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        root = destination / str(task.uuid)
        root.mkdir()
        (root / TASK_FILE).write_text(_dump(_spec_payload(task, include_hidden)), encoding="utf-8")
        for task_file in _export_files(task, include_hidden):
            folder = root / _dir_of(task_file)
            folder.mkdir(exist_ok=True)
            with default_storage.open(task_file.file.name, "rb") as src, (folder / task_file.name).open("wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
            n_files += 1
    return ExportReport(destination, len(tasks), n_files)


def _export_files(task: TaskInstance, include_hidden: bool) -> list[TaskFile]:
    files = list(task.files.all())
    return [f for f in files if include_hidden or f.kind != TaskFile.Kind.HIDDEN]


def _dir_of(task_file: TaskFile) -> str:
    return HIDDEN_DIR if task_file.kind == TaskFile.Kind.HIDDEN else REFERENCE_DIR


def _dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
