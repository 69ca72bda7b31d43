"""Rubric linting follows the UpBench authoring rules (no database)."""

from __future__ import annotations

import pytest

from experts.rubric_lint import blocking, lint_criterion, lint_rubric


def code_ids(hints):
    return {h.code for h in hints}


def _rows(n, label="important"):
    return [{"description": f"Workbook contains a sheet named Q{i} with 12 monthly totals", "label": label}
            for i in range(n)]


@pytest.mark.parametrize("text", [
    "Work is of professional quality",
    "The report is high-quality and well written",
    "Uses an appropriate tone",
])
def test_subjective_wording_gets_a_warning(text):
    assert "subjective" in code_ids(lint_criterion(text, "important"))


def test_unmeasurable_wording_gets_a_warning():
    assert "unmeasurable" in code_ids(lint_criterion("Analysis is thorough and insightful", "important"))


@pytest.mark.parametrize("text", [
    "Analysis must be completed by end of the week",
    "Delivered within 3 days of the kickoff",
    "Submitted before 2025-03-01 to the client",
])
def test_timeline_criteria_get_a_warning(text):
    assert "timeline" in code_ids(lint_criterion(text, "critical"))


@pytest.mark.parametrize("text", [
    "Must be completed by U.S based worker",
    "Translator is a native speaker of German",
    "Freelancer has 5+ years of experience in tax law",
])
def test_worker_attribute_criteria_get_a_warning(text):
    assert "worker" in code_ids(lint_criterion(text, "critical"))


@pytest.mark.parametrize("text", [
    "Deliverable contains analysis of all 12 months of data as specified in the dataset",
    "Final report includes 5 strategic recommendations with supporting rationale",
    "All visualizations are properly labeled with titles, axis labels, and data source citations",
    "Must contain between 90-120 words",
])
def test_the_papers_good_examples_pass_without_hints(text):
    assert lint_criterion(text, "important") == []


def test_negated_pitfall_wording_is_flagged():
    assert "pitfall_negated" in code_ids(lint_criterion("Does not contain arithmetic errors", "pitfall"))
    assert "pitfall_negated" not in code_ids(lint_criterion("Totals contain arithmetic errors", "pitfall"))


def test_overlong_and_too_short_criteria_are_flagged():
    assert "long" in code_ids(lint_criterion("Includes the totals " * 30, "important"))
    assert "short" in code_ids(lint_criterion("Totals", "important"))


@pytest.mark.parametrize(("n", "code"), [(4, "too_few"), (21, "too_many")])
def test_criterion_counts_outside_5_to_20_block_submission(n, code):
    hints = lint_rubric(_rows(n))
    assert code in code_ids(blocking(hints))


@pytest.mark.parametrize("n", [5, 20])
def test_criterion_counts_at_the_bounds_are_accepted(n):
    rows = _rows(n)
    rows[0]["label"] = "critical"
    assert blocking(lint_rubric(rows)) == []


def test_missing_labels_block_submission_and_point_at_the_row():
    rows = _rows(5)
    rows[3]["label"] = ""
    errors = blocking(lint_rubric(rows))
    assert [(h.code, h.index) for h in errors] == [("missing_label", 3)]


def test_empty_editor_rows_are_ignored_but_keep_their_position():
    rows = _rows(5)
    rows.insert(2, {"description": "", "label": ""})
    rows[4]["description"] = "Report is nice"
    hints = lint_rubric(rows)
    assert not blocking(hints)
    assert any(h.code == "subjective" and h.index == 4 for h in hints)


def test_rubric_without_a_critical_criterion_and_duplicates_get_warnings():
    rows = _rows(5)
    rows[4]["description"] = rows[0]["description"].upper()
    codes = code_ids(lint_rubric(rows))
    assert {"no_critical", "duplicate"} <= codes
