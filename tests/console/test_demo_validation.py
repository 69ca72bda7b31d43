"""The demo passes the checks the app applies to the same data typed or uploaded by a person: an approved
rubric as the editor and approval accept it, episode times in the order the journey writes them, file names as
uploads sanitise them, experience and survey answers as their forms accept them."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from experts.services.rubric_authoring import criterion_problems, draft_rows
from grading.models import Rubric
from grading.services.rubric_generation import rubric_validate
from journey.forms import ProfileForm
from studies.files import check_type, sanitize_filename
from studies.models import Episode, EpisodeFile, Participant, Study, TaskFile
from studies.services.uploads import allowed_extensions
from surveys.models import Answer
from surveys.services import answer_code

pytestmark = pytest.mark.django_db


def test_the_demo_passes_the_checks_applied_to_user_input():
    call_command("demo", verbosity=0)
    demo = Study.objects.get(slug="collabskill-demo")
    _rubrics(demo)
    _episode_times(demo)
    _files(demo)
    _participants_and_answers(demo)


def _rubrics(demo):
    rubrics = list(Rubric.objects.filter(task__studies=demo, status=Rubric.Status.APPROVED))
    assert rubrics
    for rubric in rubrics:
        assert criterion_problems(draft_rows(rubric)) == [], rubric
        assert rubric_validate(rubric) == [], rubric


def _episode_times(demo):
    episodes = Episode.objects.filter(study=demo).exclude(started_at=None)
    assert episodes.exists()
    for episode in episodes:
        assert episode.assigned_at <= episode.started_at, episode
        if episode.ready_at is not None:
            assert episode.started_at <= episode.ready_at, episode
        if episode.submitted_at is not None:
            assert (episode.ready_at or episode.started_at) <= episode.submitted_at, episode


def _files(demo):
    for record in TaskFile.objects.filter(task__studies=demo).distinct():
        assert sanitize_filename(record.name) == record.name, record.name
    for record in EpisodeFile.objects.filter(episode__study=demo):
        assert sanitize_filename(record.name) == record.name, record.name
        with record.file.open("rb") as handle:
            head = handle.read(8192)
        check_type(record.name, head, allowed_extensions(record.kind))


def _participants_and_answers(demo):
    for participant in Participant.objects.filter(study=demo).exclude(occupation=None):
        form = ProfileForm({"occupation": participant.occupation_id,
                            "years_experience": f"{participant.years_experience:g}"})
        assert form.is_valid(), (participant.pseudonym, form.errors)
    answers = Answer.objects.filter(response__participant__study=demo).select_related("question")
    assert answers.exists()
    for answer in answers:
        answer_code(answer.question, answer.value)
