"""Partition ids: stable, first-appearance order, any key type, across batches."""

from __future__ import annotations

import numpy as np

from replaydb.operators.tpstream import partitions
from replaydb.operators.tpstream.partitions import PartitionMap


def reference(batches: list[list[np.ndarray]]) -> list[np.ndarray]:
    ids: dict[tuple, int] = {}
    out = []
    for cols in batches:
        row_ids = []
        for r in range(len(cols[0])):
            key = tuple(c[r].item() if hasattr(c[r], "item") else c[r] for c in cols)
            row_ids.append(ids.setdefault(key, len(ids)))
        out.append(np.array(row_ids, np.int64))
    return out


def check_consistent(batches: list[list[np.ndarray]], got: list[np.ndarray]) -> None:
    """Same key <=> same id, ids dense, and keys of earlier batches have smaller ids."""
    id_of: dict[int, int] = {}
    for cols, ids in zip(batches, got):
        before = len(id_of)
        for k, i in zip(cols[0].tolist(), ids.tolist()):
            if k in id_of:
                assert id_of[k] == i
            else:
                assert i >= before
                id_of[k] = i
    assert sorted(id_of.values()) == list(range(len(id_of)))


def test_integer_keys_dense_sparse_and_growing(monkeypatch) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    for lut_max in (1 << 22, 64):          # the lookup table and the sorted-array fallback
        monkeypatch.setattr(partitions, "LUT_MAX", lut_max)
        for _ in range(20):
            batches = []
            base = int(rng.integers(-1000, 1000))
            for _ in range(int(rng.integers(1, 6))):
                n = int(rng.integers(1, 300))
                spread = int(rng.choice([5, 50, 5000, 10**9]))
                base += int(rng.integers(-3, 20))
                batches.append([rng.integers(base, base + spread, n).astype(np.int64)])
            pm = PartitionMap(("k",))
            got = [pm.ids(b) for b in batches]
            check_consistent(batches, got)
            st = pm.get_state()
            pm2 = PartitionMap(("k",))
            pm2.set_state(st)
            extra = [rng.integers(base - 10, base + 10, 50).astype(np.int64)]
            assert pm2.ids(extra).tolist() == pm.ids(extra).tolist()


def test_string_and_composite_keys() -> None:
    rng = np.random.default_rng(1)
    words = np.array(["a", "b", "c", "dd", None], dtype=object)
    batches = [[words[rng.integers(0, 5, 40)], rng.integers(0, 3, 40)] for _ in range(4)]
    pm = PartitionMap(("w", "i"))
    got = [pm.ids(b) for b in batches]
    for g, e in zip(got, reference(batches)):
        assert g.tolist() == e.tolist()
    import pyarrow as pa

    vals = pm.arrow_values([pa.string(), pa.int64()])
    key_of = {}
    for cols, ids in zip(batches, got):
        for r, i in enumerate(ids):
            key_of[int(i)] = (cols[0][r], int(cols[1][r]))
    for i, (w, k) in key_of.items():
        assert vals[0][i].as_py() == w and vals[1][i].as_py() == k


def test_string_keys_from_arrow_get_the_object_paths_ids() -> None:
    """A string key column given as its Arrow array (plain or dictionary-encoded) gets the
    ids the object-array path gives - first appearance, across batches - and values back;
    with nulls it takes the object path."""
    import pyarrow as pa

    rng = np.random.default_rng(3)
    words = np.array(["ORD", "ATL", "b", "", "Ab", "x y"], dtype=object)
    for trial in range(40):
        batches = [words[rng.integers(0, len(words), int(rng.integers(1, 30)))]
                   for _ in range(int(rng.integers(1, 5)))]
        if trial % 4 == 3:  # a NULL key somewhere
            batches[0] = batches[0].copy()
            batches[0][0] = None
        want, got = PartitionMap(("k",)), PartitionMap(("k",))
        for b in batches:
            arr = pa.array(list(b), pa.string())
            if trial % 4 == 1:
                arr = arr.dictionary_encode()
            elif trial % 4 == 2:  # a dictionary in another order, with values no row uses
                dictionary = pa.array(list(rng.permutation(words)) + ["unused"], pa.string())
                codes = [None if v is None else list(dictionary.to_pylist()).index(v)
                         for v in b]
                arr = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), dictionary)
            assert np.array_equal(got.ids([arr]), want.ids([b])), trial
        assert got.arrow_values([pa.string()])[0].equals(want.arrow_values([pa.string()])[0])
