"""End to end: a judge that favours its own family's agent is detected and removed.

A small study is graded by a real Celery worker through the official SDKs against the fake OpenAI/Anthropic
server, whose Claude judge adds points to every deliverable made with Claude Code. Each judge's grade becomes a
grade row of the judge-aware rating (grading task -> per-judge observations), the worker's refresh writes the
judge-aware snapshot, and the grader analysis (a dashboard job the worker runs) reports the self-preference
with an interval around the planted value while the corrected levels recover the true gaps that today's panel
mean gets wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone

from console.dashboard import services as dashboard_services
from rating.models import GradeObservation, RatingSnapshot
from studies.models import BackgroundJob, Episode, EpisodeFile, Study
from studies.services.episodes import episode_submit
from tests.conftest import wait_for
from tests.factories import AgentFactory, EpisodeFactory, StudyFactory, TaskFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.scenarios import submitted_episode
from tests.grading.responders import JudgeBias, graded_responder
from tests.grading.test_flow_grading_integration import shared_media  # noqa: F401 - a fixture
from tests.grading.test_fluency import TRANSCRIPT

BIAS = 8.0
SKILL = {"Claude Code": 0.62, "Codex": 0.60, "Gemini CLI": 0.58}  # quality fractions: true levels 62, 60, 58
FAMILY = {"Claude Code": "anthropic", "Codex": "openai", "Gemini CLI": "google"}
MARKER = "Co-Authored-By: Claude Code"


@pytest.mark.django_db(transaction=True)
def test_a_judges_self_preference_is_detected_and_removed_end_to_end(
        celery_worker_process, llm_server, shared_media, settings):  # noqa: F811
    llm_server.default_responder = graded_responder(
        biases=[JudgeBias("claude", MARKER, BIAS)], noise_points=1.0, leniency={"gpt": -3.0})
    study = StudyFactory(
        rating_model=Study.RatingModel.JUDGE_AWARE, partial_panel=Study.PartialPanel.ACCEPT,
        judges=[{"provider": "openai", "model": "gpt-4.1", "family": "openai"},
                {"provider": "anthropic", "model": "claude-sonnet-4-6", "family": "anthropic"}],
    )
    agents = {name: AgentFactory(name=name, family=family) for name, family in FAMILY.items()}
    tasks = [TaskFactory(studies=[study]) for _ in range(3)]
    rng = np.random.default_rng(11)
    episodes: list[Episode] = []
    quality: dict[int, float] = {}
    for p in range(12):
        person = float(rng.normal(0.0, 0.05))
        participant = None
        for position, (name, agent) in enumerate(agents.items(), start=1):
            q = float(np.clip(SKILL[name] + person + rng.normal(0.0, 0.04), 0.05, 0.95))
            text = f"Quarterly report\nquality: {q:.4f}\n" + (f"{MARKER}\n" if name == "Claude Code" else "")
            common = {"agent": agent, "task": tasks[(p + position) % 3], "position": position,
                      "status": Episode.Status.IN_PROGRESS, "prior_experience": "few", "ready_at": timezone.now()}
            if participant is None:  # the participant (consenting to both providers) comes with the first episode
                episode = submitted_episode(study=study, files={"report.txt": text.encode()},
                                            logs={"session.txt": TRANSCRIPT}, **common)
                participant = episode.participant
            else:
                episode = EpisodeFactory(study=study, participant=participant, **common)
                EpisodeFileFactory(episode=episode, name="report.txt", content=text.encode())
                EpisodeFileFactory(episode=episode, name="session.txt", content=TRANSCRIPT,
                                   kind=EpisodeFile.Kind.LOG)
            quality[episode.pk] = q
            episodes.append(episode)
            shared_media.append(episode.pk)
    worker = celery_worker_process(extra_env={
        "OPENAI_API_KEY": "test-openai-key", "OPENAI_BASE_URL": llm_server.openai_base_url,
        "ANTHROPIC_API_KEY": "test-anthropic-key", "ANTHROPIC_BASE_URL": llm_server.anthropic_base_url,
        "GRADING_ANTHROPIC_MODEL": "claude-sonnet-4-6", "GRADING_RETRY_BASE_DELAY": "0.01",
        "RATING_REFRESH_DEBOUNCE_SECONDS": "0.5",
    })
    for episode in episodes:
        episode_submit(episode=episode, actor=episode.participant.user)

    n_grades = 2 * len(episodes)

    def snapshot_of_every_grade() -> bool:
        latest = RatingSnapshot.objects.filter(study=study).order_by("-version").first()
        return latest is not None and latest.n_observations == n_grades

    try:
        wait_for(lambda: GradeObservation.objects.filter(study=study, active=True).count() == n_grades, timeout=300,
                 message="every judge's grade of every episode to reach the grade ledger")
        wait_for(snapshot_of_every_grade, timeout=120, message="the worker's judge-aware refresh")
        job = dashboard_services.analysis_request(study=study, kind="graders", actor=None)
        wait_for(lambda: BackgroundJob.objects.get(pk=job.pk).status == BackgroundJob.Status.DONE, timeout=120,
                 message="the worker to run the grader analysis")
    except BaseException:
        print(worker.output()[-6000:])
        raise

    grades = GradeObservation.objects.filter(study=study)
    assert {(g.grader, g.grader_family) for g in grades} == {("openai/gpt-4.1", "openai"),
                                                            ("anthropic/claude-sonnet-4-6", "anthropic")}
    assert set(grades.values_list("agent_family", flat=True)) == set(FAMILY.values())
    snapshot = RatingSnapshot.objects.filter(study=study).order_by("-version").first()
    assert snapshot.config["kind"] == "judge_aware"
    report = BackgroundJob.objects.get(pk=job.pk).result
    claude = next(t for t in report["self_preference"] if t["grader"] == "anthropic/claude-sonnet-4-6")
    # A 99 % interval from the reported estimate and standard error (the 95 % one misses by design 1 time in 20).
    low, high = claude["estimate"] - 2.576 * claude["se"], claude["estimate"] + 2.576 * claude["se"]
    assert claude["identifiable"] and low < BIAS < high and claude["ci_low"] > 0
    assert report["verdict"].startswith("The anthropic/claude-sonnet-4-6 judge scores anthropic agents")
    # The truth: each agent's mean quality over the same participants (every participant met every agent).
    truth = {name: 100.0 * float(np.mean([quality[e.pk] for e in episodes if e.agent_id == agent.pk]))
             for name, agent in agents.items()}
    rows = {row["name"]: row for row in report["agents"]}
    true_gap = truth["Claude Code"] - truth["Gemini CLI"]
    corrected = rows["Claude Code"]["mu_corrected"] - rows["Gemini CLI"]["mu_corrected"]
    uncorrected = rows["Claude Code"]["mu_uncorrected"] - rows["Gemini CLI"]["mu_uncorrected"]
    assert abs(corrected - true_gap) < 1.5
    assert uncorrected - true_gap > BIAS / 2 - 1.5  # the panel mean carries half the bias into the gap
