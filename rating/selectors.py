"""Reads of the rating ledger and of posterior snapshots, shaped for services, pages and reports."""

from __future__ import annotations

import hashlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, NamedTuple

import numpy as np
from django.db import connection, transaction
from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from rating.arrays import first_appearance
from rating.engine import RatingConfig
from rating.fit import ModelSpec
from rating.grader_fit import REFERENCE_WEIGHTING
from rating.models import EntityRating, GradeObservation, Observation, PosteriorState, RatingSnapshot
from studies.models import Agent, Episode, Participant, Study

logger = logging.getLogger(__name__)


class ObservationArrays(NamedTuple):
    """The active ledger of one study as parallel arrays, one entry per observation (ordered by id)."""

    agent_ids: np.ndarray  # int64 Agent primary keys
    participant_ids: np.ndarray  # int64 Participant primary keys
    # object array of task UUID strings, "" where the observation names no task; None when not read (a
    # model without tasks never uses them, see observations_arrays)
    task_ids: np.ndarray | None
    y: np.ndarray  # float64 scores
    w: np.ndarray  # float64 observation weights

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    @property
    def has_tasks(self) -> bool:
        """Return whether every observation names its task."""
        return self.n > 0 and self.task_ids is not None and bool(np.all(self.task_ids != ""))

    @property
    def any_task(self) -> bool:
        """Return whether at least one observation names its task."""
        return self.n > 0 and self.task_ids is not None and bool(np.any(self.task_ids != ""))

    def digest(self, config: dict[str, Any]) -> str:
        """A hash of these observations and the model settings: equal digests give the same posterior.

        Tasks count only when read: a ledger read without them is fitted by a task-less model, and the
        settings (the model among them) are hashed too, so a switch to the task model changes the digest.
        """
        h = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
        for array in (self.agent_ids, self.participant_ids, self.y, self.w):
            h.update(np.ascontiguousarray(array).data)  # the buffer itself: no copy of 10^7 entries
        if self.task_ids is None:
            return h.hexdigest()
        labels = self.task_ids.tolist()
        try:  # the ids are str (see task_ids): join them as they are, without a str() call per row
            joined = "\x1f".join(labels)
        except TypeError:
            joined = "\x1f".join(str(t) for t in labels)
        h.update(joined.encode())
        return h.hexdigest()

    def task_groups(self) -> np.ndarray | None:
        """Return task ids for the rating maths: ``None`` for task-less observations, ``None`` if none has one."""
        if self.task_ids is None or not self.any_task:
            return None
        groups = self.task_ids.copy()
        groups[groups == ""] = None
        return groups


def _study_id(study: Study | int) -> int:
    return study.pk if isinstance(study, Study) else int(study)


def study_rating_config(study: Study) -> RatingConfig:
    """Return the study's paper-model hyperparameters (μ0, σ0, β, k) as the engine's configuration."""
    return RatingConfig(mu0=study.rating_mu0, sigma0=study.rating_sigma0, beta=study.rating_beta, k=study.rating_k)


def study_model_spec(study: Study) -> ModelSpec:
    """Return the study's rating model: kind, k, the paper hyperparameters and hyper-uncertainty handling.

    Raises ``ValueError`` naming the bad setting (e.g. a non-positive β).
    """
    return ModelSpec(
        kind=study.rating_model,
        k=study.rating_k,
        paper=study_rating_config(study),
        integrate_hyper=study.rating_integrate_hyper,
    )


# The ledger is read in one value: each observation's fields in their binary forms (int8send, float8send,
# uuid_send: fixed widths, big-endian) as one record, the records end to end in one bytea, parsed by numpy in
# place. A COPY hands the client one message per row, and driving ten million messages through the driver took
# ~30 s by itself; arrays (array_agg) cost PostgreSQL a send call and an allocation per element on output (10^7
# x 5 columns: 8-10 s against 5-6 s); one aggregate per column cost the server more than one per row (4.9 s
# against 3.8 s for 7.3 x 10^6 rows). Grouping into blocks of ids made the server sort every row (its estimate
# of the groups is the row count). Every field is NOT NULL (the task is coalesced), so string_agg skips no
# record. A bytea holds up to 1 GB: 1.9 x 10^7 observations with tasks (2.7 x 10^7 without) per part of the
# read, beyond what a fit of the ledger holds in memory anyway.
_LEDGER_SQL = (
    "SELECT string_agg({ids}(o.id::{id}) || {ids}(o.agent_id::{id}) || {ids}(o.participant_id::{id}) "
    "|| float8send(o.y::float8) || float8send(o.weight::float8){tasks}, '') "
    "FROM rating_observation o WHERE o.study_id = %s AND o.active"
)
# While every observation, agent and participant key fits 32 bits (the keys' indexes answer at once), the three
# keys travel as int4: 28 bytes a record instead of 40, and the transfer was as long as the aggregation.
_NARROW_KEYS_SQL = (
    "SELECT GREATEST((SELECT max(id) FROM rating_observation), (SELECT max(id) FROM studyapp_agent), "
    "(SELECT max(id) FROM studyapp_participant)) < 2147483647"
)
# The task's UUID is looked up only for rows that do not carry it (COALESCE stops at the first non-null):
# services record it on every row, so a ten-million-row read joins nothing.
_TASK_COLUMN = (
    " || uuid_send(COALESCE(o.task_uuid, (SELECT t.uuid FROM studyapp_taskinstance t "
    "WHERE t.id = o.task_id), '00000000-0000-0000-0000-000000000000'::uuid))"
)
_LEDGER_FIELDS = ("id", "agent", "participant")
# The UUID's 16 bytes as two native words: equal UUIDs, equal words (numbered without a string per row).
_LEDGER_TASK = ("task", np.uint64, (2,))
# The text form of a UUID: hex digits at these positions, dashes between.
_UUID_DIGITS = np.array([*range(0, 8), *range(9, 13), *range(14, 18), *range(19, 23), *range(24, 36)])


def _uuid_labels(raw: np.ndarray) -> np.ndarray:
    """Return the text form of 16-byte UUIDs (an ``(m, 16)`` uint8 array) as ``str``, "" for the nil UUID.

    Vectorised: a ledger can name a million tasks, and ``str(uuid.UUID(bytes=...))`` per task took seconds.
    """
    nibbles = np.empty((raw.shape[0], 32), dtype=np.uint8)
    nibbles[:, 0::2] = raw >> 4
    nibbles[:, 1::2] = raw & 15
    text = np.full((raw.shape[0], 36), ord("-"), dtype=np.uint8)
    text[:, _UUID_DIGITS] = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[nibbles]
    labels = text.view("S36").reshape(-1).astype(str).astype(object)
    labels[~raw.any(axis=1)] = ""
    return labels


# Above this many pages of the observation table (~200 000 rows) the ledger is read in parts, each on its own
# connection and server process: the aggregation is single-threaded, most of the read's time, and splits by
# the table's pages (a TID range) without an index. Below it a second connection costs more than it saves.
PARALLEL_MIN_PAGES = 4096
READ_PARTS = 2
# Pages per query of a part (~500 000 observations, 14-20 MB).
READ_CHUNK_PAGES = 8192


def _ledger_record(tasks: bool, narrow: bool) -> np.dtype:
    """Return the numpy record of one observation as the ledger query sends it."""
    keys = ">i4" if narrow else ">i8"
    fields: list[Any] = [(name, keys) for name in _LEDGER_FIELDS] + [("y", ">f8"), ("w", ">f8")]
    return np.dtype(fields + ([_LEDGER_TASK] if tasks else []))


def _ledger_columns(value: bytes | None, record: np.dtype) -> list[np.ndarray]:
    """Return one aggregate's records as native columns: ids, agents, participants (int64), y, w (float64), and
    the task UUIDs as pairs of words when read."""
    value = b"" if value is None else value
    if len(value) % record.itemsize:
        raise RuntimeError("unexpected ledger layout from PostgreSQL")
    records = np.frombuffer(value, dtype=record)
    names = record.names or ()
    native = [np.int64, np.int64, np.int64, np.float64, np.float64, np.uint64]
    return [np.ascontiguousarray(records[name], dtype=kind) for name, kind in zip(names, native, strict=False)]


def part_connection_params() -> dict[str, Any]:
    """Return psycopg connection arguments for another connection to Django's database (no Django cursors)."""
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    return params


def _read_part(
    params: dict[str, Any], snapshot: str, sql: str, args: list[tuple[Any, ...]], record: np.dtype
) -> list[list[np.ndarray]]:
    """Run one part of the ledger read on a new connection, in the exported snapshot ``snapshot``: one query per
    argument tuple (the part's page ranges, in order), sent together in a pipeline so the server aggregates
    the next range while this thread converts the last; return each range's columns."""
    import psycopg
    from psycopg import sql as pgsql

    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn.execute(pgsql.SQL("SET TRANSACTION SNAPSHOT {}").format(pgsql.Literal(snapshot)))
        cursors = [conn.cursor(binary=True) for _ in args]
        with conn.pipeline() as pipeline:
            for cursor, chunk in zip(cursors, args, strict=True):
                cursor.execute(sql, chunk)
            pipeline.sync()
            columns = []
            for cursor in cursors:
                row = cursor.fetchone()
                assert row is not None  # an aggregate without GROUP BY returns one row (NULL when nothing matches)
                columns.append(_ledger_columns(row[0], record))
                cursor.close()
        conn.execute("COMMIT")
    return columns


# Past every page a table can have (block numbers are 32-bit): the upper bound of the read's last range, which
# so takes in the pages added since the table's size was read.
_END_OF_TABLE = f"({2**32 - 1},0)"


def _page_ranges(low: int, high: int | None, size: int) -> list[tuple[str, str]]:
    """Return TID bounds of pages ``[low, high)`` in ranges of ``size`` pages (``high`` None: to the end)."""
    stop = high if high is not None else low + 1
    starts = list(range(low, max(stop, low + 1), size))
    bounds = [(f"({start},0)", f"({start + size},0)") for start in starts]
    bounds[-1] = (bounds[-1][0], _END_OF_TABLE if high is None else f"({high},0)")
    return bounds


def _ledger_rows(study_id: int, tasks: bool, parts: int | None) -> list[list[np.ndarray]]:
    """Return the ledger's columns in pieces, in table page order: one piece from Django's connection, or
    several per part of the table.

    The parts run concurrently on their own connections, each importing a snapshot exported by this
    transaction, so together they read exactly the ledger one query would (rows committed meanwhile by
    anyone are invisible to all of them). A transaction that has written anything reads in one query on its
    own connection: the others would not see its uncommitted rows. Each part reads its pages in ranges of
    ``READ_CHUNK_PAGES``, one query each: values of a few tens of MB, where one value of hundreds of MB was
    copied and grown in memory several times on its way (the transfer measured as long as the aggregation).
    """
    import psycopg

    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_relation_size(%s) / current_setting('block_size')::bigint, txid_current_if_assigned()",
            [Observation._meta.db_table],
        )
        pages, xid = cursor.fetchone()
        cursor.execute(_NARROW_KEYS_SQL)
        narrow = bool(cursor.fetchone()[0])
        record = _ledger_record(tasks, narrow)
        key_send, key_type = ("int4send", "int4") if narrow else ("int8send", "bigint")
        sql = _LEDGER_SQL.format(ids=key_send, id=key_type, tasks=_TASK_COLUMN if tasks else "")
        count = READ_PARTS if parts is None else parts
        if count > 1 and xid is None and (parts is not None or pages >= PARALLEL_MIN_PAGES):
            cursor.execute("SELECT pg_export_snapshot()")
            snapshot = cursor.fetchone()[0]
            # Page bounds of each part; the last is open-ended, so pages added since the size was read are in it.
            bounds: list[int | None] = [int(pages) * i // count for i in range(count)]
            bounds.append(None)
            ranged = sql + " AND o.ctid >= %s::tid AND o.ctid < %s::tid"
            jobs = [
                [(int(study_id), start, stop) for start, stop in _page_ranges(int(low), high, READ_CHUNK_PAGES)]
                for low, high in zip(bounds[:-1], bounds[1:], strict=True)
                if low is not None
            ]
            params = part_connection_params()
            try:
                with ThreadPoolExecutor(max_workers=count) as pool:
                    futures = [pool.submit(_read_part, params, snapshot, ranged, args, record) for args in jobs]
                    return [columns for future in futures for columns in future.result()]
            except psycopg.OperationalError as exc:
                # A server refusing more connections (max_connections, a pooler's limit) must not stop the
                # ratings until someone intervenes: read in one query on this connection, as a small ledger is.
                logger.warning("ledger of study %s read in one query: a part connection failed (%s)", study_id, exc)
        # A server-binding psycopg cursor on Django's connection (and transaction): Django's own cursors bind
        # client-side, which cannot return binary results.
        with psycopg.Cursor(connection.connection) as raw:
            raw.execute(sql, (int(study_id),), binary=True)
            row = raw.fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row (of NULLs when nothing matches)
    return [_ledger_columns(row[0], record)]


def _ledger_read(
    study_id: int, tasks: bool, parts: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    connection.ensure_connection()
    pieces = _ledger_rows(study_id, tasks, parts)
    # Each piece arrived converted to native columns (in its part's thread, while the server aggregated the
    # next); the columns are joined once.
    width = 6 if tasks else 5
    if any(len(piece) != width for piece in pieces):
        raise RuntimeError("unexpected ledger layout from PostgreSQL")
    ids, agent, participant, y, w, *rest = (
        pieces[0][i] if len(pieces) == 1 else np.concatenate([piece[i] for piece in pieces]) for i in range(width)
    )
    task_words = rest[0] if tasks else None
    del pieces
    if ids.size == 0:
        empty = np.zeros(0)
        return (empty.astype(np.int64), empty.astype(np.int64), empty.astype(object) if tasks else None, empty, empty)
    if ids.size > 1 and not bool(np.all(ids[1:] > ids[:-1])):  # aggregation order is the scan's: sort by id
        order = np.argsort(ids, kind="stable")
        agent, participant, y, w = agent[order], participant[order], y[order], w[order]
        task_words = None if task_words is None else task_words[order]
    if task_words is None:
        return agent, participant, None, y, w
    codes, first = first_appearance(task_words)
    labels = _uuid_labels(task_words[first].view(np.uint8).reshape(-1, 16))
    return agent, participant, labels[codes], y, w


def observations_arrays(study: Study | int, *, tasks: bool = True) -> ObservationArrays:
    """Return the study's active observations as numpy arrays (PostgreSQL: packed binary columns; else one query).

    Without ``tasks`` the task ids are not read (``task_ids`` is None): the models other than
    ``calibrated_task`` never use them, and at 10^7 observations reading and numbering them took ~4 s of ~10.
    """
    study_id = _study_id(study)
    if connection.vendor == "postgresql":
        return ObservationArrays(*_ledger_read(study_id, tasks))
    rows = (
        Observation.objects.filter(study_id=study_id, active=True)
        .order_by("pk")
        .annotate(task_key=Coalesce("task_uuid", "task__uuid"))
        .values_list("agent_id", "participant_id", "task_key", "y", "weight")
    )
    agents, participants, task_keys, ys, ws = [], [], [], [], []
    for agent_id, participant_id, task_uuid, y, weight in rows.iterator(chunk_size=10_000):
        agents.append(agent_id)
        participants.append(participant_id)
        task_keys.append("" if task_uuid is None else str(task_uuid))
        ys.append(y)
        ws.append(weight)
    return ObservationArrays(
        agent_ids=np.asarray(agents, dtype=np.int64),
        participant_ids=np.asarray(participants, dtype=np.int64),
        task_ids=np.asarray(task_keys, dtype=object) if tasks else None,
        y=np.asarray(ys, dtype=np.float64),
        w=np.asarray(ws, dtype=np.float64),
    )


class GradeArrays(NamedTuple):
    """A study's active grade ledger (the judge-aware model's observations) as arrays, one entry per grade."""

    episode_ids: np.ndarray  # int64 Episode primary keys
    agent_ids: np.ndarray  # int64 Agent primary keys
    participant_ids: np.ndarray  # int64 Participant primary keys
    y: np.ndarray  # float64 grades on the 0-100 scale
    graders: np.ndarray  # object: "provider/model" or "expert:<id>"
    grader_families: np.ndarray  # object: "" for experts
    agent_families: np.ndarray  # object

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    def digest(self, config: dict[str, Any]) -> str:
        """A hash of these grades and the model settings: equal digests give the same posterior."""
        h = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
        for array in (self.episode_ids, self.agent_ids, self.participant_ids, self.y):
            h.update(np.ascontiguousarray(array).tobytes())
        for labels in (self.graders, self.grader_families, self.agent_families):
            h.update("\x1f".join(labels.tolist()).encode())
        return h.hexdigest()

    def expert_graders(self) -> list[str]:
        """Return the experts among the graders (they have no model family)."""
        return sorted(
            {str(g) for g, f in zip(self.graders.tolist(), self.grader_families.tolist(), strict=True) if not f}
        )


def grade_arrays(study: Study | int) -> GradeArrays:
    """Return the study's active grades as numpy arrays, ordered by episode and grader."""
    rows = list(
        GradeObservation.objects.filter(study_id=_study_id(study), active=True)
        .order_by("episode_id", "grader")
        .values_list("episode_id", "agent_id", "participant_id", "y", "grader", "grader_family", "agent_family")
    )
    columns = list(zip(*rows, strict=True)) if rows else [()] * 7
    return GradeArrays(
        episode_ids=np.asarray(columns[0], dtype=np.int64),
        agent_ids=np.asarray(columns[1], dtype=np.int64),
        participant_ids=np.asarray(columns[2], dtype=np.int64),
        y=np.asarray(columns[3], dtype=np.float64),
        graders=np.asarray(columns[4], dtype=object),
        grader_families=np.asarray(columns[5], dtype=object),
        agent_families=np.asarray(columns[6], dtype=object),
    )


def grade_ledger_fingerprint(study: Study | int) -> str | None:
    """Return a stamp that changes whenever the study's active grades change (``None`` without grades)."""
    rows = GradeObservation.objects.filter(study_id=_study_id(study))
    stats = rows.aggregate(n=Count("pk", filter=Q(active=True)), at=Max("updated_at"), total=Count("pk"))
    if not stats["n"]:
        return None
    return f"{stats['n']}.{stats['total']}.{int(stats['at'].timestamp() * 1000)}"


def graded_episode_states(study: Study | int) -> dict[str, int]:
    """Count the episodes with active grades and how many of them are graded, so the graders panel's "N grades
    of M episodes" says how many of those M the overview counts as graded and how many still wait for their
    score (an episode's grades are recorded as they come, before its score is decided)."""
    rows = (GradeObservation.objects.filter(study_id=_study_id(study), active=True)
            .values("episode__status").annotate(n=Count("episode", distinct=True)))
    states = {row["episode__status"]: row["n"] for row in rows}
    graded = states.get(Episode.Status.GRADED, 0)
    return {"episodes": sum(states.values()), "graded": graded, "not_graded": sum(states.values()) - graded}


def study_model_settings(study: Study) -> dict[str, Any]:
    """Return the model settings a snapshot records and a refresh compares: the model spec, and for the
    judge-aware model whose level it reports (the study's ``grade_reference``) and how that reference weights
    its graders (by their number of grades: a snapshot fitted before that weighting is refitted)."""
    settings = study_model_spec(study).to_dict()
    if settings["kind"] == "judge_aware":
        settings["reference"] = str(study.grade_reference)
        settings["reference_weighting"] = REFERENCE_WEIGHTING
    return settings


def study_ledger(study: Study | int, spec: ModelSpec) -> ObservationArrays | GradeArrays:
    """Return the ledger the study's model is fitted to: one row per grade for the judge-aware model, one row
    per episode for the others."""
    if spec.kind == "judge_aware":
        return grade_arrays(study)
    return observations_arrays(study, tasks=spec.kind == "calibrated_task")


def agent_names(agent_ids: Any) -> dict[int, str]:
    """Return ``{agent pk: name}`` for the given primary keys."""
    ids = {int(a) for a in np.unique(np.asarray(agent_ids, dtype=np.int64))}
    return dict(Agent.objects.filter(pk__in=ids).values_list("pk", "name"))


def participant_pseudonyms(study: Study | int, participant_ids: Any) -> dict[int, str]:
    """Return ``{participant pk: pseudonym}`` for the given participants of the study.

    Reads the study's participants rather than an ``IN`` list, so a million humans cost one plain scan, as
    plain tuples (no queryset iteration: about three times faster at that scale).
    """
    wanted = set(np.asarray(participant_ids, dtype=np.int64).tolist())
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, pseudonym FROM studyapp_participant WHERE study_id = %s", [_study_id(study)])
        found = {pk: pseudonym for pk, pseudonym in cursor.fetchall() if pk in wanted}
    missing = wanted - found.keys()
    if missing:  # only if the ledger links a participant of another study, which services never do
        found.update(Participant.objects.filter(pk__in=missing).values_list("pk", "pseudonym"))
    return found


# The study's participants in one row: ids, each pseudonym's byte length, and the pseudonyms end to end
# (UTF-8), parsed by numpy like the ledger: no Python string per participant.
_PSEUDONYMS_SQL = (
    "SELECT string_agg(int8send(p.id), ''), string_agg(int4send(octet_length(p.pseudonym)), ''), "
    "string_agg(convert_to(p.pseudonym, 'UTF8'), '') FROM studyapp_participant p WHERE p.study_id = %s"
)


def _packed_labels(blob: bytes, lengths: np.ndarray) -> np.ndarray:
    """Return the labels stored end to end in ``blob`` (``lengths`` bytes each) as a fixed-width bytes array."""
    count = lengths.shape[0]
    width = int(lengths.max()) if count else 0
    raw = np.frombuffer(blob, dtype=np.uint8)
    if count == 0 or width == 0:
        return np.zeros(count, dtype="S1")
    if int(lengths.min()) == width:  # one length (the usual generated pseudonyms): the bytes as they are
        return raw.reshape(count, width).copy().view(f"S{width}").reshape(-1)
    table = np.zeros((count, width), dtype=np.uint8)
    inside = np.arange(width)[None, :] < lengths[:, None]
    table[inside] = raw  # row-major order of the True cells is each label's bytes in turn
    return table.view(f"S{width}").reshape(-1)


class PseudonymTable(NamedTuple):
    """A study's participants' pseudonyms as arrays: primary keys and UTF-8 labels (a fixed-width bytes array)."""

    ids: np.ndarray
    labels: np.ndarray


def study_pseudonym_table(study: Study | int) -> PseudonymTable:
    """Return the study's pseudonyms as arrays (PostgreSQL: one query of three binary columns).

    For the rating rows of a million participants: a dict of a million strings, built and read back and
    encoded again, cost over a second; this is one aggregate and a few array passes.
    """
    study_id = _study_id(study)
    if connection.vendor != "postgresql":
        rows = list(Participant.objects.filter(study_id=study_id).values_list("pk", "pseudonym"))
        ids = np.array([pk for pk, _ in rows], dtype=np.int64)
        labels = np.array([name.encode() for _, name in rows], dtype=bytes) if rows else np.zeros(0, dtype="S1")
        return PseudonymTable(ids, labels)
    import psycopg

    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as raw:
        raw.execute(_PSEUDONYMS_SQL, (study_id,), binary=True)
        row = raw.fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    ids = np.frombuffer(row[0] or b"", dtype=">i8").astype(np.int64)
    lengths = np.frombuffer(row[1] or b"", dtype=">i4").astype(np.int64)
    blob = row[2] or b""
    if ids.shape[0] != lengths.shape[0] or int(lengths.sum()) != len(blob):
        raise RuntimeError("unexpected participant layout from PostgreSQL")
    return PseudonymTable(ids, _packed_labels(blob, lengths))


def participant_label_bytes(table: PseudonymTable, participant_ids: np.ndarray) -> np.ndarray:
    """Return the pseudonyms of ``participant_ids`` from the study's ``table`` (UTF-8, in their order).

    A participant of another study (which services never link) is looked up by key; one that does not exist
    is labelled ``human <pk>``.
    """
    keys = np.asarray(participant_ids).astype(np.int64, copy=False)
    ids, labels = table.ids, table.labels
    if keys.size == 0:
        return np.zeros(0, dtype="S1")
    if ids.shape[0]:
        # The table usually comes in key order (the participants' insertion order): then no sort, and keys given
        # in order are found by a merge-like pass (a tenth of the time of random probes at 10^6).
        if bool(np.all(ids[1:] > ids[:-1])):
            where = np.minimum(np.searchsorted(ids, keys), ids.shape[0] - 1)
        else:
            order = np.argsort(ids, kind="stable")
            where = order[np.minimum(np.searchsorted(ids, keys, sorter=order), ids.shape[0] - 1)]
        present = ids[where] == keys
        if bool(present.all()):
            return labels[where]
        found_labels = labels[where]
    else:
        present = np.zeros(keys.shape[0], dtype=bool)
        found_labels = np.zeros(keys.shape[0], dtype="S1")
    missing = keys[~present]
    found = dict(Participant.objects.filter(pk__in=missing.tolist()).values_list("pk", "pseudonym"))
    extra = [found.get(pk, f"human {pk}").encode() for pk in missing.tolist()]
    width = max(found_labels.dtype.itemsize, max(len(label) for label in extra))
    out = found_labels.astype(f"S{width}")
    out[~present] = np.array(extra, dtype=f"S{width}")
    return out


def latest_snapshot(study: Study | int) -> RatingSnapshot | None:
    """Return the study's newest posterior snapshot, or ``None`` before the first refresh.

    The one read of "the current ratings": pages, the API, exports, payouts, surveys and the CLI all call it.
    """
    return RatingSnapshot.objects.filter(study_id=_study_id(study)).order_by("-version").first()


def active_observations(study: Study | int) -> QuerySet[Observation]:
    """Return the study's active ledger rows (what the current posterior is fitted to)."""
    return Observation.objects.filter(study_id=_study_id(study), active=True)


def active_grades(study: Study | int) -> QuerySet[GradeObservation]:
    """Return the study's active grade rows (what the judge-aware model is fitted to)."""
    return GradeObservation.objects.filter(study_id=_study_id(study), active=True)


def _rows_of(snapshot: RatingSnapshot, kind: str) -> int | None:
    """Return the snapshot whose rows rate ``kind``: a live update rates agents itself and carries its refit's
    participants (their ratings change only with a refit)."""
    if kind == EntityRating.Kind.HUMAN and snapshot.produced_by == RatingSnapshot.ProducedBy.UPDATE:
        return snapshot.base_id
    return snapshot.pk


def _snapshot_rows(snapshot: RatingSnapshot) -> QuerySet[EntityRating]:
    return EntityRating.objects.filter(
        Q(snapshot_id=_rows_of(snapshot, EntityRating.Kind.AGENT), entity_kind=EntityRating.Kind.AGENT)
        | Q(snapshot_id=_rows_of(snapshot, EntityRating.Kind.HUMAN), entity_kind=EntityRating.Kind.HUMAN)
    )


def snapshot_ratings_count(snapshot: RatingSnapshot) -> int:
    """Return how many entities (agents and participants) the snapshot rates."""
    return _snapshot_rows(snapshot).count()


def snapshot_rating_rows(snapshot: RatingSnapshot, *, exclude_participants: Any = ()) -> QuerySet[EntityRating]:
    """Return every rating of the snapshot, agents then participants, each by rank, leaving out the given
    participants (a queryset or list of participant pks: a snapshot taken before a withdrawal still rates them)."""
    return (
        _snapshot_rows(snapshot)
        .exclude(entity_kind=EntityRating.Kind.HUMAN, entity_id__in=exclude_participants)
        .order_by("entity_kind", "rank")
    )


def studies_with_snapshots_newest_first(
    *, exclude: Study | int | None = None, limit: int = 20
) -> list[tuple[int, str]]:
    """Return ``(study id, name)`` of studies with a posterior, most recently computed first (distinct)."""
    snapshots = RatingSnapshot.objects.order_by("-computed_at")
    if exclude is not None:
        snapshots = snapshots.exclude(study_id=_study_id(exclude))
    return list(dict.fromkeys(snapshots.values_list("study_id", "study__name")[:limit]))


def episode_has_observation(episode_id: int) -> bool:
    """Return whether the episode has a ledger row (active or retracted)."""
    return Observation.objects.filter(episode_id=episode_id).exists()


def withdrawn_participants_with_active_observations(*, limit: int) -> list[int]:
    """Return ids of withdrawn participants whose observations still count (a retraction left undone)."""
    return list(
        Observation.objects.filter(active=True, participant__status=Participant.Status.WITHDRAWN)
        .values_list("participant_id", flat=True)
        .distinct()[:limit]
    )


def snapshot_model_kind(snapshot: RatingSnapshot | None) -> str | None:
    """Return the rating model the snapshot was computed under ("paper" for snapshots older than the choice)."""
    if snapshot is None:
        return None
    return (snapshot.config or {}).get("kind", "paper")


def snapshot_ratings(snapshot: RatingSnapshot, kind: str) -> QuerySet[EntityRating]:
    """Return the snapshot's ratings of one kind ("agent" or "human"), best conservative score (rank 1) first."""
    if kind not in EntityRating.Kind.values:
        raise ValueError(f"kind must be 'agent' or 'human', got {kind!r}")
    return EntityRating.objects.filter(snapshot_id=_rows_of(snapshot, kind), entity_kind=kind).order_by("rank")


def leaderboard(study: Study | int, kind: str = EntityRating.Kind.AGENT) -> QuerySet[EntityRating]:
    """Return the latest snapshot's ratings of one kind ("agent" or "human"), best conservative score first."""
    if kind not in EntityRating.Kind.values:
        raise ValueError(f"kind must be 'agent' or 'human', got {kind!r}")
    snapshot = latest_snapshot(study)
    if snapshot is None:
        return EntityRating.objects.none()
    return snapshot_ratings(snapshot, kind)


# The skill survey and collaboration statistics relate to (the paper uses the CollabSkill score): column, label.
SKILL_MEASURES = {"conservative": "CollabSkill μ − kσ", "mu": "posterior mean μ"}


def human_skill(study: Study, measure: str = "conservative") -> tuple[dict[int, float], RatingSnapshot | None]:
    """Return each rated participant's skill from the latest snapshot, keyed by participant id."""
    if measure not in SKILL_MEASURES:
        raise ValueError(f"measure must be one of {sorted(SKILL_MEASURES)}, got {measure!r}")
    snapshot = latest_snapshot(study)
    if snapshot is None:
        return {}, None
    rows = snapshot_ratings(snapshot, EntityRating.Kind.HUMAN).values_list("entity_id", measure)
    return {int(entity_id): float(value) for entity_id, value in rows}, snapshot


def studies_with_ratings() -> QuerySet[Study]:
    """Return the studies that have any observation or snapshot, oldest first."""
    return (
        Study.objects.filter(Q(observations__isnull=False) | Q(rating_snapshots__isnull=False))
        .distinct()
        .order_by("pk")
    )


def studies_needing_refresh() -> list[int]:
    """Return ids of studies whose active ledger or rating settings differ from their latest snapshot.

    A study is stale when it has no snapshot but has observations, when an observation changed after the
    snapshot's ledger read, when the number of active observations differs (rows deleted with their
    episode leave no ``updated_at`` behind), or when its hyperparameters were edited. A judge-aware study's
    ledger is its grade rows, so they are what is compared for it.
    """
    newest = RatingSnapshot.objects.filter(study=OuterRef("pk")).order_by("-version")
    grades = GradeObservation.objects.filter(study=OuterRef("pk")).order_by().values("study")
    studies = Study.objects.annotate(
        snap_at=Subquery(newest.values("computed_at")[:1]),
        snap_n=Subquery(newest.values("n_observations")[:1]),
        snap_config=Subquery(newest.values("config")[:1]),
        ledger_changed_at=Max("observations__updated_at"),
        n_active=Count("observations", filter=Q(observations__active=True)),
        grades_changed_at=Subquery(grades.annotate(at=Max("updated_at")).values("at")[:1]),
        n_active_grades=Coalesce(Subquery(grades.filter(active=True).annotate(n=Count("pk")).values("n")[:1]), 0),
    ).order_by("pk")
    stale = []
    for study in studies:
        judge_aware = study.rating_model == Study.RatingModel.JUDGE_AWARE
        n_active = study.n_active_grades if judge_aware else study.n_active
        changed_at = study.grades_changed_at if judge_aware else study.ledger_changed_at
        if study.snap_at is None:
            if n_active:
                stale.append(study.pk)
            continue
        config = study.snap_config
        if isinstance(config, str):  # some backends hand JSON back as text through a subquery
            config = json.loads(config)
        try:
            wanted = study_model_settings(study)
        except ValueError:
            wanted = None  # invalid settings: the refresh reports them
        if n_active != study.snap_n or (changed_at is not None and changed_at >= study.snap_at) or config != wanted:
            stale.append(study.pk)
    return stale


def studies_due_for_reestimation(*, older_than_seconds: float) -> list[int]:
    """Return ids of studies with live updates since a refit older than this: their variance components are due
    for re-estimation even if no further change arrives to trigger it."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return list(
        PosteriorState.objects.filter(live=True, updates__gt=0, refitted_at__lt=cutoff)
        .order_by("study_id")
        .values_list("study_id", flat=True)
    )


# A paper-model study whose residual SD is this many times β gets a plain warning on the leaderboard.
MISFIT_RATIO = 2.0


def model_fit_summary(snapshot: RatingSnapshot | None) -> dict[str, Any]:
    """Return what the leaderboard shows about the snapshot's model: kind, hyperparameters, residual check.

    ``warning`` is a plain sentence when the study runs the paper model on data whose residual SD is far
    above its β (the intervals are then too narrow by about that ratio), else empty.
    """
    if snapshot is None:
        return {}
    fit = snapshot.fit or {}
    config = snapshot.config or {}
    diagnostics = fit.get("diagnostics") or {}
    residual_sd, beta = diagnostics.get("residual_sd"), diagnostics.get("beta")
    ratio = residual_sd / beta if residual_sd is not None and beta else None
    kind = snapshot_model_kind(snapshot)
    warning = ""
    if kind == "paper" and ratio is not None and ratio >= MISFIT_RATIO:
        warning = (
            f"This study uses the paper model with β = {beta:g}, but the scores scatter around the fitted "
            f"values with a residual SD of {residual_sd:.3g}: its intervals are about ×{ratio:.0f} too narrow "
            "and levels are pulled towards the prior mean. Switch the study to the calibrated model."
        )
    return {
        "kind": kind,
        "spec": config,
        "hyper": fit.get("hyper") or {},
        "level": fit.get("level"),
        "log_likelihood": fit.get("log_likelihood"),
        "aic": fit.get("aic"),
        "diagnostics": diagnostics,
        "residual_sd": residual_sd,
        "beta": beta,
        "ratio": ratio,
        "warning": warning,
    }
