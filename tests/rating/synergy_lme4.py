"""Run the synergy model through lme4 (`scripts/synergy_lme4.R`) on the same episodes: the independent reference
of the tests and of bench/synergy.py's CPU-time comparison."""

from __future__ import annotations

import csv
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from rating.synergy import SynergyData

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "synergy_lme4.R"


def lme4_available() -> bool:
    """True when Rscript runs and lme4 loads."""
    if shutil.which("Rscript") is None:
        return False
    done = subprocess.run(["Rscript", "-e", "library(lme4)"], capture_output=True, timeout=120)
    return done.returncode == 0


def _r_name(name: str) -> str:
    return "cov_" + "".join(ch if ch.isalnum() else "_" for ch in name)


def _write(data: SynergyData, path: Path, covariates: dict[str, np.ndarray]) -> None:
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["y", "arm", "human", "task", "position", "solo", "team", *map(_r_name, covariates)])
        columns = list(covariates.values())
        for e, (y, arm, h, t, pos) in enumerate(zip(data.y, data.arm, data.human, data.task, data.position,
                                                    strict=True)):
            out.writerow([repr(float(y)), f"a{int(arm):02d}", int(h), int(t), int(pos), int(arm == 0), int(arm > 0),
                          *(repr(float(c[e])) for c in columns)])


def _python_name(name: str) -> str:
    """lme4's fixed-effect name in the Python fit's terms (arm:<label> needs the labels; see `run_lme4`)."""
    if name.startswith("position"):
        return f"position:{name[len('position'):]}"
    return name


def run_lme4(data: SynergyData, *, restricted: bool = False, tight: bool = True, positions: bool = True,
             covariates: dict[str, np.ndarray] | None = None) -> dict:
    """lme4's REML criterion, fixed effects (named as `SynergyFit.fixed_effects`, covariates by their names),
    variance components and the CPU time (user + system) of the lmer call as measured inside R."""
    covariates = covariates or {}
    names = {_r_name(name): name for name in covariates}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "episodes.csv"
        _write(data, path, covariates)
        done = subprocess.run(
            ["Rscript", str(SCRIPT), str(path), "restricted" if restricted else "full", "tight" if tight else "default",
             "positions" if positions else "none"],
            capture_output=True, text=True, timeout=3600, check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"lme4 failed: {done.stderr[-2000:]}")
    out: dict = {"fixef": {}}
    for line in done.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "fixef":
            name = parts[1]
            if name.startswith("arma"):
                name = f"arm:{data.arm_labels[int(name[4:])]}"
            name = names.get(name, name)
            out["fixef"][_python_name(name)] = float(parts[2])
        else:
            out[parts[0]] = float(parts[1])
    return out
