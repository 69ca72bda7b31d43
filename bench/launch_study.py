"""The study a launch bench runs against, the recruits' personal links, and the integrity check afterwards.

Runs inside Django (the caller has called ``django.setup()``), against the database the server uses. The study
is the demo study (``manage.py demo``), opened for recruiting with room for every arrival, so the bench needs
no fixtures of its own; recruits get platform ids ``<run>-<n>`` so runs never collide and the check looks at
one run only.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from bench.launch_flow import PASSWORD, Recruit, payload

PLATFORM = "upwork"


def prepare_study(*, arrivals: int, tasks_each: int | None = 2) -> Any:
    """Migrate the database, load the demo study if missing, open it, and give it room for ``arrivals``
    recruits × ``tasks_each`` tasks (``None``: the study's whole session, as steady-state workers take it)."""
    from django.core.management import call_command

    from console.demo import DEMO_SLUG, demo_load
    from studies.models import Study, TaskInstance
    from surveys.services import instrument_install_default

    call_command("migrate", verbosity=0)
    if not Study.objects.filter(slug=DEMO_SLUG).exists():
        demo_load()
    instrument_install_default()
    study = Study.objects.get(slug=DEMO_SLUG)
    from django.db.models import Count

    # Every recruit picks the same occupation, whose sector (with its fallbacks) has only a few tasks, and
    # earlier runs already used some capacity: leave room for every task an arrival takes on any single task.
    taken = (TaskInstance.objects.filter(studies=study).annotate(n=Count("episodes"))
             .order_by("-n").values_list("n", flat=True).first()) or 0
    study.status = Study.Status.RECRUITING
    each = study.tasks_per_session if tasks_each is None else tasks_each
    study.max_episodes_per_task = max(study.max_episodes_per_task, taken + each * arrivals + 10)
    study.save(update_fields=["status", "max_episodes_per_task"])
    return study


def recruits(study: Any, *, run: str, count: int, link: str = "personal") -> list[Recruit]:
    """The recruits' links: ``personal`` (signed, one per recruit, platform ids ``<run>-<n>``) or ``open`` (the
    study's one open link with a Prolific id, as Prolific sends every recruit: 24 hex digits, the run's
    prefix first)."""
    from django.urls import reverse

    from studies.invitations import personal_invite_path

    if link == "open":
        url = reverse("worker:join", args=[study.invite_code])
        ids = [open_link_id(run, n) for n in range(count)]
        return [Recruit(join_path=f"{url}?PROLIFIC_PID={worker_id}", worker_id=worker_id, study_slug=study.slug)
                for worker_id in ids]
    return [Recruit(join_path=personal_invite_path(study=study, platform=PLATFORM, worker_id=f"{run}-{n}"),
                    worker_id=f"{run}-{n}", study_slug=study.slug) for n in range(count)]


def open_link_id(run: str, n: int) -> str:
    """A Prolific-shaped id (24 hex digits) unique to the run: its 6 hex digits, then the recruit's number."""
    return f"{run[-6:]}{n:018x}"


def _run_identities(study: Any, run: str):
    from django.db.models import Q

    from studies.models import ParticipantIdentity

    return ParticipantIdentity.objects.filter(
        Q(platform=PLATFORM, platform_worker_id__startswith=f"{run}-")
        | Q(platform="prolific", platform_worker_id__startswith=run[-6:]), study=study)


def survey_spec(study: Any) -> dict[str, Any]:
    """Valid pre-survey answers for every question, and an occupation the study can give tasks to."""
    from studies.selectors import occupations_offered
    from surveys.models import SurveyResponse
    from surveys.selectors import default_instrument, questions_for

    instrument = study.survey_instrument or default_instrument()
    answers: dict[str, str] = {}
    for question in questions_for(instrument, SurveyResponse.Phase.PRE):
        options = question.options
        if question.kind == "has":
            answers[question.code] = "H3"
        elif question.kind == "likert":
            answers[question.code] = str((int(options.get("min", 1)) + int(options.get("max", 5))) // 2)
        elif question.kind == "choice":
            choices = options.get("choices", []) if isinstance(options, dict) else options
            answers[question.code] = str(choices[0]["value"])
        elif question.kind == "number":
            answers[question.code] = "7"
        else:
            answers[question.code] = "Spreadsheets and reports."
    occupation = occupations_offered(study).filter(title__icontains="account").order_by("pk").first() \
        or occupations_offered(study).order_by("pk").first()
    return {"answers": answers, "occupation_id": occupation.pk, "occupation_query": occupation.title.split()[0]}


def integrity_check(study: Any, *, run: str, arrivals: int) -> dict[str, Any]:
    """Participants = platform ids, every upload byte-identical to what was sent, one payment per submitted
    task, no duplicates."""
    from studies.models import Episode, EpisodeFile, Participant, Payment

    identities = list(_run_identities(study, run).values_list("platform_worker_id", "participant_id"))
    ids = Counter(worker_id for worker_id, _ in identities)
    participants = Participant.objects.filter(pk__in=[p for _, p in identities])
    episodes = Episode.objects.filter(participant__in=participants)
    submitted = list(episodes.filter(submitted_at__isnull=False).values_list("pk", flat=True))
    payments = Counter(Payment.objects.filter(episode_id__in=submitted, kind=Payment.Kind.TASK)
                       .values_list("episode_id", flat=True))
    worker_of = {p: w for w, p in identities}
    files = EpisodeFile.objects.filter(episode__in=episodes).select_related("episode")
    mismatched, checked, stored_bytes = [], 0, 0
    for record in files:
        expected = payload(worker_of[record.episode.participant_id], record.name, record.size)
        with record.file.open("rb") as handle:
            data = handle.read()
        checked += 1
        stored_bytes += len(data)
        if hashlib.sha256(data).hexdigest() != hashlib.sha256(expected).hexdigest() or record.sha256 != \
                hashlib.sha256(expected).hexdigest():
            mismatched.append(record.pk)
    duplicate_files = [k for k, n in Counter(files.values_list("episode_id", "kind", "name")).items() if n > 1]
    positions = [k for k, n in Counter(episodes.values_list("participant_id", "position")).items() if n > 1]
    report = {
        "arrivals": arrivals, "platform_ids": len(ids), "participants": participants.count(),
        "duplicate_platform_ids": sum(1 for n in ids.values() if n > 1),
        "episodes": episodes.count(), "submitted": len(submitted),
        "payments_per_submitted_task": dict(Counter(payments.get(pk, 0) for pk in submitted)),
        "files_checked": checked, "file_bytes": stored_bytes, "files_not_identical": len(mismatched),
        "duplicate_files": len(duplicate_files), "duplicate_positions": len(positions),
    }
    report["ok"] = (report["participants"] == report["platform_ids"] and not report["duplicate_platform_ids"]
                    and set(report["payments_per_submitted_task"]) <= {1} and not mismatched
                    and not duplicate_files and not positions)
    return report


__all__ = ["PASSWORD", "prepare_study", "recruits", "survey_spec", "integrity_check"]
