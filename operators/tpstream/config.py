"""Frozen configuration of the TPStream operator (what a parsed and bound query becomes).

Durations and the window are in the stream's time unit (int64). Conditions are
:mod:`replaydb.operators.expr` trees over the input stream's attributes (optionally qualified by
the stream alias).
"""

from __future__ import annotations

from dataclasses import dataclass

from replaydb.errors import QueryError
from replaydb.operators.expr import Expr
from replaydb.operators.tpstream.relations import REL_ID, canonical, mask_of

AGGREGATES = ("first", "last", "count", "sum", "avg", "min", "max")
"""RETURN aggregates over the events of one situation (Listing 5.1)."""

MODES = ("normal", "low_latency")
END_POLICIES = ("drop", "close")
ORDERS = ("adaptive", "static")


@dataclass(frozen=True)
class SituationDef:
    """``name AS condition [AT LEAST min | AT MOST max | BETWEEN min AND max]``.

    ``min_duration`` / ``max_duration`` are inclusive bounds on ``te - ts`` in stream units.
    """

    name: str
    condition: Expr
    min_duration: int | None = None
    max_duration: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise QueryError("a situation needs a name")
        for v in (self.min_duration, self.max_duration):
            if v is not None and v < 0:
                raise QueryError(f"situation {self.name}: negative duration bound {v}")
        if (self.min_duration is not None and self.max_duration is not None
                and self.min_duration > self.max_duration):
            raise QueryError(f"situation {self.name}: AT LEAST {self.min_duration} exceeds "
                             f"AT MOST {self.max_duration}; no situation can qualify")


@dataclass(frozen=True)
class Constraint:
    """``left r1;r2;... right``: a disjunction of relations between two situation streams."""

    left: str
    right: str
    relations: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.left == self.right:
            raise QueryError(f"a temporal constraint relates two different situations, "
                             f"got {self.left} with itself")
        if not self.relations:
            raise QueryError(f"constraint {self.left} .. {self.right} has no relation")
        names = []
        for r in self.relations:
            c = canonical(r)
            if c is None:
                raise QueryError(f"unknown temporal relation {r!r}")
            names.append(c)
        object.__setattr__(self, "relations", tuple(dict.fromkeys(names)))

    @property
    def mask(self) -> int:
        return mask_of(REL_ID[r] for r in self.relations)


@dataclass(frozen=True)
class ReturnItem:
    """``func(symbol.attr) AS alias``; ``attr`` None means ``count(symbol)`` (all events)."""

    func: str
    symbol: str
    attr: str | None
    alias: str

    def __post_init__(self) -> None:
        f = self.func.lower()
        if f not in AGGREGATES:
            raise QueryError(f"unknown RETURN aggregate {self.func!r}",
                             hint=f"use one of {', '.join(AGGREGATES)}")
        if self.attr is None and f != "count":
            raise QueryError(f"{f}({self.symbol}) needs an attribute: {f}({self.symbol}.attr)")
        object.__setattr__(self, "func", f)


@dataclass(frozen=True)
class TPStreamConfig:
    """Everything the TPStream operator needs.

    ``situations``: the DEFINE clause (order = symbol order in results). Every defined situation
    takes part in each match (Def. 5.6: one situation per stream); pairs without a constraint are
    free. ``constraints``: the PATTERN (conjunction). Several constraints on the same pair are
    intersected (each is a disjunction over pairwise exclusive relations).
    ``window``: WITHIN, in stream units: ``detection_time - min(ts) <= window`` where the
    detection time is ``max(te)`` in normal mode (exactly Def. 5.7) and the earliest detection
    time in low-latency mode (see :mod:`replaydb.operators.tpstream.lowlatency`).
    ``mode``: ``"normal"`` (match on situation ends, Alg. 5.2) or ``"low_latency"`` (Alg. 5.4).
    ``order``: ``"adaptive"`` (cost model + EMA statistics + re-planning), ``"static"`` (the initial
    cost-based plan, never re-planned) or a tuple of symbol names giving a fixed priority order.
    ``end_policy``: what flush() does with situations still open at the end of input:
    ``"drop"`` (default; their end is unknown, Def. 5.2 needs a terminating event) or ``"close"``
    (they end with the partition's last event: ``te = t_last + 1`` unit).
    ``alpha`` / ``threshold``: EMA smoothing factor and re-planning threshold (paper: 0.01, 0.2).
    ``use_triggers``: low-latency mode only runs the matcher for trigger situations (t_rmin
    analysis); False runs it on every start and end (same results, for testing).
    ``initial_buffer``: buffer size assumed for the initial plan (all streams alike).
    ``cost_model``: ``"calls"`` (default) or ``"paper"`` (Eq. 5.2 as printed); see
    :mod:`.evaluation_order`.
    """

    situations: tuple[SituationDef, ...]
    constraints: tuple[Constraint, ...]
    window: int
    returns: tuple[ReturnItem, ...] = ()
    partition_by: tuple[str, ...] = ()
    mode: str = "normal"
    order: str | tuple[str, ...] = "adaptive"
    end_policy: str = "drop"
    alpha: float = 0.01
    threshold: float = 0.2
    use_triggers: bool = True
    stream_alias: str | None = None
    initial_buffer: float = 100.0
    cost_model: str = "calls"

    def __post_init__(self) -> None:
        object.__setattr__(self, "situations", tuple(self.situations))
        object.__setattr__(self, "constraints", tuple(self.constraints))
        object.__setattr__(self, "returns", tuple(self.returns))
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        if not self.situations:
            raise QueryError("TPStream needs at least one situation definition")
        if len(self.situations) > 16:
            raise QueryError(f"at most 16 situation streams are supported, got "
                             f"{len(self.situations)}")
        names = [s.name for s in self.situations]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise QueryError(f"situation {sorted(dup)[0]} is defined twice")
        for c in self.constraints:
            for n in (c.left, c.right):
                if n not in names:
                    raise QueryError(f"PATTERN refers to undefined situation {n}")
        for r in self.returns:
            if r.symbol not in names:
                raise QueryError(f"RETURN refers to undefined situation {r.symbol}")
        aliases = [r.alias for r in self.returns]
        dup = {a for a in aliases if aliases.count(a) > 1}
        if dup:
            raise QueryError(f"RETURN name {sorted(dup)[0]} is used twice")
        if self.window < 0:
            raise QueryError(f"WITHIN must not be negative, got {self.window}")
        if self.mode not in MODES:
            raise QueryError(f"unknown mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.end_policy not in END_POLICIES:
            raise QueryError(f"unknown end policy {self.end_policy!r}; use drop or close")
        if isinstance(self.order, str):
            if self.order not in ORDERS:
                raise QueryError(f"unknown order {self.order!r}; use adaptive, static or a "
                                 f"tuple of situation names")
        else:
            order = tuple(self.order)
            object.__setattr__(self, "order", order)
            if sorted(order) != sorted(names):
                raise QueryError(f"a fixed order must list every situation once: {names}")
        if self.cost_model not in ("calls", "paper"):
            raise QueryError("cost_model must be 'calls' or 'paper'")
        if not 0 < self.alpha <= 1:
            raise QueryError("alpha must be in (0, 1]")
        if self.threshold <= 0:
            raise QueryError("threshold must be positive")

    # ------------------------------------------------------------------ derived views
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.situations)

    @property
    def n_streams(self) -> int:
        return len(self.situations)

    def relation_matrix(self) -> list[list[int]]:
        """``m[a][b]`` = mask of allowed relations ``a R b`` (0 = unconstrained pair).

        Constraints on the same pair are intersected; an empty intersection is kept as the
        special value -1 (nothing can match), reported by :meth:`unsatisfiable`.
        """
        idx = {n: i for i, n in enumerate(self.names)}
        from replaydb.operators.tpstream.relations import inverse_mask

        s = self.n_streams
        m = [[0] * s for _ in range(s)]
        for c in self.constraints:
            a, b = idx[c.left], idx[c.right]
            mk = c.mask
            for x, y, mm in ((a, b, mk), (b, a, inverse_mask(mk))):
                if m[x][y] == 0:
                    m[x][y] = mm
                elif m[x][y] > 0:
                    inter = m[x][y] & mm
                    m[x][y] = inter if inter else -1
        return m

    def unsatisfiable(self) -> bool:
        return any(v == -1 for row in self.relation_matrix() for v in row)
