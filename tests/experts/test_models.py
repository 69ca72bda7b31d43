"""The expert models moved from grading to experts without touching a table or losing admin history."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from experts.models import ExpertAssignment, ExpertCriterionGrade, ExpertGrade, ExpertProfile
from studies.models import AuditEvent
from tests.factories import UserFactory

MODELS = (ExpertProfile, ExpertAssignment, ExpertGrade, ExpertCriterionGrade)
move = importlib.import_module("grading.migrations.0008_move_expert_models_to_experts")


def test_the_models_keep_the_tables_they_had_in_grading():
    assert [m._meta.db_table for m in MODELS] == [
        "grading_expertprofile", "grading_expertassignment", "grading_expertgrade", "grading_expertcriteriongrade"]
    assert ExpertProfile.sectors.through._meta.db_table == "grading_expertprofile_sectors"


@pytest.mark.django_db
def test_the_tables_exist_under_their_old_names():
    tables = set(connection.introspection.table_names())
    assert {m._meta.db_table for m in MODELS} | {"grading_expertprofile_sectors"} <= tables


@pytest.mark.django_db
def test_relabelling_the_content_types_keeps_history_permissions_and_grants_either_way():
    ct = ContentType.objects.get_for_model(ExpertProfile)
    assert ct.app_label == "experts"
    user = UserFactory()
    LogEntry.objects.create(user=user, content_type=ct, object_id="1", object_repr="x", action_flag=ADDITION)
    group = Group.objects.create(name="reviewers")
    group.permissions.add(Permission.objects.get(content_type=ct, codename="view_expertprofile"))
    AuditEvent.objects.create(action="expert.profile_update", object_type="experts.expertprofile", object_id="1")

    move.to_grading(apps, None)
    ct.refresh_from_db()
    assert ct.app_label == "grading"
    assert AuditEvent.objects.get().object_type == "grading.expertprofile"
    # migrate's post-migrate step recreates a content type (and its permissions) under the new label
    stale = ContentType.objects.create(app_label="experts", model="expertprofile")
    Permission.objects.create(content_type=stale, codename="view_expertprofile", name="Can view expert profile")

    move.to_experts(apps, None)
    ct.refresh_from_db()
    assert ct.app_label == "experts" and not ContentType.objects.filter(pk=stale.pk).exists()
    assert ContentType.objects.get_for_model(ExpertProfile) == ct
    assert LogEntry.objects.get().content_type == ct
    assert list(group.permissions.values_list("content_type", "codename")) == [(ct.pk, "view_expertprofile")]
    assert Permission.objects.filter(content_type=ct).count() == 4
    assert AuditEvent.objects.get().object_type == "experts.expertprofile"
