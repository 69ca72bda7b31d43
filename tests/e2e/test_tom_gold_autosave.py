"""An expert codes a gold-sample episode's worker prompts in the browser: the shared autosave stores the draft (score,
markers, reason) without a press of Save, a reload shows it again, and the phone layout does not scroll sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from experts.models import ToMGoldCode
from experts.services.tom_gold import tom_gold_sample_draw
from tests.e2e.steps import login
from tests.experts.tom_gold_world import coded_episode, tom_study
from tests.factories.experts import make_expert

PASSWORD = "pw-correct-horse"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_gold_code_draft_saves_itself_and_survives_a_reload_on_a_phone(page):
    study = tom_study(name="Gold autosave study")
    coded_episode(study, scores=(4, 3))
    expert = make_expert(username="gwen")
    tom_gold_sample_draw(study=study, size=1, seed=1, experts=[expert], raters_per_episode=1)
    code = ToMGoldCode.objects.get()
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "gwen", PASSWORD)
    page.goto(f"/expert/tom/{code.pk}/")
    expect(page.locator("#tom-form[data-autosave='ready']")).to_be_attached()  # the draft autosave is listening
    page.check("input[name='score'][value='4']")
    page.check("input[name='markers'][value='rapport']")
    page.fill("#id_reason", "Explains what the agent cannot see.")
    expect(page.locator("#autosave-status")).to_contain_text("Saved at", timeout=20_000)
    code.refresh_from_db()
    assert (code.status, code.score, code.markers, code.reason) == (
        "draft", 4, ["rapport"], "Explains what the agent cannot see.")
    page.reload()
    expect(page.locator("input[name='score'][value='4']")).to_be_checked()
    expect(page.locator("#id_reason")).to_have_value("Explains what the agent cannot see.")
    scroll, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll <= inner
    # Closing the page at teardown hides it, and a hidden page saves its draft once more; that request would
    # reach a database already torn down. A submit event stops the autosave (the form post saves everything)
    # without posting the form, so nothing is in flight when the test ends.
    page.evaluate("() => document.getElementById('tom-form').dispatchEvent(new Event('submit'))")
