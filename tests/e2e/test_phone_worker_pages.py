"""Every worker page at 390 px (a phone) with long unbroken file names and long questions: nothing widens the
page, question borders stay clear of their wrapped text, and after a refused form the worker lands at the field.

A worker from production supervision joins, gives 3.5 years of experience, answers the pre-survey (whose
questions carry long unbroken words), does task 1 from their own field with a session file of 140 characters,
overruns the notes limit (lands focused at the notes; the address reloads), removes a file (its "uploaded" and
"Replace" lines go with it), submits, gets task 2 from a related field (the page says so) and skips it as outside
their expertise, answers the final survey and completes. The expert grading page gets the same check with long
criteria. Screenshots of every page are kept in ``var/e2e-phone-*.png``.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.urls import resolve
from playwright.sync_api import expect

from studies import models as m
from surveys.models import Question
from surveys.services import instrument_install_default
from tests.e2e.steps import answer_choice, answer_likert, close_quietly, finish_pre_survey, open_task
from tests.e2e.test_phone_every_page import WORKER_WALK
from tests.factories import (
    AgentFactory,
    ConsentVersionFactory,
    OccupationFactory,
    SectorFactory,
    StudyFactory,
    TaskFactory,
)
from tests.factories.files import XLSX
from tests.factories.tasks import TaskFileFactory

PASSWORD = "e2e-Long-pass-4821"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
ARTEFACTS = Path("var")
LONG_WORD = "Pneumonoultramicroscopicsilicovolcanoconiosis-and-other-unbroken-words-" * 2
SESSION = "claude-code-session-2026-11-26T10-41-33-0a1b2c3d4e5f60718293a4b5c6d7e8f9-" + "x" * 60 + ".jsonl"
DELIVERABLE = "production-schedule-for-the-third-quarter-with-all-shifts-and-overtime-" + "y" * 50 + ".xlsx"
LANDED: set[str] = set()  # the routes _fits measured, which the walk must cover (test_phone_every_page)
REFERENCE = "reference-line-capacity-measurements-from-the-plant-floor-" + "z" * 60 + ".xlsx"


def _world() -> m.Study:
    instrument = instrument_install_default()
    for code in ("D1", "A2", "A7"):
        question = Question.objects.get(instrument=instrument, code=code)
        question.text = f"{question.text} {LONG_WORD}"
        question.save(update_fields=["text"])
    study = StudyFactory(slug="phone", name="Agents at work on a phone", status=m.Study.Status.RECRUITING,
                         tasks_per_session=2, contact_name="Dr. Study Contact",
                         contact_email="study-team@example.org")
    ConsentVersionFactory(study=study, version=1, text=f"## What we ask\n\nTwo tasks. {LONG_WORD}")
    own = SectorFactory(code="production", name="Production")
    related = SectorFactory(code="architecture-engineering", name="Architecture and Engineering")
    occupation = OccupationFactory(soc_code="51-1011.00", title="First-Line Supervisors of Production Workers",
                                   sector=own)
    m.SectorFallback.objects.create(study=study, from_sector=own, to_sector=related, priority=1)
    agent = AgentFactory(slug="phone-agent", name="Claude Code", log_mode=m.Agent.LogMode.UPLOAD,
                         setup_guide=f"1. Install it\n2. Run `{LONG_WORD}`")
    agent.studies.add(study)
    own_task = TaskFactory(title="Shift schedule", sector=own, studies=[study], prompt=f"Plan the shifts. {LONG_WORD}",
                           expected_deliverables=[DELIVERABLE])
    own_task.occupations.add(occupation)
    TaskFileFactory(task=own_task, kind=m.TaskFile.Kind.REFERENCE, name=REFERENCE, content=XLSX)
    for i in range(2):
        TaskFactory(title=f"Stormwater culvert sizing {i}", sector=related, studies=[study],
                    prompt=f"Size the culvert. {LONG_WORD}")
    return study


def _fits(page, name: str, size: dict[str, int] = PHONE) -> None:
    """The page is no wider than the screen, legends sit inside their boxes; a screenshot is kept either way."""
    ARTEFACTS.mkdir(exist_ok=True)
    LANDED.add(resolve(urlparse(page.url).path).view_name)
    prefix = "e2e-phone" if size is PHONE else "e2e-desktop"
    page.screenshot(path=str(ARTEFACTS / f"{prefix}-{name}.png"), full_page=True)
    # A phone widens its layout viewport to fit a too-wide page, so innerWidth alone would hide the problem.
    scroll, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll <= inner == size["width"], f"the {name} page is {scroll} px wide on a {size['width']} px screen"
    crossed = page.evaluate("""() => Array.from(document.querySelectorAll("fieldset > legend")).filter(legend => {
        const box = legend.parentElement.getBoundingClientRect();
        const border = parseFloat(getComputedStyle(legend.parentElement).borderTopWidth) || 0;
        return legend.getBoundingClientRect().height > 0 && legend.getBoundingClientRect().top < box.top + border;
    }).map(legend => legend.textContent.trim().slice(0, 40))""")
    assert crossed == [], f"on the {name} page a box border runs through {crossed}"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["phone-390", "desktop-1280"])
def test_every_worker_page_fits_the_screen_with_long_names(browser, live_server, tmp_path, monkeypatch, size):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda name, args, **options: None)
    LANDED.clear()
    study = _world()
    files = {}
    for name, content in ((SESSION, b'{"type":"user"}\n'), (DELIVERABLE, XLSX), ("same.xlsx", XLSX)):
        files[name] = tmp_path / name
        files[name].write_bytes(content)
    phone = size is PHONE
    context = browser.new_context(base_url=live_server.url, viewport=size, is_mobile=phone, has_touch=phone,
                                  device_scale_factor=2 if phone else 1)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto(f"/join/{study.invite_code}/")
        _fits(page, "join", size)
        page.get_by_label("Username").fill("phone-worker")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Password confirmation").fill(PASSWORD)
        page.get_by_role("button", name="Create account and continue").click()

        page.wait_for_url(re.compile(r"/consent/$"))
        _fits(page, "consent", size)
        page.get_by_role("button", name="I have read this and agree to take part").click()

        page.wait_for_url(re.compile(r"/profile/$"))
        page.get_by_label("Search occupations").fill("farmer")
        expect(page.locator("#occupation-results .no-match")).to_contain_text("It covers 1 occupation:")
        page.locator("#occupation-results .no-match").get_by_role("link", name="browse them all").click()
        page.wait_for_url(re.compile(r"/profile/\?browse=1"))
        browse = page.locator("#occupation-browse")
        expect(browse).to_contain_text("study-team@example.org")
        browse.get_by_label(re.compile("First-Line Supervisors of Production Workers")).check()
        page.get_by_label("Years of experience in this occupation").fill("3.5")
        _fits(page, "profile", size)
        page.get_by_role("button", name="Save and continue").click()
        page.wait_for_url(re.compile(r"/survey/pre/$"))
        assert page.locator("#q_D3").input_value() == "3.5"
        answer_choice(page, "D1", "I use them often.")
        answer_choice(page, "D2", "Yes, about once a week or more.")
        for code, value in (("A1", 4), ("A2", 5), ("A3", 3), ("A6", 5)):
            answer_likert(page, code, value)
        _fits(page, "pre-survey", size)
        finish_pre_survey(page)

        # Task 1, from the worker's own occupation.
        page.wait_for_url(re.compile(r"/tasks/1/$"))
        _fits(page, "task-start", size)
        open_task(page, 1)
        expect(page.locator("#task-match")).to_contain_text("written for your occupation")
        page.get_by_label("Used a few times").check()
        page.locator("#agent-ready").check()
        page.get_by_role("button", name="Save setup").click()
        page.locator("#upload-deliverable").set_input_files([str(files[DELIVERABLE]), str(files["same.xlsx"])])
        deliverables = page.locator(".file-table[data-kind='deliverable'] tbody")
        deliverables.locator("tr", has_text="same.xlsx").wait_for()
        page.locator("#upload-log").set_input_files(str(files[SESSION]))
        page.locator(".file-table[data-kind='log'] tbody tr", has_text="claude-code-session").wait_for()
        _fits(page, "task", size)

        # A file removed takes its "uploaded" line and its "Replace" offer with it.
        page.locator("#upload-deliverable").set_input_files(str(files["same.xlsx"]))
        replace = page.get_by_role("button", name="Replace “same.xlsx”")
        expect(replace).to_be_visible()
        page.get_by_role("button", name="Remove same.xlsx").click()
        page.get_by_role("button", name="Yes, remove same.xlsx").click()
        expect(deliverables.locator("tr", has_text="same.xlsx")).to_have_count(0)
        expect(replace).to_have_count(0)
        expect(page.locator(".upload-zone[data-kind='deliverable'] .upload-progress li",
                            has_text="same.xlsx")).to_have_count(0)

        # Notes over the limit: the refused page lands at the notes, focused, under the task page's address.
        page.locator("#notes").evaluate("(area, text) => { area.value = text; }", "n" * 5001)
        page.get_by_role("button", name="Review and submit").click()
        expect(page.locator("#notes-errors")).to_contain_text("Notes can be at most 5000 characters")
        expect(page).to_have_url(re.compile(r"/study/phone/tasks/1/#log$"))
        expect(page.locator("#notes")).to_be_focused()
        expect(page.locator("#log-autosave-status")).to_contain_text("Not saved")
        expect(page.locator("#submit-checklist .checklist-done")).to_be_hidden()
        _fits(page, "task-notes-error", size)
        page.reload()
        expect(page.get_by_role("heading", level=1)).to_contain_text("Task 1 of 2")
        page.locator("#notes").fill("Worked through the schedule with the agent.")
        page.get_by_role("button", name="Review and submit").click()
        page.wait_for_url(re.compile(r"/episodes/\d+/submit/$"))
        _fits(page, "review", size)
        page.get_by_role("button", name="Submit task 1").click()

        # Task 2 comes from a related field, and the page says which; the worker skips it honestly.
        page.wait_for_url(re.compile(r"/tasks/2/$"))
        open_task(page, 2)
        expect(page.locator("#task-match")).to_contain_text(
            "This task comes from a related field: Architecture and Engineering.")
        _fits(page, "task-related-field", size)
        page.get_by_label("Why is it outside your expertise?").fill(
            "I supervise production lines; sizing a stormwater culvert needs a civil engineer.")
        page.locator("#outside-expertise-confirm").check()
        page.get_by_role("button", name="Skip this task as outside my expertise").click()

        page.wait_for_url(re.compile(r"/survey/post/$"))
        for code, value in (("A1", 6), ("A2", 5), ("A3", 4), ("A6", 3)):
            answer_likert(page, code, value)
        page.locator("label[for='q_A4-H2']").click()
        page.locator("label[for='q_A5-H3']").click()
        answer_choice(page, "A7", "Excited")
        _fits(page, "post-survey", size)
        page.get_by_role("button", name="Submit answers").click()

        page.wait_for_url(re.compile(r"/complete/$"))
        _fits(page, "complete", size)
        page.goto("/study/phone/")
        _fits(page, "study-overview", size)
        expect(page.locator("#resume-link")).to_have_count(0)
        page.goto("/study/phone/tasks/1/")
        _fits(page, "task-submitted", size)
        page.goto("/study/phone/withdraw/")
        _fits(page, "withdraw", size)
    finally:
        close_quietly(context)

    assert LANDED >= WORKER_WALK, f"worker pages the walk did not measure: {sorted(WORKER_WALK - LANDED)}"
    episodes = list(m.Episode.objects.filter(participant__user__username="phone-worker").order_by("position"))
    assert [(e.status, e.skip_reason) for e in episodes] == [("submitted", ""), ("skipped", "outside_expertise")]
    assert m.Participant.objects.get(user__username="phone-worker").years_experience == 3.5


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_expert_grading_page_keeps_long_criteria_inside_their_boxes_on_a_phone(browser, live_server,
                                                                                     monkeypatch):
    from experts.services.routing import episode_assign_expert
    from tests.e2e.steps import login
    from tests.factories.episodes import EpisodeFileFactory
    from tests.factories.experts import make_expert
    from tests.factories.grading import FIVE, make_rubric
    from tests.factories.scenarios import make_episode

    monkeypatch.setattr("studyapp.celery.app.send_task", lambda name, args=None, **kw: None)
    sector = SectorFactory(name="Finance and Insurance")
    study = StudyFactory(double_grading_share=0.0)
    task = TaskFactory(sector=sector, title="Quarterly revenue summary", studies=[study])
    rows = [(category, points, label, f"{text} {LONG_WORD}") for category, points, label, text in FIVE]
    make_rubric(task, rows=rows)
    episode = make_episode(task=task, study=study)
    EpisodeFileFactory(episode=episode, csv=True, name=DELIVERABLE.replace(".xlsx", ".csv"),
                       content=b"month,revenue\nJan,100\n")
    expert = make_expert(username="eva", sectors=[sector])
    assignment = episode_assign_expert(episode=episode, expert=expert, actor=None)
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, is_mobile=True, has_touch=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        login(page, "eva", "pw-correct-horse")
        page.goto(f"/expert/grade/{assignment.pk}/")
        expect(page.locator("fieldset.criterion").first).to_contain_text("Pneumonoultramicroscopic")
        _fits(page, "expert-grade")
    finally:
        close_quietly(context)
