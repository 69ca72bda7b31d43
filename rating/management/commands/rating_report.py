"""manage.py rating_report [--study SLUG] [--rounds N] [--seed S] [--cluster human] [--json [--stability]]."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from rating import selectors
from rating.conf import rating_settings
from rating.management.study_option import studies_for_option
from rating.services import analysis
from studies.models import Study


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Return a plain-text table: text columns left-aligned, numbers right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [bool(rows) and all(_is_number(row[i]) for row in rows) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [
            cell.rjust(widths[i]) if numeric[i] and n else cell.ljust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_number(value: Any) -> bool:
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, str) and value.replace(".", "", 1).lstrip("-").isdigit()


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


class Command(BaseCommand):
    help = (
        "Print the agents' CollabSkill leaderboard (mu - k*sigma, mu, sigma, n), bootstrap ranking stability, "
        "leave-one-human-out and leave-one-task-out mean ranks, pairwise P(A > B) and connectivity warnings, "
        "computed from the active rating ledger."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", metavar="SLUG", help="only this study (default: every study with ratings)")
        parser.add_argument(
            "--rounds", type=int, default=None,
            help=f"bootstrap rounds (default RATING['BOOTSTRAP_ROUNDS'] = {rating_settings()['BOOTSTRAP_ROUNDS']})",
        )
        parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
        parser.add_argument(
            "--cluster", choices=analysis.STABILITY_CLUSTERS, default="observation",
            help="bootstrap resampling unit: observations (paper) or participants with all their observations",
        )
        parser.add_argument(
            "--json", action="store_true",
            help="print the fitted model (posterior, agents' covariance, hyperparameters) of --study as JSON",
        )
        parser.add_argument(
            "--stability", action="store_true",
            help="with --json: add the stability report (bootstrap and leave-one-out, as the dashboard computes it "
                 "with the same --rounds/--seed/--cluster) under \"stability\"",
        )

    def handle(self, *args, **options) -> None:
        rounds = options["rounds"] if options["rounds"] is not None else rating_settings()["BOOTSTRAP_ROUNDS"]
        if rounds < 1:
            raise CommandError("--rounds must be at least 1")
        if options["stability"] and not options["json"]:
            raise CommandError("--stability goes with --json (the text report always includes stability)")
        if options["json"]:
            stability = {"rounds": rounds, "seed": options["seed"], "cluster": options["cluster"]}
            self.json_safe(options["study"], stability if options["stability"] else None)
            return
        studies = studies_for_option(options["study"])
        if not studies:
            self.stdout.write("No study has rating data yet.")
            return
        for study in studies:
            self._report(study, rounds=rounds, seed=options["seed"], cluster=options["cluster"])

    def json_safe(self, slug: str | None, stability: dict[str, Any] | None) -> None:
        """Print rating.fit.fit_model's output for the study's active ledger, ids = database primary keys.

        With ``stability`` (rounds, seed, cluster) the stability report is added: the one function the
        dashboard's job and the API also call, so outside scripts can check those numbers exactly.
        """
        if not slug:
            raise CommandError("--json needs --study SLUG")
        (study,) = studies_for_option(slug)
        arrays = selectors.observations_arrays(study)
        if arrays.n == 0:
            raise CommandError(f"{study.slug}: no active observations, nothing to fit")
        try:
            fit = analysis.study_fit(study, arrays)
        except ValueError as exc:
            raise CommandError(f"{study.slug}: invalid rating settings: {exc}")
        output = {
            "study": study.slug,
            "n_observations": arrays.n,
            "agent_names": {str(pk): name for pk, name in selectors.agent_names(arrays.agent_ids).items()},
            "fit": fit.to_dict(),
        }
        if stability is not None:
            output["stability"] = analysis.study_stability_report(study, **stability)
        self.stdout.write(json.dumps(output, allow_nan=False))

    def _report(self, study: Study, *, rounds: int, seed: int, cluster: str) -> None:
        write = self.stdout.write
        write(f"=== {study.name} ({study.slug}) ===")
        try:
            report = analysis.study_stability_report(study, rounds=rounds, seed=seed, cluster=cluster)
        except ValueError as exc:  # the engine names the bad hyperparameter
            raise CommandError(f"{study.slug}: invalid rating settings: {exc}")
        if report is None:
            write("No active observations: nothing to rank.\n")
            return
        spec = report["model"]
        k = spec["k"]
        names = report["agent_names"]
        snapshot = selectors.latest_snapshot(study)
        snapshot_note = f"latest snapshot v{snapshot.version}" if snapshot else "no snapshot stored yet"
        tasks = f", {report['n_tasks']} tasks" if report["n_tasks"] is not None else ""
        if spec["kind"] == "paper":
            paper = spec["paper"]
            model = f"paper model: mu0={paper['mu0']:g}, sigma0={paper['sigma0']:g}, beta={paper['beta']:g}"
        else:
            fitted = ", ".join(
                f"{name}={value['estimate']:.3g}" for name, value in (report.get("hyper") or {}).items()
            )
            model = f"{spec['kind']} model ({fitted})"
        write(
            f"{report['n_observations']} active observations, {report['n_agents']} agents, "
            f"{report['n_humans']} humans{tasks}; {model}, k={k:g}; {snapshot_note}"
        )
        rows = [{**row, "agent_id": names.get(row["agent_id"], row["agent_id"])} for row in report["leaderboard"]]

        write(f"\nAgent leaderboard (ranked by CollabSkill = mu - {k:g} sigma)")
        write(format_table(
            ["Rank", "Agent", "CollabSkill", "mu", "sigma", "n"],
            [[r["rank"], r["agent_id"], _fmt(r["conservative"]), _fmt(r["mu"]), _fmt(r["sigma"]), r["n"]]
             for r in rows],
        ))

        boot = report["bootstrap"]
        unit = "participants" if cluster == "human" else "observations"
        write(f"\nBootstrap ranking stability ({boot['rounds']} rounds over {unit}, seed {boot['seed']})")
        write(format_table(
            ["Agent", "Mean rank", "P(rank=1)", "95% rank interval"],
            [[r["agent_id"], _fmt(r["bootstrap_mean_rank"], 2), _fmt(r["bootstrap_p_rank1"]),
              "{}-{}".format(*r["bootstrap_rank_interval"])] for r in rows],
        ))
        tau, (tau_lo, _, tau_hi) = boot["mean_kendall_tau"], boot["kendall_tau_quantiles"]
        if tau is None:
            write("Mean Kendall tau to the full-data ranking: n/a (fewer than two agents)")
        else:
            write(
                f"Mean Kendall tau to the full-data ranking: {tau:.3f} "
                f"(95% of rounds between {_fmt(tau_lo)} and {_fmt(tau_hi)})"
            )

        loo_human, loo_task = report["leave_one_human_out"], report["leave_one_task_out"]
        write("\nLeave-one-out mean ranks")
        write(format_table(
            ["Agent", "Rank", "Leave-one-human-out mean", "Leave-one-task-out mean"],
            [[r["agent_id"], f"#{r['rank']}", _fmt(r["loo_human_mean_rank"], 2), _fmt(r["loo_task_mean_rank"], 2)]
             for r in rows],
        ))
        write(f"{loo_human['n_groups']} humans left out in turn; "
              f"{len(loo_human['changed_groups'])} of them change the ranking when left out.")
        if loo_task is None:
            write("Leave-one-task-out skipped: no observation names its task (sessions imported without a "
                  "task_id).")
        else:
            write(f"{loo_task['n_groups']} tasks left out in turn; "
                  f"{len(loo_task['changed_groups'])} of them change the ranking when left out.")

        pairwise = report["pairwise"]
        order = [pairwise["agent_ids"].index(r["agent_id"]) for r in report["leaderboard"]]
        write("\nPairwise P(row agent > column agent) from the exact joint posterior")
        write(format_table(
            ["", *[f"#{n}" for n in range(1, len(order) + 1)]],
            [[f"#{n} {rows[n - 1]['agent_id']}",
              *["-" if i == j else _fmt(pairwise["prob_greater"][i][j]) for j in order]]
             for n, i in enumerate(order, start=1)],
        ))

        links = report["connectivity"]
        if links["warning"]:
            write(self.style.WARNING(f"\nConnectivity warning: {links['warning']}"))
        else:
            write("\nConnectivity: every agent is linked to every other through shared participants.")
        write("")
