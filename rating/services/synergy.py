"""The synergy analysis of a study: its scored episodes fitted by the synergy model (:mod:`rating.synergy`), the
JSON-ready result stored as a background job's result (console/dashboard/services.py) so the "Who benefits from the
agent" page and the exports only read it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rating.synergy import synergy_fit
from rating.synergy_episodes import agent_baseline, synergy_episodes
from rating.synergy_plan import plan_boost_widths, smallest_design
from studies.conditions import crossing_summary
from studies.models import Study


def study_synergy(study: Study, *, level: float = 0.95, test: bool = True) -> dict[str, Any]:
    """Fit the synergy model to the study's episodes and return the JSON-ready result the page reads.

    ``test=False`` skips the θ = κ test (its restricted fit and held-out folds) when only the estimates are needed.
    """
    coded = synergy_episodes(study)
    crossing = crossing_summary(study=study)
    if coded is None:
        return {"n_episodes": 0, "crossing": crossing, "fit": None,
                "not_identifiable": {"boost": "no episode is scored yet"}}
    fit = synergy_fit(coded.data, level=level, baseline=agent_baseline(study, coded), test=test)
    result = fit.to_dict()
    return {
        "n_episodes": coded.data.n, "n_solo": int(np.sum(coded.data.arm == 0)),
        "n_used_ai_anyway_left_out": coded.n_used_ai_anyway,
        "arm_labels": list(coded.data.arm_labels), "agent_ids": coded.agent_ids,
        "workers": [{"participant_id": pk, "pseudonym": name}
                    for pk, name in zip(coded.participant_ids, coded.pseudonyms, strict=True)],
        "tasks": [{"task_id": pk, "uuid": uuid, "title": name}
                  for pk, uuid, name in zip(coded.task_ids, coded.task_uuids, coded.task_titles, strict=True)],
        "crossing": crossing, "fit": result, "not_identifiable": dict(fit.not_identifiable),
        "level": level,
    }


def synergy_plan(params: dict[str, Any]) -> dict[str, Any]:
    """Simulate the boost-interval width over a grid of designs (workers × solo tasks per worker) from the given
    variance components (:mod:`rating.synergy_plan`), and name the smallest design reaching the target width."""
    rows = plan_boost_widths(
        params["components"], workers=list(params["workers"]), solo_per_worker=list(params["solo_per_worker"]),
        tasks_per_worker=int(params["tasks_per_worker"]), n_tasks=int(params["n_tasks"]),
        n_agents=int(params["n_agents"]), replicates=int(params["replicates"]),
        max_seconds=float(params["max_seconds"]), seed=0)
    return {"rows": rows, "best": smallest_design(rows, float(params["width"])), "settings": dict(params)}
