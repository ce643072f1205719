"""Rank codes: beside a numeric run file, the rank bucket of every event's entry, by seq.

The planner tests the few candidates a tight block has left (a few hundred to a few
thousand events) against a member's index lookup, which holds hundreds of thousands of seqs
in the run file's key order. Without help that test is one pass over all of the lookup's
seqs, or a read of each candidate's value in the data pages (its leaf, page header and value
are cache misses in a gigabyte-sized map).

A run file's entries are sorted by (key, seq), so the entries a key range selects are one run
of consecutive positions (ranks) ``[r0, r1)`` of the file. The *rank code* of the entry at
rank ``r`` of a file of ``n`` entries is its bucket ``r * BUCKETS // n``; the codes file
holds, for every seq of ``[seq_min, seq_max]`` of the run file, the code of that seq's entry
(:data:`ABSENT` for a seq without one), two bytes a seq. A candidate ``s`` is then tested by
one read of ``codes[s - seq_min]``: a bucket wholly inside ``[r0, r1)`` is a hit, one wholly
outside a miss, and only a candidate in one of the two buckets the range's ends cut (at most
``n / BUCKETS + 1`` entries each: 153 on 10M) is looked up among that bucket's seqs in the
file. Exact, whatever the key's distribution; O(candidates), a cache miss each in a map of
two bytes per event.

Decisions:

* One codes file per run file (``<run file>.codes``), written by :func:`write_codes` from the
  file's entries just after the file itself (before the Delta commit that makes the file
  visible) and never changed: it lives and dies with its run file (vacuum removes both), so
  a snapshot pinned at any version reads codes that match its files. It is not in the Delta
  log (it is not Parquet): a reader that does not know it ignores it.
* Only numeric keys in the plain layout (the planner's exact checks read the lookup's own
  seqs where they lie in the file: the ranks of a cut bucket that the range keeps are the
  lookup's first or last), and only when the file's seqs are dense enough: a span of at most
  :data:`MAX_SPAN_PER_ENTRY` seqs per entry (a run split by key into parts has entries for a
  share of the seqs it spans; the codes of many parts would outweigh the index).
* A missing, short or mismatched codes file (another version, another file's header) is not
  an error: :func:`open_codes` answers None and the planner scans the lookup's seqs as
  before. :func:`check_codes` (the index's invariant check) rebuilds the codes from the file
  and compares.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np

from replaydb.indexes.plainread import release_map

BUCKETS = 65535
"""Rank buckets of a file (codes ``0 .. BUCKETS - 1``)."""
ABSENT = 65535
"""The code of a seq the file holds no entry for."""
MAX_SPAN_PER_ENTRY = 4
"""Codes are written only for a file whose seqs span at most this many seqs per entry."""
SUFFIX = ".codes"
_MAGIC = b"RDBRANK1"
_HEADER = struct.Struct("<8sqqqq")  # magic, buckets, n, seq_min, span
HEADER_BYTES = 64


def codes_name(run_file: str) -> str:
    """The codes file's name beside run file ``run_file``."""
    return run_file + SUFFIX


def run_of_codes(name: str) -> str | None:
    """The run file a codes file's name belongs to (None: not a codes file's name)."""
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else None


@nb.njit(cache=True, nogil=True)
def _fill(seq: np.ndarray, seq_min: int, buckets: int, out: np.ndarray) -> bool:
    """``out[seq[r] - seq_min] = r * buckets // n`` for every rank ``r`` (``out`` filled with
    :data:`ABSENT` first); False when a seq lies outside ``out`` or repeats."""
    n = seq.size
    for i in range(out.size):
        out[i] = ABSENT
    for r in range(n):
        j = seq[r] - seq_min
        if j < 0 or j >= out.size or out[j] != ABSENT:
            return False
        out[j] = (np.int64(r) * buckets) // n
    return True


def build_codes(seq: np.ndarray, seq_min: int, seq_max: int) -> np.ndarray | None:
    """The codes of a file whose entries have seqs ``seq`` in file (rank) order, over
    ``[seq_min, seq_max]``; None when they are not worth keeping (no entries, a span over
    :data:`MAX_SPAN_PER_ENTRY` seqs per entry) or a seq repeats. O(span)."""
    n = int(seq.size)
    span = int(seq_max) - int(seq_min) + 1
    if n == 0 or span > MAX_SPAN_PER_ENTRY * n:
        return None
    out = np.empty(span, np.uint16)
    ok = _fill(np.ascontiguousarray(seq, dtype=np.int64), int(seq_min), BUCKETS, out)
    return out if ok else None


def write_codes(directory: str, run_file: str, seq: np.ndarray, seq_min: int, seq_max: int,
                *, fsync: bool = False) -> str | None:
    """Write the codes of run file ``run_file`` (entries' seqs ``seq`` in rank order) beside
    it: into a temporary name, then renamed (a reader sees a whole file or none). Returns the
    codes file's name, or None when :func:`build_codes` keeps none. O(span)."""
    codes = build_codes(seq, seq_min, seq_max)
    if codes is None:
        return None
    name = codes_name(run_file)
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    head = _HEADER.pack(_MAGIC, BUCKETS, int(seq.size), int(seq_min), int(codes.size))
    with open(tmp, "wb") as f:
        f.write(head.ljust(HEADER_BYTES, b"\0"))
        f.write(codes.tobytes())
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    return name


@dataclass
class RankCodes:
    """The codes of one run file, memory-mapped: ``codes[s - seq_min]`` for seqs
    ``[seq_min, seq_min + span)``, of a file of ``n`` entries. ``close`` releases the map
    (then :attr:`codes` is empty, and :func:`members_by_codes` answers None)."""

    codes: np.ndarray
    n: int
    seq_min: int
    span: int
    _mm: Any = None

    def close(self) -> None:
        self.codes = np.empty(0, np.uint16)
        release_map(self._mm)
        self._mm = None


def open_codes(directory: str, meta: Any) -> RankCodes | None:
    """The codes of run file ``meta`` (a :class:`.runfile.RunFileMeta`), or None when it has
    none usable: no codes file, a header that does not match the file (entries, seqs,
    buckets) or a file of another size. O(1) (a map of the file)."""
    if meta.n == 0:
        return None
    path = os.path.join(directory, codes_name(meta.name))
    span = int(meta.seq_max) - int(meta.seq_min) + 1
    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) != HEADER_BYTES + 2 * span:
                return None
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError:
        return None
    magic, buckets, n, seq_min, got_span = _HEADER.unpack_from(mm, 0)
    if (magic != _MAGIC or buckets != BUCKETS or n != meta.n or seq_min != meta.seq_min
            or got_span != span):
        mm.close()
        return None
    codes = np.frombuffer(mm, np.uint16, count=span, offset=HEADER_BYTES)
    return RankCodes(codes, int(n), int(seq_min), span, mm)


def check_codes(rc: RankCodes, seq: np.ndarray) -> list[str]:
    """Problems of codes ``rc`` against its file's seqs ``seq`` in rank order (empty when
    they are the codes :func:`build_codes` makes of them). O(span)."""
    want = build_codes(seq, rc.seq_min, rc.seq_min + rc.codes.size - 1)
    if want is None:
        return ["rank codes kept for a file that should have none"]
    if rc.n != seq.size:
        return [f"rank codes for {rc.n} entries, the file holds {seq.size}"]
    bad = np.flatnonzero(want != rc.codes)
    if bad.size:
        return [f"rank codes differ from the file at {bad.size} seqs (first: seq "
                f"{rc.seq_min + int(bad[0])})"]
    return []


@nb.njit(cache=True, nogil=True)
def _seq_at(buf: np.ndarray, offsets: np.ndarray, counts: np.ndarray, p: int) -> int:
    """The int64 at position ``p`` of spans ``(offsets, counts)`` of ``buf``; -1 when ``p``
    or its span lies outside them."""
    for k in range(offsets.size):
        c = counts[k]
        if p < c:
            o = offsets[k]
            if o < 0 or o + 8 * (p + 1) > buf.size:
                return -1
            return buf[o + 8 * p:o + 8 * (p + 1)].view(np.int64)[0]
        p -= c
    return -1


@nb.njit(cache=True, nogil=True)
def _mark(targets: np.ndarray, codes: np.ndarray, seq_min: int, n: int, buckets: int,
          r0: int, buf: np.ndarray, offsets: np.ndarray, counts: np.ndarray, size: int,
          hit: np.ndarray) -> int:
    """Set ``hit[i]`` for every target whose entry's rank lies in ``[r0, r0 + size)``, the
    ranks of the piece whose seqs lie in spans ``(offsets, counts)`` of ``buf`` (see the
    module docstring): a target in a bucket the piece's ends cut is looked up among the
    piece's own seqs of that bucket. Returns 0, or 2 when a position lies outside the
    spans."""
    r1 = r0 + size
    span = codes.size
    for i in range(targets.size):
        x = targets[i]
        j = x - seq_min
        if j < 0 or j >= span:
            continue
        c = np.int64(codes[j])
        if c == ABSENT:
            continue
        a = (c * n + buckets - 1) // buckets
        b = ((c + 1) * n + buckets - 1) // buckets
        if a >= r0 and b <= r1:
            hit[i] = True
        elif b > r0 and a < r1:
            for r in range(max(a, r0), min(b, r1)):
                v = _seq_at(buf, offsets, counts, r - r0)
                if v < 0:
                    return 2
                if v == x:
                    hit[i] = True
                    break
    return 0


def mark_members(targets: np.ndarray, rc: RankCodes, piece: Any, hit: np.ndarray) -> bool:
    """Set ``hit[i]`` where ``targets[i]`` is among the seqs of ``piece`` (a
    :class:`.plainread.Spans` of consecutive positions from ``piece.rank0`` of the file of
    codes ``rc``). False (nothing set) when ``rc`` was closed meanwhile. O(targets + targets
    in the two cut buckets x n / BUCKETS). ValueError when the piece is not as its file's
    codes say."""
    codes = rc.codes
    if codes.size != rc.span:
        return False
    st = _mark(np.ascontiguousarray(targets, dtype=np.int64), codes, rc.seq_min, rc.n,
               BUCKETS, int(piece.rank0), piece.buf, piece.offsets, piece.counts,
               int(piece.size), hit)
    if st:
        raise ValueError("rank codes: a rank lies outside the lookup's seqs")
    return True


def coded(pieces: list[Any]) -> bool:
    """Whether every piece of a lookup is a range of consecutive positions of a run file
    with rank codes (:meth:`.plainread.Spans.placed`): then :func:`members_by_codes` tests
    events against the lookup."""
    return bool(pieces) and all(getattr(p, "codes", None) is not None
                                and getattr(p, "rank0", -1) >= 0 for p in pieces)


def members_by_codes(targets: np.ndarray, pieces: list[Any]) -> np.ndarray | None:
    """Which of ``targets`` (distinct integers) are among the seqs of ``pieces`` (all
    :func:`coded`): a boolean per target, as :func:`.membership.members_in_pieces` answers,
    from each piece's file's rank codes instead of a pass over its seqs; None when a file's
    codes were closed meanwhile (its file left the cache: test another way). O(targets x
    pieces + targets in cut buckets x n / BUCKETS): a code read per target and piece, mostly
    a cache and TLB miss in a map of two bytes per event, which the planner prices by
    :meth:`.membership.MemberTestCosts.codes_ns` against the cheaper of the scan and the
    bitmap (:func:`.membership.member_test_ns`)."""
    x = np.ascontiguousarray(targets, dtype=np.int64)
    hit = np.zeros(x.size, np.bool_)
    for p in pieces:
        if not mark_members(x, p.codes, p, hit):
            return None
    return hit
