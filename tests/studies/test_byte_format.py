"""Byte sizes in messages: exact below 1 KiB, one decimal and a binary unit above."""

from __future__ import annotations

import pytest

from studies.byte_format import human_bytes


@pytest.mark.parametrize(
    "n, shown",
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (69, "69 bytes"),
        (1023, "1023 bytes"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (200 * 2**20, "200.0 MiB"),
        (16 * 2**30, "16.0 GiB"),
        (3 * 2**40, "3072.0 GiB"),
    ],
)
def test_sizes_read_in_the_largest_fitting_binary_unit(n: int, shown: str) -> None:
    assert human_bytes(n) == shown
