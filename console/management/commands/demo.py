"""manage.py demo — load the demo study, accounts and a simulated cohort (idempotent)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from console.demo import DEMO_ACCOUNTS, DEMO_PASSWORD, DEMO_SLUG, demo_load, demo_refused_reason
from studies.models import Study


class Command(BaseCommand):
    help = "Load the demo study (12 sectors, 28 tasks, 5 agents), demo accounts and a SIMULATED cohort."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-cohort", action="store_true", help="Skip the simulated participants.")
        parser.add_argument("--if-empty", action="store_true",
                            help="Do nothing when a study other than the demo exists (the demo itself is updated).")
        parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="Where the site is served.")
        parser.add_argument("--access", action="store_true",
                            help="Only print the demo accounts, the invitation link and the dashboard address "
                                 "(`make run` prints them again once the worker is up, below its banner).")

    def handle(self, *args, no_cohort: bool = False, if_empty: bool = False, base_url: str = "http://127.0.0.1:8000",
               access: bool = False, **options) -> None:
        reason = demo_refused_reason()
        if reason:
            raise CommandError(reason)
        if access:
            study = Study.objects.filter(slug=DEMO_SLUG).first()
            if study is None:
                self.stdout.write(f"Staff dashboard: {base_url.rstrip('/')}{reverse('dashboard:index')}")
            else:
                self._print_access(study, base_url)
            return
        if if_empty and Study.objects.exclude(slug=DEMO_SLUG).exists():
            self.stdout.write("Studies other than the demo exist; demo not loaded.")
            study = Study.objects.filter(slug=DEMO_SLUG).first()
            if study is not None:
                # Printed on every start, not only the first: the link is what a newcomer needs next.
                self._print_access(study, base_url)
            return
        # An existing demo is brought up to date (new tasks, fallbacks, samples); loading is idempotent.
        summary = demo_load(cohort=not no_cohort)
        study = Study.objects.get(slug=DEMO_SLUG)
        self.stdout.write(self.style.SUCCESS(
            f"Demo study '{study.name}': {summary.created['agents']} agents, {summary.created['tasks']} tasks, "
            f"{summary.simulated_participants} SIMULATED participants, {summary.simulated_episodes} SIMULATED episodes."
        ))
        for note in summary.notes:
            self.stdout.write(f"  {note}")
        self._print_access(study, base_url)

    def _print_access(self, study: Study, base_url: str) -> None:
        self.stdout.write(f"Demo accounts (password: {DEMO_PASSWORD}):")
        for username, role in DEMO_ACCOUNTS:
            self.stdout.write(f"  {username:<12} {role}")
        join = reverse("worker:join", args=[study.invite_code])
        self.stdout.write(f"Worker invitation link: {base_url.rstrip('/')}{join}")
        self.stdout.write(f"Staff dashboard: {base_url.rstrip('/')}{reverse('dashboard:overview', args=[study.slug])}")
