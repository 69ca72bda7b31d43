"""Every CSV the platform writes neutralises cells a spreadsheet would run as a formula; numbers stay numbers."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from studies.csv_safety import csv_safe, csv_writer


@pytest.mark.parametrize("text", [
    "=HYPERLINK(\"http://evil.example\",\"click\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)",
    "\t=1+1", "\r=1+1", "=", "-", "-1-", "- list item",
])
def test_text_a_spreadsheet_would_evaluate_is_prefixed_with_a_quote(text):
    assert csv_safe(text) == "'" + text


@pytest.mark.parametrize("value", [
    -3, 2.5, -0.25, Decimal("-7.50"), "-7.50", "+4", "-1e-3", "12", "", "plain words", "a=b", "E-mail",
])
def test_numbers_and_ordinary_text_are_left_alone(value):
    assert csv_safe(value) == value


def test_the_writer_neutralises_every_cell_of_every_row():
    out = io.StringIO()
    writer = csv_writer(out)
    writer.writerow(["=1+1", -5, "-5.00", "ok"])
    writer.writerows([["@cmd", "+3"]])
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [["'=1+1", "-5", "-5.00", "ok"], ["'@cmd", "+3"]]
