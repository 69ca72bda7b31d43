"""Task assignment holds its shared locks only for the counts and the insert (pairing/services.py):
statements counted after the first shared lock, and assignments that must not wait for rows another
transaction holds."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pairing.services import episode_assign
from studies import models as m
from tests.conftest import requires_postgres
from tests.factories import OccupationFactory, SectorFactory, TaskFactory
from tests.factories.scenarios import make_participant, make_world

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def _after_first_shared_lock(captured: CaptureQueriesContext) -> list[str]:
    """The statements from the first row lock on a shared table (tasks or agents) to the end."""
    sql = [q["sql"] for q in captured.captured_queries]
    shared = [i for i, s in enumerate(sql) if "FOR NO KEY UPDATE" in s or "FOR UPDATE" in s
              if m.Participant._meta.db_table not in s.split("FROM", 1)[1].split("WHERE", 1)[0]]
    assert shared, "a task row is always locked before the coverage is counted"
    return sql[shared[0]:]


@pytest.mark.parametrize("mode, most", [(m.Study.DesignMode.UNIFORM, 4), (m.Study.DesignMode.BALANCED, 6)])
def test_the_shared_locks_cover_only_the_counts_and_the_insert(mode, most):
    world = make_world(tasks=6, agents=3, design_mode=mode)
    participant = make_participant(world)
    with CaptureQueriesContext(connection) as captured:
        episode = episode_assign(participant=participant, position=1)
    held = _after_first_shared_lock(captured)
    assert held[-1] == "COMMIT" and held[-2].startswith(f'INSERT INTO "{m.Episode._meta.db_table}"'), held[-2:]
    # uniform: lock tasks, coverage, the chosen task, the agent, insert; balanced adds the agent lock and counts
    assert len(held) - 1 <= most + 1, "\n".join(held)
    agent_locks = [s for s in held if "FOR NO KEY UPDATE" in s and m.Agent._meta.db_table in s.split("FROM", 1)[1][:80]]
    assert bool(agent_locks) == (mode == m.Study.DesignMode.BALANCED), held
    assert episode.agent_id in {a.pk for a in world.agents}


def _other_transaction_locking(table: str, pks: list[int]) -> psycopg.Connection:
    """A second connection holding the row locks a concurrent assignment takes (``FOR NO KEY UPDATE``) until it
    is closed."""
    settings = connection.settings_dict
    other = psycopg.connect(host=settings["HOST"] or "127.0.0.1", port=settings["PORT"] or 5432,
                            user=settings["USER"] or "postgres", dbname=settings["NAME"])
    other.execute(f"SELECT id FROM {table} WHERE id = ANY(%s) FOR NO KEY UPDATE", [pks])
    return other


def test_uniform_pairing_never_waits_for_agent_rows_another_assignment_holds():
    world = make_world(tasks=3, agents=2, design_mode=m.Study.DesignMode.UNIFORM)
    participant = make_participant(world)
    holder = _other_transaction_locking(m.Agent._meta.db_table, [a.pk for a in world.agents])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")  # a wait would end in an error, not hang the suite
        episode = episode_assign(participant=participant, position=1)
    finally:
        holder.close()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert episode.agent_id in {a.pk for a in world.agents}


def test_a_worker_of_another_sector_never_waits_for_the_first_sectors_tasks():
    world = make_world(tasks=3, agents=2, design_mode=m.Study.DesignMode.UNIFORM)
    sector = SectorFactory(code="other-sector", name="Other sector")
    occupation = OccupationFactory(soc_code="15-1252.00", title="Software Developers", sector=sector)
    own = TaskFactory(title="other sector task", sector=sector, studies=[world.study])
    holder = _other_transaction_locking(m.TaskInstance._meta.db_table, [t.pk for t in world.tasks])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")
        episode = episode_assign(participant=make_participant(world, occupation=occupation), position=1)
    finally:
        holder.close()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert episode.task_id == own.pk


def test_a_task_deactivated_between_the_two_steps_is_not_assigned():
    """The unlocked read may see a task that is switched off before the lock: the locked step drops it."""
    from studies.task_choice import task_candidates, task_pick

    world = make_world(tasks=2, agents=1)
    participant = make_participant(world)
    candidates = task_candidates(participant)
    m.TaskInstance.objects.filter(pk=world.tasks[0].pk).update(is_active=False)
    import random

    from django.db import transaction

    with transaction.atomic():
        picked = {task_pick(participant, candidates, random.Random(seed), lock=True, condition=None).pk
                  for seed in range(20)}
    assert picked == {world.tasks[1].pk}
