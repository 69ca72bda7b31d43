"""manage.py generate_rubrics, grade and code_logs: what they do and the summaries they print."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.models import FluencyCoding, Rubric
from studies.models import Episode
from tests.factories import TaskFactory
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_generate_rubrics_covers_tasks_without_one_and_summarises(llm_server):
    done = TaskFactory(title="Already done")
    make_rubric(done, per_category=2, origin=Rubric.Origin.EXPERT)
    todo = TaskFactory(title="Needs a rubric")
    TaskFactory(title="Retired", is_active=False)
    out = run("generate_rubrics")
    assert f"generated {todo.uuid}  Needs a rubric: v1, 8 criteria (draft)" in out
    assert out.strip().endswith("Rubrics: 1 generated, 0 failed, 0 waiting, 1 task(s) already had one.")
    assert todo.rubrics.get().status == Rubric.Status.DRAFT


def test_generate_rubrics_for_one_task_with_force_adds_a_version(llm_server):
    task = TaskFactory()
    make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    out = run("generate_rubrics", "--task", str(task.uuid), "--force")
    assert "v2, 8 criteria" in out and task.rubrics.count() == 2


def test_generate_rubrics_rejects_an_unknown_task():
    with pytest.raises(CommandError, match="No task with UUID"):
        run("generate_rubrics", "--task", "00000000-0000-0000-0000-000000000000")
    with pytest.raises(CommandError, match="not a task UUID"):
        run("generate_rubrics", "--task", "nope")


def test_generate_rubrics_says_why_it_waits_without_a_key(no_llm_keys):
    TaskFactory()
    out = run("generate_rubrics")
    assert "waiting" in out and "OPENAI_API_KEY" in out and "0 generated, 0 failed, 1 waiting" in out


def test_grade_pending_sync_grades_waiting_and_submitted_episodes(llm_server, sent_tasks):
    first, second = submitted_episode(), submitted_episode()
    Episode.objects.filter(pk=first.pk).update(grading_note="No judge is configured: …")
    submitted_episode(status=Episode.Status.IN_PROGRESS)
    out = run("grade", "--pending", "--sync")
    assert f"episode {first.pk}: graded score 80.00" in out and f"episode {second.pk}: graded" in out
    assert out.strip().endswith("Grading: 2 graded.")


def test_grade_pending_queues_tasks_by_default(sent_tasks):
    episode = submitted_episode()
    out = run("grade", "--pending")
    assert sent_tasks == [("grading.tasks.grade_episode", [episode.pk])]
    assert "Queued grading for 1 episode(s) and 0 solo run(s)." in out


def test_grade_one_failed_episode_resets_it_and_queues_it(sent_tasks):
    episode = submitted_episode()
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.FAILED, grading_note="boom")
    run("grade", "--episode", str(episode.pk))
    episode.refresh_from_db()
    assert episode.status == Episode.Status.SUBMITTED and episode.grading_note == ""
    assert sent_tasks == [("grading.tasks.grade_episode", [episode.pk])]


def test_grade_needs_a_target_and_an_existing_episode():
    with pytest.raises(CommandError):
        run("grade")
    with pytest.raises(CommandError, match="No episode 424242"):
        run("grade", "--episode", "424242")


def test_grade_sync_reports_waiting_with_the_reason(no_llm_keys):
    episode = submitted_episode()
    out = run("grade", "--episode", str(episode.pk), "--sync")
    assert "waiting — No judge is configured" in out and "Grading: 1 waiting." in out


def test_code_logs_pending_sync_codes_and_summarises(llm_server):
    from tests.grading.test_fluency import TRANSCRIPT

    with_log = submitted_episode(logs={"log.txt": TRANSCRIPT})
    without = submitted_episode()
    out = run("code_logs", "--pending", "--sync")
    assert f"episode {with_log.pk}: succeeded — 3/11 behaviours" in out
    assert f"episode {without.pk}: no_log — No collaboration log file was uploaded." in out
    assert "Log coding: 1 no_log, 1 succeeded." in out
    assert run("code_logs", "--pending", "--sync").strip().endswith("nothing to code.")
    assert FluencyCoding.objects.count() == 2


def test_code_logs_queues_by_default(sent_tasks):
    episode = submitted_episode()
    assert "Queued log coding for 1 episode(s)." in run("code_logs", "--pending")
    assert sent_tasks == [("grading.tasks.code_log", [episode.pk])]


def test_grade_outdated_regrades_only_episodes_scored_with_an_older_rubric(llm_server, sent_tasks,
                                                                            django_capture_on_commit_callbacks):
    from grading.services.rubric_generation import rubric_approve, rubric_copy

    old, current = submitted_episode(), submitted_episode()
    first = make_rubric(old.task, per_category=2, origin=Rubric.Origin.EXPERT)
    make_rubric(current.task, per_category=2, origin=Rubric.Origin.EXPERT)
    with django_capture_on_commit_callbacks(execute=True):
        run("grade", "--pending", "--sync")
    assert run("grade", "--outdated", "--sync").strip().endswith("nothing to grade.")
    rubric_approve(rubric=rubric_copy(rubric=first, actor=None), actor=None)
    with django_capture_on_commit_callbacks(execute=True):
        out = run("grade", "--outdated", "--sync")
    assert f"episode {old.pk}: graded score 80.00" in out and f"episode {current.pk}" not in out
    assert old.judge_runs.count() == 4 and current.judge_runs.count() == 2


def test_parse_transcripts_stores_metrics_for_episodes_with_logs_without_any_llm():
    from django.utils import timezone

    from grading.models import EpisodeTranscript
    from tests.grading.transcripts.conftest import SAMPLES

    with_log = submitted_episode(submitted_at=timezone.now(),
                                 logs={"rollout.jsonl": (SAMPLES / "codex_rollout.jsonl").read_bytes()})
    submitted_episode(submitted_at=timezone.now())  # no log: nothing to parse
    out = run("parse_transcripts", "--all")
    assert f"episode {with_log.pk}: parsed with problems, 3 prompt(s)" in out
    assert "Transcripts: 1 partial." in out
    assert EpisodeTranscript.objects.get().episode_id == with_log.pk
    with pytest.raises(CommandError, match="No episode 999999"):
        run("parse_transcripts", "--episode", "999999")
