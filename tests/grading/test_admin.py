"""Grading admin: approve/copy rubrics, retry actions, the grading queue, solo-run uploads."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from grading.models import Criterion, JudgeRun, Rubric
from grading.prompts import JUDGE_PROMPT_VERSION
from studies.models import Episode, SoloRun
from tests.factories import AgentFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks):
    return lambda: django_capture_on_commit_callbacks(execute=True)


def action(client, url: str, name: str, pks) -> str:
    response = client.post(url, {"action": name, "_selected_action": [str(pk) for pk in pks]}, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def test_approve_action_approves_valid_rubrics_and_explains_invalid_ones(staff_client):
    good = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT, status=Rubric.Status.DRAFT)
    bad = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT, status=Rubric.Status.DRAFT)
    Criterion.objects.filter(rubric=bad, key="C8").update(points=1)
    text = action(staff_client, "/admin/grading/rubric/", "approve_rubrics", [good.pk, bad.pk])
    good.refresh_from_db()
    bad.refresh_from_db()
    assert good.status == Rubric.Status.APPROVED and bad.status == Rubric.Status.DRAFT
    assert "Technical Quality" in text and "Approved 1 rubric(s)" in text


def test_criteria_of_an_approved_rubric_are_read_only_in_the_admin(staff_client):
    rubric = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT)
    page = staff_client.get(f"/admin/grading/rubric/{rubric.pk}/change/").content.decode()
    assert 'name="criteria-0-points"' not in page
    draft = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT, status=Rubric.Status.DRAFT)
    page = staff_client.get(f"/admin/grading/rubric/{draft.pk}/change/").content.decode()
    assert 'name="criteria-0-points"' in page and "points add up to 100" in page


def test_copy_action_creates_an_editable_version(staff_client):
    rubric = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT)
    action(staff_client, "/admin/grading/rubric/", "copy_for_editing", [rubric.pk])
    assert rubric.task.rubrics.filter(version=2, status="draft", based_on=rubric).exists()


def test_generate_action_queues_generation_for_the_tasks(staff_client, sent_tasks, on_commit):
    rubric = make_rubric(TaskFactory(), per_category=2, origin=Rubric.Origin.EXPERT)
    with on_commit():
        text = action(staff_client, "/admin/grading/rubric/", "generate_new_version", [rubric.pk])
    assert sent_tasks == [("grading.tasks.generate_rubric", [rubric.task_id])]
    assert "Queued rubric generation for 1 task(s)" in text


def test_grading_queue_lists_failed_episodes_with_reasons_and_retries_them(staff_client, sent_tasks, on_commit):
    episode = submitted_episode()
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.FAILED, grading_note="Every judge failed.")
    page = staff_client.get("/admin/grading/episodegrading/").content.decode()
    assert "Every judge failed." in page
    with on_commit():
        text = action(staff_client, "/admin/grading/episodegrading/", "retry_grading", [episode.pk])
    assert "Queued 1 episode(s) for grading." in text
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.SUBMITTED
    assert sent_tasks == [("grading.tasks.grade_episode", [episode.pk])]


def test_retry_action_on_judge_runs_skips_runs_that_cannot_be_redone(staff_client, sent_tasks, llm_server,
                                                                    on_commit):
    episode = submitted_episode()
    rubric = make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    failed = JudgeRun.objects.create(episode=episode, rubric=rubric, provider="openai", model="gpt-4.1",
                                     prompt_version=JUDGE_PROMPT_VERSION, status="failed", error="HTTP 500")
    done = JudgeRun.objects.create(episode=episode, rubric=rubric, provider="anthropic",
                                   model="claude-sonnet-4-6", prompt_version=JUDGE_PROMPT_VERSION,
                                   status="succeeded", total=50)
    with on_commit():
        text = action(staff_client, "/admin/grading/judgerun/", "retry_runs", [failed.pk, done.pk])
    assert "Queued 1 judge run(s)" in text and "Skipped 1 run(s)" in text
    assert sent_tasks == [("grading.tasks.grade_episode", [episode.pk])]


def test_staff_attach_a_solo_run_with_several_files_in_the_admin(staff_client, sent_tasks, on_commit):
    study, task, agent = StudyFactory(), TaskFactory(), AgentFactory()
    with on_commit():
        response = staff_client.post("/admin/studyapp/solorun/add/", {
            "study": study.pk, "task": task.pk, "agent": agent.pk, "system_prompt": "Do the task alone.",
            "deliverables": [SimpleUploadedFile("a.txt", b"alpha"), SimpleUploadedFile("b.csv", b"x,y\n1,2\n")],
            "files-TOTAL_FORMS": "0", "files-INITIAL_FORMS": "0",
        }, follow=True)
    assert response.status_code == 200
    run = SoloRun.objects.get()
    assert sorted(run.files.values_list("name", flat=True)) == ["a.txt", "b.csv"]
    assert sent_tasks == [("grading.tasks.grade_solo_run", [run.pk])]


def test_a_bad_solo_run_file_shows_a_form_error_and_saves_nothing(staff_client, sent_tasks):
    response = staff_client.post("/admin/studyapp/solorun/add/", {
        "study": StudyFactory().pk, "task": TaskFactory().pk, "agent": AgentFactory().pk,
        "deliverables": [SimpleUploadedFile("run.exe", b"MZ")],
        "files-TOTAL_FORMS": "0", "files-INITIAL_FORMS": "0",
    })
    assert response.status_code == 200
    assert "are not accepted" in response.content.decode()
    assert not SoloRun.objects.exists()


def test_staff_enter_a_solo_run_s_model_cost_on_creation_and_later_and_a_negative_cost_is_refused(
        staff_client, sent_tasks, on_commit):
    study, task, agent = StudyFactory(), TaskFactory(), AgentFactory()
    with on_commit():
        staff_client.post("/admin/studyapp/solorun/add/", {
            "study": study.pk, "task": task.pk, "agent": agent.pk, "model_cost_usd": "0.42",
            "deliverables": [SimpleUploadedFile("a.txt", b"alpha")],
            "files-TOTAL_FORMS": "0", "files-INITIAL_FORMS": "0"})
    run = SoloRun.objects.get()
    assert str(run.model_cost_usd) == "0.420000"
    change = f"/admin/studyapp/solorun/{run.pk}/change/"
    refused = staff_client.post(change, {"system_prompt": "", "model_cost_usd": "-1", "files-TOTAL_FORMS": "0",
                                         "files-INITIAL_FORMS": "0"})
    assert refused.status_code == 200 and "greater than or equal to 0" in refused.content.decode()
    staff_client.post(change, {"system_prompt": "", "model_cost_usd": "1.5", "files-TOTAL_FORMS": "0",
                               "files-INITIAL_FORMS": "0"})
    run.refresh_from_db()
    assert str(run.model_cost_usd) == "1.500000"


def test_the_tom_coding_action_queues_episodes_of_tom_studies_only_and_codings_are_read_only(
        staff_client, sent_tasks, on_commit):
    from grading.models import ProcessCoding

    coded = submitted_episode(study=StudyFactory(tom_coding=True))
    plain = submitted_episode()
    with on_commit():
        text = action(staff_client, "/admin/grading/episodegrading/", "code_processes", [coded.pk, plain.pk])
    assert "Queued ToM and response-quality coding for 1 episode(s)." in text and "were left alone" in text
    assert sent_tasks == [("grading.tasks.code_process", [coded.pk])]
    row = ProcessCoding.objects.create(episode=coded, instrument="tom", provider="openai", model="gpt-4.1",
                                       prompt_version="v", status="not_coded", is_current=True,
                                       error="No collaboration log file was uploaded.")
    page = staff_client.get("/admin/grading/processcoding/").content.decode()
    assert "No collaboration log file was uploaded." in page
    assert staff_client.post(f"/admin/grading/processcoding/{row.pk}/change/", {"score": 5}).status_code == 403


def _session(name: str) -> SimpleUploadedFile:
    from tests.grading.transcripts.conftest import SAMPLES

    return SimpleUploadedFile(name, (SAMPLES / name).read_bytes())


CLAUDE_USAGE = {"claude-sonnet-4-5-20250929": {"calls": 4, "input": 320, "cache_read": 0, "cache_write": 0,
                                               "output": 190, "reasoning": 0}}


def test_staff_attach_session_files_apart_from_the_deliverables_on_add_and_change(staff_client, sent_tasks,
                                                                                   on_commit):
    from datetime import date
    from decimal import Decimal

    from grading.models import ModelPrice
    from studies.models import SoloRunFile

    ModelPrice.objects.create(model="claude-sonnet-4-5", effective_from=date(2020, 1, 1), input_per_million=3,
                              cache_read_per_million=Decimal("0.3"), cache_write_per_million=Decimal("3.75"),
                              output_per_million=15)
    form = staff_client.get("/admin/studyapp/solorun/add/").content.decode()
    assert 'name="session_files"' in form and "Session files" in form
    with on_commit():
        staff_client.post("/admin/studyapp/solorun/add/", {
            "study": StudyFactory().pk, "task": TaskFactory().pk, "agent": AgentFactory().pk,
            "deliverables": [SimpleUploadedFile("a.txt", b"alpha")],
            "session_files": [_session("claude_code_session_v2.jsonl")],
            "files-TOTAL_FORMS": "0", "files-INITIAL_FORMS": "0"})
    run = SoloRun.objects.get()
    assert dict(run.files.values_list("name", "kind")) == {"a.txt": "deliverable",
                                                           "claude_code_session_v2.jsonl": "log"}
    assert run.usage == CLAUDE_USAGE
    change = f"/admin/studyapp/solorun/{run.pk}/change/"
    page = staff_client.get(change).content.decode()
    # 320 input at $3 and 190 output at $15 per million
    assert "4 calls of claude-sonnet-4-5-20250929: 320 input" in page
    assert "0.003810 USD, priced from the session files" in page
    response = staff_client.post(change, {"system_prompt": "", "model_cost_usd": "", "files-TOTAL_FORMS": "0",
                                          "files-INITIAL_FORMS": "0",
                                          "session_files": [_session("gemini_session_v2.json")]})
    assert response.status_code == 302
    run.refresh_from_db()
    assert set(run.usage) == {"claude-sonnet-4-5-20250929", "gemini-2.5-pro"}
    assert run.files.filter(kind=SoloRunFile.Kind.LOG).count() == 2
    staff_client.post(change, {"system_prompt": "", "model_cost_usd": "0.42", "files-TOTAL_FORMS": "0",
                               "files-INITIAL_FORMS": "0"})
    assert "0.420000 USD, entered by staff" in staff_client.get(change).content.decode()


@pytest.mark.parametrize(("session", "message"), [
    (SimpleUploadedFile("report.pdf", b"%PDF-1.4 a deliverable"), "is not a session file"),
    (SimpleUploadedFile("a.txt", b"a log named like the deliverable"), "attached twice"),
])
def test_a_bad_session_file_shows_a_form_error_and_saves_nothing(staff_client, sent_tasks, session, message):
    response = staff_client.post("/admin/studyapp/solorun/add/", {
        "study": StudyFactory().pk, "task": TaskFactory().pk, "agent": AgentFactory().pk,
        "deliverables": [SimpleUploadedFile("a.txt", b"alpha")], "session_files": [session],
        "files-TOTAL_FORMS": "0", "files-INITIAL_FORMS": "0"})
    assert response.status_code == 200 and message in response.content.decode()
    assert not SoloRun.objects.exists() and not sent_tasks


def test_a_bad_session_file_on_change_saves_nothing(staff_client, sent_tasks, on_commit):
    from studies.models import SoloRunFile

    with on_commit():
        staff_client.post("/admin/studyapp/solorun/add/", {
            "study": StudyFactory().pk, "task": TaskFactory().pk, "agent": AgentFactory().pk,
            "deliverables": [SimpleUploadedFile("a.txt", b"alpha")], "files-TOTAL_FORMS": "0",
            "files-INITIAL_FORMS": "0"})
    run = SoloRun.objects.get()
    response = staff_client.post(f"/admin/studyapp/solorun/{run.pk}/change/", {
        "system_prompt": "changed", "model_cost_usd": "", "files-TOTAL_FORMS": "0", "files-INITIAL_FORMS": "0",
        "deliverables": [SimpleUploadedFile("b.txt", b"beta")],
        "session_files": [_session("claude_code_session_v2.jsonl"), SimpleUploadedFile("run.exe", b"MZ")]})
    assert response.status_code == 200 and "is not a session file" in response.content.decode()
    run.refresh_from_db()
    assert run.system_prompt == "" and run.usage is None
    assert list(SoloRunFile.objects.values_list("name", flat=True)) == ["a.txt"]
    assert "Unknown: the solo run has no model cost entered" in staff_client.get(
        f"/admin/studyapp/solorun/{run.pk}/change/").content.decode()
