"""A populated study for dashboard tests: scored episodes, a posterior, surveys, codings, solo runs, payments."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
from django.utils import timezone

from grading.models import Criterion, CriterionScore, FluencyCoding, JudgeRun, LLMUsage, Rubric
from rating import services as rating_services
from rating.models import Observation, RatingSnapshot
from studyapp import models as m
from surveys.models import Answer, Instrument, Question, SurveyResponse
from surveys.services import instrument_install_default
from tests.factories import AgentFactory, ParticipantFactory, SectorFactory, StudyFactory, TaskFactory

BEHAVIOURS = (
    "iterates_and_refines", "clarifies_goal_before_asking", "defines_audience", "checks_facts_and_claims",
)
ORIENTATIONS = ("Excited", "Curious", "Neutral", "Skeptical", "Anxious")


@dataclass
class PopulatedStudy:
    study: m.Study
    agents: list[m.Agent]
    tasks: list[m.TaskInstance]
    participants: list[m.Participant]
    episodes: list[m.Episode]
    snapshot: RatingSnapshot | None = None
    solo: list[m.SoloRun] = field(default_factory=list)


def default_instrument() -> Instrument:
    """Return the default instrument (a transactional test's flush removes the migration's copy)."""
    return instrument_install_default()


def add_survey(participant: m.Participant, rng: np.random.Generator, *, phases=("pre", "post")) -> None:
    """Give the participant submitted pre and post surveys with plausible coded answers."""
    instrument = default_instrument()
    questions = {q.code: q for q in Question.objects.filter(instrument=instrument)}
    now = timezone.now()
    base = {code: int(rng.integers(1, 8)) for code in ("A1", "A2", "A3", "A6")}
    base.update({code: int(rng.integers(1, 6)) for code in ("A4", "A5")})
    for phase in phases:
        response = SurveyResponse.objects.create(participant=participant, instrument=instrument, phase=phase,
                                                 submitted_at=now)
        answers = []
        if phase == "pre":
            d1 = int(rng.integers(1, 5))
            answers.append(Answer(response=response, question=questions["D1"], value=str(d1), numeric=float(d1)))
            d2 = int(rng.integers(1, 6))
            answers.append(Answer(response=response, question=questions["D2"], value=str(d2), numeric=float(d2)))
            years = float(rng.integers(0, 30))
            answers.append(Answer(response=response, question=questions["D3"], value=f"{years:g}", numeric=years))
        for code, value in base.items():
            if phase == "post":
                high = 5 if code in ("A4", "A5") else 7
                value = int(np.clip(value + rng.integers(-1, 3), 1, high))
            raw = f"H{value}" if code in ("A4", "A5") else str(value)
            answers.append(Answer(response=response, question=questions[code], value=raw, numeric=float(value)))
        answers.append(
            Answer(response=response, question=questions["A7"], value=str(rng.choice(ORIENTATIONS)), numeric=None)
        )
        Answer.objects.bulk_create(answers)


def populated_study(
    *, n_agents: int = 3, n_participants: int = 16, per_participant: int = 3, seed: int = 7, refresh: bool = True,
    surveys: bool = True, extras: bool = True, **study_fields,
) -> PopulatedStudy:
    """Create a connected study: every participant works with several agents on distinct tasks, all scored."""
    rng = np.random.default_rng(seed)
    study = StudyFactory(**study_fields)
    sectors = [SectorFactory(), SectorFactory()]
    agents = [AgentFactory() for _ in range(n_agents)]
    study.agents.add(*agents)
    n_tasks = per_participant * 2 + 2
    tasks = [TaskFactory(studies=[study], sector=sectors[i % 2]) for i in range(n_tasks)]
    skill_agent = rng.normal(60, 8, size=n_agents)
    participants, episodes = [], []
    for p_index in range(n_participants):
        participant = ParticipantFactory(study=study, status=m.Participant.Status.COMPLETE)
        m.ParticipantIdentity.objects.create(
            participant=participant, study=study, email=f"person{p_index}@example.org", full_name=f"Person {p_index}",
            platform="prolific", platform_worker_id=f"PROLIFIC{p_index:04d}",
        )
        participants.append(participant)
        human = rng.normal(10, 8)
        task_order = rng.permutation(n_tasks)
        for position in range(1, per_participant + 1):
            a = (p_index + position) % n_agents
            score = float(np.clip(np.round(skill_agent[a] + human + rng.normal(0, 6), 3), 0, 100))
            episode = m.Episode.objects.create(
                participant=participant, study=study, agent=agents[a], task=tasks[int(task_order[position - 1])],
                position=position, status=m.Episode.Status.GRADED, score=score, auto_score=score,
                score_source=m.Episode.ScoreSource.AUTO, submitted_at=timezone.now(),
            )
            episodes.append(episode)
            Observation.objects.create(
                study=study, episode=episode, agent=episode.agent, participant=participant, task=episode.task, y=score,
            )
            m.Payment.objects.create(participant=participant, episode=episode, kind=m.Payment.Kind.TASK,
                                     amount=study.compensation_per_task, currency=study.currency)
        if surveys:
            add_survey(participant, rng)
    result = PopulatedStudy(study=study, agents=agents, tasks=tasks, participants=participants, episodes=episodes)
    if extras:
        _add_grading(result, rng)
        for episode in episodes:
            flags = {code: {"present": bool(rng.random() < 0.5), "reason": "seen in the log"} for code in BEHAVIOURS}
            FluencyCoding.objects.create(
                episode=episode, status=FluencyCoding.Status.SUCCEEDED, behaviours=flags,
                behaviour_count=sum(f["present"] for f in flags.values()), model="coder-1",
            )
        for task in tasks:
            for agent in agents:
                result.solo.append(
                    m.SoloRun.objects.create(task=task, agent=agent, study=study,
                                             score=float(np.round(rng.uniform(40, 90), 2)),
                                             status=m.Episode.Status.GRADED)
                )
        LLMUsage.objects.create(study=study, purpose=LLMUsage.Purpose.JUDGE, provider="openai", model="gpt-4.1",
                                input_tokens=1000, output_tokens=200, cost_usd=Decimal("0.012"))
        LLMUsage.objects.create(study=study, purpose=LLMUsage.Purpose.RUBRIC, provider="openai", model="gpt-4.1",
                                input_tokens=3000, output_tokens=900, cost_usd=Decimal("0.030"), succeeded=False)
    if refresh:
        result.snapshot = rating_services.posterior_refresh(study_id=study.pk)
    return result


def _add_grading(data: PopulatedStudy, rng: np.random.Generator) -> None:
    rubrics = {}
    for task in data.tasks:
        rubric = Rubric.objects.create(task=task, version=1, status=Rubric.Status.APPROVED)
        criteria = [
            Criterion.objects.create(rubric=rubric, order=i, key=f"C{i + 1}", category=category, description="Check",
                                     points=points)
            for i, (category, points) in enumerate((("correctness", 60.0), ("completeness", 40.0)))
        ]
        rubrics[task.pk] = (rubric, criteria)
    for episode in data.episodes:
        rubric, criteria = rubrics[episode.task_id]
        run = JudgeRun.objects.create(
            episode=episode, rubric=rubric, provider="openai", model="gpt-4.1", prompt_version="p1",
            status=JudgeRun.Status.SUCCEEDED, is_current=True, total=episode.score, cost_usd=Decimal("0.001"),
        )
        for criterion in criteria:
            CriterionScore.objects.create(judge_run=run, criterion=criterion,
                                          earned=float(np.round(criterion.points * rng.uniform(0, 1), 2)),
                                          reason="Matches the reference.")
