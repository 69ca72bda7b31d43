"""End to end: a submission with a broken session file is graded by a real worker and its log still parsed."""

from __future__ import annotations

import pytest
from django.utils import timezone

from grading.models import EpisodeTranscript, FluencyCoding
from studies.models import Episode
from studies.services.episodes import episode_submit
from tests.conftest import wait_for
from tests.factories import StudyFactory
from tests.factories.files import REPORT
from tests.factories.scenarios import submitted_episode
from tests.grading.test_flow_grading_integration import shared_media  # noqa: F401 - fixture
from tests.grading.transcripts.conftest import SAMPLES


@pytest.mark.django_db(transaction=True)
def test_a_broken_log_file_never_stops_grading_and_the_readable_one_is_measured(
        celery_worker_process, llm_server, shared_media):  # noqa: F811
    study = StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"},
                                 {"provider": "anthropic", "model": "claude-sonnet-4-6"}])
    broken = b'{"type": "user", "message": {"role": "user", "content": "hal' + bytes(range(256)) * 4
    episode = submitted_episode(study=study, status=Episode.Status.IN_PROGRESS, prior_experience="few",
                                ready_at=timezone.now(), files={"summary.txt": REPORT},
                                logs={"broken.jsonl": broken,
                                      "rollout.jsonl": (SAMPLES / "codex_rollout.jsonl").read_bytes()})
    shared_media.append(episode.pk)
    worker = celery_worker_process(extra_env={
        "OPENAI_API_KEY": "test-openai-key", "OPENAI_BASE_URL": llm_server.openai_base_url,
        "ANTHROPIC_API_KEY": "test-anthropic-key", "ANTHROPIC_BASE_URL": llm_server.anthropic_base_url,
        "GRADING_ANTHROPIC_MODEL": "claude-sonnet-4-6", "GRADING_RETRY_BASE_DELAY": "0.01",
    })

    episode_submit(episode=episode, actor=episode.participant.user)

    try:
        wait_for(lambda: Episode.objects.filter(pk=episode.pk, status=Episode.Status.GRADED).exists(), timeout=120,
                 message="the worker to grade the episode")
        wait_for(lambda: FluencyCoding.objects.filter(episode_id=episode.pk).exists(), timeout=60,
                 message="the worker to code the collaboration log")
    except BaseException:
        print(worker.output()[-5000:])
        raise
    episode.refresh_from_db()
    assert episode.score == 80
    assert FluencyCoding.objects.get(episode=episode).status == "succeeded"
    transcript = EpisodeTranscript.objects.get(episode=episode)
    assert transcript.status == "partial"
    assert {f["name"]: f["status"] for f in transcript.files} == {"broken.jsonl": "unreadable",
                                                                  "rollout.jsonl": "partial"}
    assert (transcript.user_prompts, transcript.tool_calls, transcript.interventions) == (3, 3, 1)
