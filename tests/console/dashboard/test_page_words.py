"""Words on the staff pages that must mean what they say: a scale's direction, a command without raw backticks."""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.dashboard import verdicts
from console.dashboard.pages import survey_page
from console.templatetags.dashboard_text import code_spans
from grading.providers import not_configured_note
from studies.models import Episode


def _paired(item: str, delta: float) -> dict:
    return {"item": item, "n": 20, "mean_pre": 3.0, "mean_post": 3.0 + delta, "delta": delta, "se": 0.1,
            "se_pre": 0.1, "se_post": 0.1, "p_value": 0.001, "p_holm": 0.002}


def test_a_human_agency_scale_change_is_worded_in_the_scales_own_direction():
    """H1 = 1 (agent fully autonomous) ... H5 = 5: a fall is a move toward agent autonomy, not "down"."""
    result = {"items": [{"code": "A4", "construct": "Perceived capability", "kind": "has"},
                        {"code": "A2", "construct": "Trust", "kind": "likert"},
                        {"code": "A5", "construct": "Desired autonomy", "kind": "has"}],
              "paired": [_paired("A4", -0.8), _paired("A2", 0.5), _paired("A5", 0.6)],
              "pre_correlations": [], "change_correlations": [], "skill_split": [], "categorical": []}
    verdict = survey_page(result)["verdicts"]["paired"]
    assert "A4 Perceived capability (toward agent autonomy (H1))" in verdict
    assert "A5 Desired autonomy (toward human involvement (H5))" in verdict
    assert "A2 Trust (up)" in verdict
    assert "(down)" not in verdict
    assert verdicts.change_direction({"kind": "likert", "delta": -1.0}) == "down"


def test_backticked_commands_in_notes_become_code_and_stay_escaped():
    assert str(code_spans("run `manage.py grade --pending` <now>")) == (
        "run <code>manage.py grade --pending</code> &lt;now&gt;")
    assert str(code_spans("an odd ` stays")) == "an odd ` stays"
    assert str(code_spans(None)) == ""


@pytest.mark.django_db
def test_the_overview_shows_a_waiting_reasons_command_as_code_not_raw_backticks(staff_client, populated):
    note = not_configured_note()
    assert "`" in note
    Episode.objects.filter(pk=populated.episodes[0].pk).update(status=Episode.Status.SUBMITTED, grading_note=note)
    html = staff_client.get(reverse("dashboard:overview", args=[populated.study.slug])).content.decode()
    assert "<code>manage.py grade --pending</code>" in html
    assert "`" not in html.split('id="queue"')[-1].split("</section>")[0]
