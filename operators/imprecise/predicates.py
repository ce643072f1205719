"""WHERE predicates of an imprecise pattern, compiled once and evaluated vectorized.

Each conjunct is attached to the component of its last variable in pattern order (as SASE+
places a conjunct on the edge of its last identifier's state, paper 002): a conjunct naming only
``v_j`` (or no variable at all, then ``j = 0``) is a *single-event* condition of component ``j``,
evaluated on whole batches at ingest; a conjunct naming several variables is a *cross* condition
evaluated over arrays of candidate (partial match, event) pairs. The candidates for component
``j`` of a partial match ``(e_1..e_{j-1})`` are the events of ``j``'s type meeting every
conjunct attached to ``j`` - the same set decides skip-till-next's NELT and its spoilers.

Complexity: one NumPy pass per conjunct over the batch or pair arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from replaydb.operators.expr import (
    Call,
    Column,
    ColumnsEnv,
    Expr,
    ExprError,
    columns,
    compile_predicate,
    qualifiers,
)


class _GatherEnv:
    """Environment resolving ``var.attr`` to ``attrs[attr][index_of_var]``."""

    def __init__(self, attrs: dict[str, np.ndarray], index: dict[str, np.ndarray]) -> None:
        self.attrs = attrs
        self.index = index

    def column(self, ref: Column) -> Any:
        return self.attrs[ref.name][self.index[ref.qualifier]]  # type: ignore[index]

    def call(self, node: Call, args: list[Any]) -> Any:
        raise ExprError(f"unknown function {node.name}", node.pos)


class PredicatePlan:
    """Conjuncts split into single-event and cross conditions per component."""

    def __init__(self, variables: tuple[str, ...], predicates: tuple[Expr, ...],
                 extra_attrs: tuple[str, ...] = ()) -> None:
        self.variables = variables
        self.var_index = {v: i for i, v in enumerate(variables)}
        l_ = len(variables)
        self.single: list[list[Callable[[Any], Any]]] = [[] for _ in range(l_)]
        self.cross: list[list[tuple[frozenset[int], Callable[[Any], Any]]]] = [
            [] for _ in range(l_)]
        names: dict[str, None] = {}
        for p in predicates:
            quals = qualifiers(p)
            for c in columns(p):
                if c.qualifier is None or c.qualifier not in self.var_index:
                    raise ExprError(f"attribute {c} must be qualified by a pattern variable",
                                    c.pos)
                names[c.name] = None
            idx = sorted(self.var_index[q] for q in quals)
            fn = compile_predicate(p)
            if len(idx) <= 1:
                self.single[idx[0] if idx else 0].append(fn)
            else:
                self.cross[idx[-1]].append((frozenset(idx), fn))
        for a in extra_attrs:
            names[a] = None
        self.attribute_names: tuple[str, ...] = tuple(names)

    @property
    def has_cross(self) -> list[bool]:
        return [bool(c) for c in self.cross]

    def single_mask(self, j: int, cols: dict[str, np.ndarray], n: int) -> np.ndarray:
        """Single-event conditions of component ``j`` over a batch of ``n`` events."""
        out = np.ones(n, dtype=bool)
        if not self.single[j]:
            return out
        env = ColumnsEnv(cols, frozenset(self.variables))
        for fn in self.single[j]:
            out &= np.broadcast_to(np.asarray(fn(env), dtype=bool), (n,))
        return out

    def cross_mask(self, j: int, attrs: dict[str, np.ndarray], index: dict[int, np.ndarray],
                   n: int, assigned: frozenset[int] | None = None) -> np.ndarray:
        """Cross conditions attached to component ``j`` over ``n`` candidate pairs.

        ``index[k]`` gives, per pair, the buffer position of the event bound to component ``k``.
        With ``assigned`` (the any-state method) the conditions evaluated are those naming ``j``
        whose variables are all in ``assigned | {j}`` - wherever they are attached.
        """
        out = np.ones(n, dtype=bool)
        if assigned is None:
            conds = self.cross[j]
        else:
            have = assigned | {j}
            conds = [(s, fn) for lst in self.cross for (s, fn) in lst
                     if j in s and s <= have]
        if not conds or n == 0:
            return out
        env = _GatherEnv(attrs, {self.variables[k]: v for k, v in index.items()})
        for _, fn in conds:
            out &= np.broadcast_to(np.asarray(fn(env), dtype=bool), (n,))
        return out

    def cross_ok_scalar(self, j: int, attrs: dict[str, np.ndarray],
                        bound: dict[int, int]) -> bool:
        """Cross conditions of component ``j`` for one partial match (used by oracles)."""
        idx = {k: np.array([v]) for k, v in bound.items()}
        return bool(self.cross_mask(j, attrs, idx, 1)[0])
