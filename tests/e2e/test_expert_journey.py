"""An expert writes a rubric, staff approve it, and the expert grades a blind episode with it."""

from __future__ import annotations

import re

import pytest
from celery import current_app
from playwright.sync_api import expect

from experts.models import ExpertAssignment, ExpertGrade
from grading.models import Rubric
from rating.models import Observation
from studies.models import Episode
from tests.e2e.steps import login, sign_out
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.agents import AgentFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import make_expert
from tests.factories.scenarios import make_episode

PASSWORD = "pw-correct-horse"
CRITERIA = [
    ("correctness", "critical", "Summary sheet total equals 1,234,567"),
    ("correctness", "important", "Each of the 12 monthly rows shows revenue and cost"),
    ("completeness", "important", "Deliverable includes the file summary.csv"),
    ("requirements", "optional", "Summary includes a one-line note on the largest month"),
    ("technical", "pitfall", "Totals contain hard-coded numbers instead of formulas"),
]


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_expert_authors_a_rubric_staff_approve_it_and_the_expert_grades_blind(page, monkeypatch):
    queued = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, **kw: queued.append((name, args)))
    sector = SectorFactory(name="Finance and Insurance")
    study = StudyFactory(double_grading_share=0.0)
    task = TaskFactory(sector=sector, title="Quarterly revenue summary", studies=[study],
                       hidden_info="Reference total: 1,234,567.")
    episode = make_episode(task=task, study=study, agent=AgentFactory(name="Hidden Agent Z", model_version="sx-9000"),
                           auto_score=42.5)
    EpisodeFileFactory(episode=episode, csv=True, content=b"month,revenue\nJan,100\nFeb,250\n")
    make_expert(username="eva", sectors=[sector])
    UserFactory(username="sam", roles=["staff"])

    # 1. The expert writes a rubric from scratch, guided by live lint hints.
    login(page, "eva", PASSWORD)
    page.goto("/expert/")
    page.click("text=Quarterly revenue summary")
    page.click("button:has-text('Start blank')")
    expect(page.locator("h1")).to_contain_text("Rubric draft v1")
    rows = page.locator("#criteria-rows [data-row]")
    expect(rows).to_have_count(5)
    rows.nth(0).locator("textarea.crit-description").fill("Work is of professional quality")
    expect(rows.nth(0).locator(".lint-hints")).to_contain_text("matter of opinion")
    for i, (category, label, text) in enumerate(CRITERIA):
        row = rows.nth(i)
        row.locator("textarea.crit-description").fill(text)
        row.locator("select.crit-label").select_option(label)
        row.locator("select.crit-category").select_option(category)
    expect(rows.nth(0).locator(".lint-hints")).not_to_contain_text("matter of opinion")
    expect(page.locator("#criteria-count")).to_contain_text("5 criteria")
    expect(page.locator("#rubric-form")).to_have_attribute("data-lint", "idle")  # hints settled: no layout shift
    page.click("button:has-text('Submit for approval')")
    expect(page.locator(".messages")).to_contain_text("submitted for approval")
    rubric = Rubric.objects.get(task=task, origin=Rubric.Origin.EXPERT)
    assert rubric.status == Rubric.Status.SUBMITTED
    assert sorted(rubric.criteria.values_list("points", flat=True)) == [15, 20, 20, 20, 25]
    sign_out(page)

    # 2. Staff approve it and route the waiting episode.
    login(page, "sam", PASSWORD)
    page.goto("/expert/staff/rubrics/")
    page.click("a:has-text('Review')")
    page.fill("#id_note", "Clear, checkable criteria.")
    page.click("button:has-text('Approve')")
    expect(page.locator(".messages")).to_contain_text("Approved version 1")
    page.goto("/expert/staff/routing/")
    page.click("button:has-text('Route now')")
    expect(page.locator(".messages")).to_contain_text("Routed 1 episodes")
    assignment = ExpertAssignment.objects.get(episode=episode)
    sign_out(page)

    # 3. The expert grades blind; answers autosave; a fail needs feedback.
    login(page, "eva", PASSWORD)
    page.goto("/expert/")
    page.click("a:has-text('Start grading')")
    expect(page.locator("#grade-form")).to_be_visible()
    body = page.content()
    assert "Hidden Agent Z" not in body and "42.5" not in body
    expect(page.locator("pre.extracted")).to_contain_text("| Feb | 250 |")
    expect(page.locator("#grade-form[data-autosave='ready']")).to_be_attached()  # the draft autosave is listening
    criteria = list(rubric.criteria.order_by("order"))
    page.check(f"input[name='verdict_{criteria[0].pk}'][value='pass']")
    expect(page.locator("#autosave-status")).to_contain_text("Saved at", timeout=20_000)
    page.reload()
    expect(page.locator(f"input[name='verdict_{criteria[0].pk}'][value='pass']")).to_be_checked()

    for criterion in criteria[1:]:
        page.check(f"input[name='verdict_{criterion.pk}'][value='pass']")
    page.check(f"input[name='verdict_{criteria[1].pk}'][value='fail']")
    expect(page.locator(f"fieldset[data-criterion='{criteria[1].pk}'] .feedback-needed")).to_be_visible()
    page.check("input[name='overall'][value='revise']")
    page.click("button:has-text('Submit grade')")
    expect(page.locator("ul.messages")).to_contain_text("1 answer below needs attention")
    expect(page.locator(f"fieldset[data-criterion='{criteria[1].pk}']")).to_contain_text(
        "Feedback is required on a fail")
    expect(page.locator(f"input[name='verdict_{criteria[3].pk}'][value='pass']")).to_be_checked()  # kept

    page.fill(f"#id_feedback_{criteria[1].pk}", "The March and April rows are missing.")
    page.click("button:has-text('Submit grade')")
    expect(page.locator(".messages")).to_contain_text("Grade submitted")
    expect(page.locator("#reveal")).to_contain_text("Hidden Agent Z")
    expect(page.locator("#own-score")).to_have_text(re.compile(r"80\.0"))

    grade = ExpertGrade.objects.get(assignment=assignment)
    assert (grade.status, grade.score, grade.overall) == ("submitted", 80.0, "revise")
    assert Episode.objects.get(pk=episode.pk).expert_score == 80.0
    # The observation commits with the grade; the posterior refresh it asks for is queued.
    assert Observation.objects.filter(episode=episode, active=True).exists()
    assert ("rating.tasks.refresh_posterior", [episode.study_id]) in queued
    page.screenshot(path="var/e2e-expert-reveal.png", full_page=True)
