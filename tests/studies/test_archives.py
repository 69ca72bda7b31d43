"""The one ZIP-member check: every form an archive path can use to escape or hide is refused."""

from __future__ import annotations

import stat
import zipfile

import pytest

from studies.archives import member_path_problem, zip_member_problem


@pytest.mark.parametrize(
    "path, reason",
    [
        ("", "empty path"),
        ("/", "empty path"),
        ("docs\x00.txt", "control or unprintable"),
        ("notes\n.txt", "control or unprintable"),
        ("evil\u202etxt.exe", "control or unprintable"),  # right-to-left override hides the real extension
        ("bundle\\reference\\x.txt", "uses backslashes"),
        ("..\\evil.txt", "uses backslashes"),
        ("\\windows\\evil.txt", "uses backslashes"),
        ("/etc/passwd", "is an absolute path"),
        ("C:/Users/evil.txt", "drive letter"),
        ("c:evil.txt", "drive letter"),
        ("../evil.txt", "points outside"),
        ("docs/../../evil.txt", "points outside"),
        ("docs/..", "points outside"),
    ],
)
def test_unsafe_paths_are_refused_with_their_reason(path: str, reason: str) -> None:
    problem = member_path_problem(path)
    assert problem is not None and reason in problem


@pytest.mark.parametrize("path", ["task.json", "reference/ledger.csv", "docs/", "a..b/report..final.pdf", "résumé.pdf"])
def test_ordinary_paths_pass(path: str) -> None:
    assert member_path_problem(path) is None


def test_symbolic_link_members_are_refused() -> None:
    link = zipfile.ZipInfo("reference/latest.txt")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    assert "symbolic link" in (zip_member_problem(link) or "")


def test_zip_member_problem_checks_the_path_first_and_passes_regular_files() -> None:
    regular = zipfile.ZipInfo("reference/ledger.csv")
    regular.external_attr = (stat.S_IFREG | 0o644) << 16
    assert zip_member_problem(regular) is None
    assert "points outside" in (zip_member_problem(zipfile.ZipInfo("../x.csv")) or "")
