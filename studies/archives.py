"""The one check every ZIP member path passes before anything reads or stores it (no Django imports).

Task-bundle imports and deliverable extraction both open archives that participants or study teams upload;
both refuse the same member names, so a path one accepts can never smuggle a file past the other.
"""

from __future__ import annotations

import re
import stat
import zipfile

__all__ = ["member_path_problem", "zip_member_problem"]

_DRIVE = re.compile(r"^[A-Za-z]:")


def member_path_problem(path: str) -> str | None:
    """Return why a relative path inside an archive or upload may not be used, or None when it is safe.

    The reason reads after the path, e.g. "“x” is an absolute path". Rules, strictest of every copy this
    replaced: no empty name, no control or other unprintable characters (NUL included), no backslashes
    (the ZIP format uses '/', and '\\' could hide '..' or a root from other tools), no absolute path, no
    drive letter, no '..' component.
    """
    if not path.strip("/"):
        return "is an empty path"
    if any(not c.isprintable() for c in path):
        return "contains control or unprintable characters"
    if "\\" in path:
        return "uses backslashes; paths inside an archive must use forward slashes"
    if path.startswith("/"):
        return "is an absolute path"
    if _DRIVE.match(path):
        return "is an absolute path (it starts with a drive letter)"
    if ".." in path.split("/"):
        return "points outside the upload (“..”)"
    return None


def zip_member_problem(info: zipfile.ZipInfo) -> str | None:
    """Return why a ZIP member may not be read: an unsafe path (see `member_path_problem`) or a symbolic link."""
    problem = member_path_problem(info.filename)
    if problem:
        return problem
    if stat.S_ISLNK(info.external_attr >> 16):
        return "is a symbolic link; links are not allowed in archives"
    return None
