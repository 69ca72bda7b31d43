"""The demo as shipped, end to end in a browser: a new worker joins by the printed link, picks an occupation
whose own sector has few tasks, does five tasks (two alone, as the demo's solo condition has it, and one of the
agent tasks skipped after a setup failure), the surveys and the completion, and every page counts the same;
demo-expert grades a real episode blind; staff see it all."""

from __future__ import annotations

import io
import re

import pytest
from celery import current_app
from django.core.management import call_command
from playwright.sync_api import expect

from experts.models import ExpertAssignment, ExpertGrade
from studies import models as m
from surveys.services import instrument_install_default
from tests.e2e.steps import answer_choice, answer_likert, finish_pre_survey, login, open_task, sign_out, wait_saved
from tests.factories.files import PNG, XLSX

PASSWORD = "e2e-Long-pass-4821"
TALLY = "4 submitted, 1 skipped of 5"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_demo_runs_end_to_end_for_a_worker_an_expert_and_staff(page, live_url, tmp_path, monkeypatch):
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, **kw: None)
    instrument_install_default()  # a transactional test starts from an emptied database
    out = io.StringIO()
    call_command("demo", "--no-cohort", "--base-url", live_url, stdout=out)
    link = re.search(r"Worker invitation link: (\S+)", out.getvalue()).group(1)
    files = {}
    for name, content in (("summary.xlsx", XLSX), ("session.txt", b"log"), ("error.png", PNG)):
        files[name] = tmp_path / name
        files[name].write_bytes(content)

    # Worker: the printed link, an account, consent with the study's facts.
    page.goto(link.replace(live_url, ""))
    page.get_by_label("Username").fill("newcomer")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password confirmation").fill(PASSWORD)
    page.get_by_role("button", name="Create account and continue").click()
    page.wait_for_url(re.compile(r"/consent/$"))
    expect(page.locator("#study-facts")).to_contain_text("20.00 USD for each task you submit")
    expect(page.locator("#rank-bonuses")).to_contain_text("1st place 100.00 USD")
    expect(page.locator("#research-contact")).to_contain_text("study-team@example.org")
    page.get_by_role("button", name="I have read this and agree to take part").click()

    # Economists: a sector that used to have no task at all; now reachable through fallbacks.
    page.wait_for_url(re.compile(r"/profile/$"))
    page.get_by_label("Search occupations").fill("econom")
    page.get_by_label(re.compile("Economists")).check()
    page.get_by_label("Years of experience in this occupation").fill("4")
    page.get_by_role("button", name="Save and continue").click()

    page.wait_for_url(re.compile(r"/survey/pre/$"))
    answer_choice(page, "D1", "I use them often.")
    wait_saved(page)
    answer_choice(page, "D2", "Yes, about once a week or more.")
    for code, value in (("A1", 4), ("A2", 5), ("A3", 3), ("A6", 5)):
        answer_likert(page, code, value)
    finish_pre_survey(page)

    agent_tasks = 0
    for position in range(1, 6):
        open_task(page, position)
        expect(page.get_by_role("heading", level=1)).to_contain_text(f"Task {position} of 5")
        solo = page.locator("#solo-notice").count() > 0
        if solo:
            expect(page.locator("#solo-notice")).to_contain_text("without any AI tool")
            assert page.locator("#setup").count() == 0 and page.locator("#log").count() == 0
        else:
            agent_tasks += 1
        if agent_tasks == 2 and not solo:
            page.get_by_text("The setup did not work").click()
            page.get_by_label("What went wrong?").fill("The installer stops with a permissions error.")
            page.locator("#setup-failed-screenshots").set_input_files(str(files["error.png"]))
            page.locator("#setup-failed-confirm").check()
            page.get_by_role("button", name="Report the problem and skip this task").click()
            agent_tasks += 1
            continue
        if not solo:
            page.get_by_label("Never used").check()
            page.locator("#agent-ready").check()
            page.get_by_role("button", name="Save setup").click()
        page.locator("#upload-deliverable").set_input_files(str(files["summary.xlsx"]))
        page.locator(".file-table[data-kind='deliverable'] tbody tr", has_text="summary.xlsx").wait_for()
        if solo:
            pass
        elif page.locator("#upload-log").count():
            page.locator("#upload-log").set_input_files(str(files["session.txt"]))
            page.locator(".file-table[data-kind='log'] tbody tr", has_text="session.txt").wait_for()
        else:
            page.get_by_label("Shared-session link").fill("https://manus.im/share/e2e")
        # Notes typed and never saved by hand survive "Review and submit".
        page.get_by_label(re.compile("Notes for the study team")).fill(f"Notes on task {position}")
        page.get_by_role("button", name="Review and submit").click()
        page.get_by_role("button", name=f"Submit task {position}").click()

    page.wait_for_url(re.compile(r"/survey/post/$"))
    expect(page.locator(".journey-step", has_text="Tasks")).to_contain_text(f"Tasks ({TALLY})")
    for code, value in (("A1", 6), ("A2", 5), ("A3", 4), ("A6", 3)):
        answer_likert(page, code, value)
    page.locator("label[for='q_A4-H2']").click()
    page.locator("label[for='q_A5-H3']").click()
    answer_choice(page, "A7", "Excited")
    page.get_by_role("button", name="Submit answers").click()

    page.wait_for_url(re.compile(r"/complete/$"))
    expect(page.locator("#task-tally")).to_have_text(TALLY)
    expect(page.locator("#return-link")).to_be_visible()
    page.goto("/study/collabskill-demo/")
    expect(page.locator("#task-tally")).to_have_text(f"{TALLY} · pay recorded for 4 tasks, not paid out yet")
    participant = m.Participant.objects.get(user__username="newcomer")
    episodes = list(participant.episodes.order_by("position"))
    conditions = [e.condition for e in episodes]
    assert conditions in (["solo"] * 2 + ["with_agent"] * 3, ["with_agent"] * 3 + ["solo"] * 2), conditions
    skipped = 4 if conditions[0] == "solo" else 2      # the second agent task
    assert [e.status for e in episodes] == ["skipped" if e.position == skipped else "submitted" for e in episodes]
    assert {e.condition_order for e in episodes} == {"solo_first" if conditions[0] == "solo" else "agent_first"}
    assert all(e.notes == f"Notes on task {e.position}" for e in episodes if e.status == "submitted")
    assert m.Payment.objects.filter(participant=participant, kind="task").count() == 4
    sign_out(page)

    # demo-expert grades a real sample submission blind.
    login(page, "demo-expert", "demo-password")
    assignment = ExpertAssignment.objects.filter(expert__user__username="demo-expert").order_by("pk").first()
    page.goto(f"/expert/grade/{assignment.pk}/")
    expect(page.locator("#grade-form")).to_be_visible()
    assert assignment.episode.agent.name not in page.content()
    criteria = list(assignment.episode.task.rubrics.get(status="approved").criteria.order_by("order"))
    for criterion in criteria:
        page.check(f"input[name='verdict_{criterion.pk}'][value='pass']")
    page.check("input[name='overall'][value='accept']")
    page.click("button:has-text('Submit grade')")
    expect(page.locator(".messages")).to_contain_text("Grade submitted")
    assert ExpertGrade.objects.get(assignment=assignment).status == "submitted"
    sign_out(page)

    # Staff: the dashboard shows the new participant's work, why grading waits, and nobody stranded.
    login(page, "demo-staff", "demo-password")
    page.goto("/admin/dashboard/collabskill-demo/")
    expect(page.locator("#waiting-reasons")).to_be_visible()
    assert page.locator("#stranded").count() == 0
    page.goto(f"/expert/staff/episodes/{episodes[0].pk}/")
    page.locator("#id_assign_expert").select_option(index=1)
    page.click("button:has-text('Assign for grading')")
    expect(page.locator(".messages")).to_contain_text("grading queue")
    assert ExpertAssignment.objects.filter(episode=episodes[0]).exists()
    page.screenshot(path="var/e2e-demo-staff.png", full_page=True)
