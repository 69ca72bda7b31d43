"""The judge's character budget is shared fairly and every cut is marked."""

from __future__ import annotations

from grading.extract import TRUNCATION_NOTICE, ExtractLimits, extract_files
from tests.grading.extract.builders import (
    make_zip,
)


def test_budget_is_shared_fairly_and_every_cut_is_marked() -> None:
    files = [("small.txt", b"s" * 500), ("big1.txt", b"a" * 10_000), ("big2.txt", b"b" * 10_000)]
    extraction = extract_files(files, limits=ExtractLimits(max_chars=6_000))
    small, big1, big2 = extraction.parts
    assert extraction.truncated
    assert extraction.total_chars <= 6_000
    assert small.text == "s" * 500 and not small.truncated
    for part, letter in ((big1, "a"), (big2, "b")):
        kept, marker = part.text.split("\n[[TRUNCATED: ")
        assert part.truncated
        assert kept == letter * len(kept) and len(kept) >= 2_500  # an equal share of what small.txt left
        assert marker == f"{10_000 - len(kept)} characters omitted from {part.name}]]"
    assert "[[TRUNCATED:" in extraction.as_prompt_text()
    assert "[[TRUNCATED:" in TRUNCATION_NOTICE


def test_nothing_is_cut_when_everything_fits() -> None:
    extraction = extract_files([("a.txt", b"alpha"), ("b.txt", b"beta")], limits=ExtractLimits(max_chars=100))
    assert not extraction.truncated
    assert "TRUNCATED" not in extraction.as_prompt_text()


def test_huge_text_file_is_read_only_as_far_as_the_budget_needs() -> None:
    extraction = extract_files(
        [("log.txt", b"line of log output\n" * 200_000)], limits=ExtractLimits(max_chars=10_000)
    )
    [part] = extraction.parts
    assert len(part.text) <= 10_000
    assert "[[TRUNCATED: at least" in part.text


def test_many_large_members_are_cut_while_extracting_yet_shared_fairly() -> None:
    members = {f"chapter{i:02d}.txt": (f"chapter {i} " * 2_000).encode() for i in range(40)}
    extraction = extract_files(
        [("book.zip", make_zip(members)), ("late.txt", b"z" * 3_000)], limits=ExtractLimits(max_chars=20_000)
    )
    chapters = [p for p in extraction.parts if "chapter" in p.name]
    assert extraction.total_chars <= 20_000
    assert len(chapters) == 40 and all(p.truncated for p in chapters)
    shares = [len(p.text) for p in chapters]
    assert max(shares) - min(shares) <= 60  # equal shares despite the early cuts
    kept, marker = chapters[0].text.split("\n[[TRUNCATED: ")
    assert (
        marker
        == f"{len(members['chapter00.txt']) - len(kept)} characters omitted from book.zip/chapter00.txt]]"
    )
    assert extraction.parts[-1].text.startswith("z" * 200)
