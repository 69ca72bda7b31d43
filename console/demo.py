"""Build the demo study: taxonomy, agents, tasks with generated files, accounts and a simulated cohort.

Everything is idempotent (get-or-create by natural keys; the simulated cohort is generated once) and
deterministic (seeded), so running `manage.py demo` twice leaves the same counts. The cohort is drawn from
the rating model itself — y = s_agent + s_human + ε — with known skills, and every simulated row is flagged
``is_simulated`` so nobody mistakes it for collected data.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import slugify

from console import demo_catalogue
from console.demo_tom import demo_tom_coders, simulated_tom_codes
from grading.providers import JudgeSpec, study_judges
from rating.services.ledger import GradeInput, episode_grades_record
from studies.model_families import family_from_name
from studies.models import (
    Agent,
    ConsentVersion,
    Episode,
    EpisodeFile,
    Occupation,
    Participant,
    Payment,
    Sector,
    SectorFallback,
    Study,
    TaskFile,
    TaskInstance,
)
from studies.onet import import_occupations
from studies.roles import EXPERT, STAFF, WORKER, grant_role

DEMO_SLUG = "collabskill-demo"
DEMO_PASSWORD = "demo-password"
DEMO_ACCOUNTS = (("demo-staff", STAFF), ("demo-expert", EXPERT), ("demo-worker", WORKER))
ONET_FIXTURE = Path(__file__).resolve().parent.parent / "studies" / "fixtures" / "onet_occupations.tsv"
# True agent skills of the generative model (offsets added to a common base; ordering as in paper Table 2).
TRUE_AGENT_SKILL = {"claude-cowork": 77.2, "claude-code": 75.2, "codex": 71.7, "manus": 71.6, "gemini-cli": 70.0}
HUMAN_SKILL_SD = 8.0
NOISE_SD = 8.0
COHORT_SIZE = 90
SEED = 20261121
# Each simulated episode is graded by the study's judge panel: a judge's grade is the episode's quality plus its
# family's leniency, plus SELF_PREFERENCE when the agent is of the judge's own family, plus noise. The auto score
# is the panel mean, as in a real study; the leaderboard's graders panel should find both effects.
JUDGE_LENIENCY = {"openai": -1.5, "anthropic": 1.5}
SELF_PREFERENCE = 4.0
JUDGE_NOISE_SD = 5.0
# The solo condition (seed 004): every simulated worker also does SOLO_TASKS tasks alone, before or after their
# agent tasks (counterbalanced at random, probability 1/2). Alone they score SOLO_LEVEL + θ_h, where θ_h is their
# skill with an agent minus their own boost (sd WORKER_BOOST_SD), so each agent's planted boost is its skill above
# SOLO_LEVEL plus what the judges' self-preference adds to it (planted_boosts). Drawn from its own random stream
# after the agent episodes, so every number of the agent episodes stays as it was.
SOLO_TASKS = 2
SOLO_LEVEL = 66.0
WORKER_BOOST_SD = 3.0

CONSENT_TEXT = """## Consent to take part in a research study

You are invited to take part in a study of how professionals work together with AI agents on tasks from
their own occupation.

**What you will do.** Answer a short survey, complete up to five tasks, upload what you produced, and answer
a second survey. Three tasks are done with an AI agent we assign at random (upload a record of the
collaboration too); two are done on your own, without any AI tool, before or after the others.

**Your data.** Your deliverables and collaboration logs are graded automatically. For grading they are sent
to outside language-model providers: **OpenAI** and **Anthropic**. Research data is stored under a
pseudonym; your name and e-mail are kept separately and are never part of research exports.

**Payment.** You are paid for every task you complete, whether or not the agent succeeds. Top-ranked
participants receive a bonus.

**Your choice.** Taking part is voluntary. You may withdraw at any time from any page without penalty.
"""


@dataclass
class DemoSummary:
    created: dict[str, int] = field(default_factory=dict)
    simulated_participants: int = 0
    simulated_episodes: int = 0
    notes: list[str] = field(default_factory=list)


def demo_load(*, cohort: bool = True) -> DemoSummary:
    """Create (or complete) the demo study; safe to run any number of times."""
    summary = DemoSummary()
    with transaction.atomic():
        import_occupations(ONET_FIXTURE)
        study = _study()
        agents = _agents(study)
        tasks = _tasks(study)
        _sector_fallbacks(study)
        _accounts(study)
    summary.created = {"agents": len(agents), "tasks": len(tasks)}
    summary.created["sample_submissions"] = _sample_submissions(study, agents, tasks)
    if cohort and not study.participants.filter(is_simulated=True).exists():
        participants, episodes = _simulated_cohort(study, agents, tasks)
        summary.simulated_participants, summary.simulated_episodes = participants, episodes
        summary.notes.extend(_after_cohort(study))
    else:
        summary.simulated_participants = study.participants.filter(is_simulated=True).count()
        summary.simulated_episodes = study.episodes.filter(is_simulated=True).count()
    return summary


def _study() -> Study:
    study, _ = Study.objects.get_or_create(
        slug=DEMO_SLUG,
        defaults={
            "name": "CollabSkill demo study",
            "description": "A demonstration study. Its cohort is SIMULATED from the rating model with known skills.",
            "status": Study.Status.RECRUITING,
            "is_simulated": True,
            "compensation_per_task": Decimal("20.00"),
            "rank_bonuses": ["100.00", "50.00", "50.00"],
            "max_episodes_per_task": 40,
            "llm_budget_usd": Decimal("50.00"),
            # The demo shows the platform as a new study runs it; `import_sessions --model paper` reproduces
            # the paper's published ratings.
            "rating_model": Study.RatingModel.CALIBRATED,
            # The solo condition as the simulated cohort has it: a newcomer sees it in the settings and does it.
            "solo_tasks_per_session": SOLO_TASKS,
            "condition_order": Study.ConditionOrder.COUNTERBALANCED,
        },
    )
    # Fields added after the first demo release are filled in on older demo databases too.
    facts = {"contact_name": "CollabSkill demo team", "contact_email": "study-team@example.org",
             "ethics_approval": "Demonstration only — enter your ethics board and protocol number here",
             "return_url": "https://recruitment.example.org/complete?code={code}"}
    changed = [name for name, value in facts.items() if not getattr(study, name)]
    for name in changed:
        setattr(study, name, facts[name])
    if changed:
        study.save(update_fields=changed)
    ConsentVersion.objects.get_or_create(
        study=study, version=1, defaults={"text": CONSENT_TEXT, "llm_providers": ["openai", "anthropic"]}
    )
    return study


def _agents(study: Study) -> list[Agent]:
    agents = []
    for spec in demo_catalogue.AGENTS:
        defaults = {key: value for key, value in spec.items() if key != "slug"}
        defaults.setdefault("family", family_from_name(spec.get("model_version", ""), spec.get("product", ""),
                                                       spec["name"]))
        agent, _ = Agent.objects.get_or_create(slug=spec["slug"], defaults=defaults)
        if not agent.tutorial_url and spec.get("tutorial_url"):
            agent.tutorial_url = spec["tutorial_url"]
            agent.save(update_fields=["tutorial_url"])
        agent.studies.add(study)
        agents.append(agent)
    return agents


def _tasks(study: Study) -> list[TaskInstance]:
    tasks = []
    for index, (major, soc, title, prompt, deliverables, kinds, hidden) in enumerate(demo_catalogue.TASKS):
        task_uuid = _stable_uuid(f"demo-task-{index}")
        task, created = TaskInstance.objects.get_or_create(
            uuid=task_uuid,
            defaults={
                "title": title, "prompt": prompt, "source": TaskInstance.Source.CUSTOM,
                "sector": Sector.objects.get(code=f"soc-{major}"),
                "required_software": _software_for(kinds), "expected_deliverables": deliverables,
                "hidden_info": hidden,
            },
        )
        task.studies.add(study)
        task.occupations.add(Occupation.objects.get(soc_code=soc))
        if created:
            for kind in kinds:
                name, data = _reference_file(kind, title, index)
                _store_task_file(task, TaskFile.Kind.REFERENCE, name, data)
            _store_task_file(task, TaskFile.Kind.HIDDEN, "gold-notes.txt", f"{title}\n\n{hidden}\n".encode())
        tasks.append(task)
    return tasks


def _sector_fallbacks(study: Study) -> None:
    """Let every demo sector borrow tasks from related sectors once its own run out."""
    sectors = {sector.code: sector for sector in Sector.objects.filter(code__startswith="soc-")}
    for major, related in demo_catalogue.SECTOR_FALLBACKS.items():
        for priority, to_major in enumerate(related, start=1):
            SectorFallback.objects.get_or_create(
                study=study, from_sector=sectors[f"soc-{major}"], to_sector=sectors[f"soc-{to_major}"],
                defaults={"priority": priority},
            )


def _accounts(study: Study) -> None:
    from experts.models import ExpertProfile

    User = get_user_model()
    for username, role in DEMO_ACCOUNTS:
        user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.org"})
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        grant_role(user, role)
        if role == EXPERT:
            profile, _ = ExpertProfile.objects.get_or_create(user=user)
            profile.sectors.set(Sector.objects.filter(code__in=["soc-13", "soc-15", "soc-23"]))


# Three submitted episodes with real files, in the demo expert's sectors, so the expert workspace has work
# out of the box (simulated episodes have no files and never reach experts). (task index, deliverables, log)
SAMPLE_SUBMISSIONS = (
    (0, {"reconciliation.xlsx": "xlsx", "exceptions-memo.docx": "docx"},
     "Asked the agent to match ledger and bank rows by invoice number; it found the duplicate INV-1042 and the "
     "missing bank entry, I spotted the transposed amount myself."),
    (5, {"ab-analysis.xlsx": "xlsx", "recommendation.md": "md"},
     "The agent computed both conversion rates and a two-proportion z-test; I checked the interval by hand."),
    (10, {"contract-review.docx": "docx"},
     "I had the agent list every liability and renewal clause, then wrote the redlines with it clause by clause."),
)


def _sample_submissions(study: Study, agents: list[Agent], tasks: list[TaskInstance]) -> int:
    """Create (once) a few real submitted episodes with files and route them to ``demo-expert``."""
    from experts.models import ExpertProfile
    from experts.services.routing import episode_assign_expert
    from grading.models import Criterion, Rubric
    from studies.services.payments import payment_record_task

    User = get_user_model()
    expert = ExpertProfile.objects.get(user=User.objects.get(username="demo-expert"))
    now = timezone.now()
    made = 0
    for number, (index, deliverables, log_text) in enumerate(SAMPLE_SUBMISSIONS, start=1):
        task = tasks[index]
        pseudonym = f"DEMO-SAMPLE-{number}"
        if Participant.objects.filter(pseudonym=pseudonym).exists():
            continue
        with transaction.atomic():
            participant = Participant.objects.create(
                study=study, pseudonym=pseudonym, status=Participant.Status.COMPLETE,
                occupation=task.occupations.first(), years_experience=6 + number,
                consent_version=study.current_consent(), consented_at=now - timedelta(days=2),
                completed_at=now - timedelta(days=1), last_activity_at=now - timedelta(days=1),
            )
            submitted = now - timedelta(days=1, hours=number)
            episode = Episode.objects.create(
                participant=participant, study=study, agent=agents[number % len(agents)], task=task, position=1,
                status=Episode.Status.SUBMITTED, prior_experience="few", ready_at=submitted - timedelta(minutes=80),
                started_at=submitted - timedelta(minutes=90), submitted_at=submitted, notes=log_text,
            )
            _assigned_when_started(Episode.objects.filter(pk=episode.pk))
            for name, kind in deliverables.items():
                _store_episode_file(episode, EpisodeFile.Kind.DELIVERABLE, name,
                                    _deliverable(kind, task.title, index))
            _store_episode_file(episode, EpisodeFile.Kind.LOG, "collaboration-log.txt",
                                f"Session log for: {task.title}\n\n{log_text}\n".encode())
            payment_record_task(episode=episode)
            if not Rubric.objects.filter(task=task).exists():
                rubric = Rubric.objects.create(task=task, version=1, status=Rubric.Status.APPROVED,
                                               origin=Rubric.Origin.EXPERT, approved_at=now,
                                               details={"evaluation_notes": task.hidden_info})
                # Five criteria: the least the rubric editor accepts (the demo passes the app's own rules).
                for order, (category, points, label, text) in enumerate((
                    (Criterion.Category.CORRECTNESS, 30, Criterion.Label.CRITICAL,
                     f"The key findings are right: {task.hidden_info}"),
                    (Criterion.Category.CORRECTNESS, 10, Criterion.Label.PITFALL,
                     "Totals or figures in the deliverables contain arithmetic errors."),
                    (Criterion.Category.COMPLETENESS, 20, Criterion.Label.IMPORTANT,
                     "Every expected deliverable is present: " + ", ".join(task.expected_deliverables) + "."),
                    (Criterion.Category.REQUIREMENTS, 25, Criterion.Label.IMPORTANT,
                     "The deliverables do what the prompt asks, in the requested form."),
                    (Criterion.Category.TECHNICAL, 15, Criterion.Label.OPTIONAL,
                     "Clear structure, consistent formatting, no broken formulas or references."),
                ), start=1):
                    Criterion.objects.create(rubric=rubric, order=order, key=f"C{order}", category=category,
                                             points=points, label=label, description=text)
            episode_assign_expert(episode=episode, expert=expert, actor=None)
        made += 1
    return made


def _store_episode_file(episode: Episode, kind: str, name: str, data: bytes) -> None:
    record = EpisodeFile(episode=episode, kind=kind, name=name, size=len(data),
                         sha256=hashlib.sha256(data).hexdigest())
    record.file.save(name, ContentFile(data), save=False)
    record.save()


def _deliverable(kind: str, title: str, index: int) -> bytes:
    """A plausible worker deliverable (the reference generator's layout, with a worker's conclusion)."""
    if kind == "md":
        return (f"# {title}\n\nRecommendation: ship variant B. Conversion rose from 4.1% to 4.6% "
                "(two-sided p = 0.03, 95% CI of the lift 0.05 to 0.95 points).\n").encode()
    _name, data = _reference_file(kind, f"{title} (worker deliverable)", index + 1000)
    return data


def _simulated_cohort(study: Study, agents: list[Agent], tasks: list[TaskInstance]) -> tuple[int, int]:
    """Draw ~90 participants and ~380 episodes of quality s_agent + s_human + ε, each graded by the judge panel
    (grade rows with source 0: simulated, no judge run behind them); the auto score is the panel mean."""
    rng = random.Random(SEED)
    judge_rng = random.Random(SEED + 1)  # its own stream, so the episodes' quality draws stay as they were
    solo_rng = random.Random(SEED + 2)  # the solo condition's stream, for the same reason
    tom_rng = random.Random(SEED + 3)  # the simulated ToM codings' stream, so no earlier draw moves
    effort_rng = random.Random(SEED + 4)  # the simulated effort controls' stream, for the same reason
    judges = study_judges(study)
    coders = demo_tom_coders(study)
    planted: list[tuple[Participant, float, float]] = []
    tasks_by_sector: dict[int, list[TaskInstance]] = {}
    for task in tasks:
        tasks_by_sector.setdefault(task.sector_id, []).append(task)
    occupations = list(Occupation.objects.filter(sector_id__in=tasks_by_sector).order_by("soc_code"))
    now = timezone.now()
    n_episodes = 0
    with transaction.atomic():
        for i in range(COHORT_SIZE):
            occupation = occupations[i % len(occupations)]
            human_skill = rng.gauss(0.0, HUMAN_SKILL_SD)
            participant = Participant.objects.create(
                study=study, pseudonym=f"SIM-{i + 1:03d}", is_simulated=True,
                status=Participant.Status.COMPLETE, occupation=occupation,
                years_experience=max(0, int(rng.gauss(9.6, 6))),
                consent_version=study.current_consent(), consented_at=now - timedelta(days=20),
                completed_at=now - timedelta(days=rng.randint(0, 14)), last_activity_at=now - timedelta(days=1),
            )
            n_tasks = rng.choices([3, 4, 5], weights=[0.15, 0.45, 0.40])[0]
            pool = list(tasks_by_sector[occupation.sector_id])
            extra = [t for t in tasks if t.sector_id != occupation.sector_id]
            rng.shuffle(pool)
            rng.shuffle(extra)
            chosen = (pool + extra)[:n_tasks]
            unused = list(agents)
            order = solo_rng.choice([Study.ConditionOrder.SOLO_FIRST, Study.ConditionOrder.AGENT_FIRST])
            for position, task in enumerate(chosen, start=1):
                if not unused:
                    unused = list(agents)
                agent = unused.pop(rng.randrange(len(unused)))
                quality = TRUE_AGENT_SKILL[agent.slug] + human_skill + rng.gauss(0.0, NOISE_SD)
                grades = _panel_grades(quality, agent, judges, judge_rng)
                y = round(sum(grade.y for grade in grades) / len(grades), 2)
                submitted = now - timedelta(days=rng.randint(1, 20), minutes=rng.randint(0, 600))
                episode = Episode.objects.create(
                    participant=participant, study=study, agent=agent, task=task,
                    position=position + (SOLO_TASKS if order == Study.ConditionOrder.SOLO_FIRST else 0),
                    condition_order=order, condition_order_probability=0.5,
                    status=Episode.Status.GRADED, prior_experience=rng.choice(["never", "few", "regular"]),
                    ready_at=submitted - timedelta(minutes=70), started_at=submitted - timedelta(minutes=75),
                    submitted_at=submitted, auto_score=y, is_simulated=True,
                )
                episode_grades_record(episode_id=episode.pk, kind="judge", grades=grades)
                Payment.objects.create(participant=participant, episode=episode, kind=Payment.Kind.TASK,
                                       amount=study.compensation_per_task, currency=study.currency,
                                       note="simulated")
                n_episodes += 1
            solo_tasks = (pool + extra)[n_tasks:n_tasks + SOLO_TASKS]
            n_solo, own_boost = _simulated_solo(participant, human_skill, solo_tasks, order, n_tasks, judges,
                                                solo_rng)
            n_episodes += n_solo
            planted.append((participant, human_skill, own_boost))
            _simulated_survey(participant, human_skill, rng)
        _assigned_when_started(Episode.objects.filter(study=study, is_simulated=True))
        simulated_tom_codes(planted, coders, tom_rng, effort_rng)
    return COHORT_SIZE, n_episodes


def _simulated_solo(participant: Participant, human_skill: float, tasks: list[TaskInstance], order: str,
                    n_agent_tasks: int, judges: list[JudgeSpec], rng: random.Random) -> tuple[int, float]:
    """Create the participant's solo episodes (no agent), graded by the same judge panel; return how many, and
    the worker's own boost (their ability with an agent above their ability alone)."""
    own_boost = rng.gauss(0.0, WORKER_BOOST_SD)
    first = 1 if order == Study.ConditionOrder.SOLO_FIRST else n_agent_tasks + 1
    now = timezone.now()
    for offset, task in enumerate(tasks):
        quality = SOLO_LEVEL + human_skill - own_boost + rng.gauss(0.0, NOISE_SD)
        grades = _panel_grades(quality, None, judges, rng)
        submitted = now - timedelta(days=rng.randint(1, 20), minutes=rng.randint(0, 600))
        episode = Episode.objects.create(
            participant=participant, study=participant.study, agent=None, condition=Episode.Condition.SOLO,
            condition_order=order, condition_order_probability=0.5, task=task, position=first + offset,
            status=Episode.Status.GRADED, started_at=submitted - timedelta(minutes=75), submitted_at=submitted,
            auto_score=round(sum(grade.y for grade in grades) / len(grades), 2), is_simulated=True,
        )
        Payment.objects.create(participant=participant, episode=episode, kind=Payment.Kind.TASK,
                               amount=participant.study.compensation_per_task, currency=participant.study.currency,
                               note="simulated")
    return len(tasks), own_boost


def planted_boosts(study: Study) -> dict[str, float]:
    """Each demo agent's true boost over working alone, by agent name: its skill above SOLO_LEVEL plus the mean
    self-preference of the study's judge panel for its family (the judges' leniencies apply to both conditions)."""
    judges = study_judges(study)
    out = {}
    for agent in Agent.objects.filter(slug__in=TRUE_AGENT_SKILL):
        own = sum(1 for judge in judges if judge.family and judge.family == agent.family) / len(judges)
        out[agent.name] = TRUE_AGENT_SKILL[agent.slug] + SELF_PREFERENCE * own - SOLO_LEVEL
    return out


def _assigned_when_started(episodes) -> None:
    """Date the assignment at the start, as the journey does (``assigned_at`` is filled with "now" on create)."""
    episodes.update(assigned_at=F("started_at"))


def _panel_grades(quality: float, agent: Agent | None, judges: list[JudgeSpec],
                  rng: random.Random) -> list[GradeInput]:
    """One grade per judge of the panel (0-100), each with its judge's leniency and self-preference."""
    grades = []
    for judge in judges:
        value = quality + JUDGE_LENIENCY.get(judge.family, 0.0) + rng.gauss(0.0, JUDGE_NOISE_SD)
        if agent is not None and judge.family and judge.family == agent.family:
            value += SELF_PREFERENCE
        grades.append(GradeInput(grader=judge.label, family=judge.family, y=round(min(100.0, max(0.0, value)), 2),
                                 source_id=0))
    return grades


def _simulated_survey(participant: Participant, human_skill: float, rng: random.Random) -> None:
    """Pre and (for most) post answers loosely tied to skill, so the survey statistics have something to show."""
    from surveys.models import Answer, Instrument, SurveyResponse

    instrument = Instrument.objects.filter(slug="collabskill-attitudes", is_active=True).order_by("-version").first()
    if instrument is None:
        return
    questions = {q.code: q for q in instrument.questions.all()}
    z = human_skill / HUMAN_SKILL_SD

    def clamp(value: float, low: int, high: int) -> int:
        return int(min(high, max(low, round(value))))

    pre = {
        "D1": clamp(3 + 0.5 * z + rng.gauss(0, 0.6), 1, 4), "D2": clamp(3.5 + 0.6 * z + rng.gauss(0, 0.9), 1, 5),
        "D3": participant.years_experience or 0, "A1": clamp(4 + 0.4 * z + rng.gauss(0, 1.3), 1, 7),
        "A2": clamp(3.6 + rng.gauss(0, 1.4), 1, 7), "A3": clamp(3.8 + 0.5 * z + rng.gauss(0, 1.3), 1, 7),
        "A4": clamp(3.3 + rng.gauss(0, 0.9), 1, 5), "A5": clamp(3.4 + rng.gauss(0, 0.8), 1, 5),
        "A6": clamp(3.5 + rng.gauss(0, 1.5), 1, 7),
    }
    post = {
        "A1": clamp(pre["A1"] + 0.6 + rng.gauss(0, 0.8), 1, 7),
        "A2": clamp(pre["A2"] + 0.9 - 0.5 * z + rng.gauss(0, 0.9), 1, 7),
        "A3": clamp(pre["A3"] + 0.45 + rng.gauss(0, 0.9), 1, 7),
        "A4": clamp(pre["A4"] - 0.5 + 0.25 * z + rng.gauss(0, 0.6), 1, 5),
        "A5": clamp(pre["A5"] - 0.15 + rng.gauss(0, 0.5), 1, 5),
        "A6": clamp(pre["A6"] + rng.gauss(0, 0.8), 1, 7),
    }
    moods = ["Excited", "Curious", "Neutral", "Skeptical", "Anxious"]
    phases = [("pre", pre, rng.choice(moods))]
    if rng.random() < 0.82:
        phases.append(("post", post, rng.choice(moods[:3] if z > 0 else moods)))
    for phase, values, mood in phases:
        response = SurveyResponse.objects.create(participant=participant, instrument=instrument, phase=phase,
                                                 submitted_at=timezone.now())
        answers = []
        for code, numeric in values.items():
            question = questions.get(code)
            if question is not None:
                answers.append(Answer(response=response, question=question, value=_raw_value(question, numeric),
                                      numeric=float(numeric)))
        if "A7" in questions:
            answers.append(Answer(response=response, question=questions["A7"], value=mood, numeric=None))
        Answer.objects.bulk_create(answers)


def _raw_value(question, numeric: int) -> str:
    """The raw answer as the survey form would store it for this coded value."""
    if question.kind == "has":
        return f"H{numeric}"
    if question.kind == "choice":
        for option in question.options.get("choices", []) if isinstance(question.options, dict) else question.options:
            if option.get("code") == numeric:
                return str(option.get("value"))
    return str(numeric)


def _after_cohort(study: Study) -> list[str]:
    """Put the simulated scores through the real rating path: record observations, then compute the posterior."""
    from rating.services.ledger import study_rerecord
    from rating.services.refresh import posterior_refresh

    recorded = study_rerecord(study_id=study.pk)
    snapshot = posterior_refresh(study_id=study.pk, only_if_changed=True)
    return [f"rating: {recorded} observations recorded, posterior v{snapshot.version} computed"]


def _stable_uuid(key: str):
    import uuid

    return uuid.UUID(hashlib.sha256(key.encode()).hexdigest()[:32])


def _software_for(kinds: list[str]) -> list[str]:
    names = {"xlsx": "Microsoft Excel or LibreOffice Calc", "docx": "Microsoft Word or LibreOffice Writer",
             "pdf": "A PDF reader", "csv": "A spreadsheet program"}
    return sorted({names[k] for k in kinds})


def _store_task_file(task: TaskInstance, kind: str, name: str, data: bytes) -> None:
    if task.files.filter(kind=kind, name=name).exists():
        return
    record = TaskFile(task=task, kind=kind, name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    record.file.save(name, ContentFile(data), save=False)
    record.save()


def _reference_file(kind: str, title: str, index: int) -> tuple[str, bytes]:
    rng = random.Random(index)
    rows = [(f"ITEM-{1000 + i}", f"Line item {i + 1}", round(rng.uniform(100, 5000), 2)) for i in range(12)]
    slug = slugify(" ".join(title.split()[:3]))  # names as an upload would keep them: no apostrophes
    if kind == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["id", "description", "amount"])
        writer.writerows(rows)
        return f"{slug}-data.csv", buffer.getvalue().encode()
    if kind == "xlsx":
        from openpyxl import Workbook

        workbook = Workbook()
        sheet = workbook.active
        sheet.title = "Data"
        sheet.append(["id", "description", "amount"])
        for row in rows:
            sheet.append(list(row))
        sheet.append(["", "Total", f"=SUM(C2:C{len(rows) + 1})"])
        notes = workbook.create_sheet("Notes")
        notes.append([f"Reference data for: {title}"])
        buffer = io.BytesIO()
        workbook.save(buffer)
        return f"{slug}-workbook.xlsx", buffer.getvalue()
    if kind == "docx":
        from docx import Document

        document = Document()
        document.add_heading(title, level=1)
        document.add_paragraph("Background notes prepared for this task. Figures are illustrative.")
        table = document.add_table(rows=1, cols=3)
        table.rows[0].cells[0].text, table.rows[0].cells[1].text, table.rows[0].cells[2].text = "id", "item", "amount"
        for row in rows[:5]:
            cells = table.add_row().cells
            cells[0].text, cells[1].text, cells[2].text = row[0], row[1], f"{row[2]:.2f}"
        buffer = io.BytesIO()
        document.save(buffer)
        return f"{slug}-notes.docx", buffer.getvalue()
    if kind == "pdf":
        from reportlab.lib.pagesizes import A4
        from reportlab.pdfgen import canvas

        buffer = io.BytesIO()
        pdf = canvas.Canvas(buffer, pagesize=A4, invariant=1)
        pdf.setTitle(title)
        y = 800
        pdf.drawString(72, y, title)
        for row in rows[:8]:
            y -= 20
            pdf.drawString(72, y, f"{row[0]}  {row[1]}  {row[2]:.2f}")
        pdf.showPage()
        pdf.save()
        return f"{slug}-brief.pdf", buffer.getvalue()
    raise ValueError(f"unknown reference file kind {kind!r}")


def demo_refused_reason() -> str | None:
    """Demo accounts have a published password, so production refuses them."""
    if settings.PRODUCTION:
        return "The demo has accounts with a published password and is refused when DJANGO_ENV=production."
    return None
