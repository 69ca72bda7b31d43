"""The demo's simulated ToM and response-quality codings, with a planted ToM → κ effect and none on θ.

Each simulated worker has skill s (their ability with an agent, κ) and own boost b (κ − θ: their ability alone is
θ = s − b); their scores are already drawn. The ToM trait is planted on them afterwards, over the whole cohort, as

    τ = TOM_MEAN + c · (u − ū),   u = s + r·b,

with r chosen so that over the cohort Cov(u, s − b) = 0 exactly (ToM does not go with ability alone) and c so
that the slope of s on τ is exactly PLANTED_KAPPA points per ToM point. So the truth the analysis should recover is
δ_κ = PLANTED_KAPPA, δ_θ = 0, and no within-worker effect: each with-agent episode adds a deviation that moves no
score. Each judge adds its bias and noise, rounded to the 0-5 scale. Every row is flagged ``is_simulated`` with
a reason saying so, and its prompt version reads "simulated-demo", so no one mistakes it for a judge's coding.

The episodes have no logs, so the response-quality regression's effort controls (the worker's prompts,
characters written, edit ratio) are drawn too, from their own stream: more of each with more ToM (as effort goes
with perspective-taking in real prompts) but with no effect on quality, so the regression must separate them.
They are stored as `grading.models.SimulatedEffort`, apart from transcripts, so no reader of logs (nor any
LLM) sees them, and the analysis that reads them says it is simulated.
"""

from __future__ import annotations

import random

import numpy as np
from django.db import transaction
from django.utils import timezone

from grading.models import ProcessCoding
from grading.providers import JudgeSpec, study_judges
from grading.schemas import TOM_MARKERS
from grading.services.simulated_effort import EffortDraw, simulated_effort_record
from studies.models import Episode, Participant, Study

TOM_MEAN = 2.5
PLANTED_KAPPA = 3.5  # points of with-agent score per ToM point
TOM_EPISODE_SD = 0.5
TOM_JUDGE_NOISE_SD = 0.45
TOM_JUDGE_BIAS = {"openai": -0.15, "anthropic": 0.15}
QUALITY_MEAN = 2.6
QUALITY_PER_TRAIT = 0.6
QUALITY_PER_DEVIATION = 0.5
QUALITY_NOISE_SD = 0.5
TURNS_MEAN, TURNS_PER_TOM, TURNS_SD = 5.0, 1.2, 1.8
CHARS_PER_TURN, CHARS_PER_TURN_PER_TOM, CHARS_PER_TURN_SD = 220.0, 45.0, 70.0
EDIT_MEAN, EDIT_PER_TOM, EDIT_SD = 0.55, 0.06, 0.12
SIMULATED_VERSION = "simulated-demo"
SIMULATED_REASON = ("SIMULATED for the demo: drawn from a model with a planted ToM effect, not coded by a judge "
                    "(ToM {tom:.2f} planted, this code {score}).")
HIGH = tuple(m.code for m in TOM_MARKERS if m.high)
LOW = tuple(m.code for m in TOM_MARKERS if not m.high)


def planted_tom() -> dict[str, float]:
    """The true slopes, in score points per ToM point: on κ, on θ (0) and of the within-worker deviation (0)."""
    return {"kappa": PLANTED_KAPPA, "theta": 0.0, "deviation": 0.0}


def planted_quality() -> dict[str, float]:
    """The response-quality regression's latent truth, in quality points: per ToM trait and deviation point, and
    none for any effort control."""
    return {"tom_trait": QUALITY_PER_TRAIT, "tom_deviation": QUALITY_PER_DEVIATION, "turns": 0.0,
            "characters_k": 0.0, "edit_ratio": 0.0}


def planted_traits(workers: list[tuple[float, float]]) -> list[float]:
    """Each worker's planted ToM trait from their (skill, own boost), exact over the cohort (see the module)."""
    s = np.array([w[0] for w in workers])
    b = np.array([w[1] for w in workers])
    s, b = s - s.mean(), b - b.mean()
    ratio = (s @ s - s @ b) / (b @ b - s @ b)
    u = s + ratio * b
    scale = (u @ s) / (PLANTED_KAPPA * (u @ u))
    return (TOM_MEAN + scale * u).tolist()


def demo_tom_coders(study: Study) -> tuple[JudgeSpec, JudgeSpec]:
    """Turn ToM coding on for the demo study with the first judges of its panel's two families, and return them."""
    first: dict[str, JudgeSpec] = {}
    for judge in study_judges(study):
        first.setdefault(judge.family, judge)
    pair = tuple(first.values())[:2]
    if len(pair) != 2:
        raise ValueError("the demo's judge panel needs two model families for its ToM coders")
    study.tom_coding = True
    study.tom_coders = [{"provider": j.provider, "model": j.model, "family": j.family} for j in pair]
    study.save(update_fields=["tom_coding", "tom_coders"])
    return pair[0], pair[1]


def _code(value: float) -> int:
    return int(min(5, max(0, round(value))))


def _markers(score: int, rng: random.Random) -> list[str]:
    """High-ToM markers for high codes, low-ToM ones for low codes (illustrative, drawn at random)."""
    return sorted(rng.sample(HIGH, k=min(score, 4))) if score >= 3 else sorted(rng.sample(LOW, k=2 - min(score, 2)))


def simulated_tom_codes(workers: list[tuple[Participant, float, float]], coders: tuple[JudgeSpec, JudgeSpec],
                        rng: random.Random, effort_rng: random.Random) -> int:
    """Write both judges' simulated ToM and response-quality codings of every with-agent episode of the cohort's
    (participant, skill, own boost) workers, and each episode's simulated effort (drawn from ``effort_rng``, so the
    codes' draws stay as they were); return how many coding rows were written."""
    traits = planted_traits([(skill, boost) for _, skill, boost in workers])
    now = timezone.now()
    rows: list[ProcessCoding] = []
    efforts: list[EffortDraw] = []
    for (participant, _, _), tom in zip(workers, traits, strict=True):
        episodes = Episode.objects.filter(participant=participant, condition=Episode.Condition.WITH_AGENT)
        for episode in episodes.order_by("pk"):
            codes, expressed = _episode_codes(episode, tom, coders, rng, now)
            rows.extend(codes)
            efforts.append(_effort(episode.pk, expressed, effort_rng))
    with transaction.atomic():
        ProcessCoding.objects.bulk_create(rows)
        simulated_effort_record(efforts)
    return len(rows)


def _effort(episode_id: int, expressed: float, rng: random.Random) -> EffortDraw:
    """Effort that rises with the ToM the episode expresses (module docstring) and moves no quality code."""
    centred = expressed - TOM_MEAN
    turns = max(1, round(rng.gauss(TURNS_MEAN + TURNS_PER_TOM * centred, TURNS_SD)))
    per_turn = max(20.0, rng.gauss(CHARS_PER_TURN + CHARS_PER_TURN_PER_TOM * centred, CHARS_PER_TURN_SD))
    ratio = min(0.98, max(0.02, rng.gauss(EDIT_MEAN + EDIT_PER_TOM * centred, EDIT_SD)))
    return EffortDraw(episode_id=episode_id, worker_turns=turns, worker_chars=round(turns * per_turn),
                      edit_ratio=round(ratio, 4))


def _episode_codes(episode: Episode, tom: float, coders: tuple[JudgeSpec, JudgeSpec], rng: random.Random,
                   now) -> tuple[list[ProcessCoding], float]:
    """Both judges' codes of one episode, and the ToM it expresses (the trait plus its deviation)."""
    deviation = rng.gauss(0.0, TOM_EPISODE_SD)
    quality = (QUALITY_MEAN + QUALITY_PER_TRAIT * (tom - TOM_MEAN) + QUALITY_PER_DEVIATION * deviation
               + rng.gauss(0.0, QUALITY_NOISE_SD))
    rows = []
    for judge in coders:
        bias = TOM_JUDGE_BIAS.get(judge.family, 0.0)
        for instrument, value in ((ProcessCoding.Instrument.TOM, tom + deviation),
                                  (ProcessCoding.Instrument.RESPONSE_QUALITY, quality)):
            score = _code(value + bias + rng.gauss(0.0, TOM_JUDGE_NOISE_SD))
            markers = _markers(score, rng) if instrument == ProcessCoding.Instrument.TOM else []
            rows.append(ProcessCoding(
                episode=episode, instrument=instrument, prompt_version=SIMULATED_VERSION,
                provider=judge.provider, model=judge.model, family=judge.family,
                status=ProcessCoding.Status.SUCCEEDED, score=score, markers=markers,
                reason=SIMULATED_REASON.format(tom=tom, score=score), is_current=True, is_simulated=True,
                finished_at=now))
    return rows, tom + deviation
