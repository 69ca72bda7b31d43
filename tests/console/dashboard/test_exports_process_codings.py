"""Exports carry every ToM / response-quality coding with its version, judge and status; other studies' do not."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest

from console.exports import Pseudonymizer, build_export
from grading.models import ProcessCoding
from grading.prompts import QUALITY_PROMPT_VERSION, TOM_PROMPT_VERSION
from studies.models import Study
from tests.factories.scenarios import populated_study


def _export(study, **kwargs) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle, **kwargs)
    handle.seek(0)
    return zipfile.ZipFile(handle)


def _rows(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


def _code(episode, instrument, provider, model, family, **fields) -> ProcessCoding:
    version = TOM_PROMPT_VERSION if instrument == "tom" else QUALITY_PROMPT_VERSION
    return ProcessCoding.objects.create(episode=episode, instrument=instrument, provider=provider, model=model,
                                        family=family, prompt_version=version, **fields)


@pytest.fixture
def coded(db):
    populated = populated_study(extras=False, refresh=False, surveys=False, n_participants=3)
    Study.objects.filter(pk=populated.study.pk).update(tom_coding=True)
    populated.study.refresh_from_db()
    first, second = populated.episodes[:2]
    old = _code(first, "tom", "openai", "gpt-4.1", "openai", status="succeeded", score=2, markers=["rapport"],
                reason="Old reason.")
    _code(first, "tom", "openai", "gpt-4.1", "openai", status="succeeded", score=4, is_current=True,
          markers=["challenges_ai", "rapport"], reason="The worker said: my name is Ana Lopez.")
    _code(first, "response_quality", "anthropic", "claude-sonnet-4-6", "anthropic", status="succeeded", score=5,
          is_current=True, reason="Helpful.")
    _code(second, "tom", "anthropic", "claude-sonnet-4-6", "anthropic", status="not_coded", is_current=True,
          error="No collaboration log file was uploaded.")
    return populated, old


@pytest.mark.django_db
def test_every_coding_is_exported_with_version_judge_status_and_the_dictionary_explains_it(coded):
    populated, old = coded
    archive = _export(populated.study)
    rows = _rows(archive, "process_codings.csv")
    hasher = Pseudonymizer(populated.study)
    first, second = populated.episodes[:2]
    by_id = {int(r["coding_id"]): r for r in rows}
    assert len(rows) == 4
    assert by_id[old.pk]["is_current"] == "false" and by_id[old.pk]["score"] == "2"
    current = next(r for r in rows if r["is_current"] == "true" and r["instrument"] == "tom"
                   and r["episode_id"] == hasher("episode", first.pk))
    assert (current["instrument_version"], current["provider"], current["model"], current["family"],
            current["score"], current["markers"]) == (TOM_PROMPT_VERSION, "openai", "gpt-4.1", "openai", "4",
                                                      "challenges_ai rapport")
    missing = next(r for r in rows if r["episode_id"] == hasher("episode", second.pk))
    assert (missing["status"], missing["score"], missing["note"]) == (
        "not_coded", "", "No collaboration log file was uploaded.")
    assert "reason" not in rows[0] and "Ana Lopez" not in archive.read("process_codings.csv").decode()
    dictionary = _rows(archive, "data_dictionary.csv")
    described = {r["column"] for r in dictionary if r["file"] == "process_codings.csv"}
    assert described == {"", *rows[0].keys()}
    assert all(r["description"] for r in dictionary if r["file"] == "process_codings.csv")


@pytest.mark.django_db
def test_the_judges_reason_comes_only_with_identifying_information(coded):
    populated, _old = coded
    rows = _rows(_export(populated.study, include_pii=True), "process_codings.csv")
    assert "The worker said: my name is Ana Lopez." in {r["reason"] for r in rows}


@pytest.mark.django_db
def test_a_study_without_tom_coding_exports_no_process_file(db):
    populated = populated_study(extras=False, refresh=False, surveys=False, n_participants=2)
    archive = _export(populated.study)
    assert "process_codings.csv" not in archive.namelist()
    assert "process_codings" not in archive.read("data_dictionary.csv").decode()
