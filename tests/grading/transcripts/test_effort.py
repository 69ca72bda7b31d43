"""The edit ratio (seed 004's effort control) against a plain dynamic-programming edit distance."""

from __future__ import annotations

import random

import pytest

from grading.transcripts.effort import MAX_CHARS, edit_ratio, edit_ratio_cut, levenshtein


def _reference(a: str, b: str) -> int:
    """The textbook Wagner–Fischer table, one cell at a time."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def test_the_distance_equals_the_cell_by_cell_table_on_random_strings():
    rng = random.Random(7)
    for _ in range(300):
        a = "".join(rng.choice("abcé✓") for _ in range(rng.randint(0, 25)))
        b = "".join(rng.choice("abcé✓") for _ in range(rng.randint(0, 25)))
        assert levenshtein(a, b) == _reference(a, b), (a, b)


def test_known_distances():
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == levenshtein("abc", "") == 3
    assert levenshtein("same", "same") == 0


def test_a_pasted_task_has_ratio_zero_and_an_own_request_a_high_one():
    question = "Draft a one-page memo on the quarterly budget."
    assert edit_ratio([question], question) == 0.0
    assert edit_ratio(["Please write me a poem about cats"], question) > 0.6
    joined = "Draft a memo.\nKeep it short."
    assert edit_ratio(["Draft a memo.", "Keep it short."], question) == pytest.approx(
        _reference(joined, question) / max(len(joined), len(question)))


def test_no_prompt_is_no_measure_not_zero():
    assert edit_ratio([], "anything") is None
    assert edit_ratio(["   "], "anything") is None


def test_long_texts_are_compared_on_their_first_part_and_say_so():
    long = "x" * (MAX_CHARS + 10)
    assert edit_ratio_cut([long], "q") and not edit_ratio_cut(["short"], "q")
    assert edit_ratio([long], "x" * MAX_CHARS) == 0.0
