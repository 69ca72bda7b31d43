"""Multi-model scenarios shared by several test packages.

A populated study for the dashboard (scored episodes, a posterior, surveys, codings, solo runs, payments); a
recruiting study "world" for worker journeys; episodes ready for the grading pipeline or the expert workspace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
from django.utils import timezone

from grading.models import CriterionScore, FluencyCoding, JudgeRun, LLMUsage
from rating.models import Observation, RatingSnapshot
from rating.services import refresh as rating_refresh
from studies import models as m
from tests.factories.agents import AgentFactory
from tests.factories.episodes import EpisodeFactory, EpisodeFileFactory
from tests.factories.files import REPORT, XLSX
from tests.factories.grading import make_rubric
from tests.factories.participants import ParticipantFactory
from tests.factories.studies import ConsentVersionFactory, StudyFactory
from tests.factories.surveys import add_survey
from tests.factories.tasks import TaskFactory, TaskFileFactory
from tests.factories.taxonomy import OccupationFactory, SectorFactory
from tests.factories.users import UserFactory

BEHAVIOURS = (
    "iterates_and_refines", "clarifies_goal_before_asking", "defines_audience", "checks_facts_and_claims",
)
HIDDEN_MARKER = "GOLD-SECRET-7731"


@dataclass
class PopulatedStudy:
    study: m.Study
    agents: list[m.Agent]
    tasks: list[m.TaskInstance]
    participants: list[m.Participant]
    episodes: list[m.Episode]
    snapshot: RatingSnapshot | None = None
    solo: list[m.SoloRun] = field(default_factory=list)


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
        result.snapshot = rating_refresh.posterior_refresh(study_id=study.pk)
    return result


def _add_grading(data: PopulatedStudy, rng: np.random.Generator) -> None:
    rubrics = {}
    for task in data.tasks:
        rubric = make_rubric(task, version=1, rows=[
            ("correctness", 60.0, "", "Check"), ("completeness", 40.0, "", "Check"),
        ])
        rubrics[task.pk] = (rubric, list(rubric.criteria.order_by("order")))
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


@dataclass
class World:
    study: m.Study
    sector: m.Sector
    occupation: m.Occupation
    agents: list[m.Agent]
    tasks: list[m.TaskInstance]
    consent: m.ConsentVersion
    extra: dict = field(default_factory=dict)


def add_task_files(task: m.TaskInstance) -> None:
    """One reference workbook, one reference note, and a hidden gold file that workers must never get."""
    for kind, name, content in (
        (m.TaskFile.Kind.REFERENCE, "data.xlsx", XLSX),
        (m.TaskFile.Kind.REFERENCE, "brief.txt", b"Quarterly numbers are in data.xlsx\n"),
        (m.TaskFile.Kind.HIDDEN, "gold.txt", HIDDEN_MARKER.encode()),
    ):
        TaskFileFactory(task=task, kind=kind, name=name, content=content)


def make_world(*, tasks: int = 8, agents: int = 3, capacity: int = 3, slug: str = "pilot",
               with_files: bool = False, **study_fields) -> World:
    """A recruiting study with a consent version, one sector and occupation, agents and tasks."""
    study = StudyFactory(slug=slug, status=m.Study.Status.RECRUITING, max_episodes_per_task=capacity, **study_fields)
    consent = ConsentVersionFactory(study=study, version=1)
    sector = SectorFactory(code=f"{slug}-finance", name=f"Finance {slug}")
    occupation = OccupationFactory(soc_code=f"13-{abs(hash(slug)) % 9000 + 1000}.00", title="Accountants and Auditors",
                                   sector=sector)
    agent_rows = [AgentFactory(slug=f"{slug}-agent-{i}", name=f"Agent {slug} {i}",
                               share_url_hosts=["share.example.org"]) for i in range(agents)]
    for agent in agent_rows:
        agent.studies.add(study)
    task_rows = []
    for i in range(tasks):
        task = TaskFactory(title=f"{slug} task {i}", sector=sector, studies=[study], hidden_info=HIDDEN_MARKER)
        if with_files:
            add_task_files(task)
        task_rows.append(task)
    return World(study=study, sector=sector, occupation=occupation, agents=agent_rows, tasks=task_rows,
                 consent=consent)


def make_participant(world: World, *, user=None, status=m.Participant.Status.WORKING, **fields) -> m.Participant:
    """A participant who accepted the current consent and has a profile (by default ready for tasks)."""
    user = user or UserFactory(roles=["worker"])
    values = {"occupation": world.occupation, "consent_version": world.consent, "consented_at": timezone.now(),
              **fields}
    participant = ParticipantFactory(study=world.study, user=user, status=status, **values)
    m.ParticipantIdentity.objects.create(participant=participant, study=world.study)
    return participant


def submitted_episode(*, study=None, providers=("openai", "anthropic"), files=None, task=None,
                      logs=None, **episode_fields) -> m.Episode:
    """A submitted episode whose participant consented to `providers` receiving their files."""
    study = study or StudyFactory()
    consent = ConsentVersionFactory(study=study, version=study.consent_versions.count() + 1,
                                    llm_providers=list(providers))
    participant = ParticipantFactory(study=study, consent_version=consent, status=m.Participant.Status.WORKING)
    extra = {"task": task} if task is not None else {}
    episode_fields.setdefault("status", m.Episode.Status.SUBMITTED)
    episode = EpisodeFactory(participant=participant, study=study, **extra, **episode_fields)
    for name, data in (files if files is not None else {"report.txt": REPORT}).items():
        EpisodeFileFactory(episode=episode, name=name, content=data)
    for name, data in (logs or {}).items():
        EpisodeFileFactory(episode=episode, name=name, content=data, kind=m.EpisodeFile.Kind.LOG)
    return episode


def make_episode(*, task=None, sector=None, study=None, agent=None, status=m.Episode.Status.GRADED,
                 auto_score: float | None = 70.0, participant=None, **extra) -> m.Episode:
    """An auto-graded episode (the expert workspace's input); its task joins `study` when one is given."""
    if task is None:
        task = TaskFactory(sector=sector or SectorFactory())
    kwargs = {"task": task, "status": status, "auto_score": auto_score, **extra}
    if participant is not None:
        kwargs["participant"] = participant
    elif study is not None:
        kwargs["participant"] = ParticipantFactory(study=study)
    if agent is not None:
        kwargs["agent"] = agent
    episode = EpisodeFactory(**kwargs)
    if study is not None:
        task.studies.add(study)
    return episode
