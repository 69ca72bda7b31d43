"""The judges' comparison-mode rankings in the export (judge_comparisons.csv, only for a study that has them, with
its data dictionary) and on the Comparisons tab, judged through the real SDKs against the local test server."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from django.urls import reverse

from console.exports import Pseudonymizer, build_export
from experts.models import JudgeComparison
from experts.services.judge_comparisons import comparison_set_judge
from tests.experts.test_judge_comparisons import _expert_ranks, world  # noqa: F401  (the judged world)
from tests.grading.conftest import _fake_llm_session, llm_server  # noqa: F401  (the local LLM test server)

pytestmark = pytest.mark.django_db


def _export(study) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle)
    handle.seek(0)
    return zipfile.ZipFile(handle)


def _rows(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


def test_a_study_without_judge_rankings_exports_no_such_file(world):  # noqa: F811
    archive = _export(world["study"])
    assert "judge_comparisons.csv" not in archive.namelist() and "comparisons.csv" in archive.namelist()
    assert "judge_comparisons.csv" not in archive.read("data_dictionary.csv").decode()


def test_the_export_holds_one_row_per_ranking_with_hashed_deliverables(world):  # noqa: F811
    comparison_set_judge(comparison_set=world["set"])
    archive = _export(world["study"])
    rows = _rows(archive, "judge_comparisons.csv")
    hasher = Pseudonymizer(world["study"])
    assert len(rows) == 4
    shown = " ".join([f"e:{hasher('episode', world['with_agent'].pk)}", f"e:{hasher('episode', world['alone'].pk)}",
                      f"s:{world['run'].pk}"])
    recorded = next(r for r in rows if r["order"] == "recorded" and r["provider"] == "openai")
    reversed_ = next(r for r in rows if r["order"] == "reversed" and r["provider"] == "openai")
    assert recorded["shown_deliverables"] == shown and recorded["ranks"] == "1 2 3"
    assert reversed_["shown_deliverables"] == " ".join(shown.split()[::-1]) and reversed_["ranks"] == "3 2 1"
    assert (recorded["status"], recorded["attempts"], recorded["set_id"]) == ("succeeded", "1", str(world["set"].pk))
    assert recorded["task_id"] == str(world["task"].uuid) and float(recorded["cost_usd"]) > 0
    dictionary = {(r["file"], r["column"]) for r in _rows(archive, "data_dictionary.csv")}
    for column in ("", "shown_deliverables", "ranks", "order", "attempts", "reason"):
        assert ("judge_comparisons.csv", column) in dictionary


def test_the_comparisons_tab_shows_the_judges_against_the_experts(world, staff_client, monkeypatch):  # noqa: F811
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    url = reverse("dashboard:comparisons", args=[world["study"].slug])
    assert "no judge ranking of a comparison set has succeeded yet" in staff_client.get(url).content.decode()
    for _ in range(2):
        _expert_ranks(world, {"with_agent": 1, "alone": 2, "run": 3})
    comparison_set_judge(comparison_set=world["set"])
    assert JudgeComparison.objects.filter(status="succeeded").count() == 4
    html = staff_client.get(url).content.decode()
    table = html[html.index('id="judge-comparisons"'):]
    table = table[:table.index("</table>")]
    # 4 rankings x 2 experts x 3 pairs, all agreeing; 6 pairs in both orders, all the same; the earlier-shown
    # deliverable wins 6 of 12 strict verdicts (+0 pp).
    assert "openai/gpt-4.1" in table and "all judges" in table
    assert "100 %<br><small>" in table and "24 of 24" in table and "6 of 6" in table and "+0 pp" in table
    assert "6 of 12" in table
