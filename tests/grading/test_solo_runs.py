"""Solo-agent baselines: attaching deliverables, grading through the same pipeline, win rates."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from grading.models import JudgeRun, Rubric
from grading.services.solo_runs import solo_run_attach, solo_run_grade
from studies.files import FileRejected
from studies.models import AuditEvent, Episode, SoloRun, SoloRunFile
from tests.factories import AgentFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.grading import make_rubric

pytestmark = pytest.mark.django_db


def upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


def attach(**kwargs) -> SoloRun:
    values = {"study": StudyFactory(), "task": TaskFactory(), "agent": AgentFactory(),
              "files": [upload("report.txt", b"Grand total: 1,234,567")], "actor": UserFactory(roles=["staff"])}
    values.update(kwargs)
    return solo_run_attach(**values)


def test_attaching_stores_the_files_audits_and_queues_grading(sent_tasks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = attach(files=[upload("report.txt", b"hello"), upload("../../data.csv", b"a,b\n1,2\n")])
    assert run.status == Episode.Status.SUBMITTED
    files = {f.name: f for f in run.files.all()}
    assert set(files) == {"report.txt", "data.csv"}
    assert files["report.txt"].size == 5 and len(files["report.txt"].sha256) == 64
    with files["report.txt"].file.open("rb") as fh:
        assert fh.read() == b"hello"
    assert sent_tasks == [("grading.tasks.grade_solo_run", [run.pk])]
    assert AuditEvent.objects.filter(action="solo_run.attached", object_id=str(run.pk)).exists()


def test_a_bad_file_rejects_the_whole_attachment_and_saves_nothing(sent_tasks):
    with pytest.raises(FileRejected, match="not accepted"):
        attach(files=[upload("report.txt", b"ok"), upload("tool.exe", b"MZ...")])
    assert not SoloRun.objects.exists() and not SoloRunFile.objects.exists()


def test_a_file_whose_content_does_not_match_its_extension_is_rejected(sent_tasks):
    with pytest.raises(FileRejected, match="does not match"):
        attach(files=[upload("report.pdf", b"plain text")])


def test_a_solo_run_is_graded_by_the_same_judges_and_rubric(llm_server, sent_tasks):
    task = TaskFactory()
    rubric = make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    run = attach(task=task)
    outcome = solo_run_grade(solo_run_id=run.pk)
    run.refresh_from_db()
    assert outcome.status == "graded" and run.score == 80 and run.status == Episode.Status.GRADED
    judge_runs = JudgeRun.objects.filter(solo_run=run)
    assert {(r.provider, r.rubric_id, r.is_current) for r in judge_runs} == {("openai", rubric.pk, True),
                                                                             ("anthropic", rubric.pk, True)}
    assert not any(name.startswith("rating.") for name, _ in sent_tasks)  # baselines never enter the ledger
