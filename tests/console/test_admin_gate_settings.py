"""The expert gate's study settings through the admin's own study form: shown, validated, saved."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.forms.models import model_to_dict
from django.test import RequestFactory
from django.urls import reverse

from studies.models import Study
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

GATE_FIELDS = ("calibration_rate", "calibration_min_per_family", "gate_mode", "gate_min_agreement", "gate_max_bias",
               "gate_min_episodes", "gate_bias_width")


def _form(study: Study, **changes):
    request = RequestFactory().post("/")
    request.user = UserFactory(is_staff=True, is_superuser=True)
    model_admin = admin.site._registry[Study]
    form_class = model_admin.get_form(request, study)
    data = {k: v for k, v in model_to_dict(study).items() if k in form_class.base_fields and v is not None}
    data.update(rank_bonuses='["100.00"]', judges="[]", **changes)
    return form_class(data=data, instance=study)


def test_the_change_form_shows_every_gate_setting(client):
    study = StudyFactory()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get(reverse("admin:studyapp_study_change", args=[study.pk])).content.decode()
    for name in GATE_FIELDS:
        assert f'name="{name}"' in page


def test_out_of_range_settings_and_enforcing_under_automated_scores_are_refused():
    study = StudyFactory(score_source=Study.ScoreSource.AUTO)
    form = _form(study, calibration_rate="1.5", gate_min_episodes="1", gate_max_bias="-3", gate_mode="enforce")
    assert not form.is_valid()
    assert {"calibration_rate", "gate_min_episodes", "gate_max_bias", "gate_mode"} <= set(form.errors)
    assert "blended or expert" in form.errors["gate_mode"][0]
    study.refresh_from_db()
    assert study.gate_mode == Study.GateMode.REPORT and study.calibration_rate == 0.1


def test_valid_settings_save():
    study = StudyFactory(score_source=Study.ScoreSource.BLENDED)
    form = _form(study, gate_mode="enforce", calibration_rate="0.25", gate_min_episodes="20")
    assert form.is_valid(), form.errors
    form.save()
    study.refresh_from_db()
    assert (study.gate_mode, study.calibration_rate, study.gate_min_episodes) == ("enforce", 0.25, 20)


def test_an_emptied_tom_coders_field_saves_as_the_default_pair_not_a_server_error():
    study = StudyFactory()
    form = _form(study, tom_coders="")
    assert form.is_valid(), form.errors
    form.save()
    study.refresh_from_db()
    assert study.tom_coders == []
