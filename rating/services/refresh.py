"""Writes of posterior snapshots: the debounced refresh request, the refit, the stale sweep, and the study's
choice of rating model. A refit solves the whole active ledger from scratch (variance components re-estimated),
so the stored posterior equals a batch solve whatever order the ledger changes came in; it also stores the
posterior in information form for the live updates that follow it (`rating.services.live`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
from django.core.cache import cache
from django.db import OperationalError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from rating import selectors
from rating.arrays import first_appearance
from rating.conf import rating_settings
from rating.connectivity import connectivity
from rating.fit import FitResult, ModelSpec, ParticipantRatings
from rating.live import information_state
from rating.models import EntityRating, LedgerChange, PendingRatingRows, PosteriorState, RatingSnapshot
from rating.services.analysis import study_fit
from rating.services.retention import participant_rows_remove
from rating.task_names import REFRESH_POSTERIOR
from studies.models import Study
from studies.services.audit import audit_record
from studies.task_sending import send_task_now

logger = logging.getLogger(__name__)


def refresh_key(study_id: int) -> str:
    """Return the cache key that marks a pending debounced refresh of the study."""
    return f"rating:refresh:{study_id}"


# --------------------------------------------------------------------------------------------------------
# Refreshing the posterior
# --------------------------------------------------------------------------------------------------------


def _debounce_seconds(study_id: int) -> float:
    """Return how long a refresh request waits for others to join it: short when the next refresh is a live
    update (a grade reaches the leaderboard in about a second), the refit debounce otherwise."""
    conf = rating_settings()
    if conf["LIVE_UPDATES"] and PosteriorState.objects.filter(study_id=study_id, live=True).exists():
        return float(conf["LIVE_DEBOUNCE_SECONDS"])
    return float(conf["REFRESH_DEBOUNCE_SECONDS"])


# Namespace of the PostgreSQL advisory locks that serialise one study's refreshes (two-key form: this, study).
_REFRESH_LOCK = 0x72617465


class RefreshBusy(Exception):
    """Another refresh of the study holds its lock (raised instead of waiting when asked)."""


@contextlib.contextmanager
def refresh_transaction(study_id: int, *, wait: bool = True) -> Iterator[bool]:
    """Run one refresh of the study: serialised with the study's other refreshes, in one consistent snapshot.

    On PostgreSQL a session advisory lock is taken *before* the transaction begins, and the transaction runs at
    repeatable read: its snapshot is taken after any earlier refresh committed, and the ledger, the queued
    changes it deletes and the state it replaces are all read as of one moment -- a change committed meanwhile
    stays queued for the next refresh, neither lost nor applied twice. A worker that dies mid-refresh ends its
    session, which releases the lock. Inside an enclosing transaction (a caller's atomic block) the caller's
    transaction is used as it is. Yields whether the advisory lock is held. Without ``wait`` a held lock raises
    :class:`RefreshBusy` at once (a worker process is not tied up behind a refit of a large ledger).
    """
    postgres = connection.vendor == "postgresql"
    outermost = not connection.in_atomic_block
    locked = False
    if postgres and outermost:
        with connection.cursor() as cursor:
            if wait:
                cursor.execute("SELECT pg_advisory_lock(%s, %s)", [_REFRESH_LOCK, study_id])
            else:
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_REFRESH_LOCK, study_id])
                if not cursor.fetchone()[0]:
                    raise RefreshBusy(f"another refresh of study {study_id} is running")
        locked = True
    try:
        with transaction.atomic():
            if locked:
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield locked
    finally:
        # A dropped connection has released the lock already.
        if locked:
            with contextlib.suppress(Exception), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_REFRESH_LOCK, study_id])


def posterior_schedule_refresh(*, study_id: int) -> bool:
    """Enqueue a refresh of the study unless one is already pending; return whether this call enqueued.

    Call it after the ledger change has committed (services use ``transaction.on_commit``). The first
    caller in a debounce window adds the cache key and enqueues ``refresh_posterior`` with a countdown of
    ``RATING["REFRESH_DEBOUNCE_SECONDS"]``; later callers find the key and stop. Nothing is lost: the
    refresh deletes the key *before* it reads the ledger, so a caller that found the key set had already
    committed and is read, and a caller arriving after the delete (or after the key expired) enqueues a
    refresh of its own.
    """
    key = refresh_key(study_id)
    # A cache or broker outage must not fail the change that asked: the beat sweep refreshes every study
    # whose ledger is newer than its latest snapshot, so a lost request only delays the refresh.
    try:
        debounce = _debounce_seconds(study_id)
        # Redis expires keys in whole seconds and treats a zero timeout as "do not store".
        if not cache.add(key, 1, timeout=max(1, math.ceil(debounce))):
            return False
        send_task_now(REFRESH_POSTERIOR, [study_id], countdown=debounce)
    except Exception:
        logger.warning("could not schedule the refresh of study %s; the sweep will do it", study_id, exc_info=True)
        with contextlib.suppress(Exception):  # the cache may be down too; the key then expires on its own
            cache.delete(key)  # let the next change try again rather than wait for the key to expire
        return False
    return True


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Return the sorted distinct values: :func:`numpy.unique` by a sort, not by its hash table.

    numpy's hash-based unique measured several seconds per call on 10^7 mostly distinct int64 keys, a sort
    well under one.
    """
    ordered = np.sort(values)
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _connectivity_summary(agent_codes: np.ndarray, agent_labels: np.ndarray, human_codes: np.ndarray) -> dict[str, Any]:
    """Return rating.connectivity.connectivity of the ledger, computed on a reduced graph of the same components.

    ``human_codes`` are any non-negative integers, one per person (not necessarily consecutive). Each person
    links every agent they worked with to the lowest-coded one of them (a star per person: the same components
    as the full graph), and every distinct agent-agent link becomes one synthetic participant; each agent also
    gets one of its own, so an agent without links still appears, and agents keep their order. Ten million
    observations shrink to at most agents² links, found with two vectorised passes and no sort, before the
    string-id graph is built.
    """
    if agent_codes.shape[0] == 0:
        return {"connected": True, "n_components": 0, "agent_component": {}, "components": [], "warning": None}
    n_agents = int(agent_labels.shape[0])
    small = np.int32 if n_agents < 2**31 - 1 else np.int64
    codes: np.ndarray = np.asarray(agent_codes).astype(small, copy=False)
    humans = np.asarray(human_codes).astype(np.intp, copy=False)
    lowest = np.full(int(humans.max()) + 1, n_agents, dtype=small)
    np.minimum.at(lowest, humans, codes)
    pairs = np.take(lowest, humans).astype(np.int64) * n_agents + codes
    if n_agents * n_agents <= 1 << 26:  # a bitmap of every possible link: no sort of the 10^7 pairs
        seen = np.zeros(n_agents * n_agents, dtype=bool)
        seen[pairs] = True
        links = np.flatnonzero(seen)
    else:
        links = _sorted_unique(pairs)
    left, right = np.divmod(links, n_agents)
    left, right = left[left != right], right[left != right]
    own, linked = np.arange(n_agents), n_agents + np.arange(left.shape[0])
    agents = np.concatenate([own, left, right])
    people = np.concatenate([own, linked, linked])
    return connectivity(agent_labels[agents], people).to_dict()


def _compact_codes(keys: np.ndarray) -> np.ndarray:
    """Return non-negative integer codes for ``keys`` (equal keys, equal codes): the key itself, less the
    smallest, when the keys span a compact range (primary keys usually do), else numbered by first appearance."""
    values = np.asarray(keys).astype(np.int64, copy=False)
    low, high = int(values.min()), int(values.max())
    if high - low < 4 * values.shape[0] + (1 << 16):
        return values - low
    return first_appearance(values.view(np.uint64).reshape(-1, 1))[0]


def _key_positions(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return each value's position in ``keys`` (distinct, every value among them): a lookup table when the
    keys span a compact range, else a binary search."""
    keys = np.asarray(keys).astype(np.int64, copy=False)
    values = np.asarray(values).astype(np.int64, copy=False)
    low, high = int(keys.min()), int(keys.max())
    if high - low < 4 * keys.shape[0] + (1 << 16):
        table = np.zeros(high - low + 1, dtype=np.intp)
        table[keys - low] = np.arange(keys.shape[0])
        return table[values - low]
    sorter = np.argsort(keys)
    return sorter[np.searchsorted(keys, values, sorter=sorter)]


def _participants_or_end(
    ready: queue.Queue[ParticipantRatings], fit_job: Future[FitResult]
) -> ParticipantRatings | None:
    """Wait for the fit to hand over the participants' posterior; ``None`` when it ended without (the paper model)
    -- a fit that failed raises here."""
    while True:
        try:
            return ready.get(timeout=0.05)
        except queue.Empty:
            if fit_job.done():
                fit_job.result()  # raises the fit's error, if any
                return None if ready.empty() else ready.get_nowait()


def _participants_write(
    snapshot: RatingSnapshot,
    participants: ParticipantRatings,
    pseudonyms: selectors.PseudonymTable,
    k: float,
    *,
    separate: bool,
) -> None:
    """Write the participants' rows of ``snapshot``, labelled by pseudonym and ranked by conservative score.

    With ``separate`` (a refit outside any caller's transaction, on PostgreSQL) a large set of rows is written
    on connections of its own, under the snapshot's pending lock.
    """
    keys = participants.keys if participants.keys is not None else participants.ids.astype(np.int64)
    mu, sigma, n = participants.mu, participants.sigma, participants.n
    # In key order from here: the pseudonyms are then found by a sequential pass, and the COPY streams take
    # contiguous slices in the order the unique index wants (0.3-0.4 s less before the first row at 10^6).
    if keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1])):
        order = np.argsort(keys, kind="stable")
        keys, mu, sigma, n = keys[order], mu[order], sigma[order], np.asarray(n)[order]
    separately = separate and connection.vendor == "postgresql" and keys.shape[0] >= SEPARATE_MIN_ROWS
    if separately:
        _pending_lock(snapshot.pk)
    entity_ratings_write(
        snapshot_id=snapshot.pk,
        kind=EntityRating.Kind.HUMAN,
        keys=keys,
        labels=selectors.participant_label_bytes(pseudonyms, keys),
        mu=mu,
        sigma=sigma,
        conservative=mu - k * sigma,
        n=n,
        separately=separately,
    )


def _ledger_links(
    arrays: Any, agent_keys: np.ndarray, agent_labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, dict[str, Any], float]:
    """Return each observation's agent position in ``agent_keys`` and participant code, the ledger's
    connectivity summary, and the seconds this took (it runs on a thread beside the refit's write)."""
    started = time.perf_counter()
    # Any consistent numbering of the participants will do for the links (no sort of 10^7 keys).
    human_idx = _compact_codes(arrays.participant_ids)
    agent_idx = _key_positions(agent_keys, arrays.agent_ids)
    links = _connectivity_summary(agent_idx, agent_labels, human_idx)
    return agent_idx, human_idx, links, time.perf_counter() - started


def _ranks(conservative: np.ndarray, mu: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Return 1-based ranks by conservative score, ties to higher mu, then to the lower primary key.

    Scores are usually all distinct (and finite), and then one sort of them decides: a three-key sort of a
    million rows cost about three times as much.
    """
    # Distinct scores have one order, so the sort need not be stable (quicksort: a third of a stable sort's time).
    order = np.argsort(-conservative)
    ordered = conservative[order]
    if not (bool(np.all(ordered[1:] != ordered[:-1])) and bool(np.isfinite(ordered).all())):
        order = np.lexsort((keys, -mu, -conservative))
    ranks = np.empty(order.size, dtype=np.int64)
    ranks[order] = np.arange(1, order.size + 1)
    return ranks


# COPY's binary format: a signature, then per row a 16-bit field count and each field as a 32-bit length and
# its bytes (big-endian, fixed width for numbers), then a trailer. Rows are built by numpy as packed records,
# one record type per label length, so a million rows cost no Python per row: the text format, formatted row
# by row (repr of three floats each), took most of the write at that size, and PostgreSQL parses a float's
# text form more slowly than it copies eight bytes.
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # no flags, no header extension
_COPY_TRAILER = b"\xff\xff"
_COPY_COLUMNS = "snapshot_id, entity_kind, entity_id, label, mu, sigma, conservative, n, rank"
_INT4_MAX = 2**31 - 1


class _RatingRows(NamedTuple):
    """One kind's rating rows of a snapshot as parallel arrays (labels UTF-8 in a fixed-width bytes array)."""

    keys: np.ndarray
    labels: np.ndarray
    floats: tuple[np.ndarray, np.ndarray, np.ndarray]  # mu, sigma, conservative
    counts: np.ndarray
    ranks: np.ndarray

    def take(self, rows: np.ndarray | slice) -> _RatingRows:
        """Return the rows at the positions ``rows`` (views for a slice)."""
        mu, sigma, conservative = self.floats
        return _RatingRows(
            self.keys[rows],
            self.labels[rows],
            (mu[rows], sigma[rows], conservative[rows]),
            self.counts[rows],
            self.ranks[rows],
        )


def _copy_binary(snapshot_id: int, kind: bytes, table: _RatingRows) -> list[bytes]:
    """Return ``EntityRating`` rows in COPY's binary format (signature and trailer included), in key order.

    Rows are grouped by the byte length of their label, which makes each group's records fixed-width; within a
    group they go in key order, so the unique index on (snapshot, kind, entity) takes them at its right edge.
    """
    keys, labels, floats, counts, ranks = table
    lengths = np.strings.str_len(labels).astype(np.int64)
    # Row groups as index arrays, None for "every row as given" (sorted keys and labels of one length, the usual
    # case: no gather at all).
    order = None if keys.size < 2 or bool(np.all(keys[1:] > keys[:-1])) else np.argsort(keys, kind="stable")
    ordered_lengths = lengths if order is None else lengths[order]
    groups: list[np.ndarray | None]
    if int(ordered_lengths.min()) == int(ordered_lengths.max()):
        groups = [order]
    else:
        by_length = np.argsort(ordered_lengths, kind="stable")
        grouped = by_length if order is None else order[by_length]
        cuts = np.flatnonzero(np.diff(ordered_lengths[by_length])) + 1
        groups = list(np.split(grouped, cuts))

    def take(values: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        return values if rows is None else values[rows]

    chunks = [_COPY_SIGNATURE]
    for rows in groups:
        width = int(lengths[0 if rows is None else rows[0]])
        fields: list[tuple[str, str]] = [
            ("fields", ">i2"),
            ("snapshot_len", ">i4"),
            ("snapshot", ">i8"),
            ("kind_len", ">i4"),
        ]
        if kind:
            fields.append(("kind", f"S{len(kind)}"))
        fields += [("key_len", ">i4"), ("key", ">i8"), ("label_len", ">i4")]
        if width:
            fields.append(("label", f"S{width}"))
        for name in ("mu", "sigma", "conservative"):
            fields += [(f"{name}_len", ">i4"), (name, ">f8")]
        fields += [("n_len", ">i4"), ("n", ">i4"), ("rank_len", ">i4"), ("rank", ">i4")]
        # What every row of the group shares (field count, lengths, snapshot, kind) is set once and broadcast:
        # a strided write per field and row costs more than copying whole records.
        shared = np.zeros((), dtype=np.dtype(fields))
        shared["fields"], shared["snapshot_len"], shared["snapshot"] = 9, 8, snapshot_id
        shared["kind_len"], shared["key_len"], shared["label_len"] = len(kind), 8, width
        if kind:
            shared["kind"] = kind
        for name in ("mu", "sigma", "conservative"):
            shared[f"{name}_len"] = 8
        shared["n_len"], shared["rank_len"] = 4, 4
        record = np.empty(keys.shape[0] if rows is None else rows.shape[0], dtype=np.dtype(fields))
        record[...] = shared
        record["key"] = take(keys, rows)
        if width:
            record["label"] = take(labels, rows)  # the group's labels fill their width: only padding is cut
        for name, values in zip(("mu", "sigma", "conservative"), floats, strict=True):
            record[name] = take(values, rows)
        record["n"], record["rank"] = take(counts, rows), take(ranks, rows)
        chunks.append(record.tobytes())
    chunks.append(_COPY_TRAILER)
    return chunks


def _label_bytes(labels: list[str] | np.ndarray) -> np.ndarray:
    """Return labels UTF-8 encoded in a fixed-width bytes array (as given when they already are)."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind == "S":
        return labels
    return np.array([str(label).encode() for label in labels], dtype=bytes)


# A refit's participants' rows (a million at platform scale) are written in key ranges on connections of their
# own, side by side: the server's index insertions, most of the write, then use as many cores as there are
# streams (two streams: 3.7-3.9 s against 5.8-6.9 s for one, for 10^6 rows). Each stream commits on its own,
# before the refit's transaction does; below SEPARATE_MIN_ROWS one COPY in the refit's transaction is as fast.
SEPARATE_MIN_ROWS = 200_000
SEPARATE_STREAMS = 2
# Namespace of the one-key advisory locks that mark a snapshot whose rows are being written separately (the
# snapshot id in the low 48 bits).
_PENDING_SNAPSHOT = 0x7261 << 48


def _pending_key(snapshot_id: int) -> int:
    return _PENDING_SNAPSHOT | int(snapshot_id)


def _pending_lock(snapshot_id: int) -> None:
    """Mark the snapshot as being written until this transaction ends (a shared transaction-level lock): until
    then the orphan sweep leaves its separately written rows alone, after it they are the snapshot's or, if
    the transaction rolled back, orphans."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", [_pending_key(snapshot_id)])


def _copy_stream(conn: Any, sql: str, chunks: list[bytes]) -> None:
    with conn.cursor().copy(sql) as copy:
        for chunk in chunks:
            copy.write(chunk)
    conn.commit()


def _copy_separately(sql: str, snapshot_id: int, kind: bytes, table: _RatingRows) -> bool:
    """COPY the rows in ``SEPARATE_STREAMS`` contiguous key ranges, each on a new connection, concurrently; return
    ``False`` (nothing written) when the server refuses one of the connections.

    Every connection is opened before any row is sent, so a refusal (max_connections, a pooler's limit) leaves
    the caller to write in its own transaction. A marker (:class:`PendingRatingRows`) is committed before the
    first row; a failure after that raises, and the rows a stream committed are the orphan sweep's.
    """
    import psycopg

    params = selectors.part_connection_params()
    conns: list[Any] = []
    try:
        for _ in range(SEPARATE_STREAMS):
            conns.append(psycopg.connect(**params))
    except psycopg.OperationalError as exc:
        for conn in conns:
            conn.close()
        logger.warning(
            "snapshot %s: rows written in the refit's transaction (a connection failed: %s)", snapshot_id, exc
        )
        return False
    try:
        # The marker first, committed: every row that can outlive a failed refit is then found by the sweep.
        mark = _MARK_PENDING_SQL.format(table=PendingRatingRows._meta.db_table)
        conns[0].execute(mark, [snapshot_id, len(table.keys)])
        conns[0].commit()
        keys = table.keys
        ordered = keys.size < 2 or bool(np.all(keys[1:] > keys[:-1]))  # as a refit passes them: slices, no copy
        order = None if ordered else np.argsort(keys, kind="stable")
        bounds = [keys.shape[0] * i // SEPARATE_STREAMS for i in range(SEPARATE_STREAMS + 1)]
        with ThreadPoolExecutor(max_workers=len(conns)) as pool:
            jobs = []
            for conn, lo, hi in zip(conns, bounds[:-1], bounds[1:], strict=True):
                rows = slice(lo, hi) if order is None else order[lo:hi]
                payload = _copy_binary(snapshot_id, kind, table.take(rows))
                jobs.append(pool.submit(_copy_stream, conn, sql, payload))  # sent while the next one is built
            for job in jobs:
                job.result()
    finally:
        for conn in conns:
            conn.close()  # a stream that did not commit is rolled back
    return True


_MARK_PENDING_SQL = "INSERT INTO {table} (snapshot_id, rows, created_at) VALUES (%s, %s, now())"


def orphaned_ratings_delete() -> int:
    """Clear the markers of rows written ahead of their snapshot (:class:`PendingRatingRows`): delete the rows of
    snapshots that were never committed (a refit that failed after its streams), drop the markers of those that
    were; return how many snapshots' rows went.

    A marker is handled only under its snapshot's pending lock taken exclusively -- so no refit is still writing
    it -- and the snapshot is looked for after the lock is held: a refit's lock is released only once its commit
    is visible.
    """
    if connection.vendor != "postgresql":
        return 0
    deleted = 0
    for snapshot_id in PendingRatingRows.objects.order_by("snapshot_id").values_list("snapshot_id", flat=True):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_pending_key(snapshot_id)])
            if not cursor.fetchone()[0]:
                continue  # still being written
            if not RatingSnapshot.objects.filter(pk=snapshot_id).exists():
                cursor.execute("DELETE FROM rating_entityrating WHERE snapshot_id = %s", [snapshot_id])
                logger.warning(
                    "deleted %s rating rows of snapshot %s, which was never committed", cursor.rowcount, snapshot_id
                )
                deleted += 1
            PendingRatingRows.objects.filter(snapshot_id=snapshot_id).delete()
    return deleted


def entity_ratings_write(
    *,
    snapshot_id: int,
    kind: str,
    keys: np.ndarray,
    labels: list[str] | np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    conservative: np.ndarray,
    n: np.ndarray,
    separately: bool = False,
) -> None:
    """Write one kind's rows of a snapshot: PostgreSQL ``COPY FROM STDIN`` (binary), elsewhere ``bulk_create``.

    With ``separately`` (PostgreSQL only) the rows go in ``SEPARATE_STREAMS`` key ranges on connections of their
    own, each committed before this returns (see :func:`_copy_separately`): only for a refit that holds its
    snapshot's pending lock (:func:`_pending_lock`), so rows of a refit that then fails are found and deleted.

    A million humans are about a second through binary COPY, against minutes of row-by-row ORM work. The
    binary format carries every float as its eight bytes, nan and infinities included. ``labels`` are text, or
    already UTF-8 in a fixed-width bytes array (an "S" array keeps the bytes as they are: a label holds no
    NUL, which PostgreSQL text cannot store).
    """
    if keys.size == 0:
        return
    keys = np.asarray(keys).astype(np.int64, copy=False)
    floats = (np.asarray(mu, float), np.asarray(sigma, float), np.asarray(conservative, float))
    counts = np.asarray(n).astype(np.int64)
    ranks = _ranks(floats[2], floats[0], keys)
    if connection.vendor == "postgresql":
        if counts.size and (int(counts.min()) < 0 or int(counts.max()) > _INT4_MAX):
            raise ValueError("n: counts must fit the rating table's integer column")
        if ranks.size > _INT4_MAX:
            raise ValueError("keys: more ratings than the rank column can number")
        table = _RatingRows(keys, _label_bytes(labels), floats, counts, ranks)
        sql = f"COPY {EntityRating._meta.db_table} ({_COPY_COLUMNS}) FROM STDIN (FORMAT BINARY)"
        if separately and _copy_separately(sql, int(snapshot_id), str(kind).encode(), table):
            return
        data = _copy_binary(int(snapshot_id), str(kind).encode(), table)
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            for chunk in data:
                copy.write(chunk)
        return
    columns = zip(
        keys.tolist(),
        [label.decode() for label in labels.tolist()] if isinstance(labels, np.ndarray) else labels,
        floats[0].tolist(),
        floats[1].tolist(),
        floats[2].tolist(),
        counts.tolist(),
        ranks.tolist(),
        strict=True,
    )
    EntityRating.objects.bulk_create(
        [
            EntityRating(
                snapshot_id=snapshot_id,
                entity_kind=kind,
                entity_id=entity_id,
                label=label,
                mu=m,
                sigma=s,
                conservative=c,
                n=count,
                rank=rank,
            )
            for entity_id, label, m, s, c, count, rank in columns
        ],
        batch_size=5000,
    )


def _live_state(
    fit: FitResult, arrays: Any, agent_idx: np.ndarray, human_idx: np.ndarray, links: dict[str, Any]
) -> bytes | None:
    """Return the refit's posterior in information form, or ``None`` when its model has no live updates.

    Only the calibrated two-factor model has them (its participants are independent given the agents); a
    ledger whose agents fall apart into components is refitted every time (a new link can join them), and so
    is a ledger below ``LIVE_MIN_OBSERVATIONS``.
    """
    conf = rating_settings()
    if not conf["LIVE_UPDATES"] or fit.variance_nodes is None or not links.get("connected", False):
        return None
    if arrays.n < conf["LIVE_MIN_OBSERVATIONS"]:  # a refit is about as fast: keep the refit debounce
        return None
    state = information_state(fit, agent_idx, human_idx, arrays.y, arrays.w, compact=True)
    return None if state is None else state.to_bytes()


def _state_replace(row: PosteriorState, snapshot: RatingSnapshot, data: bytes | None) -> None:
    """Make ``row`` the state of a refit: its information form (or none), no live update since."""
    row.snapshot = row.refit = snapshot
    row.live = data is not None
    row.data = data or b""
    row.updates = 0
    row.refitted_at = timezone.now()
    row.save()
    LedgerChange.objects.filter(study_id=snapshot.study_id).delete()


def _empty_snapshot(
    study: Study, state_row: PosteriorState, settings: dict[str, Any], digest: str, read_at: Any, started: float
) -> RatingSnapshot:
    """Store the snapshot of an emptied ledger (no agent, no participant) and make it the state's."""
    version = (RatingSnapshot.objects.filter(study=study).aggregate(v=Max("version"))["v"] or 0) + 1
    snapshot = RatingSnapshot.objects.create(
        study=study,
        version=version,
        n_observations=0,
        config=settings,
        fit={},
        ledger_digest=digest,
        connectivity=_connectivity_summary(
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
        ),
        timings={"total_ms": round((time.perf_counter() - started) * 1000, 3)},
    )
    RatingSnapshot.objects.filter(pk=snapshot.pk).update(computed_at=read_at)
    snapshot.computed_at = read_at
    _state_replace(state_row, snapshot, None)
    return snapshot


def _agents_write(snapshot: RatingSnapshot, fit: FitResult, arrays: Any, pool: ThreadPoolExecutor) -> Future:
    """Write the agents' rows of the refit; return the job working out the ledger's links beside it."""
    agent_keys = fit.agent_ids.astype(np.int64)
    names = selectors.agent_names(agent_keys)
    agent_labels = [names.get(int(pk), f"agent {pk}") for pk in agent_keys.tolist()]
    links_job = pool.submit(_ledger_links, arrays, agent_keys, np.array(agent_labels, dtype=object))
    entity_ratings_write(
        snapshot_id=snapshot.pk,
        kind=EntityRating.Kind.AGENT,
        keys=agent_keys,
        labels=agent_labels,
        mu=fit.agent_mu,
        sigma=fit.agent_sigma(),
        conservative=fit.conservative(),
        n=fit.agent_n,
    )
    return links_job


def _refit_timings(
    started: float, t0: float, t_read: float, t_ready: float, t_participants: float, t_solve: float, t_write: float,
    t_state: float, links_seconds: float,
) -> dict[str, float]:  # fmt: skip
    """The refit's phases in milliseconds, as the snapshot records them."""
    return {
        "read_ms": round((t_read - t0) * 1000, 3),
        # The participants' rows are written while the fit finishes: solve_ms is the fit's wall time with
        # that write inside it, write_ms what is written after it (the links beside it, connectivity_ms
        # their own time).
        "solve_ms": round((t_solve - t_read) * 1000, 3),
        # Within it: until the participants' posterior was handed over, and their rows' write from then.
        "participants_ready_ms": round((t_ready - t_read) * 1000, 3),
        "participants_write_ms": round((t_participants - t_ready) * 1000, 3),
        "connectivity_ms": round(links_seconds * 1000, 3),
        "write_ms": round((t_write - t_solve) * 1000, 3),
        "state_ms": round((t_state - t_write) * 1000, 3),
        "total_ms": round((t_state - started) * 1000, 3),
    }


def posterior_refresh(
    *, study_id: int, only_if_changed: bool = False, reason: str = "", wait: bool = True
) -> RatingSnapshot:
    """Refit: solve the study's active ledger, variance components included, and store it as the next snapshot.

    Refreshes of one study run one at a time (:func:`refresh_transaction`), so they write consecutive
    versions. The ledger is read in one query; agents are labelled by name and humans by pseudonym, and
    each kind is ranked by the conservative score. ``computed_at`` is the moment the ledger was read.
    With ``only_if_changed`` (refresh requests: the debounced task, the demo) a ledger and model settings
    identical to the latest snapshot's return that snapshot instead of writing a copy of it. ``reason`` says
    why a refit was chosen over a live update; the snapshot records it. The queued ledger changes the refit
    has read are deleted with it, and the posterior's information form replaces the live-update state.
    """
    started = time.perf_counter()
    with refresh_transaction(study_id, wait=wait) as serialised:
        # Under the advisory lock refreshes are already serialised; otherwise NO KEY UPDATE does it without
        # blocking recordings, whose inserts only take KEY SHARE on the study row.
        study = (Study.objects if serialised else Study.objects.select_for_update(no_key=True)).get(pk=study_id)
        state_row, _ = PosteriorState.objects.get_or_create(study=study)
        # Delete the debounce key before the read (see posterior_schedule_refresh for why that loses nothing).
        cache.delete(refresh_key(study_id))
        read_at = timezone.now()
        t0 = time.perf_counter()
        spec = selectors.study_model_spec(study)
        settings = selectors.study_model_settings(study)
        arrays = selectors.study_ledger(study, spec)
        t_read = time.perf_counter()
        # The fit runs on a thread from here: the digest (with the check for an unchanged ledger, which then waits
        # for the fit it discards) and the participants' pseudonyms are read beside it, and as soon as the
        # participants' posterior is final it is handed over and written here (the snapshot row first, for its
        # key) while the fit works out the per-observation leverages and diagnostics.
        ready: queue.Queue[ParticipantRatings] = queue.Queue(maxsize=1)
        with ThreadPoolExecutor(max_workers=2) as pool:
            fit_job = pool.submit(study_fit, study, arrays, ready.put) if arrays.n else None
            digest = arrays.digest(settings)
            if only_if_changed:
                latest = selectors.latest_snapshot(study)
                if latest is not None and latest.ledger_digest == digest:
                    if state_row.snapshot_id == latest.pk:  # the queued changes cancel out: the state is the ledger's
                        LedgerChange.objects.filter(study=study).delete()
                    return latest
            if arrays.n == 0:  # an emptied ledger is an empty snapshot, not an error
                return _empty_snapshot(study, state_row, settings, digest, read_at, started)
            assert fit_job is not None
            pseudonyms = selectors.study_pseudonym_table(study)
            participants = _participants_or_end(ready, fit_job)
            t_ready = time.perf_counter()
            snapshot = RatingSnapshot.objects.create(
                study=study,
                version=(RatingSnapshot.objects.filter(study=study).aggregate(v=Max("version"))["v"] or 0) + 1,
                n_observations=arrays.n,
                config=settings,
                fit={},  # filled in below, with the links and the timings
                connectivity={},
                ledger_digest=digest,
            )
            if participants is not None:
                _participants_write(snapshot, participants, pseudonyms, spec.k, separate=serialised)
            t_participants = time.perf_counter()
            fit = fit_job.result()
            t_solve = time.perf_counter()
            links_job = _agents_write(snapshot, fit, arrays, pool)
            if participants is None:  # the paper model: its participants come with the fit
                _participants_write(
                    snapshot,
                    ParticipantRatings(fit.human_ids, fit.human_mu, fit.human_sigma, fit.human_n),
                    pseudonyms,
                    fit.spec.k,
                    separate=serialised,
                )
            agent_idx, human_idx, links, links_seconds = links_job.result()
        fit_summary = fit.to_dict()
        if reason:
            fit_summary["update"] = {"kind": "refit", "reason": reason}
        t_write = time.perf_counter()
        _state_replace(state_row, snapshot, _live_state(fit, arrays, agent_idx, human_idx, links))
        t_state = time.perf_counter()
        timings = _refit_timings(started, t0, t_read, t_ready, t_participants, t_solve, t_write, t_state, links_seconds)
        RatingSnapshot.objects.filter(pk=snapshot.pk).update(
            computed_at=read_at, timings=timings, connectivity=links, fit=fit_summary
        )
        snapshot.computed_at, snapshot.timings, snapshot.connectivity, snapshot.fit = (
            read_at,
            timings,
            links,
            fit_summary,
        )
    return snapshot


def posteriors_refresh_stale() -> list[int]:
    """Refit every study whose ledger or settings changed since its latest snapshot, or whose live updates rest on
    variance components older than ``REML_INTERVAL_SECONDS``; return their ids. First clear the markers of rows
    written ahead of their snapshot, deleting those of refits that never committed (:func:`orphaned_ratings_delete`);
    last, when ``KEEP_PARTICIPANT_REFITS`` asks for it, delete the participants' rows of a few superseded refits
    (:func:`rating.services.retention.participant_rows_remove`).

    One study's failure is logged and does not stop the others; database errors propagate so the beat
    task retries the whole sweep.
    """
    orphaned_ratings_delete()
    refreshed = []
    stale = selectors.studies_needing_refresh()
    due = selectors.studies_due_for_reestimation(older_than_seconds=float(rating_settings()["REML_INTERVAL_SECONDS"]))
    for study_id in sorted(set(stale) | set(due)):
        reason = "" if study_id in stale else "scheduled re-estimation of the variance components"
        try:
            posterior_refresh(study_id=study_id, reason=reason)
        except (OperationalError, Study.DoesNotExist):
            raise
        except Exception:
            logger.exception("rating sweep: refreshing study %s failed", study_id)
            continue
        refreshed.append(study_id)
    conf = rating_settings()
    if int(conf["KEEP_PARTICIPANT_REFITS"]) > 0:
        participant_rows_remove(
            keep=int(conf["KEEP_PARTICIPANT_REFITS"]),
            grace_seconds=max(0.0, float(conf["RETENTION_GRACE_SECONDS"])),
            limit=max(1, int(conf["RETENTION_PER_SWEEP"])),
        )
    return refreshed


def study_rating_model_set(*, study: Study, spec: ModelSpec, actor: Any = None, note: str = "") -> bool:
    """Give the study this rating model (kind, k, paper hyperparameters, hyper-uncertainty); audited.

    Returns whether anything changed. The next refresh (and the stale sweep) recomputes the posterior.
    """
    wanted = {
        "rating_model": spec.kind,
        "rating_k": spec.k,
        "rating_mu0": spec.paper.mu0,
        "rating_sigma0": spec.paper.sigma0,
        "rating_beta": spec.paper.beta,
        "rating_integrate_hyper": spec.integrate_hyper,
    }
    before = {name: getattr(study, name) for name in wanted}
    if before == wanted:
        return False
    for name, value in wanted.items():
        setattr(study, name, value)
    study.save(update_fields=[*wanted, "updated_at"])
    audit_record(
        actor=actor, action="study.rating_model", obj=study, study=study, before=before, after=wanted, note=note
    )
    return True
