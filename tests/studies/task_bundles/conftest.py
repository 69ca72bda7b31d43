"""The sector and occupations every task-bundle test imports against."""

from __future__ import annotations

import pytest

from tests.factories import OccupationFactory, SectorFactory


@pytest.fixture
def taxonomy(db):
    sector = SectorFactory(code="finance", name="Finance and Insurance")
    OccupationFactory(soc_code="13-2011.00", title="Accountants and Auditors", sector=sector)
    OccupationFactory(soc_code="13-2051.00", title="Financial Analysts", sector=sector)
    return sector
