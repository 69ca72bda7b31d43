"""CSV cells that a spreadsheet opens as data, never as a formula (CSV/formula injection).

Excel, LibreOffice and Google Sheets evaluate a cell starting with ``=``, ``+``, ``-`` or ``@`` (and, after
trimming, a leading tab or carriage return) as a formula, so free text typed by a participant could run a
``HYPERLINK`` or ``DDE`` payload on the researcher's machine. Such text gets a leading apostrophe, the
convention spreadsheets display as "text". Numbers, including negative ones and numeric strings such as
``"-7.50"``, stay unchanged so columns still parse as numbers. Every CSV the platform writes goes through
:func:`csv_writer`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def csv_safe(value: Any) -> Any:
    """Return the cell value, with text that a spreadsheet would evaluate prefixed by an apostrophe."""
    if not isinstance(value, str):  # numbers, dates and None are written as themselves
        return value
    if value.startswith(_TRIGGERS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


class SafeWriter:
    """A ``csv.writer`` whose every cell passes through :func:`csv_safe`."""

    def __init__(self, handle: Any, **options: Any) -> None:
        self._writer = csv.writer(handle, **options)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([csv_safe(cell) for cell in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(handle: Any, **options: Any) -> SafeWriter:
    """Return a CSV writer for ``handle`` that neutralises formula-like text in every cell."""
    return SafeWriter(handle, **options)
