"""The calibration sample: a random share of automatically graded episodes sent to experts.

Judges are measured against experts (the expert gate) on these episodes only, because the other expert
grades were not picked at random (flagged disagreements, held episodes, staff choice). Each episode is drawn
once, when it is first graded automatically, with a probability that is stored on it: the family's first
``calibration_min_per_family`` sampled episodes for sure, then ``calibration_rate``
(`rating/expert_gate.py:inclusion_probability`). The draw is seeded by the episode id, like the
double-grading draw, so a re-delivered grading task draws the same way.
"""

from __future__ import annotations

import random

from rating.expert_gate import inclusion_probability
from studies.models import Episode


def calibration_draw_value(episode_id: int) -> float:
    """Return the episode's uniform draw (the same on every call)."""
    return random.Random(f"calibration:{episode_id}").random()


def episode_calibration_draw(*, episode: Episode) -> bool:
    """Draw the episode into (or out of) its study's calibration sample, once; return whether it is in.

    Call inside the transaction that stores the episode's automated score. Gold copies and simulated episodes
    never reach an expert, so they are outside the sampled population.
    """
    if episode.calibration_probability is not None:
        return episode.in_calibration_sample
    if episode.is_gold or episode.is_simulated:
        return False
    study = episode.study
    if study.calibration_rate <= 0:
        return False
    # Solo episodes form their own stratum: they have no agent family, and the judges may score them differently.
    family = episode.agent.family if episode.agent else None
    same = {"agent__family": family} if family is not None else {"agent__isnull": True}
    sampled = Episode.objects.filter(study=study, in_calibration_sample=True, **same).count()
    probability = inclusion_probability(rate=study.calibration_rate, sampled_in_family=sampled,
                                        min_per_family=study.calibration_min_per_family)
    chosen = calibration_draw_value(episode.pk) < probability
    Episode.objects.filter(pk=episode.pk).update(calibration_probability=probability, in_calibration_sample=chosen)
    episode.calibration_probability, episode.in_calibration_sample = probability, chosen
    return chosen
