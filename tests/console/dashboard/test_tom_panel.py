"""The "Why some gain more" panel and the ToM analysis behind it: the service aligns each synergy episode with its
judge pair's codes by episode id, the analysis runs as a background job keyed on the episodes and codings, the
page is staff only, a quantity that is not identifiable shows its reason and no number, and the exports of a ToM
study carry the trait and the estimates while other studies' files stay as they were."""

from __future__ import annotations

import csv
import io
import math
import re
import zipfile

import numpy as np
import pytest
from django.urls import reverse
from django.utils import timezone

from console.dashboard import selectors, services
from console.exports import build_export
from grading.models import ProcessCoding
from grading.selectors import study_process_codes
from grading.services.theory_of_mind import _inputs, study_tom
from rating.synergy_episodes import synergy_episodes
from studies.models import BackgroundJob, Episode
from tests.factories.synergy import planted_synergy_study
from tests.factories.tom import LABELS, planted_tom, planted_tom_mean, tom_study

pytestmark = pytest.mark.django_db
def test_the_service_aligns_each_synergy_episode_with_its_pairs_codes_by_episode_id():
    study = tom_study()
    agent = list(Episode.objects.filter(study=study, condition="with_agent").order_by("pk"))
    # A third judge's coding is not the study's pair: ignored. One episode without a parsable log, one coded once.
    ProcessCoding.objects.create(episode=agent[0], instrument="tom", prompt_version="v1", provider="google",
                                 model="gemini", status="succeeded", score=0, is_current=True)
    ProcessCoding.objects.filter(episode=agent[1]).update(status="not_coded", score=None)
    ProcessCoding.objects.filter(episode=agent[2], provider="anthropic").delete()
    coded = synergy_episodes(study)
    rows = {r.episode_id: r for r in study_process_codes(study.pk)}
    inputs, counts = _inputs(coded, rows, LABELS)
    tom = inputs.moderation.tom
    for i, pk in enumerate(coded.episode_ids.tolist()):
        episode = Episode.objects.get(pk=pk)
        if episode.condition == "solo" or pk == agent[1].pk:
            assert math.isnan(tom[i]), pk
        elif pk == agent[2].pk:
            assert tom[i] == planted_tom(episode, 0)
        else:
            assert tom[i] == planted_tom_mean(episode), pk
    team = coded.data.team
    assert np.array_equal(inputs.quality.human, coded.data.human[team])
    assert np.allclose(inputs.quality.tom, tom[team], equal_nan=True)
    table = inputs.judges
    assert table.raters == LABELS and str(agent[1].pk) not in table.items
    row = table.items.index(str(agent[0].pk))
    assert table.scores[row].tolist() == [planted_tom(agent[0], 0), planted_tom(agent[0], 1)]
    assert math.isnan(table.scores[table.items.index(str(agent[2].pk))][1])
    assert counts["not coded: no parsable log"] == 1 and counts["coded by one judge only"] == 1
    assert counts["solo episode: no agent to talk to, not coded"] == int((~team).sum())
    assert sum(counts.values()) == coded.data.n
    assert inputs.simulated is False


def test_simulated_codings_flag_the_result_and_the_panel(staff_client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = tom_study(simulated=True, slug="simtom")
    result = study_tom(study)
    assert result["simulated"] is True and result["analysis"]["simulated"] is True
    services.analysis_job_run(job_id=services.analysis_request(study=study, kind="tom", actor=None).pk)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert 'id="tom-simulated"' in html


def test_the_analysis_runs_as_a_job_keyed_on_episodes_and_codings(staff_client, monkeypatch,
                                                                   django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: sent.append(a))
    study = tom_study()
    with django_capture_on_commit_callbacks(execute=True):
        html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    job = BackgroundJob.objects.get(study=study, kind="tom")
    assert job.status == BackgroundJob.Status.QUEUED and sent, "the page starts the job by itself"
    assert "Queued · 0%" in html and 'data-reload="1"' in html, "progress shown, the page reloads itself"
    services.analysis_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == BackgroundJob.Status.DONE and job.result["analysis"]["verdict"]["headline"]
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert html.index('id="tom-verdict"') < html.index('id="tom-effects"') < html.index('id="tom-quality-h"')
    assert 'id="tom-icc"' in html and "ICC(2,1)" in html and "ICC(2,2)" in html
    assert re.search(r'<td class="num">-?\d+\.\d\d to -?\d+\.\d\d</td>', html)
    key = job.cache_key
    ProcessCoding.objects.filter(episode__study=study, instrument="tom").update(score=3)
    assert selectors.analysis_cache_key(study, "tom", None) != key, "a changed coding makes the result stale"
    assert BackgroundJob.objects.filter(study=study, kind="tom").count() == 1


def test_the_panel_is_staff_only(client, worker_user):
    study = tom_study(slug="private")
    url = reverse("dashboard:tom", args=[study.slug])
    assert client.get(url).status_code in (302, 403)
    client.force_login(worker_user)
    assert client.get(url).status_code in (302, 403)
    assert not BackgroundJob.objects.filter(study=study, kind="tom").exists()


def test_a_study_without_tom_coding_says_how_to_turn_it_on(staff_client):
    planted = planted_synergy_study(workers=12, tasks=6, slug="notom")
    html = staff_client.get(reverse("dashboard:tom", args=[planted.world.study.slug])).content.decode()
    assert 'id="tom-off"' in html and "code_processes" in html
    assert not BackgroundJob.objects.filter(study=planted.world.study, kind="tom").exists()
    assert study_tom(planted.world.study)["analysis"] is None


def test_too_few_workers_give_the_reason_and_no_number(staff_client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = tom_study(workers=6, slug="thin")
    services.analysis_job_run(job_id=services.analysis_request(study=study, kind="tom", actor=None).pk)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    table = html[html.index('id="tom-effects"'):]
    table = table[:table.index("</table>")]
    assert "Not identifiable: " in table and "at least 10 are needed" in table
    assert not re.search(r'<td class="num">-?\d', table), "no number where the effect is not identifiable"
    assert 'id="tom-quality-reason"' in html and "no with-agent episode has a parsed log" in html


def _export(study) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle)
    return zipfile.ZipFile(io.BytesIO(handle.getvalue()))


def _rows(archive, name):
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


def test_a_tom_study_exports_the_trait_and_the_estimates_described_in_the_dictionary(monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = tom_study(slug="extom")
    empty = _export(study)
    assert _rows(empty, "tom_estimates.csv") == [], "no analysis run for the current data: empty, not stale"
    services.analysis_job_run(job_id=services.analysis_request(study=study, kind="tom", actor=None).pk)
    result = BackgroundJob.objects.get(study=study, kind="tom").result
    archive = _export(study)
    workers = _rows(archive, "tom_workers.csv")
    assert len(workers) == 12 and all(float(w["tom_trait"]) >= 0 for w in workers)
    estimates = {(r["analysis"], r["term"]): r for r in _rows(archive, "tom_estimates.csv")}
    kappa = result["analysis"]["moderation"]["kappa"]
    assert float(estimates[("moderation", "kappa")]["estimate"]) == pytest.approx(kappa["estimate"])
    assert estimates[("moderation", "kappa")]["note"] == ""
    icc = estimates[("judges", "icc_2_k")]
    assert float(icc["estimate"]) == pytest.approx(result["analysis"]["judges"]["icc_average"])
    quality = estimates[("response_quality", "tom_trait")]
    assert quality["estimate"] == "" and "parsed log" in quality["note"]
    dictionary = _rows(archive, "data_dictionary.csv")
    described = {(r["file"], r["column"]) for r in dictionary}
    for name in ("tom_workers.csv", "tom_estimates.csv"):
        header = next(csv.reader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))
        assert all((name, column) in described for column in header)


def test_a_solo_study_without_tom_coding_exports_no_tom_files():
    planted = planted_synergy_study(workers=12, tasks=6, slug="plain")
    names = _export(planted.world.study).namelist()
    assert not any("tom_" in name for name in names)


def test_a_fit_that_did_not_converge_shows_its_reason_and_no_number():
    from console.dashboard.tom import effect_rows
    row = {"estimate": 2.0, "se": 1.0, "lower": 0.0, "upper": 4.0, "p_value": 0.05}
    analysis = {"moderation": {"converged": False, "kappa": row, "theta": row, "boost": row,
                               "reasons": {"convergence": "the REML search did not converge"}},
                "deviation": {"converged": True, "deviation": row, "reasons": {}}}
    rows = effect_rows(analysis)
    assert [r["row"] for r in rows[:3]] == [None, None, None]
    assert all(r["reason"] == "the REML search did not converge" for r in rows[:3])
    assert rows[3]["row"] == row and rows[3]["reason"] is None


def _gold(study, episodes, scores) -> None:
    from experts.models import ToMGoldCode, ToMGoldItem, ToMGoldSample
    from tests.factories.experts import make_expert

    sample = ToMGoldSample.objects.create(study=study, size=len(episodes), seed=1, population=len(episodes),
                                          prompt_version="v1")
    expert = make_expert(username="gold-expert")
    for episode, score in zip(episodes, scores, strict=True):
        item = ToMGoldItem.objects.create(sample=sample, episode=episode, stratum="mid|agent",
                                          stratum_population=len(episodes), stratum_sample=len(episodes),
                                          inclusion_probability=1.0, judge_mean=2.5)
        ToMGoldCode.objects.create(item=item, expert=expert, status="submitted", score=score, reason="gold")


def test_the_experts_gold_codes_check_the_judges_on_the_panel_and_refresh_the_result(staff_client, monkeypatch):
    from rating.tom_reliability import icc_agreement, judge_gold_table

    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = tom_study(slug="goldtom")
    job = services.analysis_request(study=study, kind="tom", actor=None)
    services.analysis_job_run(job_id=job.pk)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert 'id="tom-gold-reason"' in html and "no expert has submitted a gold code yet" in html
    key = BackgroundJob.objects.get(pk=job.pk).cache_key
    agent = list(Episode.objects.filter(study=study, condition="with_agent").order_by("pk"))[:8]
    scores = [min(5, (planted_tom(e, 0) + planted_tom(e, 1)) // 2 + (i % 2)) for i, e in enumerate(agent)]
    _gold(study, agent, scores)
    assert selectors.analysis_cache_key(study, "tom", None) != key, "a new gold code makes the result stale"
    job = services.analysis_request(study=study, kind="tom", actor=None)
    services.analysis_job_run(job_id=job.pk)
    gold = BackgroundJob.objects.get(pk=job.pk).result["analysis"]["gold"]
    judges = [(e.pk, label, float(c.score)) for e in agent for label, c in
              ((f"{c.provider}/{c.model}", c) for c in ProcessCoding.objects.filter(episode=e, instrument="tom"))]
    expected = icc_agreement(judge_gold_table(judges, [(e.pk, "x", float(s)) for e, s in zip(agent, scores,
                                                                                             strict=True)]))
    assert gold["n_items"] == 8 and gold["icc_single"] == pytest.approx(expected.icc_single, abs=1e-12)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert 'id="tom-gold"' in html and "ICC(2,1): the judges" in html


def _pair(study, a, b, order, judge, shown, winner):
    from grading.models import ToMPairCoding
    from grading.prompts import TOM_PAIR_PROMPT_VERSION
    from tests.factories.tom import PAIR

    spec = PAIR[judge]
    return ToMPairCoding.objects.create(study=study, episode_a=a, episode_b=b, order=order, seed=1,
                                        prompt_version=TOM_PAIR_PROMPT_VERSION, provider=spec["provider"],
                                        model=spec["model"], family=spec["provider"], status="succeeded",
                                        shown_choice=shown, winner=winner, reason="r",
                                        finished_at=timezone.now())


def _tom_mean(episode) -> float:
    return planted_tom_mean(episode)


def test_the_pairwise_run_is_summarised_per_judge_and_its_results_refresh_the_analysis(staff_client, monkeypatch):
    """A judge that always answers "A" is fully position-biased and never order-consistent; the panel shows it."""
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = tom_study(slug="pairtom")
    study.tom_pairwise_pairs = 6
    study.save(update_fields=["tom_pairwise_pairs"])
    services.analysis_job_run(job_id=services.analysis_request(study=study, kind="tom", actor=None).pk)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert 'id="tom-pairwise-reason"' in html and "no pairwise comparison by the study" in html
    key = selectors.analysis_cache_key(study, "tom", None)
    agent = list(Episode.objects.filter(study=study, condition="with_agent").order_by("pk"))
    pairs = [(agent[2 * i], agent[2 * i + 1]) for i in range(6)]
    for a, b in pairs:
        _pair(study, a, b, "ab", 0, "A", "a")
        _pair(study, a, b, "ba", 0, "A", "b")
    assert selectors.analysis_cache_key(study, "tom", None) != key, "new pair results make the analysis stale"
    job = services.analysis_request(study=study, kind="tom", actor=None)
    services.analysis_job_run(job_id=job.pk)
    rows = {r["judge"]: r for r in BackgroundJob.objects.get(pk=job.pk).result["pairwise"]["rows"]}
    judge = rows[LABELS[0]]
    assert (judge["n_pairs"], judge["n_comparisons"]) == (6, 12)
    assert (judge["order_consistency"]["successes"], judge["order_consistency"]["n"]) == (0, 6)
    assert (judge["position_a"]["successes"], judge["position_a"]["n"], judge["position_a"]["share"]) == (12, 12, 1)
    unequal = sum(1 for a, b in pairs if _tom_mean(a) != _tom_mean(b))
    assert (judge["absolute_agreement"]["successes"], judge["absolute_agreement"]["n"]) == (unequal, 2 * unequal)
    assert rows[LABELS[1]]["n_comparisons"] == 0 and rows[LABELS[1]]["position_a"]["share"] is None
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    table = html[html.index('id="tom-pairwise"'):]
    table = table[:table.index("</table>")]
    assert LABELS[0] in table and LABELS[1] in table and "all judges" in table
    assert "0 of 6" in table and "12 of 12" in table and "1.000" in table
    assert "Not identifiable: no pairs compared in both orders" in table


def test_a_study_without_a_pairwise_run_says_how_to_ask_for_one(staff_client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = tom_study(slug="nopairs")
    services.analysis_job_run(job_id=services.analysis_request(study=study, kind="tom", actor=None).pk)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    assert 'id="tom-pairwise-reason"' in html and "code_tom_pairs" in html
    assert 'id="tom-pairwise"' not in html
