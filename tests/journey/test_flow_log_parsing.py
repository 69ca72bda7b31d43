"""Session logs are read when they are uploaded, by a real Celery worker and with no language model.

A worker uploads a Claude Code session file to a task whose agent is Gemini CLI: the worker is warned on the
task page (and may still submit), the transcript row is written by the worker process, and the staff
collaboration page shows the metrics although no LLM key is configured and nothing is scored.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from grading.models import EpisodeTranscript, FluencyCoding
from studies import models as m
from studies.log_sources import LogFormat
from tests.conftest import wait_for
from tests.factories import UserFactory
from tests.factories.files import XLSX, upload
from tests.factories.scenarios import make_participant, make_world
from tests.grading.test_flow_grading_integration import shared_media  # noqa: F401 - fixture
from tests.grading.transcripts.conftest import SAMPLES

NO_LLM = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "", "OPENAI_BASE_URL": "", "ANTHROPIC_BASE_URL": ""}


@pytest.fixture
def no_llm_key(settings):
    settings.GRADING = {**settings.GRADING, "OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None,
                        "OPENAI_BASE_URL": None, "ANTHROPIC_BASE_URL": None}


@pytest.mark.django_db(transaction=True)
def test_a_log_upload_is_parsed_by_the_worker_and_a_wrong_agents_log_is_flagged_but_submittable(
        client, celery_worker_process, shared_media, no_llm_key):  # noqa: F811
    world = make_world(with_files=True)
    for index, agent in enumerate(world.agents):
        m.Agent.objects.filter(pk=agent.pk).update(name=f"Gemini CLI {index}", log_format=LogFormat.GEMINI,
                                                   log_mode=m.Agent.LogMode.UPLOAD)
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    episode = m.Episode.objects.get(participant=participant, position=1)
    shared_media.append(episode.pk)
    worker = celery_worker_process(queues="default", extra_env=NO_LLM)

    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "few", "ready": "1"})
    client.post(reverse("worker:episode-upload", args=[episode.pk]),
                {"kind": "deliverable", "file": upload("summary.xlsx", XLSX)})
    reply = client.post(reverse("worker:episode-upload", args=[episode.pk]),
                        {"kind": "log", "file": upload("session.jsonl",
                                                       (SAMPLES / "claude_code_session.jsonl").read_bytes())},
                        HTTP_ACCEPT="application/json")
    assert reply.status_code == 200
    assert "looks like a Claude Code session file" in reply.json()["files"][0]["warning"]

    try:
        wait_for(lambda: EpisodeTranscript.objects.filter(episode=episode).exists(), timeout=60,
                 message="the worker to parse the uploaded log")
    except BaseException:
        print(worker.output()[-5000:])
        raise
    row = EpisodeTranscript.objects.get(episode=episode)
    assert row.formats == ["claude_code"] and row.user_prompts == 4 and row.tool_calls == 3
    assert not FluencyCoding.objects.exists()  # the deterministic parse is not the LLM coding

    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert ("This looks like a Claude Code session file (.jsonl), but this task&#x27;s agent is "
            f"{episode.agent.name}, which writes a Gemini CLI saved chat (.json)") in page
    assert "you can still submit" in page

    review = client.get(reverse("worker:episode-submit", args=[episode.pk])).content.decode()
    assert "<code>session.jsonl</code>: This looks like a Claude Code session file" in review
    assert 'id="final-submit"' in review  # a warning, not a problem that blocks the submission
    submitted = client.post(reverse("worker:episode-submit", args=[episode.pk]))
    assert submitted.status_code == 302
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.SUBMITTED and episode.score is None

    client.force_login(UserFactory(username="coordinator", roles=["staff"]))
    html = client.get(reverse("dashboard:collaboration", args=[world.study.slug])).content.decode()
    assert "parse_transcripts" not in html
    assert "Of 1 submitted episode, 1 came with log files: 1 was read" in html
    assert "Claude Code session (JSONL) 1" in html
    metrics = html[html.index('id="transcript-metrics"'):]
    prompts = metrics[metrics.index("Worker prompts"):].split("</tr>")[0]
    assert '<td class="num">1</td><td class="num">4.00</td><td class="num">4.00</td><td class="num">0</td>' in prompts


@pytest.mark.django_db(transaction=True)
def test_an_upload_whose_parse_message_is_lost_is_parsed_by_the_beat_sweep(
        client, monkeypatch, shared_media, no_llm_key, tmp_path, celery_worker_process):  # noqa: F811
    # celery_worker_process: purges stale messages, so only the sweep can start this parse.
    from kombu.exceptions import OperationalError

    from tests.conftest import WorkerProcess, worker_environment

    world = make_world(with_files=True)
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    episode = m.Episode.objects.get(participant=participant, position=1)
    shared_media.append(episode.pk)

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to the broker. Connection refused.")

    monkeypatch.setattr("studyapp.celery.app.send_task", broker_down)
    reply = client.post(reverse("worker:episode-upload", args=[episode.pk]),
                        {"kind": "log", "file": upload("rollout.jsonl",
                                                       (SAMPLES / "codex_reduced_rollout.jsonl").read_bytes())},
                        HTTP_ACCEPT="application/json")
    assert reply.status_code == 200 and reply.json()["ok"]  # the upload is kept; only the message was lost
    monkeypatch.undo()
    assert not EpisodeTranscript.objects.filter(episode=episode).exists()

    # The worker as `make run` starts it: with the embedded beat that runs the reconciliation sweep.
    worker = WorkerProcess("default,grading,rating", worker_environment({
        **NO_LLM, "GRADING_SWEEP_SECONDS": "1", "GRADING_REQUEUE_AFTER_SECONDS": "1"}),
        args=("-B", "-s", str(tmp_path / "beat-schedule")))
    try:
        wait_for(lambda: EpisodeTranscript.objects.filter(episode=episode).exists(), timeout=90,
                 message="the sweep to parse the log whose message was lost")
    except BaseException:
        print(worker.output()[-5000:])
        raise
    finally:
        log = worker.stop()
    assert EpisodeTranscript.objects.get(episode=episode).user_prompts == 3
    assert "grading.tasks.parse_log" in log
