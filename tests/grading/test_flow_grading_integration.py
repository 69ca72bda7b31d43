"""End to end: a worker submits, a real Celery worker grades through the fake providers, the ledger records once.

Runs on whatever this run uses: SQLite + the filesystem broker by default, PostgreSQL + Redis when
DATABASE_URL / REDIS_URL are set (CI). The worker subprocess reads the fake server's address and keys from
the environment variables the settings already read, exactly as a deployment would.
"""

from __future__ import annotations

import shutil

import pytest
from celery import current_app
from django.utils import timezone

from grading.models import FluencyCoding, JudgeRun, LLMUsage
from rating.models import Observation
from studies.models import Episode
from studies.services.episodes import episode_submit
from tests.conftest import wait_for
from tests.factories import StudyFactory
from tests.factories.files import REPORT
from tests.factories.scenarios import submitted_episode
from tests.grading.test_fluency import TRANSCRIPT


@pytest.fixture
def shared_media(settings):
    """Store files where the worker subprocess (same VAR_DIR) looks for them, and clean up after."""
    location = settings.VAR_DIR / "media"
    storage = dict(settings.STORAGES)
    storage["default"] = {**storage["default"], "OPTIONS": {**storage["default"]["OPTIONS"],
                                                            "location": str(location)}}
    settings.STORAGES = storage
    settings.MEDIA_ROOT = location
    created: list[int] = []
    yield created
    for pk in created:
        shutil.rmtree(location / "episodes" / str(pk), ignore_errors=True)


@pytest.mark.django_db(transaction=True)
def test_a_submitted_episode_is_graded_by_a_real_worker_and_observed_exactly_once(
        celery_worker_process, llm_server, shared_media):
    study = StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"},
                                 {"provider": "anthropic", "model": "claude-sonnet-4-6"}])
    episode = submitted_episode(study=study, status=Episode.Status.IN_PROGRESS, prior_experience="few",
                                ready_at=timezone.now(), files={"summary.txt": REPORT},
                                logs={"session.txt": TRANSCRIPT})
    shared_media.append(episode.pk)
    worker = celery_worker_process(extra_env={
        "OPENAI_API_KEY": "test-openai-key", "OPENAI_BASE_URL": llm_server.openai_base_url,
        "ANTHROPIC_API_KEY": "test-anthropic-key", "ANTHROPIC_BASE_URL": llm_server.anthropic_base_url,
        "GRADING_ANTHROPIC_MODEL": "claude-sonnet-4-6", "GRADING_RETRY_BASE_DELAY": "0.01",
    })

    episode_submit(episode=episode, actor=episode.participant.user)

    def graded_and_observed() -> bool:
        return (Episode.objects.filter(pk=episode.pk, status=Episode.Status.GRADED).exists()
                and Observation.objects.filter(episode_id=episode.pk).exists())

    try:
        wait_for(graded_and_observed, timeout=120, message="the worker to grade the episode and record it")
        wait_for(lambda: FluencyCoding.objects.filter(episode_id=episode.pk).exists(), timeout=60,
                 message="the worker to code the collaboration log")
    except BaseException:
        print(worker.output()[-5000:])
        raise
    episode.refresh_from_db()
    assert episode.auto_score == 80 and episode.score == 80
    runs = JudgeRun.objects.filter(episode=episode)
    assert {(r.provider, r.status, r.total, r.is_current) for r in runs} == {
        ("openai", "succeeded", 80, True), ("anthropic", "succeeded", 80, True)}
    assert episode.task.rubrics.get().status == "draft"
    observation = Observation.objects.get(episode_id=episode.pk)
    assert observation.active and observation.y == episode.score
    assert FluencyCoding.objects.get(episode=episode).status == "succeeded"
    assert set(LLMUsage.objects.filter(study=study).values_list("purpose", flat=True)) == {"rubric", "judge",
                                                                                          "fluency"}

    # A duplicate delivery of the grading task changes nothing: no new calls, runs or observations.
    calls = len(llm_server.requests)
    result = current_app.send_task("grading.tasks.grade_episode", args=[episode.pk])
    assert result.get(timeout=60)["status"] == "unchanged"
    assert len(llm_server.requests) == calls
    assert JudgeRun.objects.filter(episode=episode).count() == 2
    assert Observation.objects.filter(episode_id=episode.pk).count() == 1
