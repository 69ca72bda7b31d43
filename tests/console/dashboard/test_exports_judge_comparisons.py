"""The judges' comparison-mode rankings in the export (judge_comparisons.csv, only for a study that has them, with
its data dictionary) and on the Comparisons tab, judged through the real SDKs against the local test server."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from console.dashboard.preferences import judge_page
from console.exports import Pseudonymizer, build_export
from experts.models import JudgeComparison
from experts.services.judge_comparisons import comparison_set_judge
from rating.judge_preferences import ExpertRanking, JudgeRanking, judge_preference_summary
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
    # One comparison set: kappa's jackknife over sets has nothing to leave out, so the cell says why.
    assert "only 1 comparison set carries judge-expert pair verdicts; at least 2 are needed" in table


def test_the_kappa_cell_shows_its_jackknife_interval_or_why_there_is_none():
    items = [(2 * s, 2 * s + 1) for s in range(3)]
    judged = [JudgeRanking(s, "openai/gpt-4.1", order, shown[::step], ranks[::step])  # the same verdict twice
              for s, (shown, ranks) in enumerate(zip(items, [(1, 2), (2, 1), (1, 2)], strict=True))
              for order, step in (("recorded", 1), ("reversed", -1))]
    experts = [ExpertRanking(s, f"e{i}", items[s], ranks) for s, i, ranks in
               [(0, 0, (1, 2)), (0, 1, (1, 2)), (1, 0, (2, 1)), (1, 1, (1, 1)), (2, 0, (1, 2)), (2, 1, (2, 1))]]
    summary = judge_preference_summary(judged, experts, ["openai/gpt-4.1"])
    page = judge_page(summary)
    html = render_to_string("console/_judge_comparisons.html", {"judges": page, "study": {"slug": "s"}})
    table = html[html.index('id="judge-comparisons"'):html.index("</table>")]
    agreement = summary["rows"][0]["expert_agreement"]
    interval = agreement["kappa_interval"]
    assert interval["n_sets"] == 3 and interval["lower"] < agreement["kappa"] < interval["upper"]
    shown = f"{agreement['kappa']:.2f}<br><small>{interval['lower']:.2f} to {interval['upper']:.2f} · 3 sets</small>"
    assert shown in table
    # Two units of one set: the kappa stays, the interval gives way to the reason.
    one = judge_page(judge_preference_summary(judged[:2], experts[:1], ["openai/gpt-4.1"]))
    html = render_to_string("console/_judge_comparisons.html", {"judges": one, "study": {"slug": "s"}})
    assert "<small>only 1 comparison set carries judge-expert pair verdicts; at least 2 are needed</small>" in html
    assert " sets</small>" not in html


def test_the_experts_yardstick_shows_their_kappa_with_its_interval_or_why_there_is_none():
    items = [(2 * s, 2 * s + 1) for s in range(6)]
    judged = [JudgeRanking(s, "openai/gpt-4.1", "recorded", items[s], (1, 2)) for s in range(6)]
    pairs = [((1, 2), (1, 2)), ((2, 1), (2, 1)), ((1, 2), (2, 1)), ((1, 1), (1, 1)), ((1, 2), (1, 2)),
             ((2, 1), (1, 1))]
    experts = [ExpertRanking(s, f"e{i}", items[s], ranks[i]) for s, ranks in enumerate(pairs) for i in (0, 1)]
    summary = judge_preference_summary(judged, experts, ["openai/gpt-4.1"])
    yardstick = summary["experts_with_each_other"]
    interval = yardstick["kappa_interval"]
    html = render_to_string("console/_judge_comparisons.html", {"judges": judge_page(summary), "study": {"slug": "s"}})
    line = html[html.index('id="judge-comparisons-experts"'):]
    line = line[:line.index("</p>")]
    assert (f"kappa {yardstick['kappa']:.2f} ({interval['lower']:.2f} to {interval['upper']:.2f} over "
            f"{interval['n_sets']} sets)") in line
    # Experts who shared one set of four only: six pair verdicts, their kappa, and why it has no interval.
    four = (100, 101, 102, 103)
    one = judge_preference_summary([JudgeRanking(9, "openai/gpt-4.1", "recorded", four, (1, 2, 3, 4))],
                                   [ExpertRanking(9, "e0", four, (1, 2, 3, 4)),
                                    ExpertRanking(9, "e1", four, (2, 1, 3, 3))], ["openai/gpt-4.1"])
    assert one["experts_with_each_other"]["kappa"] is not None
    html = render_to_string("console/_judge_comparisons.html", {"judges": judge_page(one), "study": {"slug": "s"}})
    line = html[html.index('id="judge-comparisons-experts"'):]
    line = line[:line.index("</p>")]
    assert "(no interval: only 1 comparison set carries expert-expert pair verdicts" in line
