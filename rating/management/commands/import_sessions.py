"""manage.py import_sessions FILE --study SLUG [--create] [--model M]: re-rate published CollabSkill sessions."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from rating.exceptions import SessionsImportError
from rating.fit import RATING_MODELS, ModelSpec
from rating.services import refresh, sessions_import
from studies.models import Study


class Command(BaseCommand):
    help = (
        "Import a sessions JSON file in the released CollabSkill format (a list of objects with session_id, "
        "agent_id, user_id, task_id, autograde_overall_score, autograde_status, skipped) into a study's rating "
        "ledger, then refresh its posterior. Only sessions that are done, not skipped and scored count; "
        "sessions naming no agent or no user are left out and listed; importing the same file again changes "
        "nothing. The rating model is --model, else the one an exported file carries, else the study's own."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="path of the sessions JSON file")
        parser.add_argument("--study", required=True, metavar="SLUG", help="study that receives the sessions")
        parser.add_argument("--create", action="store_true", help="create the study when no study has this slug")
        parser.add_argument("--name", help="name of a study made by --create (default: the slug)")
        parser.add_argument("--no-refresh", action="store_true", help="leave the posterior to the next refresh")
        parser.add_argument(
            # The judge-aware model needs every grade of a session; a sessions file holds one score each.
            "--model", choices=[kind for kind in RATING_MODELS if kind != "judge_aware"],
            help="rating model for the study; 'paper' is the paper's model with its defaults "
            "(mu0=0, sigma0=1, beta=1, k=3) and reproduces its published ratings",
        )

    def handle(self, *args, **options) -> None:
        path = Path(options["file"])
        try:
            sessions = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CommandError(f"{path} is not valid UTF-8 JSON: {exc}")
        model = ModelSpec(kind=options["model"]) if options["model"] else None
        try:
            sessions_import.sessions_parse(sessions)  # refuse a bad file before --create makes a study for it
            if model is None:  # the file's own model, checked before --create makes a study for it
                sessions_import.sessions_model(sessions)
            study = self._study(options["study"], create=options["create"], name=options["name"])
            result = sessions_import.sessions_import(study_id=study.pk, sessions=sessions, model=model)
        except SessionsImportError as exc:
            for problem in exc.problems[:50]:
                self.stderr.write(f"  {problem}")
            if len(exc.problems) > 50:
                self.stderr.write(f"  ... and {len(exc.problems) - 50} more")
            listed = " (all listed above)" if len(exc.problems) > 1 else ""
            raise CommandError(
                f"nothing imported: {len(exc.problems)} problem(s) in {path}, first: {exc.problems[0]}{listed}"
            )
        self.stdout.write(
            f"{study.slug}: {result.sessions} sessions read, {result.counted} counted "
            f"({result.created} new, {result.updated} updated, {result.unchanged} unchanged); "
            f"ignored {result.skipped} skipped, {result.not_done} not done, {result.unscored} unscored; "
            f"{result.retracted} earlier import(s) retracted"
        )
        if result.no_agent or result.no_user:
            shown = ", ".join(result.left_out_ids[:20])
            more = f" and {len(result.left_out_ids) - 20} more" if len(result.left_out_ids) > 20 else ""
            self.stdout.write(self.style.WARNING(
                f"  left out {result.no_agent} session(s) without an agent and {result.no_user} without a user: "
                f"{shown}{more}"
            ))
        self.stdout.write(
            f"  rating model: {result.model}" + (" (changed by this import)" if result.model_changed else "")
        )
        self.stdout.write(
            f"  created {result.agents_created} agent(s) and {result.participants_created} participant(s); "
            f"{result.tasks_linked} session(s) linked to known tasks, {result.tasks_unknown} name unknown task ids"
        )
        if options["no_refresh"]:
            return
        try:
            snapshot = refresh.posterior_refresh(study_id=study.pk)
        except ValueError as exc:  # e.g. too few observations for a calibrated model; the import itself stands
            self.stdout.write(self.style.WARNING(
                f"  sessions imported, but the {study.rating_model} rating model cannot be fitted yet: {exc}"
            ))
            return
        self.stdout.write(f"  posterior snapshot v{snapshot.version} from {snapshot.n_observations} observations")

    def _study(self, slug: str, *, create: bool, name: str | None) -> Study:
        try:
            study, created = sessions_import.sessions_import_study(slug=slug, name=name or "", create=create)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {slug!r} (pass --create to make one)")
        except ValidationError:
            raise CommandError(f"{slug!r} is not a valid slug (letters, digits, hyphens, underscores)")
        if created:
            self.stdout.write(f"created study {study.slug!r}")
        return study
