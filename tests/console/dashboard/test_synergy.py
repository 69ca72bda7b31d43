"""The "Who benefits from the agent" panel: its verdict and tables come from the stored synergy fit; a study
without a solo condition or without a fittable boost says so and shows no number."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from console.dashboard import services
from console.dashboard.synergy import difficulty_rows, slope_view, synergy_page, synergy_verdict
from tests.factories.synergy import planted_synergy_study

pytestmark = pytest.mark.django_db


def _fit(study):
    job = services.analysis_request(study=study, kind="synergy", actor=None)
    services.analysis_job_run(job_id=job.pk)


def test_the_panel_shows_the_verdict_first_then_the_boost_per_agent_with_intervals(staff_client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    planted = planted_synergy_study()
    study = planted.world.study
    _fit(study)
    html = staff_client.get(reverse("dashboard:synergy", args=[study.slug])).content.decode()
    verdict = re.search(r'id="synergy-verdict">(.*?)</p>', html, re.S).group(1)
    assert "makes people score higher than alone" in verdict
    assert html.index('id="synergy-verdict"') < html.index('id="synergy-boosts"')
    table = html[html.index('id="synergy-boosts"'):]
    table = table[:table.index("</table>")]
    for name in planted.boosts:
        assert name in table
    assert re.search(r"<td class=\"num\">-?\d+\.\d to -?\d+\.\d</td>", table)
    assert 'id="synergy-ability"' in html and 'id="synergy-test"' in html
    slope = re.search(r'id="synergy-slope">(.*?)</p>', html, re.S).group(1)
    assert "Per point of ability alone, the boost changes by" in slope or slope.startswith("Cannot tell: ")
    assert 'id="synergy-agents-differ"' in html
    assert "Crossing is too thin" not in html


def test_a_study_without_a_solo_condition_says_so_and_shows_no_boost(staff_client, populated):
    html = staff_client.get(reverse("dashboard:synergy", args=[populated.study.slug])).content.decode()
    assert "This study has no solo condition" in html
    assert 'id="synergy-boosts"' not in html


def test_thin_crossing_is_named_on_the_panel(staff_client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda *a, **k: None)
    planted = planted_synergy_study(workers=12, tasks=6, slug="thin")
    study = planted.world.study
    from studies.models import Episode
    extra = planted.world.tasks[0].__class__.objects.create(title="Only ever solo", sector=planted.world.sector)
    extra.studies.add(study)
    person = study.participants.first()
    Episode.objects.create(participant=person, study=study, task=extra, position=9, condition="solo", agent=None,
                           status=Episode.Status.GRADED, score=40.0, is_simulated=True)
    html = staff_client.get(reverse("dashboard:synergy", args=[study.slug])).content.decode()
    assert "Crossing is too thin on 1 task" in html and "Only ever solo" in html


def test_a_not_identifiable_boost_gives_the_reason_and_no_number():
    fit = {"level": 0.95, "boosts": {}, "not_identifiable": {"boost": "no episode was done without an agent"}}
    assert synergy_verdict(fit) == "No boost can be estimated yet: no episode was done without an agent."
    view = synergy_page({"fit": fit, "not_identifiable": fit["not_identifiable"], "workers": [], "tasks": []})
    assert view["boosts"] == [] and view["by_ability"] == [] and view["by_difficulty"] == []
    assert view["reasons"] == [{"key": "boost", "text": "no episode was done without an agent"}]


def test_boost_by_difficulty_uses_the_model_task_effects_and_skips_tasks_seen_in_one_condition():
    est = lambda v: {"estimate": v, "lower": v - 1, "upper": v + 1}  # noqa: E731
    tasks = [{"beta": est(b), "gamma": est(g)} for b, g in ((-9, 6), (-8, 4), (0, 1), (1, 0), (8, -2), (9, -4))]
    tasks.append({"beta": est(20), "gamma": None})  # seen only alone: no γ, left out
    rows = difficulty_rows({"tasks": tasks}, 5.0)
    assert [r["label"] for r in rows] == ["hardest third", "middle third", "easiest third"]
    assert [r["boost"] for r in rows] == [10.0, 5.5, 2.0]
    assert sum(r["tasks"] for r in rows) == 6


def test_the_ability_slope_gives_intervals_per_agent_and_says_cannot_tell_where_the_model_cannot():
    est = {"estimate": -0.4, "se": 0.1, "lower": -0.6, "upper": -0.2, "p_positive": 0.0}
    fit = {"boosts": {"a": est}, "ability_slope": {"boost_per_point": est, "team_per_point": est},
           "agent_slopes": {"agents": {"a": {"slope": est, "workers": 30, "reason": None},
                                       "b": {"slope": None, "workers": 4, "reason": "only 4 workers did tasks both "
                                                                                   "alone and with b (need 10)"}},
                            "common_slope_test": None},
           "not_identifiable": {"agent_slopes_test": "fewer than two agents have a slope: whether it differs "
                                                     "cannot be told"}}
    view = slope_view(fit)
    assert view["common"]["boost_per_point"]["upper"] == -0.2 and view["common_reason"] is None
    assert [r["agent"] for r in view["agents"]] == ["a", "b"] and view["agents"][1]["slope"] is None
    assert view["differ_words"] == ("Cannot tell whether agents differ in whom they help: fewer than two agents "
                                    "have a slope: whether it differs cannot be told.")
    tested = fit | {"agent_slopes": fit["agent_slopes"] | {"common_slope_test": {"statistic": 9.0, "df": 1,
                                                                                   "p_value": 0.0027}}}
    assert slope_view(tested)["differ_words"].startswith("The agents differ in whom they help")
    boundary = {"boosts": {"a": est}, "ability_slope": None,
                "not_identifiable": {"ability_slope": "ability alone and with an agent are estimated perfectly "
                                                      "correlated (a boundary of the model): ..."}}
    assert slope_view(boundary)["common_reason"].startswith("ability alone and with an agent")
