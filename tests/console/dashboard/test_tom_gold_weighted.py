"""The panel's judge-vs-gold check shows the ICC as sampled and weighted by the stratified sample's design (the
stored N_h of each item's stratum), the weighted one equal to the pure estimator on the same table, with what
each means."""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.dashboard import services
from grading.models import ProcessCoding
from rating.tom_reliability import icc_agreement, judge_gold_table
from rating.tom_weighted_icc import GoldDesign, weighted_icc_agreement
from studies.models import BackgroundJob, Episode
from tests.factories.experts import make_expert
from tests.factories.tom import planted_tom_mean, tom_study

pytestmark = pytest.mark.django_db

POPULATION = {"low|agent": 40, "high|agent": 6}


def _stratified_gold(study, episodes) -> dict[int, str]:
    """Half the episodes from a large stratum (π small), half from a small one (π large); one expert codes all."""
    from experts.models import ToMGoldCode, ToMGoldItem, ToMGoldSample

    sample = ToMGoldSample.objects.create(study=study, size=len(episodes), seed=1, population=46,
                                          prompt_version="v1")
    expert = make_expert(username="gold-weighted")
    half = len(episodes) // 2
    strata = {}
    for i, episode in enumerate(episodes):
        stratum = "low|agent" if i < half else "high|agent"
        n_h = half if i < half else len(episodes) - half
        item = ToMGoldItem.objects.create(sample=sample, episode=episode, stratum=stratum,
                                          stratum_population=POPULATION[stratum], stratum_sample=n_h,
                                          inclusion_probability=n_h / POPULATION[stratum], judge_mean=2.5)
        judge_mean = planted_tom_mean(episode)
        score = min(5, round(judge_mean) + (i % 3 if stratum == "high|agent" else 0))
        ToMGoldCode.objects.create(item=item, expert=expert, status="submitted", score=score, reason="gold")
        strata[episode.pk] = stratum
    return strata


def test_the_panel_shows_the_gold_icc_unweighted_and_design_weighted(staff_client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    study = tom_study(slug="goldweighted")
    agent = list(Episode.objects.filter(study=study, condition="with_agent").order_by("pk"))[:12]
    strata = _stratified_gold(study, agent)
    job = services.analysis_request(study=study, kind="tom", actor=None)
    services.analysis_job_run(job_id=job.pk)
    analysis = BackgroundJob.objects.get(pk=job.pk).result["analysis"]
    judges = [(c.episode_id, f"{c.provider}/{c.model}", float(c.score))
              for c in ProcessCoding.objects.filter(episode__in=agent, instrument="tom")]
    from experts.models import ToMGoldCode

    gold = [(c.item.episode_id, c.expert_id, float(c.score)) for c in ToMGoldCode.objects.select_related("item")]
    table = judge_gold_table(judges, gold)
    expected = weighted_icc_agreement(table, GoldDesign({str(pk): h for pk, h in strata.items()}, POPULATION))
    weighted = analysis["gold_weighted"]
    assert weighted["n_items"] == 12 and weighted["n_strata"] == 2 and weighted["population"] == 46
    assert weighted["icc_single"] == pytest.approx(expected.icc_single, abs=1e-12)
    assert weighted["icc_average_interval"] == pytest.approx(list(expected.icc_average_interval), abs=1e-12)
    assert analysis["gold"]["icc_single"] == pytest.approx(icc_agreement(table).icc_single, abs=1e-12)
    assert weighted["icc_single"] != pytest.approx(analysis["gold"]["icc_single"], abs=1e-3)
    html = staff_client.get(reverse("dashboard:tom", args=[study.slug])).content.decode()
    table_html = html[html.index('id="tom-gold"'):html.index('id="tom-gold-weighting"')]
    assert table_html.count("unweighted") == 2 and table_html.count("design-weighted") == 2
    assert f"{weighted['icc_single']:.3f}" in table_html and f"{analysis['gold']['icc_single']:.3f}" in table_html
    note = html[html.index('id="tom-gold-weighting"'):].split("</p>")[0]
    assert "describes the sample" in note and "every ToM-coded episode (46 episodes)" in note
