"""Allen's 13 interval relations as TPStream uses them, with everything the algorithms derive.

A situation is a half-open interval ``[ts, te)`` with ``ts < te``. For two situations ``A`` and
``B`` exactly one of the 13 relations below holds (they are jointly exhaustive and pairwise
disjoint). Definitions follow Table 5.1 of the dissertation / Table 1 of the paper, written as
chains over the four endpoints (``A R B``):

=================  ===================================  ===========  ============================
relation           definition                           t_rmin       prefix group (t_gmin)
=================  ===================================  ===========  ============================
before             A.ts < A.te < B.ts < B.te            B.ts         {before, meets} (B.ts)
after              B.ts < B.te < A.ts < A.te            A.ts         {after, met-by} (A.ts)
meets              A.ts < A.te = B.ts < B.te            B.ts         {before, meets} (B.ts)
met-by             B.ts < B.te = A.ts < A.te            A.ts         {after, met-by} (A.ts)
overlaps           A.ts < B.ts < A.te < B.te            A.te         A.ts < B.ts group (B.ts)
overlapped-by      B.ts < A.ts < B.te < A.te            B.te         B.ts < A.ts group (A.ts)
starts             A.ts = B.ts < A.te < B.te            A.te         A.ts = B.ts group (B.ts)
started-by         A.ts = B.ts < B.te < A.te            B.te         A.ts = B.ts group (B.ts)
during             B.ts < A.ts < A.te < B.te            A.te         B.ts < A.ts group (A.ts)
contains           A.ts < B.ts < B.te < A.te            B.te         A.ts < B.ts group (B.ts)
finishes           A.ts < B.ts < A.te = B.te            A.te         A.ts < B.ts group (B.ts)
finished-by        B.ts < A.ts < A.te = B.te            A.te         B.ts < A.ts group (A.ts)
equals             A.ts = B.ts < A.te = B.te            A.te         A.ts = B.ts group (B.ts)
=================  ===================================  ===========  ============================

**The "finishes" convention.** Both documents define ``A finishes B`` as
``A.ts < B.ts < A.te = B.te`` (A starts first, both end together). In the textbook Allen algebra
that configuration is called "A is finished by B". replaydb follows the documents, so a query
written against the paper means what its authors meant: ``finishes`` here is the *documents'*
relation (``A`` starts first) and ``finished-by`` its inverse (``B`` starts first). The aggressive
drivers query (``B contains;finishes;overlaps;meets C``) reads naturally under this convention:
every alternative has the speeding phase ``B`` start before the braking phase ``C``.

**Earliest detection time** ``t_rmin`` is the third endpoint of the chain: the order of the
fourth is implied by the third. **Prefix groups** share the first two endpoints of their chains;
a constraint containing a whole group can be detected at the group's second start (t_gmin),
because at that point every continuation still satisfies one of the group's relations.

**Initial selectivities** (Table 5.3): before 0.445, during 0.03, overlaps 0.01,
starts/finishes/meets 0.0049, equals 0.0006; a relation and its inverse alike (they sum to 1).

Complexity: every function here is O(1) per pair of situations (vectorized over arrays).
"""

from __future__ import annotations

import numpy as np

RELATIONS: tuple[str, ...] = (
    "before", "after", "meets", "met-by", "overlaps", "overlapped-by", "starts", "started-by",
    "during", "contains", "finishes", "finished-by", "equals",
)
"""Canonical names; a relation's index in this tuple is its id (bit in a relation mask)."""

BEFORE, AFTER, MEETS, MET_BY, OVERLAPS, OVERLAPPED_BY, STARTS, STARTED_BY, DURING, CONTAINS, \
    FINISHES, FINISHED_BY, EQUALS = range(13)

REL_ID: dict[str, int] = {name: i for i, name in enumerate(RELATIONS)}

INVERSE: tuple[int, ...] = (
    AFTER, BEFORE, MET_BY, MEETS, OVERLAPPED_BY, OVERLAPS, STARTED_BY, STARTS, CONTAINS, DURING,
    FINISHED_BY, FINISHES, EQUALS,
)
"""``A R B`` holds iff ``B INVERSE[R] A`` holds."""

DEFINITIONS: dict[str, str] = {
    "before": "A.ts < A.te < B.ts < B.te",
    "after": "B.ts < B.te < A.ts < A.te",
    "meets": "A.ts < A.te = B.ts < B.te",
    "met-by": "B.ts < B.te = A.ts < A.te",
    "overlaps": "A.ts < B.ts < A.te < B.te",
    "overlapped-by": "B.ts < A.ts < B.te < A.te",
    "starts": "A.ts = B.ts < A.te < B.te",
    "started-by": "A.ts = B.ts < B.te < A.te",
    "during": "B.ts < A.ts < A.te < B.te",
    "contains": "A.ts < B.ts < B.te < A.te",
    "finishes": "A.ts < B.ts < A.te = B.te",
    "finished-by": "B.ts < A.ts < A.te = B.te",
    "equals": "A.ts = B.ts < A.te = B.te",
}
"""The documents' endpoint chains (``A R B``)."""

T_RMIN: dict[str, tuple[str, str]] = {
    "before": ("B", "ts"), "after": ("A", "ts"), "meets": ("B", "ts"), "met-by": ("A", "ts"),
    "overlaps": ("A", "te"), "overlapped-by": ("B", "te"), "starts": ("A", "te"),
    "started-by": ("B", "te"), "during": ("A", "te"), "contains": ("B", "te"),
    "finishes": ("A", "te"), "finished-by": ("A", "te"), "equals": ("A", "te"),
}
"""Earliest detection time of ``A R B``: the endpoint (symbol, ts|te) that is t3 of the chain."""

SELECTIVITY: dict[str, float] = {
    "before": 0.445, "after": 0.445, "during": 0.03, "contains": 0.03, "overlaps": 0.01,
    "overlapped-by": 0.01, "starts": 0.0049, "started-by": 0.0049, "finishes": 0.0049,
    "finished-by": 0.0049, "meets": 0.0049, "met-by": 0.0049, "equals": 0.0006,
}
"""Table 5.3 initial selectivity estimates (a relation and its inverse alike)."""

SELECTIVITY_BY_ID = np.array([SELECTIVITY[r] for r in RELATIONS], dtype=np.float64)

# Prefix groups of relations seen from A (t_gmin is the later start) ---------------------------
GROUP_SEQ_AB = (1 << BEFORE) | (1 << MEETS)              # A.ts < A.te <= B.ts   -> B.ts
GROUP_SEQ_BA = (1 << AFTER) | (1 << MET_BY)              # B.ts < B.te <= A.ts   -> A.ts
GROUP_EQ = (1 << STARTS) | (1 << EQUALS) | (1 << STARTED_BY)        # A.ts = B.ts  -> B.ts
GROUP_LT = (1 << OVERLAPS) | (1 << FINISHES) | (1 << CONTAINS)      # A.ts < B.ts  -> B.ts
GROUP_GT = (1 << OVERLAPPED_BY) | (1 << FINISHED_BY) | (1 << DURING)  # B.ts < A.ts -> A.ts
PREFIX_GROUPS: dict[str, int] = {
    "A.ts < A.te <= B.ts": GROUP_SEQ_AB,
    "B.ts < B.te <= A.ts": GROUP_SEQ_BA,
    "A.ts = B.ts": GROUP_EQ,
    "A.ts < B.ts": GROUP_LT,
    "B.ts < A.ts": GROUP_GT,
}
"""Prefix groups as relation masks (seen from A). For two situations that have both started and
are both still ongoing, the possible relations are exactly one of GROUP_EQ / GROUP_LT / GROUP_GT
(chosen by comparing their starts)."""

ONGOING_GROUPS = np.array([GROUP_EQ, GROUP_LT, GROUP_GT], dtype=np.int64)
"""Indexed by ``0 if A.ts == B.ts else 1 if A.ts < B.ts else 2``."""

ALL_MASK = (1 << 13) - 1

_ALIASES: dict[str, str] = {}
for _r in RELATIONS:
    _ALIASES[_r] = _r
    _ALIASES[_r.replace("-", "")] = _r
    _ALIASES[_r.replace("-", "_")] = _r
    _ALIASES[_r.replace("-", " ")] = _r
_ALIASES["equal"] = "equals"


def canonical(name: str) -> str | None:
    """The canonical relation name for a spelling (``'met by'``, ``'met_by'``, ``'equal'``...)."""
    return _ALIASES.get(" ".join(name.lower().split()))


def relation_words() -> frozenset[str]:
    """Every accepted single-word spelling (lower case)."""
    return frozenset(w for w in _ALIASES if " " not in w)


def mask_of(relations: object) -> int:
    """Relation mask (bit ``i`` = relation ``i``) of an iterable of names or ids."""
    m = 0
    for r in relations:  # type: ignore[attr-defined]
        m |= 1 << (REL_ID[r] if isinstance(r, str) else int(r))
    return m


def names_of(mask: int) -> tuple[str, ...]:
    """Canonical names in a mask, in :data:`RELATIONS` order."""
    return tuple(r for i, r in enumerate(RELATIONS) if mask >> i & 1)


def inverse_mask(mask: int) -> int:
    """The mask of the inverse relations (``A m B`` <=> ``B inverse_mask(m) A``)."""
    out = 0
    for i in range(13):
        if mask >> i & 1:
            out |= 1 << INVERSE[i]
    return out


def selectivity(mask: int) -> float:
    """Initial selectivity of a constraint (Eq. 5.5): the sum over its relations."""
    return float(sum(SELECTIVITY_BY_ID[i] for i in range(13) if mask >> i & 1))


def classify(a_ts: np.ndarray, a_te: np.ndarray, b_ts: np.ndarray, b_te: np.ndarray) -> np.ndarray:
    """Relation id of ``A R B`` for arrays of situations (vectorized; endpoints broadcast).

    Requires ``ts < te`` on both sides. Ends may be a large sentinel (an ongoing situation whose
    end is only known to lie in the future): every comparison with it then comes out "later".
    """
    a_ts, a_te, b_ts, b_te = np.broadcast_arrays(*(np.asarray(x) for x in (a_ts, a_te, b_ts, b_te)))
    out = np.empty(a_ts.shape, dtype=np.int64)
    before = a_te < b_ts
    meets = a_te == b_ts
    after = b_te < a_ts
    met_by = b_te == a_ts
    inner = ~(before | meets | after | met_by)
    s_eq, s_lt = a_ts == b_ts, a_ts < b_ts
    e_eq, e_lt = a_te == b_te, a_te < b_te
    out[before] = BEFORE
    out[meets] = MEETS
    out[after] = AFTER
    out[met_by] = MET_BY
    sel = inner & s_eq
    out[sel & e_eq] = EQUALS
    out[sel & e_lt] = STARTS
    out[sel & ~e_eq & ~e_lt] = STARTED_BY
    sel = inner & s_lt
    out[sel & e_eq] = FINISHES
    out[sel & e_lt] = OVERLAPS
    out[sel & ~e_eq & ~e_lt] = CONTAINS
    sel = inner & ~s_eq & ~s_lt
    out[sel & e_eq] = FINISHED_BY
    out[sel & e_lt] = DURING
    out[sel & ~e_eq & ~e_lt] = OVERLAPPED_BY
    return out


def holds(relation: str | int, a_ts, a_te, b_ts, b_te) -> np.ndarray:  # noqa: ANN001
    """Whether ``A relation B`` holds (vectorized)."""
    rid = REL_ID[relation] if isinstance(relation, str) else int(relation)
    return classify(a_ts, a_te, b_ts, b_te) == rid


def t_rmin_value(relation: str, a_ts: int, a_te: int, b_ts: int, b_te: int) -> int:
    """The value of ``t_rmin`` for a pair that satisfies ``relation``."""
    sym, end = T_RMIN[relation]
    return {("A", "ts"): a_ts, ("A", "te"): a_te, ("B", "ts"): b_ts, ("B", "te"): b_te}[(sym, end)]
