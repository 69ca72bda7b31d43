"""Choose which score feeds a study's rating: automated judges, expert grades, or a blend.

Switching only records the choice; the rating service then re-records every episode's observation from
the new source (``rating.services.ledger.study_rerecord``), and the refreshed posterior is the exact batch
solution of the re-recorded ledger — the ledger is the only state, so nothing from the old source remains.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from experts.exceptions import ExpertError
from rating.task_names import RERECORD_STUDY
from studies.models import Study
from studies.services.audit import audit_record
from studies.task_sending import send_task_on_commit


def study_set_score_source(*, study: Study, source: str, actor: Any, blend_expert_weight: float | None = None
                           ) -> bool:
    """Set the study's score source (and blend weight); return whether anything changed.

    A change is audited and, once committed, every observation is re-recorded by the rating worker.
    """
    if source not in Study.ScoreSource.values:
        raise ExpertError(f"“{source}” is not a score source; choose automated, expert or blended.")
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        weight = locked.blend_expert_weight if blend_expert_weight is None else float(blend_expert_weight)
        if not 0.0 <= weight <= 1.0:
            raise ExpertError("The expert weight of the blend must be between 0 and 1.")
        if source == Study.ScoreSource.AUTO and locked.gate_mode == Study.GateMode.ENFORCE:
            raise ExpertError("The study enforces the expert gate, whose held episodes count only through their "
                              "expert grades; set the gate to report or off before choosing automated scores.")
        before = {"score_source": locked.score_source, "blend_expert_weight": locked.blend_expert_weight}
        after = {"score_source": source, "blend_expert_weight": weight}
        if before == after:
            return False
        locked.score_source, locked.blend_expert_weight = source, weight
        locked.save(update_fields=["score_source", "blend_expert_weight", "updated_at"])
        audit_record(actor=actor, action="study.score_source", obj=locked, study=locked, before=before, after=after,
                     note="every observation is re-recorded from the new source")
        study_id = locked.pk
        send_task_on_commit(RERECORD_STUDY, [study_id])
    study.score_source, study.blend_expert_weight = source, weight
    return True
