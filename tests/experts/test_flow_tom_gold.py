"""The ToM gold coding pages over HTTP: blind (worker prompts only), own codes only, staff-only sampling."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from experts.models import ToMGoldCode, ToMGoldSample
from experts.services.tom_gold import tom_gold_sample_draw
from tests.experts.tom_gold_world import AGENT_SAYS, JUDGE_REASON, coded_episode, secret_agent, tom_study
from tests.factories import UserFactory
from tests.factories.experts import make_expert

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    study = tom_study(name="Blind ToM Study")
    episode = coded_episode(study, scores=(4, 3), agent=secret_agent(), score=63.7)
    mine, theirs = make_expert(username="mine"), make_expert(username="theirs")
    tom_gold_sample_draw(study=study, size=1, seed=1, experts=[mine, theirs], raters_per_episode=2)
    codes = {c.expert.user.username: c for c in ToMGoldCode.objects.select_related("expert__user")}
    return {"study": study, "episode": episode, "mine": mine, "theirs": theirs, "code": codes["mine"],
            "their_code": codes["theirs"]}


def _page(client, user, code):
    client.force_login(user)
    return client.get(reverse("expert:tom_gold_code", args=[code.pk]))


def test_the_coding_page_shows_the_workers_prompts_and_nothing_that_unblinds(client, world):
    for state in ("open", "submitted"):
        html = _page(client, world["mine"].user, world["code"]).content.decode()
        assert "You can&#x27;t see our ledger" in html and "could you be wrong?" in html
        episode = world["episode"]
        for secret in (AGENT_SAYS, "AGENT-ONLY", "Secret Agent X", "sx-9000", JUDGE_REASON, "JUDGE-REASON",
                       "with_agent", "With an agent", "63.7", "high|", "mid|", "gpt-4.1", "claude-sonnet",
                       "Blind ToM Study", episode.task.title, f"episode {episode.pk}"):
            assert secret not in html, (state, secret)
        if state == "open":
            client.post(reverse("expert:tom_gold_code", args=[world["code"].pk]),
                        {"score": "3", "markers": ["rapport"], "reason": "Names the gap.", "action": "submit"})
    assert ToMGoldCode.objects.get(pk=world["code"].pk).status == "submitted"


def test_an_expert_opens_and_saves_only_their_own_codes(client, world):
    assert _page(client, world["theirs"].user, world["code"]).status_code == 404
    response = client.post(reverse("expert:tom_gold_autosave", args=[world["code"].pk]),
                           data=json.dumps({"score": "2", "reason": "x"}), content_type="application/json")
    assert response.status_code == 404
    assert ToMGoldCode.objects.get(pk=world["code"].pk).score is None
    client.force_login(UserFactory(roles=["worker"]))
    assert client.get(reverse("expert:tom_gold_code", args=[world["code"].pk])).status_code == 404
    assert client.get(reverse("expert:tom_gold_list")).status_code == 404
    listing = _page(client, world["mine"].user, world["code"]) and client.get(reverse("expert:tom_gold_list"))
    assert f"#{world['code'].pk}" in listing.content.decode()
    assert f"#{world['their_code'].pk}" not in listing.content.decode()


def test_autosave_keeps_a_draft_and_refuses_bad_input_without_losing_it(client, world):
    _page(client, world["mine"].user, world["code"])
    url = reverse("expert:tom_gold_autosave", args=[world["code"].pk])
    ok = client.post(url, data=json.dumps({"score": "2", "markers": ["rapport"], "reason": "draft",
                                           "visible_seconds": 5}), content_type="application/json")
    assert ok.status_code == 200
    bad = client.post(url, data=json.dumps({"score": "9", "reason": "lost?"}), content_type="application/json")
    assert bad.status_code == 400 and "0 to 5" in bad.json()["error"]
    code = ToMGoldCode.objects.get(pk=world["code"].pk)
    assert (code.status, code.score, code.markers, code.reason) == ("draft", 2, ["rapport"], "draft")
    refused = client.post(reverse("expert:tom_gold_code", args=[code.pk]),
                          {"score": "", "reason": "kept text", "action": "submit"})
    assert refused.status_code == 400 and "choose a score" in refused.content.decode()
    assert "kept text" in refused.content.decode()


def test_only_staff_draw_a_sample_and_see_its_progress(client):
    study = tom_study()
    for scores in ((5, 5), (1, 0), (4, 4)):
        coded_episode(study, scores=scores, parsed=False)
    expert = make_expert()
    url = reverse("expert:staff_tom_gold")
    form = {"study": study.pk, "size": 2, "seed": 9, "experts": [expert.pk], "raters_per_episode": 1}
    client.force_login(expert.user)
    assert client.post(url, form).status_code in (302, 403, 404)
    assert not ToMGoldSample.objects.exists()
    client.force_login(UserFactory(is_staff=True))
    bad = client.post(url, {**form, "size": 1})
    assert bad.status_code == 400 and "below the number of strata" in bad.content.decode()
    assert client.post(url, form).status_code == 302
    page = client.get(url, {"study": study.pk}).content.decode()
    assert "high|with_agent" in page and "low|with_agent" in page and "0 / 1" in page
