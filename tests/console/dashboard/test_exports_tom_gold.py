"""Exports carry the experts' ToM gold codes with the sampling design; studies without a sample do not."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest

from console.exports import Pseudonymizer, build_export
from experts.models import ToMGoldCode
from experts.services.tom_gold import tom_gold_sample_draw, tom_gold_save
from studies.models import Study
from tests.experts.tom_gold_world import judge_codes
from tests.factories.experts import make_expert
from tests.factories.scenarios import populated_study


def _export(study, **kwargs) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle, **kwargs)
    handle.seek(0)
    return zipfile.ZipFile(handle)


def _rows(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


@pytest.fixture
def sampled(db):
    populated = populated_study(extras=False, refresh=False, surveys=False, n_participants=3)
    Study.objects.filter(pk=populated.study.pk).update(tom_coding=True)
    populated.study.refresh_from_db()
    for episode in populated.episodes[:4]:
        judge_codes(episode, (4, 5))
    expert = make_expert()
    tom_gold_sample_draw(study=populated.study, size=2, seed=4, experts=[expert])
    code = ToMGoldCode.objects.order_by("pk").first()
    tom_gold_save(code=code, user=expert.user, score=3, markers=["rapport", "challenges_ai"],
                  reason="Worker Ana Lopez explains the gap.", submit=True)
    return populated, expert, code


@pytest.mark.django_db
def test_gold_codes_are_exported_with_stratum_inclusion_probability_and_expert_pseudonym(sampled):
    populated, expert, code = sampled
    archive = _export(populated.study)
    rows = _rows(archive, "tom_gold_codes.csv")
    hasher = Pseudonymizer(populated.study)
    assert len(rows) == 2
    row = next(r for r in rows if r["gold_code_id"] == str(code.pk))
    assert row["episode_id"] == hasher("episode", code.item.episode_id)
    assert row["expert_id"] == hasher("expert", expert.pk) and row["expert_id"] != str(expert.pk)
    assert (row["stratum"], row["stratum_population"], row["stratum_sample"], row["inclusion_probability"],
            row["status"], row["score"], row["markers"], row["sample_seed"]) == (
        "high|with_agent", "4", "2", "0.5", "submitted", "3", "challenges_ai rapport", "4")
    assert "reason" not in row and "Ana Lopez" not in archive.read("tom_gold_codes.csv").decode()
    dictionary = _rows(archive, "data_dictionary.csv")
    described = {r["column"] for r in dictionary if r["file"] == "tom_gold_codes.csv"}
    assert described == {"", *row.keys()}
    with_pii = _rows(_export(populated.study, include_pii=True), "tom_gold_codes.csv")
    assert next(r for r in with_pii if r["gold_code_id"] == str(code.pk))["reason"] == \
        "Worker Ana Lopez explains the gap."


@pytest.mark.django_db
def test_a_study_without_a_gold_sample_exports_no_gold_file():
    populated = populated_study(extras=False, refresh=False, surveys=False, n_participants=2)
    archive = _export(populated.study)
    assert "tom_gold_codes.csv" not in archive.namelist()
    assert "tom_gold_codes.csv" not in archive.read("data_dictionary.csv").decode()
    assert "tom_pair_codings.csv" not in archive.namelist()


@pytest.mark.django_db
def test_pairwise_comparisons_are_exported_per_pair_order_and_judge_with_the_dictionary():
    from grading.models import ToMPairCoding
    from grading.prompts import TOM_PAIR_PROMPT_VERSION

    populated = populated_study(extras=False, refresh=False, surveys=False, n_participants=2)
    Study.objects.filter(pk=populated.study.pk).update(tom_coding=True, tom_pairwise_pairs=3)
    populated.study.refresh_from_db()
    a, b = sorted(populated.episodes[:2], key=lambda e: e.pk)
    for order, choice, winner in (("ab", "A", "a"), ("ba", "A", "b")):
        ToMPairCoding.objects.create(study=populated.study, episode_a=a, episode_b=b, order=order, seed=2,
                                     prompt_version=TOM_PAIR_PROMPT_VERSION, provider="openai", model="gpt-4.1",
                                     family="openai", status="succeeded", shown_choice=choice, winner=winner,
                                     reason="Worker Ana Lopez said so.")
    archive = _export(populated.study)
    rows = _rows(archive, "tom_pair_codings.csv")
    hasher = Pseudonymizer(populated.study)
    assert [(r["episode_a_id"], r["episode_b_id"], r["order"], r["shown_choice"], r["winner"]) for r in rows] == [
        (hasher("episode", a.pk), hasher("episode", b.pk), "ab", "A", "a"),
        (hasher("episode", a.pk), hasher("episode", b.pk), "ba", "A", "b")]
    assert "Ana Lopez" not in archive.read("tom_pair_codings.csv").decode()
    described = {r["column"] for r in _rows(archive, "data_dictionary.csv") if r["file"] == "tom_pair_codings.csv"}
    assert described == {"", *rows[0].keys()}
