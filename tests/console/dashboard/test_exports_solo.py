"""Exports and the solo condition: a study without one exports exactly the files, columns and dictionary it
always did; a study with one carries each episode's condition, order, its probability, position and the "AI
tool anyway" answer, and the synergy model's per-worker and per-task estimates, described in the dictionary."""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

import pytest

from console.dashboard import services
from console.exports import build_export
from tests.factories.scenarios import populated_study
from tests.factories.synergy import planted_synergy_study

pytestmark = pytest.mark.django_db
DATA = Path(__file__).parent / "data"


def _export(study, **kwargs) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle, **kwargs)
    return zipfile.ZipFile(io.BytesIO(handle.getvalue()))


def _rows(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


# The one addition to every study's export since the references were written: each episode's time and cost.
TIME_AND_COST = ("episode_costs.csv", "model_prices.csv")


@pytest.mark.parametrize("include_pii", [False, True])
def test_a_study_without_solo_tasks_exports_the_files_columns_and_dictionary_it_always_did(include_pii):
    # The reference files were written by the export as it was before the solo condition existed.
    suffix = "_pii" if include_pii else ""
    archive = _export(populated_study().study, include_pii=include_pii)
    members = archive.namelist()
    assert set(TIME_AND_COST) <= set(members)
    assert [name for name in members if name not in TIME_AND_COST] == \
        (DATA / f"export_without_solo_members{suffix}.txt").read_text().split()
    dictionary = archive.read("data_dictionary.csv").decode().splitlines(keepends=True)
    kept = "".join(line for line in dictionary if not line.startswith(TIME_AND_COST))
    assert kept.encode() == (DATA / f"export_without_solo_dictionary{suffix}.csv").read_bytes()
    header = archive.read("episodes.csv").decode().splitlines()[0]
    assert "condition" not in header and "used_ai_anyway" not in header


def test_the_same_study_exports_the_same_bytes_at_the_same_time():
    from datetime import UTC, datetime
    study = populated_study().study
    stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    first, second = io.BytesIO(), io.BytesIO()
    build_export(study, first, exported_at=stamp)
    build_export(study, second, exported_at=stamp)
    assert first.getvalue() == second.getvalue()


def test_a_study_with_solo_tasks_exports_conditions_and_the_synergy_estimates(monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    planted = planted_synergy_study(workers=30, tasks=8)
    study = planted.world.study
    job = services.analysis_request(study=study, kind="synergy", actor=None)
    services.analysis_job_run(job_id=job.pk)
    archive = _export(study)
    episodes = _rows(archive, "episodes.csv")
    assert {r["condition"] for r in episodes} == {"solo", "with_agent"}
    assert all(r["agent"] == "" for r in episodes if r["condition"] == "solo")
    assert {(r["condition_order"], r["condition_order_probability"]) for r in episodes} == {
        ("solo_first", "0.5"), ("agent_first", "0.5")}
    assert {r["used_ai_anyway"] for r in episodes} == {"false"} and all(r["position"] for r in episodes)
    workers = _rows(archive, "synergy_workers.csv")
    assert len(workers) == 30 and all(w["boost"] and float(w["boost_lower"]) < float(w["boost_upper"]) for w in workers)
    assert {w["participant_id"] for w in workers} == {r["participant_id"] for r in episodes}
    tasks = _rows(archive, "synergy_tasks.csv")
    assert len(tasks) == 8 and all(t["gamma"] for t in tasks)
    dictionary = archive.read("data_dictionary.csv").decode()
    for column in ("episodes.csv,condition,", "episodes.csv,condition_order_probability,",
                   "synergy_workers.csv,boost_lower,", "synergy_tasks.csv,beta_plus_gamma,"):
        assert column in dictionary


def test_without_a_fit_of_the_current_episodes_the_synergy_files_are_empty():
    planted = planted_synergy_study(workers=10, tasks=6, slug="nofit")
    archive = _export(planted.world.study)
    assert _rows(archive, "synergy_workers.csv") == [] and _rows(archive, "synergy_tasks.csv") == []
