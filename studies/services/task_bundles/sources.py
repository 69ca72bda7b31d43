"""Where an import's files come from: a folder, a ZIP archive, or one uploaded table, behind one interface."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, cast

from studies.archives import member_path_problem, zip_member_problem
from studies.byte_format import human_bytes
from studies.task_bundle_format import JUNK_NAMES, JUNK_PREFIXES, TABLE_SUFFIXES, TASK_FILE, BundleLimits, Problem

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Entry:
    """A regular file in the source, addressed by its POSIX path relative to the source root."""

    path: str
    size: int
    opener: Callable[[], IO[bytes]]


def _is_junk(path: str) -> bool:
    name = PurePosixPath(path).name
    return path.startswith(JUNK_PREFIXES) or name in JUNK_NAMES or name.startswith("._")


class Tree:
    """Files of one import source; problems found while listing are appended to ``problems``."""

    def __init__(self, limits: BundleLimits, problems: list[Problem]) -> None:
        self.limits = limits
        self.problems = problems

    def entries(self) -> list[Entry]:
        raise NotImplementedError

    def lookup(self, path: str) -> Entry | None:
        raise NotImplementedError


class _FolderTree(Tree):
    def __init__(self, root: Path, limits: BundleLimits, problems: list[Problem]) -> None:
        super().__init__(limits, problems)
        self.root = root
        self._listed: list[Entry] | None = None

    def _entry(self, rel: str, path: Path, st: os.stat_result) -> Entry:
        return Entry(rel, st.st_size, lambda: path.open("rb"))

    def entries(self) -> list[Entry]:
        if self._listed is not None:
            return self._listed
        listed: list[Entry] = []
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

    def lookup(self, path: str) -> Entry | None:
        if member_path_problem(path):
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


class _ZipTree(Tree):
    def __init__(self, archive: zipfile.ZipFile, limits: BundleLimits, problems: list[Problem]) -> None:
        super().__init__(limits, problems)
        self.archive = archive
        self._by_path: dict[str, Entry] = {}
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
            reason = zip_member_problem(info)
            if reason:
                self.problems.append(Problem(name, "", f"unsafe archive member: it {reason}"))
                continue
            if info.is_dir() or _is_junk(name):
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
            self._by_path[name] = Entry(name, info.file_size, functools.partial(self.archive.open, info))
        if declared_total > limits.max_total_bytes:
            self.problems.append(Problem("", "", f"the archive unpacks to {human_bytes(declared_total)}, more "
                                                 f"than the {human_bytes(limits.max_total_bytes)} import limit"))

    def entries(self) -> list[Entry]:
        return list(self._by_path.values())

    def lookup(self, path: str) -> Entry | None:
        return self._by_path.get(path)


class _SingleFileTree(Tree):
    """An uploaded table on its own: nothing lies beside it."""

    def __init__(self, entry: Entry, limits: BundleLimits, problems: list[Problem]) -> None:
        super().__init__(limits, problems)
        self.entry = entry

    def entries(self) -> list[Entry]:
        return [self.entry]

    def lookup(self, path: str) -> Entry | None:
        return self.entry if path == self.entry.path else None


@contextlib.contextmanager
def open_tree(source: Path | IO[bytes], name: str | None, limits: BundleLimits,
               problems: list[Problem]) -> Iterator[tuple[Tree | None, str | None]]:
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
        # A RawIOBase is a binary file object, though typeshed does not count it as IO[bytes].
        yield _SingleFileTree(Entry(base, size, lambda: cast(IO[bytes], _Unclosing(source))), limits, problems), base
        return
    with _open_zip(source, name, limits, problems) as tree:
        yield tree, None


@contextlib.contextmanager
def _open_zip(handle: IO[bytes], name: str, limits: BundleLimits,
              problems: list[Problem]) -> Iterator[Tree | None]:
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



def read_bytes(entry: Entry, limit: int) -> bytes:
    """Read a small file whole, in chunks, never more than ``limit + 1`` bytes."""
    parts: list[bytes] = []
    size = 0
    with entry.opener() as handle:
        while size <= limit and (chunk := handle.read(min(CHUNK_BYTES, limit + 1 - size))):
            parts.append(chunk)
            size += len(chunk)
    return b"".join(parts)



def join_path(root: str, rel: str) -> str:
    return f"{root}/{rel}" if root else rel
