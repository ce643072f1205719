"""Property tests: the LSM index answers like a brute-force filter of its entries.

Random operation sequences (add, flush, compact, tail rewrites through seq-range tombstones)
run against a real index (Delta table on disk) and a plain dict model {seq: (key, t)}. After
the operations: random range queries (both bound flags, both orders, max_seq) equal the
model's filtered entries; count bounds hold and exact counts are exact; every committed version
read through a pinned reader equals the model at that commit; the invariant checker passes with
the model as the expected primary data.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaydb.indexes import LSMIndex, LSMOptions

KEY_TYPES = ("int64", "float64", "string")


def key_strategy(key_type: str) -> st.SearchStrategy:
    if key_type == "int64":
        return st.integers(-6, 6) | st.integers(-(2**62), 2**62)
    if key_type == "float64":
        return st.sampled_from([-1.5, -0.0, 0.0, 0.25, 1.0, 2.0]) | st.floats(
            -1e6, 1e6, allow_nan=False, allow_infinity=False
        )
    return st.text(alphabet="ab\u00e9\U0001f600", max_size=3)


def bound_strategy(key_type: str) -> st.SearchStrategy:
    return st.none() | key_strategy(key_type)


@st.composite
def scenario(draw, key_type: str):
    ops = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["add", "add", "flush", "flush", "compact", "rewrite"]))
        if kind == "add":
            ops.append(("add", draw(st.lists(key_strategy(key_type), min_size=0, max_size=25))))
        elif kind == "rewrite":
            ops.append(
                (
                    "rewrite",
                    draw(st.integers(0, 30)),
                    draw(st.lists(key_strategy(key_type), min_size=0, max_size=12)),
                )
            )
        elif kind == "compact":
            ops.append(("compact", draw(st.booleans())))
        else:
            ops.append(("flush",))
    opts = LSMOptions(
        l0_max_runs=draw(st.integers(1, 3)),
        size_ratio=2,
        l1_max_entries=draw(st.sampled_from([3, 10, 40])),
        row_group_entries=draw(st.sampled_from([1, 2, 5, 16])),
        sample_every=draw(st.sampled_from([1, 2, 7])),
        target_file_entries=draw(st.sampled_from([0, 0, 6])),
        auto_compact=draw(st.booleans()),
        seq_bins=draw(st.sampled_from([1, 4, 64])),
        threads=draw(st.sampled_from([1, 2, 3])),
        parallel_min_entries=draw(st.sampled_from([4, 1 << 21])),
    )
    queries = draw(
        st.lists(
            st.tuples(
                bound_strategy(key_type),
                bound_strategy(key_type),
                st.booleans(),
                st.booleans(),
                st.sampled_from(["key", "seq"]),
                st.none() | st.integers(0, 80),
            ),
            min_size=1,
            max_size=6,
        )
    )
    return ops, opts, queries


def _norm_key(key_type: str, k):
    if key_type == "float64":
        return float(k) + 0.0
    return k


def expected_answer(model: dict, key_type: str, lo, hi, lo_inc, hi_inc, order, max_seq):
    rows = []
    for seq, (k, t) in model.items():
        if max_seq is not None and seq >= max_seq:
            continue
        if lo is not None and (k < lo or (k == lo and not lo_inc)):
            continue
        if hi is not None and (k > hi or (k == hi and not hi_inc)):
            continue
        rows.append((k, seq, t))
    if key_type == "string":
        rows.sort(key=(lambda r: (r[0].encode(), r[1])) if order == "key" else (lambda r: r[1]))
    else:
        rows.sort(key=(lambda r: (r[0], r[1])) if order == "key" else (lambda r: r[1]))
    return rows


def model_arrays(model: dict, key_type: str):
    seqs = np.array(sorted(model), dtype=np.int64)
    keys = [model[s][0] for s in seqs.tolist()]
    ts = np.array([model[s][1] for s in seqs.tolist()], dtype=np.int64)
    if key_type != "string":
        keys = np.array(keys, dtype=key_type)
    return keys, seqs, ts


def run_scenario(tmp_path, key_type, ops, opts, queries):
    idx = LSMIndex.create(tmp_path / "ix", key_type, options=opts)
    committed: dict = {}  # model of committed state
    pending: dict = {}  # model including the memtable
    next_seq = 0
    versions = {idx.version: dict(committed)}

    def t_of(seq):
        return seq * 7 - 3

    def add(keys):
        nonlocal next_seq
        seqs = np.arange(next_seq, next_seq + len(keys), dtype=np.int64)
        arr = keys if key_type == "string" else np.array(keys, dtype=key_type)
        idx.add(arr, seqs, t_of(seqs))
        for k, s in zip(keys, seqs.tolist()):
            pending[s] = (_norm_key(key_type, k), t_of(s))
        next_seq += len(keys)

    for op in ops:
        if op[0] == "add":
            add(op[1])
        elif op[0] == "flush":
            v = idx.flush()
            committed.clear()
            committed.update(pending)
            versions[v] = dict(committed)
        elif op[0] == "compact":
            v = idx.compact(full=op[1])
            if v is not None:
                versions[v] = dict(committed)
        else:  # tail rewrite: late events change every seq from s0 on
            s0 = max(0, next_seq - op[1])
            idx.delete_from_seq(s0)
            for s in [s for s in pending if s >= s0]:
                del pending[s]
            next_seq = s0
            add(op[2])
            v = idx.flush()
            committed.clear()
            committed.update(pending)
            versions[v] = dict(committed)
    v = idx.flush()
    committed.clear()
    committed.update(pending)
    versions[v] = dict(committed)
    assert idx.memtable_entries == 0

    problems = idx.check(model_arrays(committed, key_type))
    assert problems == [], problems
    for lo, hi, lo_inc, hi_inc, order, max_seq in queries:
        res = idx.range(
            lo, hi, lo_inclusive=lo_inc, hi_inclusive=hi_inc, order=order, max_seq=max_seq
        )
        want = expected_answer(committed, key_type, lo, hi, lo_inc, hi_inc, order, max_seq)
        got = list(zip(res.key.tolist(), res.seq.tolist(), res.t.tolist()))
        assert got == want, (lo, hi, lo_inc, hi_inc, order, max_seq)
        est = idx.count(lo, hi, lo_inclusive=lo_inc, hi_inclusive=hi_inc, max_seq=max_seq)
        assert est.low <= len(want) <= est.high, (est, len(want))
        assert est.low <= est.estimate <= est.high
        ex = idx.count(
            lo, hi, lo_inclusive=lo_inc, hi_inclusive=hi_inc, max_seq=max_seq, exact=True
        )
        assert ex.low == ex.high == len(want)
    for version, state in versions.items():
        snap = idx.at_version(version)
        res = snap.range(order="seq")
        assert res.seq.tolist() == sorted(state), version
        assert snap.check(model_arrays(state, key_type)) == []
    idx.close()


@pytest.mark.parametrize("key_type", KEY_TYPES)
@settings(max_examples=25)
@given(data=st.data())
def test_index_matches_brute_force(tmp_path_factory, key_type, data):
    ops, opts, queries = data.draw(scenario(key_type))
    run_scenario(tmp_path_factory.mktemp("p"), key_type, ops, opts, queries)


@pytest.mark.slow
@pytest.mark.parametrize("key_type", KEY_TYPES)
@settings(max_examples=400)
@given(data=st.data())
def test_index_matches_brute_force_many(tmp_path_factory, key_type, data):
    ops, opts, queries = data.draw(scenario(key_type))
    run_scenario(tmp_path_factory.mktemp("p"), key_type, ops, opts, queries)
