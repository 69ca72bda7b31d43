"""Provider outages: a judge whose provider kept failing waits for it, and grading resumes once it answers.

A provider outage is the commonest fault of all, so it never leaves a submission failed for a person to
retry. When every task attempt of a judge failed with provider faults (5xx, 429, timeouts), the run WAITS
(`grading.selectors.PROVIDER_DOWN`): with no judge scored the submission waits with a note staff see as
waiting; with some judges scored it is held under the study's partial-panel policy. Each sweep then probes every
waiting provider once (a free model-list request, `grading.provider_probe`) and, for each provider that
answers, sends grading again for the submissions waiting on it, at once rather than at the waiting cadence.

Cost bound: a provider that stays down costs one unpaid probe per sweep, whatever the number of waiting
submissions; a probe that answers while completions still fail costs one more round of the task's usual
attempts, and a run is given up (FAILED, staff retry) after `PROVIDER_OUTAGE_ROUNDS` rounds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.utils import timezone

from grading.conf import grading_settings
from grading.provider_probe import provider_down_reason
from grading.providers import JudgeSpec
from grading.selectors import episodes_waiting_for_providers
from studies.models import Episode

logger = logging.getLogger(__name__)


def provider_outages_recheck(*, send: Callable[[int], bool], limit: int) -> tuple[int, int]:
    """Probe each provider submissions wait for; send grading for those waiting on one that answers.

    `send(episode_id)` sends one grading message and says whether the broker took it (the sweep stops at the
    first refusal). Return (probes made, submissions sent).
    """
    waiting = episodes_waiting_for_providers(
        quiet_for=float(grading_settings()["REQUEUE_AFTER_SECONDS"]), limit=limit)
    if not waiting:
        return 0, 0
    judges = {judge for wanted in waiting.values() for judge in wanted}
    answering: set[str] = set()
    for provider in sorted({provider for provider, _model in judges}):
        model = min(model for p, model in judges if p == provider)
        reason = provider_down_reason(JudgeSpec(provider=provider, model=model))
        if reason is None:
            answering.add(provider)
        else:
            logger.info("provider outage: %s still down (%s); %d submission(s) wait for it", provider, reason,
                        sum(1 for wanted in waiting.values() if any(p == provider for p, _ in wanted)))
    sent = 0
    for episode_id, wanted in waiting.items():
        if not any(provider in answering for provider, _model in wanted):
            continue
        if not send(episode_id):
            break
        # Touching the row keeps the next sweeps from sending it again while this message waits in a queue.
        Episode.objects.filter(pk=episode_id).update(updated_at=timezone.now())
        sent += 1
    if sent:
        logger.info("provider outage: %s answer again; grading sent for %d waiting submission(s)",
                    ", ".join(sorted(answering)), sent)
    return len({p for p, _ in judges}), sent
