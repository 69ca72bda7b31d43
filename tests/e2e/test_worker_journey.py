"""A new worker walks the whole journey in a real browser: invitation, account, consent, profile, pre-survey,
five tasks (one skipped because the agent setup failed, one with a multi-file upload), post-survey and the
completion code."""

from __future__ import annotations

import re

import pytest

from studies import models as m
from surveys.models import Answer, SurveyResponse
from surveys.services import instrument_install_default
from tests.e2e.steps import answer_choice, answer_likert, drop_file, finish_pre_survey, open_task, wait_saved
from tests.factories import (
    AgentFactory,
    ConsentVersionFactory,
    OccupationFactory,
    SectorFactory,
    StudyFactory,
    TaskFactory,
)
from tests.factories.files import PDF, PNG, XLSX
from tests.factories.scenarios import add_task_files

PASSWORD = "e2e-Long-pass-4821"
PRE = {"D1": "I use them often.", "D2": "Yes, about once a week or more.", "A4": "H3", "A5": "H4",
       "A7": "Curious"}


def _world():
    instrument_install_default()
    study = StudyFactory(slug="e2e", name="Agents at work", status=m.Study.Status.RECRUITING, tasks_per_session=5,
                         return_url="https://app.prolific.com/submissions/complete?cc={code}")
    ConsentVersionFactory(study=study, version=1, text="## What we ask\n\nYou work on five tasks with AI agents.",
                          llm_providers=["openai", "anthropic"])
    sector = SectorFactory(code="business-finance", name="Business and Financial Operations")
    OccupationFactory(soc_code="13-2011.00", title="Accountants and Auditors", sector=sector)
    OccupationFactory(soc_code="29-1141.00", title="Registered Nurses", sector=SectorFactory(code="health"))
    for i, mode in enumerate(["upload", "upload", "share_url"]):
        agent = AgentFactory(slug=f"e2e-agent-{i}", name=f"Agent {'ABC'[i]}", log_mode=mode,
                             share_url_hosts=["share.example.org"],
                             setup_guide=f"1. Install agent {i}\n2. Run `agent-{i} --version`")
        agent.studies.add(study)
    for i in range(7):
        task = TaskFactory(title=f"Quarterly summary {i}", sector=sector, studies=[study],
                           expected_deliverables=["summary.xlsx"])
        add_task_files(task)
    return study


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_new_worker_completes_the_whole_journey(page, live_url, tmp_path, monkeypatch):
    sent = []
    monkeypatch.setattr("studyapp.celery.app.send_task",
                        lambda name, args, **options: sent.append((name, args)))
    study = _world()
    files = {}
    for name, content in (("summary.xlsx", XLSX), ("notes.pdf", PDF), ("chart.png", PNG), ("session.txt", b"log"),
                          ("error.png", PNG)):
        files[name] = tmp_path / name
        files[name].write_bytes(content)

    # Invitation → account creation.
    page.goto(f"/join/{study.invite_code}/?platform=prolific&worker_id=5f0c3a1b2c3d4e5f60e2e001")
    # A recruit from a platform needs no password; this one chooses one anyway (the optional way in).
    page.get_by_label("Username").fill("e2e-worker")
    page.get_by_label("Password (optional)", exact=True).fill(PASSWORD)
    page.get_by_label("Password confirmation (optional)").fill(PASSWORD)
    page.get_by_role("button", name="Start the study").click()

    # Consent: current version, providers named; accept.
    page.wait_for_url(re.compile(r"/study/e2e/consent/$"))
    assert page.locator("#llm-providers").inner_text().count("OpenAI") == 1
    assert "Anthropic" in page.locator("#llm-providers").inner_text()
    page.get_by_role("button", name="I have read this and agree to take part").click()

    # Profile: searchable O*NET picker.
    page.wait_for_url(re.compile(r"/profile/$"))
    page.get_by_label("Search occupations").fill("account")
    page.get_by_label(re.compile("Accountants and Auditors")).check()
    assert page.locator("text=Registered Nurses").count() == 0
    page.get_by_label("Years of experience in this occupation").fill("7")
    page.get_by_role("button", name="Save and continue").click()

    # Pre-survey: answers autosave; a reload keeps them.
    page.wait_for_url(re.compile(r"/survey/pre/$"))
    assert page.locator("#has-table").is_visible()
    answer_choice(page, "D1", PRE["D1"])
    wait_saved(page)
    answer_likert(page, "A2", 6)
    wait_saved(page)
    page.reload()
    assert page.locator("#q_A2-6").is_checked(), "autosaved answer survives a reload"
    answer_choice(page, "D2", PRE["D2"])
    assert page.locator("#q_D3").input_value() == "7"
    for code, value in (("A1", 4), ("A3", 3), ("A6", 5)):
        answer_likert(page, code, value)
    finish_pre_survey(page)

    # Five tasks.
    for position in range(1, 6):
        open_task(page, position)
        assert page.get_by_role("heading", level=1).inner_text().startswith(f"Task {position} of 5")
        if position == 2:
            page.get_by_text("The setup did not work").click()
            page.get_by_label("What went wrong?").fill("The installer stops with a permissions error.")
            page.locator("#setup-failed-screenshots").set_input_files(str(files["error.png"]))
            page.locator("#setup-failed-confirm").check()
            page.get_by_role("button", name="Report the problem and skip this task").click()
            continue
        page.get_by_label("Used a few times").check()
        page.locator("#agent-ready").check()
        page.get_by_role("button", name="Save setup").click()
        assert page.locator("#agent-ready").is_checked()
        deliverables = [files["summary.xlsx"]]
        if position == 1:
            deliverables += [files["notes.pdf"], files["chart.png"]]
        page.locator("#upload-deliverable").set_input_files([str(p) for p in deliverables])
        table = page.locator(".file-table[data-kind='deliverable'] tbody")
        for path in deliverables:
            table.locator("tr", has_text=path.name).wait_for()
        if position == 3:
            # Same name again: the page offers to replace instead of silently overwriting.
            page.locator("#upload-deliverable").set_input_files(str(files["summary.xlsx"]))
            page.get_by_role("button", name="Replace “summary.xlsx”").click()
            page.locator(".upload-progress li", has_text="replaced").wait_for()
            assert table.locator("tr", has_text="summary.xlsx").count() == 1
        if position == 4:
            drop_file(page, "deliverable", "dropped-notes.txt", "notes dropped on the page")
            table.locator("tr", has_text="dropped-notes.txt").wait_for()
        if page.locator("#upload-log").count():
            page.locator("#upload-log").set_input_files(str(files["session.txt"]))
            page.locator(".file-table[data-kind='log'] tbody tr", has_text="session.txt").wait_for()
            assert page.locator("#submit-checklist .checklist-done").is_visible()
        else:
            page.get_by_label("Shared-session link").fill("https://share.example.org/s/e2e")
            page.get_by_role("button", name="Save", exact=True).click()
        page.get_by_role("button", name="Review and submit").click()
        page.get_by_role("button", name=f"Submit task {position}").click()

    # Post-survey, framed after the tasks.
    page.wait_for_url(re.compile(r"/survey/post/$"))
    assert "After collaborating with agents on these tasks" in page.locator("#question-A2").inner_text()
    for code, value in (("A1", 6), ("A2", 5), ("A3", 4), ("A6", 3)):
        answer_likert(page, code, value)
    page.locator("label[for='q_A4-H2']").click()
    page.locator("label[for='q_A5-H3']").click()
    answer_choice(page, "A7", "Excited")
    page.get_by_role("button", name="Submit answers").click()

    # Completion code and return link.
    page.wait_for_url(re.compile(r"/complete/$"))
    participant = m.Participant.objects.get(user__username="e2e-worker")
    code = page.locator("#completion-code").inner_text().strip()
    assert code == participant.completion_code
    assert page.locator("#return-link").get_attribute("href").endswith(f"cc={code}")
    page.screenshot(path="var/e2e-worker-complete.png", full_page=True)

    # What the database recorded.
    assert participant.status == m.Participant.Status.COMPLETE
    assert participant.identity.platform_worker_id == "5f0c3a1b2c3d4e5f60e2e001"
    episodes = list(m.Episode.objects.filter(participant=participant).order_by("position"))
    assert [e.status for e in episodes] == ["submitted", "skipped", "submitted", "submitted", "submitted"]
    assert m.EpisodeFile.objects.filter(episode=episodes[0], kind="deliverable").count() == 3
    assert m.EpisodeFile.objects.filter(episode=episodes[3], name="dropped-notes.txt").exists()
    assert m.Payment.objects.filter(participant=participant, kind="task").count() == 4
    graded = [args[0] for name, args in sent if name == "grading.tasks.grade_episode"]
    assert sorted(graded) == sorted(e.pk for e in episodes if e.status == "submitted")
    assert SurveyResponse.objects.filter(participant=participant, submitted_at__isnull=False).count() == 2
    assert Answer.objects.get(response__phase="pre", question__code="A2").numeric == 6.0
    assert Answer.objects.get(response__phase="post", question__code="A4").numeric == 2.0
    assert m.StepVisit.objects.filter(participant=participant, step="task").count() >= 5
