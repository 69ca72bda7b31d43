"""The coding sweep leaves episodes with simulated codings (the demo's) alone: a judge would only replace them with
"not coded" rows, as the episodes have no log; an episode without any coding is still owed one."""

from __future__ import annotations

import pytest

from grading.models import ProcessCoding
from grading.selectors import episodes_owing_process_coding
from studies.models import Episode
from tests.factories.tom import tom_study

pytestmark = pytest.mark.django_db


def test_simulated_codings_are_not_owed_a_judge_coding_but_uncoded_episodes_are():
    study = tom_study(workers=4, slug="owed", simulated=True)
    coders = [("openai", "gpt-4.1"), ("anthropic", "claude-sonnet-4-6")]
    agent = Episode.objects.filter(study=study, condition="with_agent")
    solo = Episode.objects.filter(study=study, condition="solo")
    owed = set(episodes_owing_process_coding(study, coders, limit=1000))
    assert not owed & set(agent.values_list("pk", flat=True))
    assert set(solo.values_list("pk", flat=True)) <= owed, "solo episodes are still looked at (and not coded)"
    ProcessCoding.objects.filter(episode=agent.first()).update(is_simulated=False)
    assert agent.first().pk in set(episodes_owing_process_coding(study, coders, limit=1000)), \
        "a judge's coding of an older version is owed the current one"
