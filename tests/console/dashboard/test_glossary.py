"""Staff pages explain themselves: a verdict opens every panel, every statistical term links the glossary."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from console.dashboard import verdicts
from console.dashboard.glossary import GLOSSARY
from tests.console.dashboard.test_flow_counts import study_with_every_state  # noqa: F401 (fixture)

PAGES = ("overview", "leaderboard", "surveys", "collaboration")
SECTION = re.compile(r'<section class="dash-section[^"]*"[^>]*>(.*?)</section>', re.S)
TERM_LINK = re.compile(r'<a class="dash-term" href="[^"#]*#term-(\w+)" title="([^"]+)">(.*?)</a>', re.S)
# Jargon that must never stand on a staff page without its glossary link.
JARGON = ("AIC", "Restricted log-likelihood", "LR statistic", "Kendall τ", "P(rank = 1)", "Rank-biserial r",
          "Held-out predictive coverage", "Mann-Whitney U", "Point-biserial correlation")


def test_held_out_coverage_gets_a_verdict_that_allows_for_chance():
    def say(coverage: float, n: int = 374) -> str:
        return verdicts.model_verdict({}, {"coverage": {"coverage": coverage, "nominal": 0.95, "n_predicted": n}})

    assert say(0.945).startswith("The stated uncertainty is honest")
    assert say(0.925).startswith("The intervals are slightly too narrow")  # the 0.925 at n = 374
    assert say(0.925, n=40).startswith("The stated uncertainty is honest")  # within chance for 40 scores
    assert say(0.80).startswith("The intervals are too narrow")
    assert say(0.99).startswith("The intervals are on the cautious side")


def test_the_pairwise_verdict_names_the_closest_call():
    pairwise = {"labels": ["A", "B", "C"], "matrix": [[0.5, 0.97, 0.99], [0.03, 0.5, 0.58], [0.01, 0.42, 0.5]]}
    text = verdicts.pairwise_verdict(pairwise)
    assert text.startswith("The closest call is B against C: P(B ahead) = 0.58, a coin toss.")
    assert "1 of 2 neighbouring pairs are settled" in text


def test_the_design_verdict_explains_equal_rows_by_the_repeat_limit():
    rows = [{"goal_key": "top", "mode": mode, "current": mode == "uniform", "median": 120, "low": 80, "high": 200,
             "max_sessions": 5000} for mode in ("uniform", "balanced", "adaptive")]
    power = {"repeat_limit": 1, "n_agents": 5, "tasks_per_session": 5, "has_data": True,
             "estimate": {"rows": rows, "target": 0.95, "equal_goals": ["top"]}}
    text = verdicts.design_verdict(power)
    assert "the current design needs about 120 more episodes (80–200)" in text
    assert "every worker meets every agent, so the three designs assign the same pairs" in text
    assert "session" not in text
    power["repeat_limit"] = 2
    assert "every worker meets every agent" not in verdicts.design_verdict(power)


def test_participant_scores_say_why_they_are_negative():
    assert "most are negative" in verdicts.humans_verdict(90, 3.0)
    assert "typical participant (0)" in verdicts.humans_verdict(90, 3.0)


@pytest.mark.django_db
def test_the_glossary_page_holds_every_term(staff_client):
    text = staff_client.get(reverse("dashboard:glossary")).content.decode()
    for key, entry in GLOSSARY.items():
        assert f'id="term-{key}"' in text and escape(entry.plain[:40]) in text


@pytest.mark.django_db
def test_every_panel_opens_with_a_verdict_and_every_term_is_linked(staff_client, study_with_every_state):  # noqa: F811
    study = study_with_every_state.study
    for page in PAGES:
        text = staff_client.get(reverse(f"dashboard:{page}", args=[study.slug])).content.decode()
        for section in SECTION.findall(text):
            heading = re.search(r"<h2[^>]*>(.*?)</h2>", section, re.S)
            if not heading or not re.search(r"<table|<svg|<figure", section):
                continue
            after = section[heading.end():].lstrip()
            assert after.startswith('<p class="dash-verdict"'), f"{page}: “{heading.group(1)}” has no verdict first"
        for key, title, _label in TERM_LINK.findall(text):
            assert key in GLOSSARY and title, f"{page}: link to missing glossary entry {key}"
        visible = TERM_LINK.sub("", text)
        for word in JARGON:
            assert word not in re.sub(r"<[^>]+>", "", visible).replace("&gt;", ">"), f"{page}: “{word}” unlinked"


@pytest.mark.django_db
def test_a_finished_stability_run_shows_its_mean_kendall_tau(staff_client, study_with_every_state):  # noqa: F811
    study = study_with_every_state.study
    text = staff_client.get(reverse("dashboard:leaderboard", args=[study.slug])).content.decode()
    caption = re.search(r"<caption>Agent CollabSkill ranking(.*?)</caption>", text, re.S).group(1)
    assert re.search(r"mean .*Kendall τ</a> -?[01]\.\d\d\)", caption), caption
    assert "n/a" not in caption
    assert re.search(r"\(\d+ bootstrap rounds", caption)
