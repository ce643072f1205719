"""The 13 relations: definitions, range queries, t_rmin, prefix groups, selectivities."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from replaydb.operators.tpstream import kernel, oracle
from replaydb.operators.tpstream import relations as R


def intervals(limit: int = 7) -> list[tuple[int, int]]:
    return [(s, e) for s in range(limit) for e in range(s + 1, limit)]


def test_exactly_one_relation_holds_and_classify_agrees_with_the_documents_chains() -> None:
    for a, b in itertools.product(intervals(), repeat=2):
        holding = [r for r in range(13) if oracle.relation_holds(r, a, b)]
        assert len(holding) == 1, (a, b, holding)
        assert int(R.classify(a[0], a[1], b[0], b[1])) == holding[0]
        assert kernel.classify(a[0], a[1], b[0], b[1]) == holding[0]


def test_inverse_relations() -> None:
    for a, b in itertools.product(intervals(6), repeat=2):
        r = int(R.classify(*a, *b))
        assert int(R.classify(*b, *a)) == R.INVERSE[r]
    assert all(R.INVERSE[R.INVERSE[i]] == i for i in range(13))


def test_finishes_follows_the_documents_convention() -> None:
    # documents: A finishes B  <=>  A.ts < B.ts < A.te = B.te  (A starts first)
    assert R.RELATIONS[int(R.classify(0, 5, 2, 5))] == "finishes"
    # the textbook "A finishes B" (A starts later, same end) is finished-by here
    assert R.RELATIONS[int(R.classify(2, 5, 0, 5))] == "finished-by"
    assert R.DEFINITIONS["finishes"] == "A.ts < B.ts < A.te = B.te"


def test_range_queries_return_exactly_the_matching_candidates() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        # a buffer of disjoint situations sorted by ts (= by te)
        k = int(rng.integers(0, 9))
        ts, te, cur = [], [], int(rng.integers(0, 3))
        for _ in range(k):
            s = cur + int(rng.integers(0, 3))
            e = s + int(rng.integers(1, 4))
            ts.append(s)
            te.append(e)
            cur = e
        ts_a, te_a = np.array(ts, np.int64), np.array(te, np.int64)
        a_s = int(rng.integers(0, max(cur, 1) + 2))
        a_e = a_s + int(rng.integers(1, 6))
        lo = int(rng.integers(0, k + 1))
        hi = int(rng.integers(lo, k + 1))
        for r in range(13):
            x1, x2 = kernel.rel_range(r, a_s, a_e, ts_a, te_a, lo, hi)
            got = set(range(x1, x2))
            exp = {q for q in range(lo, hi) if oracle.relation_holds(r, (a_s, a_e), (ts[q], te[q]))}
            assert got == exp, (R.RELATIONS[r], (a_s, a_e), ts, te, lo, hi)


def test_range_queries_with_an_ongoing_bound_situation() -> None:
    # an ongoing A (end later than anything): only relations with A.te after B.te can match
    ts = np.array([0, 4, 8], np.int64)
    te = np.array([2, 6, 9], np.int64)
    inf = np.iinfo(np.int64).max
    for r in range(13):
        x1, x2 = kernel.rel_range(r, 3, inf, ts, te, 0, 3)
        exp = {q for q in range(3) if oracle.relation_holds(r, (3, 10**18), (ts[q], te[q]))}
        assert set(range(x1, x2)) == exp


@pytest.mark.parametrize("name", R.RELATIONS)
def test_t_rmin_is_the_third_endpoint_of_the_chain(name: str) -> None:
    chain = R.DEFINITIONS[name].split()
    third = chain[4]
    sym, end = R.T_RMIN[name]
    assert third == f"{sym}.{end}"


def test_prefix_groups_share_their_first_two_endpoints() -> None:
    for group in (R.GROUP_EQ, R.GROUP_LT, R.GROUP_GT, R.GROUP_SEQ_AB, R.GROUP_SEQ_BA):
        names = R.names_of(group)
        heads = {tuple(R.DEFINITIONS[n].split()[:3]) for n in names}
        if group in (R.GROUP_SEQ_AB, R.GROUP_SEQ_BA):   # A.ts < A.te <= B.ts (< or =)
            heads = {tuple(R.DEFINITIONS[n].split()[:2]) for n in names}
        assert len(heads) == 1, names
    # the three overlap groups partition the nine relations where both intervals intersect
    assert R.GROUP_EQ | R.GROUP_LT | R.GROUP_GT == R.ALL_MASK & ~(
        R.GROUP_SEQ_AB | R.GROUP_SEQ_BA)


def test_selectivities_table_5_3() -> None:
    assert R.SELECTIVITY["before"] == 0.445
    assert R.SELECTIVITY["during"] == R.SELECTIVITY["contains"] == 0.03
    assert R.SELECTIVITY["overlaps"] == 0.01
    assert R.SELECTIVITY["meets"] == R.SELECTIVITY["starts"] == R.SELECTIVITY["finishes"] == 0.0049
    assert R.SELECTIVITY["equals"] == 0.0006
    assert abs(sum(R.SELECTIVITY.values()) - 1.0) < 1e-9
    for i in range(13):
        assert R.SELECTIVITY[R.RELATIONS[i]] == R.SELECTIVITY[R.RELATIONS[R.INVERSE[i]]]


def test_spellings() -> None:
    assert R.canonical("met by") == "met-by"
    assert R.canonical("MET_BY") == "met-by"
    assert R.canonical("metby") == "met-by"
    assert R.canonical("equal") == "equals"
    assert R.canonical("overlapped   by") == "overlapped-by"
    assert R.canonical("sometimes") is None
    assert R.inverse_mask(R.mask_of(["before", "finishes"])) == R.mask_of(["after", "finished-by"])
