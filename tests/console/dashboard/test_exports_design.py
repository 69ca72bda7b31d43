"""The research export records the pairing design and probability of every assignment."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest

from console.exports import build_export
from studies.models import Episode


@pytest.mark.django_db
def test_episodes_csv_carries_design_mode_and_assignment_probability(populated):
    first, second, *_ = populated.episodes
    Episode.objects.filter(pk=first.pk).update(design_mode="adaptive", assignment_probability=0.125)
    Episode.objects.filter(pk=second.pk).update(design_mode=None, assignment_probability=None)
    handle = io.BytesIO()
    build_export(populated.study, handle)
    handle.seek(0)
    with zipfile.ZipFile(handle) as archive:
        rows = list(csv.DictReader(io.TextIOWrapper(archive.open("episodes.csv"), encoding="utf-8")))
    values = {(row["design_mode"], row["assignment_probability"]) for row in rows}
    assert ("adaptive", "0.125") in values
    assert ("", "") in values, "episodes from before designs were recorded export empty cells"
