"""Every migration runs both ways: the whole schema can be migrated back to zero and forward again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from surveys.models import Instrument


def _migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.mark.django_db(transaction=True)
def test_the_schema_migrates_back_to_zero_and_forward_again_with_the_default_instrument() -> None:
    try:
        # Unapplying the study domain unapplies every app built on it, the instrument's data migration included.
        _migrate([("studyapp", None)])
        assert "surveys_instrument" not in connection.introspection.table_names()
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    again = Instrument.objects.get(slug="collabskill-attitudes", version=1)
    assert again.questions.count() > 0
