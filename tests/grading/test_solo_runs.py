"""Solo-agent baselines: attaching deliverables and session files, grading through the same pipeline, the usage
the session files recorded."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from grading.models import JudgeRun, Rubric
from grading.services.extraction import solo_run_extract
from grading.services.solo_runs import SESSION, solo_run_add_files, solo_run_attach, solo_run_grade
from grading.transcripts.version import PARSER_VERSION
from studies.files import FileRejected
from studies.models import AuditEvent, Episode, SoloRun, SoloRunFile
from tests.factories import AgentFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.grading import make_rubric
from tests.grading.transcripts.conftest import SAMPLES

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


def sample(name: str) -> SimpleUploadedFile:
    return upload(name, (SAMPLES / name).read_bytes())


def _counts(calls=0, input=0, cache_read=0, cache_write=0, output=0, reasoning=0) -> dict[str, int]:  # noqa: A002
    return {"calls": calls, "input": input, "cache_read": cache_read, "cache_write": cache_write,
            "output": output, "reasoning": reasoning}


# Counted by hand from the sample lines (see tests/grading/transcripts/test_usage.py for the working).
CLAUDE = {"claude-sonnet-4-5-20250929": _counts(4, 10 + 200 + 50 + 60, output=20 + 80 + 60 + 30)}
CODEX = {"gpt-5-codex": _counts(1, 3120 - 1024, 1024, output=212, reasoning=64)}
GEMINI = {"gemini-2.5-pro": _counts(2, 8120 + (9100 - 8000), 8000, output=96 + 40 + 60, reasoning=40)}


@pytest.mark.parametrize(("name", "expected"), [("claude_code_session_v2.jsonl", CLAUDE),
                                                ("codex_reduced_rollout.jsonl", CODEX),
                                                ("gemini_session_v2.json", GEMINI)])
def test_a_session_file_of_each_cli_gives_the_run_its_recorded_usage(sent_tasks, name, expected):
    run = attach(session_files=[sample(name)])
    run.refresh_from_db()
    assert run.usage == expected
    session = run.files.get(kind=SoloRunFile.Kind.LOG)
    assert session.name == name and run.usage_fingerprint
    assert list(run.files.filter(kind=SoloRunFile.Kind.DELIVERABLE).values_list("name", flat=True)) == ["report.txt"]
    assert AuditEvent.objects.get(action="solo_run.attached").after["session_files"] == [name]


def test_several_session_files_add_up_per_model():
    run = attach(session_files=[sample("claude_code_session_v2.jsonl"), sample("codex_reduced_rollout.jsonl"),
                                sample("gemini_session_v2.json")])
    run.refresh_from_db()
    assert run.usage == {**CLAUDE, **CODEX, **GEMINI}


@pytest.mark.parametrize("name", ["codex_legacy.jsonl", "gemini_session.json", "terminal_transcript.txt"])
def test_a_session_file_without_usage_leaves_the_usage_unknown_never_zero(name):
    run = attach(session_files=[sample(name)])
    run.refresh_from_db()
    assert run.usage is None and run.files.filter(kind=SoloRunFile.Kind.LOG).count() == 1


def test_a_run_without_session_files_has_unknown_usage_and_existing_calls_are_unchanged(sent_tasks):
    run = attach()
    run.refresh_from_db()
    assert run.usage is None and run.usage_fingerprint == ""
    assert AuditEvent.objects.get(action="solo_run.attached").after == {
        "task": str(run.task.uuid), "agent": run.agent.name, "files": ["report.txt"]}


def test_attaching_another_session_file_later_reads_the_usage_again():
    run = attach(session_files=[sample("codex_legacy.jsonl")])
    run.refresh_from_db()
    assert run.usage is None
    first = run.usage_fingerprint
    solo_run_add_files(solo_run=run, files=[sample("claude_code_session_v2.jsonl")], actor=None, kind=SESSION)
    run.refresh_from_db()
    assert run.usage == CLAUDE and run.usage_fingerprint not in ("", first)
    solo_run_add_files(solo_run=run, files=[sample("gemini_session_v2.json")], actor=None, kind=SESSION)
    run.refresh_from_db()
    assert run.usage == {**CLAUDE, **GEMINI}
    assert AuditEvent.objects.filter(action="solo_run.session_files_added").count() == 2


def test_a_newer_parser_reads_the_session_files_again(monkeypatch):
    from grading.services import solo_runs
    from grading.transcripts import version

    run = attach(session_files=[sample("claude_code_session_v2.jsonl")])
    run.refresh_from_db()
    SoloRun.objects.filter(pk=run.pk).update(usage=None)  # as an older parser might have left it
    run.refresh_from_db()
    assert solo_runs.solo_run_usage_build(solo_run=run).usage is None  # same files, same parser: not read again
    monkeypatch.setattr(version, "PARSER_VERSION", PARSER_VERSION + "-next")
    assert solo_runs.solo_run_usage_build(solo_run=run).usage == CLAUDE


@pytest.mark.parametrize(("files", "message"), [
    ([sample("claude_code_session_v2.jsonl"), upload("report.pdf", b"%PDF-1.4 ...")], "is not a session file"),
    ([upload("tool.exe", b"MZ...")], "is not a session file"),
    ([upload("empty.jsonl", b"")], "is empty"),
    ([upload("report.txt", b"a terminal log")], "attached twice"),  # the deliverable's name is taken
])
def test_a_bad_session_file_rejects_the_whole_attachment_and_saves_nothing(sent_tasks, files, message):
    with pytest.raises(FileRejected, match=message):
        attach(session_files=files)
    assert not SoloRun.objects.exists() and not SoloRunFile.objects.exists() and not sent_tasks


def test_a_bad_session_file_added_later_saves_nothing_and_keeps_the_usage():
    run = attach(session_files=[sample("claude_code_session_v2.jsonl")])
    with pytest.raises(FileRejected, match="is not a session file"):
        solo_run_add_files(solo_run=run, files=[sample("gemini_session_v2.json"), upload("x.csv", b"a,b\n")],
                           actor=None, kind=SESSION)
    run.refresh_from_db()
    assert run.usage == CLAUDE and run.files.count() == 2


def test_the_grading_extraction_reads_the_deliverables_never_the_session_files():
    run = attach(files=[upload("report.txt", b"DELIVERABLE-TEXT")],
                 session_files=[sample("claude_code_session_v2.jsonl")])
    extraction = solo_run_extract(solo_run=run)
    text = extraction.as_prompt_text(images_attached=False)
    assert "DELIVERABLE-TEXT" in text
    assert "claude_code_session_v2" not in text and "msg_A1" not in text and "claude-sonnet" not in text
