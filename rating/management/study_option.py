"""The --study option shared by the rating commands."""

from __future__ import annotations

from django.core.management.base import CommandError

from rating import selectors
from studies.models import Study


def studies_for_option(slug: str | None) -> list[Study]:
    """Return the named study, or every study with rating data; an unknown slug is a command error."""
    if not slug:
        return list(selectors.studies_with_ratings())
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study with slug {slug!r}")
    return [study]
