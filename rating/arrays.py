"""Validating and coding the observation arrays every rating model takes (ids, scores, weights).

Ids are coded by first appearance without converting every row to a Python string (:func:`first_appearance`
hashes packed words), which keeps a ten-million-row ledger's coding well under a second.

Pure numpy: no Django, no settings, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np


def normalise_id(value: Any, name: str) -> str:
    if value is None or not isinstance(value, Hashable):
        raise ValueError(f"{name} must be a non-empty hashable id, got {value!r}")
    text = value if isinstance(value, str) else str(value)
    if not text.strip():
        raise ValueError(f"{name} must be a non-empty id, got {value!r}")
    return text


def id_array(values: Any, name: str) -> np.ndarray:
    """Return ``values`` as a 1-D array of ``str`` ids, rejecting None and empty ids."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == object and arr.size:
        # numpy's stubs reject None as a ufunc operand; equal() compares it elementwise on object arrays.
        missing = np.flatnonzero(np.equal(arr, None))  # type: ignore[call-overload]
        if missing.size:
            raise ValueError(f"{name} contains None at index {int(missing[0])}")
    if arr.dtype.kind == "b":
        raise ValueError(f"{name} must hold ids, not booleans")
    return arr.astype(str) if arr.size else np.zeros(0, dtype=str)


def finite_array(values: Any, name: str, n: int) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}")
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match the ids, got {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(f"{name} must be finite; found {arr[bad[0]]!r} at index {int(bad[0])}")
    return arr


def weight_array(values: Any, name: str, n: int) -> np.ndarray:
    if values is None:
        return np.ones(n)
    arr = finite_array(values, name, n)
    bad = np.flatnonzero(arr <= 0)
    if bad.size:
        raise ValueError(f"{name} must be > 0; found {arr[bad[0]]!r} at index {int(bad[0])}")
    return arr


def index_array(values: Any, name: str, n: int, size: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer indices, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= size):
        raise ValueError(f"{name} must lie in [0, {size}), got range [{arr.min()}, {arr.max()}]")
    return arr


_HASH_MULT = np.uint64(0xBF58476D1CE4E5B9)
_HASH_SEED = np.uint64(0x9E3779B97F4A7C15)


def id_words(arr: np.ndarray) -> np.ndarray:
    """Return the ids of a 1-D integer or ``str`` array as rows of ``uint64`` words, equal iff the ids are."""
    n = arr.shape[0]
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False).view(np.uint64).reshape(n, 1)
    width = arr.dtype.itemsize // 4
    chars = np.ascontiguousarray(arr).view(np.uint32).reshape(n, width)
    # The dtype's width is the longest id's; trailing columns that are NUL everywhere carry nothing.
    column_max = chars.max(axis=0) if width and n else np.zeros(0, dtype=np.uint32)
    filled = np.flatnonzero(column_max)
    width = int(filled[-1]) + 1 if filled.size else 0
    chars = chars[:, :width]
    # numpy pads str with NUL and no id ends in NUL, so padded code points are canonical. Latin-1 ids pack
    # eight characters per word, others two.
    if width and int(column_max.max()) < 256:
        packed = np.zeros((n, -(-width // 8) * 8), dtype=np.uint8)
        packed[:, :width] = chars
    else:
        packed = np.zeros((n, -(-width // 2) * 2), dtype=np.uint32)
        packed[:, :width] = chars
    if packed.shape[1] == 0:
        return np.zeros((n, 1), dtype=np.uint64)
    return packed.view(np.uint64)


def coded_ids(values: Any, name: str, n: int | None) -> tuple[np.ndarray, list[str]]:
    """Return ``(codes, keys)``: ids coded by first appearance and the distinct ids as ``str`` in that order.

    Integer and ``str`` arrays are coded without converting every row to a Python string (only the distinct
    ids are); other inputs go through :func:`id_array`. Rejects None, booleans and empty ids, naming the
    first offending row.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but agent_ids has {n}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64), []
    if arr.dtype.kind not in "iuU":
        arr = id_array(arr, name)
    codes, first = first_appearance(id_words(arr))
    distinct = arr[first]
    keys = [str(v) for v in distinct.tolist()] if arr.dtype.kind in "iu" else distinct.tolist()
    blank = [i for i, key in enumerate(keys) if not key.strip()]
    if blank:
        raise ValueError(f"{name} contains an empty id at index {int(first[blank[0]])}")
    return codes, keys


def _hash_rows(words: np.ndarray) -> np.ndarray:
    h = np.full(words.shape[0], _HASH_SEED, dtype=np.uint64)
    for j in range(words.shape[1]):
        h ^= words[:, j]
        h *= _HASH_MULT
        h ^= h >> np.uint64(29)
        h *= _HASH_MULT
    return h


def first_appearance(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(codes, first)``: each row's code, numbered by first appearance, and each code's first row.

    A vectorised open-addressing hash table over 64-bit row hashes: every row probes its slot; an empty
    slot is claimed by the lowest row index probing it (``np.minimum.at``), rows whose hash equals the
    owner's are resolved there and the others probe the next slot. Equal rows probe together, so each
    distinct id's owner is its first row. No sort of the n rows. Exact: every row is then compared in full
    with its code's first row, and a (never yet seen) 64-bit collision falls back to a sort.
    """
    n = words.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if words.shape[1] == 1:
        values = words[:, 0].view(np.int64)
        low, high = int(values.min()), int(values.max())
        if high - low < max(4 * n, 1 << 16):
            # Compact integers: the value itself is the slot.
            offset = values - low
            first_of = np.full(high - low + 1, n, dtype=np.int64)
            np.minimum.at(first_of, offset, np.arange(n))
            used = np.flatnonzero(first_of < n)
            return _number_by_first(offset, used, first_of[used], high - low + 1)
    # One word (integers, or ids of up to eight Latin-1 characters): the word is the id, compared exactly.
    exact = words.shape[1] == 1
    hashes = words[:, 0] * _HASH_MULT if exact else _hash_rows(words)
    keys = words[:, 0] if exact else hashes
    # Table size from a linear-counting estimate of the distinct ids (one pass into a 1 MiB bitmap), so the
    # table stays small enough for cache-friendly probes; it grows if the estimate was short.
    marks = np.zeros(1 << 20, dtype=bool)
    marks[(hashes >> np.uint64(44)).astype(np.int64)] = True
    vacant = (1 << 20) - int(np.count_nonzero(marks))
    estimate = n if vacant == 0 else min(n, (1 << 20) * math.log((1 << 20) / vacant) + 1.0)
    bits = max(10, math.ceil(math.log2(2.5 * estimate + 1.0)))
    while True:
        size = 1 << bits
        owner = np.full(size, n, dtype=np.int64)
        owner_key = np.zeros(size, dtype=np.uint64)
        slot = (hashes >> np.uint64(64 - bits)).astype(np.int64)
        # First round: the table is empty, so every row's slot goes to the lowest row probing it.
        np.minimum.at(owner, slot, np.arange(n))
        taken = np.flatnonzero(owner < n)
        if 2 * taken.shape[0] > size:
            bits += 2
            continue
        owner_key[taken] = keys[owner[taken]]
        same = owner_key[slot] == keys
        resolved = np.where(same, slot, -1)
        todo = np.flatnonzero(~same)
        full = False
        while todo.size:
            probe = (slot[todo] + 1) & (size - 1)
            slot[todo] = probe
            empty = owner[probe] == n
            if empty.any():
                claimed = probe[empty]
                np.minimum.at(owner, claimed, todo[empty])
                owner_key[claimed] = keys[owner[claimed]]
                if 2 * int(np.count_nonzero(owner < n)) > size:
                    full = True
                    break
            same = owner_key[probe] == keys[todo]
            resolved[todo[same]] = probe[same]
            todo = todo[~same]
        if not full:
            break
        bits += 2
    used = np.flatnonzero(owner < n)
    codes, first = _number_by_first(resolved, used, owner[used], size)
    if not exact and not np.array_equal(words[first[codes]], words):
        # Two different ids with one 64-bit hash: number them by a sort instead.
        _, inverse = np.unique(words, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        first_of = np.full(n, n, dtype=np.int64)
        np.minimum.at(first_of, inverse, np.arange(n))
        used = np.flatnonzero(first_of < n)
        return _number_by_first(inverse, used, first_of[used], n)
    return codes, first


def _number_by_first(key: np.ndarray, used: np.ndarray, first: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(first, kind="stable")
    code_of = np.full(size, -1, dtype=np.int64)
    code_of[used[order]] = np.arange(used.shape[0])
    return code_of[key], first[order]


def first_appearance_codes(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (codes, unique ids) numbering a ``str`` id array by first appearance (by a sort: small inputs)."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
    uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    code_of_sorted = np.empty(uniq.size, dtype=np.int64)
    code_of_sorted[order] = np.arange(uniq.size)
    return code_of_sorted[inverse.reshape(-1)], uniq[order].astype(object)


def reject_blank_ids(ids: np.ndarray, name: str) -> None:
    """Raise naming the first empty (or blank) id of a ``str`` id array."""
    blank = np.flatnonzero(np.char.str_len(np.char.strip(ids)) == 0) if ids.size else ids
    if blank.size:
        raise ValueError(f"{name} contains an empty id at index {int(blank[0])}")
