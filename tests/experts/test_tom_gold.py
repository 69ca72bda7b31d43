"""The ToM gold sample: its draw (strata, inclusion probabilities, reproducible), assignment, coding and reads."""

from __future__ import annotations

from collections import defaultdict

import pytest

from experts.exceptions import ExpertError
from experts.models import ToMGoldCode, ToMGoldItem
from experts.selectors import study_tom_gold
from experts.services.tom_gold import tom_gold_population, tom_gold_sample_draw, tom_gold_save
from tests.experts.tom_gold_world import judge_codes, tom_study
from tests.factories import StudyFactory
from tests.factories.episodes import EpisodeFactory
from tests.factories.experts import make_expert
from tests.factories.participants import ParticipantFactory

pytestmark = pytest.mark.django_db


def _population(study, spec):
    """spec: list of (judge scores, condition) -> episodes with those ToM codes."""
    episodes = []
    for scores, condition in spec:
        extra = {"condition": "solo", "agent": None} if condition == "solo" else {}
        episode = EpisodeFactory(participant=ParticipantFactory(study=study), status="graded", **extra)
        if scores is not None:
            judge_codes(episode, scores)
        episodes.append(episode)
    return episodes


def test_strata_are_the_judges_mean_band_by_condition_and_uncoded_episodes_are_left_out():
    study = tom_study()
    coded = _population(study, [((5, 4), "with_agent"), ((2, 3), "with_agent"), ((0, 1), "solo"), (None, "")])
    population = tom_gold_population(study)
    assert population == {coded[0].pk: ("high|with_agent", 4.5), coded[1].pk: ("mid|with_agent", 2.5),
                          coded[2].pk: ("low|solo", 0.5)}


def test_the_sample_weights_sum_to_each_strata_population_and_experts_share_the_items():
    study = tom_study()
    spec = [((5, 5), "with_agent")] * 9 + [((2, 2), "with_agent")] * 14 + [((0, 1), "with_agent")] * 5
    _population(study, spec)
    experts = [make_expert(username=f"e{i}") for i in range(3)]
    sample = tom_gold_sample_draw(study=study, size=10, seed=11, experts=experts, raters_per_episode=2)
    items = list(ToMGoldItem.objects.filter(sample=sample))
    assert len(items) == 10 and sample.population == 28
    weights: dict[str, float] = defaultdict(float)
    for item in items:
        weights[item.stratum] += 1 / item.inclusion_probability
    assert weights == pytest.approx({"high|with_agent": 9, "mid|with_agent": 14, "low|with_agent": 5})
    codes = ToMGoldCode.objects.filter(item__sample=sample)
    assert codes.count() == 20
    assert sorted(set(codes.values_list("expert__user__username", flat=True))) == ["e0", "e1", "e2"]
    assert all(len({c.expert_id for c in item.codes.all()}) == 2 for item in items)


def test_the_same_seed_draws_the_same_episodes_in_another_copy_of_the_population():
    drawn = []
    for _ in range(2):
        study = tom_study()
        episodes = _population(study, [((4, 4), "with_agent")] * 12)
        sample = tom_gold_sample_draw(study=study, size=4, seed=3, experts=[make_expert()])
        drawn.append([episodes.index(i.episode) for i in sample.items.order_by("episode_id")])
    assert drawn[0] == drawn[1]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"size": 0}, "at least 1"), ({"raters_per_episode": 3}, "between 1 and"),
    ({"size": 1}, "below the number of strata"),
])
def test_a_bad_draw_is_refused_with_the_reason_and_stores_nothing(kwargs, message):
    study = tom_study()
    _population(study, [((5, 5), "with_agent"), ((0, 0), "with_agent")])
    args = {"size": 2, "seed": 1, "experts": [make_expert(), make_expert()], "raters_per_episode": 1, **kwargs}
    with pytest.raises(ExpertError, match=message):
        tom_gold_sample_draw(study=study, **args)
    assert not ToMGoldItem.objects.exists()


def test_a_study_without_tom_coding_or_with_a_sample_cannot_be_drawn_again():
    with pytest.raises(ExpertError, match="does not code theory of mind"):
        tom_gold_sample_draw(study=StudyFactory(), size=1, seed=1, experts=[make_expert()])
    study = tom_study()
    _population(study, [((3, 3), "with_agent")])
    tom_gold_sample_draw(study=study, size=1, seed=1, experts=[make_expert()])
    with pytest.raises(ExpertError, match="already has"):
        tom_gold_sample_draw(study=study, size=1, seed=2, experts=[make_expert()])


def test_submitted_gold_codes_reach_the_stats_selector_with_their_design_weights():
    study = tom_study()
    _population(study, [((4, 5), "with_agent")] * 4)
    expert = make_expert()
    sample = tom_gold_sample_draw(study=study, size=2, seed=5, experts=[expert])
    first, second = ToMGoldCode.objects.filter(item__sample=sample).order_by("item__episode_id")
    with pytest.raises(ExpertError, match="to submit, choose a score and give a reason"):
        tom_gold_save(code=first, user=expert.user, score=None, markers=[], reason="", submit=True)
    tom_gold_save(code=first, user=expert.user, score=4, markers=["rapport", "rapport"], reason=" Clear. ",
                  submit=True)
    tom_gold_save(code=second, user=expert.user, score=2, markers=[], reason="draft only")
    gold = study_tom_gold(study.pk)
    assert len(gold) == 1
    row = gold[0]
    assert (row.episode_id, row.expert_id, row.score, row.markers) == (first.item.episode_id, expert.pk, 4,
                                                                       ("rapport",))
    assert row.stratum == "high|with_agent" and row.inclusion_probability == 0.5 and row.weight == 2.0
    with pytest.raises(ExpertError, match="already submitted"):
        tom_gold_save(code=first, user=expert.user, score=1, markers=[], reason="changed")
    with pytest.raises(ExpertError, match="someone else"):
        tom_gold_save(code=second, user=make_expert().user, score=1, markers=[], reason="x")
    with pytest.raises(ExpertError, match="Unknown marker"):
        tom_gold_save(code=second, user=expert.user, score=1, markers=["mind_reading"], reason="x")
    with pytest.raises(ExpertError, match="0 to 5"):
        tom_gold_save(code=second, user=expert.user, score=6, markers=[], reason="x")
