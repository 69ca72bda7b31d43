"""Staff build a blind comparison set; one expert ranks it on a desktop (1280 px), another on a phone (390 px,
no horizontal scroll); the staff page then shows the answers by arm and the raw win/tie counts, and the Time &
cost page's cost panel prices the three workflows with the experts' comparison time (at 1280 and 390 px)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from celery import current_app
from playwright.sync_api import expect

from experts.models import ComparisonAssignment, ComparisonSet
from studies.models import Episode, Participant, SoloRun
from tests.e2e.steps import login, sign_out
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.agents import AgentFactory
from tests.factories.episodes import EpisodeFactory, EpisodeFileFactory
from tests.factories.experts import make_expert, make_solo_run
from tests.factories.participants import ParticipantFactory
from tests.factories.scenarios import make_episode
from tests.factories.taxonomy import OccupationFactory

PASSWORD = "pw-correct-horse"
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}
LONG_NAME = "quarterly_client_memo_final_version_with_all_the_appendices_and_tables_v12.txt"


def _no_horizontal_scroll(page) -> None:
    scroll, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
        .slice(0, 5).map((el) => `${el.tagName}.${el.className}#${el.id}`)""")
    assert scroll <= inner, (page.url, scroll, inner, wide)


def _rank(page, ranks: dict[int, str], accept: dict[int, str], justification: str) -> None:
    for position, rank in ranks.items():
        page.select_option(f"#id_rank_{position}", rank)
    for position, value in accept.items():
        page.check(f"input[name='accept_{position}'][value='{value}']")
    page.fill("#id_justification", justification)


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_staff_build_a_set_experts_rank_it_blind_on_desktop_and_phone_and_staff_see_the_result(page, monkeypatch):
    monkeypatch.setattr(current_app, "send_task", lambda *a, **k: None)
    sector = SectorFactory(name="Professional Services")
    study = StudyFactory(name="Memo study")
    task = TaskFactory(sector=sector, title="Client memo on the new filing rule", studies=[study])
    agent = AgentFactory(name="Hidden Agent Q", model_version="qx-77")
    with_agent = make_episode(task=task, study=study, agent=agent, score=64.25)
    EpisodeFileFactory(episode=with_agent, name=LONG_NAME, content=b"Memo drafted together with the tool.\n")
    alone = EpisodeFactory(task=task, participant=ParticipantFactory(study=study, pseudonym="PSEUDO-W2"), agent=None,
                           condition=Episode.Condition.SOLO, status=Episode.Status.SUBMITTED)
    EpisodeFileFactory(episode=alone, name="memo.txt", content=b"Memo written by hand, no tool.\n")
    run = make_solo_run(study=study, task=task, agent=agent, content=b"Memo the tool wrote on its own.\n")
    make_expert(username="eva", sectors=[sector])
    make_expert(username="ana", sectors=[sector])
    UserFactory(username="sam", roles=["staff"])

    # 1. Staff choose the study and the task; one deliverable per arm is proposed; they give it to two experts.
    page.set_viewport_size(DESKTOP)
    login(page, "sam", PASSWORD)
    page.goto("/expert/staff/comparisons/")
    page.select_option("#id_study_filter", label="Memo study")
    page.wait_for_url("**study=*")
    page.select_option("#id_task_filter", label=task.title)
    page.wait_for_url("**task=*")
    form = page.locator("#comparison-set-form")
    expect(form).to_contain_text("Worker + Hidden Agent Q")
    expect(form).to_contain_text("Hidden Agent Q alone")
    expect(form.locator("input[name=deliverables]:checked")).to_have_count(3)
    form.get_by_label("eva").check()
    form.get_by_label("ana").check()
    form.locator("button:has-text('Create set')").click()
    expect(page.locator(".messages")).to_contain_text("with 3 deliverables for 2 expert(s)")
    comparison_set = ComparisonSet.objects.get()
    sign_out(page)

    # 2. Eva ranks it blind on a desktop: autosave keeps her draft; an incomplete ranking is refused, kept, named.
    login(page, "eva", PASSWORD)
    page.goto("/expert/")
    page.click("a:has-text('Start comparing')")
    expect(page.locator("#compare-form")).to_be_visible()
    body = page.content()
    for hidden in ("Hidden Agent Q", "qx-77", "64.25", "PSEUDO-W2", "alone", "Solo", "solo", LONG_NAME, "memo.txt"):
        assert hidden not in body, hidden  # stored file names too: the expert sees deliverable-<n>-file-<k>
    expect(page.locator("section.deliverable")).to_have_count(3)
    expect(page.locator("#compare-form[data-autosave='ready']")).to_be_attached()  # the draft autosave is listening
    page.select_option("#id_rank_1", "2")
    expect(page.locator("#autosave-status")).to_contain_text("Saved at", timeout=20_000)
    page.reload()
    expect(page.locator("#id_rank_1")).to_have_value("2")
    _rank(page, {2: "1"}, {1: "minor", 2: "ready"}, "")
    page.click("button:has-text('Submit comparison')")
    expect(page.locator("ul.messages")).to_contain_text("2 answers below need attention")
    expect(page.locator("fieldset[data-position='3']")).to_contain_text("Deliverable 3: give a rank")
    expect(page.locator("input[name='accept_2'][value='ready']")).to_be_checked()  # kept
    _rank(page, {3: "2"}, {3: "major"}, "Deliverable 2 answers the client's question in one page; 1 and 3 ramble.")
    page.click("button:has-text('Submit comparison')")
    expect(page.locator(".messages")).to_contain_text("Comparison submitted", timeout=20_000)
    assert "Hidden Agent Q" not in page.content()  # nothing revealed afterwards either
    eva = ComparisonAssignment.objects.get(comparison_set=comparison_set, expert__user__username="eva")
    assert eva.status == "submitted"
    assert [p.rank for p in eva.placements.order_by("position")] == [2, 1, 2]
    sign_out(page)

    # 3. Ana ranks it on a phone: the page fits 390 px, long file names included; she ties two deliverables.
    page.set_viewport_size(PHONE)
    login(page, "ana", PASSWORD)
    page.goto("/expert/")
    _no_horizontal_scroll(page)
    page.click("a:has-text('Start comparing')")
    expect(page.locator("#compare-form")).to_be_visible()
    for summary in page.locator("section.deliverable details.preview > summary").all():
        summary.click()
    _no_horizontal_scroll(page)
    _rank(page, {1: "1", 2: "1", 3: "3"}, {1: "ready", 2: "ready", 3: "unusable"},
          "Two are equally usable for the client; the third misreads the rule.")
    _no_horizontal_scroll(page)
    page.click("button:has-text('Submit comparison')")
    expect(page.locator(".messages")).to_contain_text("Comparison submitted", timeout=20_000)
    _no_horizontal_scroll(page)
    page.screenshot(path="var/e2e-comparison-phone.png", full_page=True)
    ana = ComparisonAssignment.objects.get(comparison_set=comparison_set, expert__user__username="ana")
    assert ana.status == "submitted" and [p.rank for p in ana.placements.order_by("position")] == [1, 1, 3]
    sign_out(page)

    # 4. Staff see both answers by arm and the raw counts: three pairs from each of two comparisons.
    page.set_viewport_size(DESKTOP)
    login(page, "sam", PASSWORD)
    page.goto(f"/expert/staff/comparisons/?study={study.pk}")
    expect(page.locator(f"#set-{comparison_set.pk}")).to_contain_text("answers the client's question")
    expect(page.locator(f"#set-{comparison_set.pk}")).to_contain_text("Two are equally usable")
    counts = page.locator("table.pair-counts tbody tr")
    expect(counts).to_have_count(3)
    totals = [int(row.locator("td").nth(5).inner_text()) for row in counts.all()]
    assert totals == [2, 2, 2]
    page.screenshot(path="var/e2e-comparison-staff.png", full_page=True)

    # 5. The Time & cost page's cost panel: staff set a target and the expert wage; the agent-alone workflow is
    # priced with the run's model cost and its share of the two comparisons' time, at 1280 and at 390 px.
    _price_the_workflows(study, with_agent, alone, run)
    expected = {"human_alone": "30.00", "agent_then_expert": _agent_alone_cost(comparison_set)}
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(f"/admin/dashboard/{study.slug}/costs/")
        expect(page.locator("#expert-time-table")).to_contain_text("Per comparison")
        page.fill("#id_target", "70")
        page.fill("#id_expert_wage", "90")
        page.click("button:has-text('Compare the workflows')")
        expect(page.locator("#workflow-target")).to_contain_text("Target score 70, expert wage 90 USD per hour")
        agent_table = page.locator("table.workflow-table[data-group='Hidden Agent Q']")
        for workflow, cost in expected.items():
            expect(agent_table.locator(f"tr[data-workflow='{workflow}'] td.expected-cost")).to_contain_text(cost)
        expect(agent_table.locator("tr[data-workflow='human_with_agent'] td.expected-cost")).to_contain_text(
            "Cannot be estimated")
        if viewport is PHONE:
            _no_horizontal_scroll(page)
    page.screenshot(path="var/e2e-comparison-costs-phone.png", full_page=True)


def _price_the_workflows(study, with_agent, alone, run) -> None:
    """Wages, timestamps and scores a real study would hold: the worker alone took 30 minutes at 60 USD/h."""
    occupation = OccupationFactory(hourly_wage_usd=Decimal("60"))
    Participant.objects.filter(study=study).update(occupation=occupation)
    for episode, score in ((with_agent, 64.25), (alone, 72.0)):
        submitted = episode.submitted_at or episode.assigned_at
        Episode.objects.filter(pk=episode.pk).update(score=score, submitted_at=submitted,
                                                     started_at=submitted - timedelta(minutes=30))
    SoloRun.objects.filter(pk=run.pk).update(score=80.0, model_cost_usd=Decimal("0.40"))


def _agent_alone_cost(comparison_set) -> str:
    """The run's model cost plus a third of the experts' recorded comparison seconds at 90 USD/h (one task), in
    the page's own arithmetic (a cost in Decimal, shown from its float): at a half-cent tie, float arithmetic
    here would round the other way."""
    seconds = sum(a.time_spent_seconds for a in ComparisonAssignment.objects.filter(comparison_set=comparison_set))
    cost = Decimal("0.40") + Decimal(str(seconds / 3)) / Decimal(3600) * Decimal(90)
    return f"{float(cost):,.2f}"
