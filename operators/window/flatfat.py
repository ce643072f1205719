"""FlatFAT: a flat, array-backed aggregation tree over a ring buffer of slice partials.

The slide tree of the online windowed aggregation (Tangwongsan et al. 2015, used by the
dissertation, 3.3): one leaf per slice of the window, inner nodes hold the merge of their children,
the root holds the merge of all leaves - the current window's aggregate.

Layout: the implicit binary tree of the iterative segment tree. With ``size`` leaves, node ``i`` in
``[1, size)`` is inner with children ``2i`` and ``2i+1``; leaves are nodes ``[size, 2*size)``;
leaf position ``j`` is node ``size + j``. This works for any ``size`` (not only powers of two) and
uses ``2 * size`` entries per component. Node 1 is the root and covers every leaf because all
merges are commutative (see :mod:`~replaydb.operators.window.aggregates`), so the window's
aggregate is read in O(1) even when the ring's oldest leaf sits in the middle of the array.

Leaves are addressed as a ring: the slice with global index ``s`` lives at position ``s mod size``.
Sliding the window replaces the oldest leaves by the newest ones in place.

Operations and complexity (``n`` = number of leaves touched, ``W`` = ``size``):

* :meth:`root` - O(1).
* :meth:`set_leaves` - replace ``n`` consecutive ring positions: O(n + log W), vectorized level
  by level (one NumPy call per level and component).
* :meth:`range_total` - merge of ``n`` consecutive ring positions: O(log W).
* :meth:`gather` / :meth:`in_order` - read leaves: O(n) / O(W).
* :meth:`load` - replace all leaves and rebuild: O(W).

:meth:`_check` verifies every inner node against its children (used by the seeded stress tests).
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.window.aggregates import Layout, Partials, concat


class FlatFAT:
    """A ring of ``size`` leaves of partial aggregates with an aggregation tree above it."""

    def __init__(self, layout: Layout, size: int) -> None:
        if size < 1:
            raise ValueError("FlatFAT needs at least one leaf")
        self.layout = layout
        self.size = int(size)
        self.tree: Partials = layout.identity(2 * self.size)

    # ------------------------------------------------------------------ reading
    def root(self) -> Partials:
        """The merge of all leaves (length-1 partial), O(1)."""
        return {k: v[1:2].copy() for k, v in self.tree.items()}  # a single leaf is node 1 itself

    def gather(self, pos: int, n: int) -> Partials:
        """Leaves at ring positions ``pos, pos+1, ..., pos+n-1`` (mod size), in that order."""
        return concat([{k: v[self.size + a : self.size + b].copy() for k, v in self.tree.items()}
                       for a, b in self._ranges(pos, n)] or [self.layout.identity(0)])

    def in_order(self, pos: int) -> Partials:
        """All leaves, starting at ring position ``pos``."""
        return self.gather(pos, self.size)

    def range_total(self, pos: int, n: int) -> Partials:
        """Merge of the leaves at ring positions ``pos .. pos+n-1`` (mod size); O(log size)."""
        acc = self.layout.identity(1)
        if n <= 0:
            return acc
        if n >= self.size:
            return self.root()
        lay = self.layout
        for a, b in self._ranges(pos, n):
            lo, hi = a + self.size, b + self.size
            while lo < hi:
                if lo & 1:
                    acc = lay.combine(acc, {k: v[lo : lo + 1] for k, v in self.tree.items()})
                    lo += 1
                if hi & 1:
                    hi -= 1
                    acc = lay.combine(acc, {k: v[hi : hi + 1] for k, v in self.tree.items()})
                lo //= 2
                hi //= 2
        return acc

    # ------------------------------------------------------------------ writing
    def set_leaves(self, pos: int, values: Partials) -> None:
        """Write ``values`` to ring positions ``pos, pos+1, ...`` and update their ancestors."""
        n = len(values["n"])
        if n == 0:
            return
        if n > self.size:
            raise ValueError(f"cannot write {n} leaves into a ring of {self.size}")
        done = 0
        for a, b in self._ranges(pos, n):
            for k, v in self.tree.items():
                v[self.size + a : self.size + b] = values[k][done : done + (b - a)]
            done += b - a
            self._update_ancestors(a, b)

    def load(self, values: Partials, pos: int) -> None:
        """Replace every leaf: ``values`` (length ``size``) starts at ring position ``pos``."""
        if len(values["n"]) != self.size:
            raise ValueError("load needs exactly one value per leaf")
        p = pos % self.size
        for k, v in self.tree.items():
            leaves = v[self.size :]
            leaves[p:] = values[k][: self.size - p]
            leaves[:p] = values[k][self.size - p :]
        self._recompute(1, self.size)

    def clear(self) -> None:
        """Every leaf empty."""
        self.tree = self.layout.identity(2 * self.size)

    # ------------------------------------------------------------------ internals
    def _ranges(self, pos: int, n: int) -> list[tuple[int, int]]:
        """Ring positions ``pos .. pos+n-1`` as at most two contiguous ``[a, b)`` leaf ranges."""
        if n <= 0:
            return []
        p = pos % self.size
        if p + n <= self.size:
            return [(p, p + n)]
        return [(p, self.size), (0, p + n - self.size)]

    def _update_ancestors(self, a: int, b: int) -> None:
        """Recompute every ancestor of leaves ``[a, b)``, children always before parents."""
        lo, hi = a + self.size, b + self.size
        while lo > 1:
            lo, hi = max(1, lo // 2), (hi - 1) // 2 + 1
            self._recompute(lo, hi)

    def _recompute(self, lo: int, hi: int) -> None:
        """Recompute inner nodes ``[lo, hi)`` from their children.

        A node's children have larger indices, so processing chunks ``[m, hi)`` with ``hi <= 2m``
        from the top index down never reads a child that is still stale.
        """
        hi = min(hi, self.size)
        lay = self.layout
        while hi > lo:
            m = max(lo, (hi + 1) // 2)
            left = {k: v[2 * m : 2 * hi : 2] for k, v in self.tree.items()}
            right = {k: v[2 * m + 1 : 2 * hi : 2] for k, v in self.tree.items()}
            merged = lay.combine(left, right)
            for k, v in self.tree.items():
                v[m:hi] = merged[k]
            hi = m

    def _check(self) -> None:
        """Invariant: every inner node equals the merge of its children (exactly)."""
        if self.size == 1:
            return
        idx = np.arange(1, self.size)
        left = {k: v[2 * idx] for k, v in self.tree.items()}
        right = {k: v[2 * idx + 1] for k, v in self.tree.items()}
        merged = self.layout.combine(left, right)
        for c in self.layout.components:
            got = self.tree[c.name][1 : self.size]
            exp = merged[c.name]
            same = (got == exp) | (np.isnan(got) & np.isnan(exp)) if got.dtype.kind == "f" \
                else got == exp
            if c.kind == "val":  # a value only matters where its key is set
                key = self.tree[c.link][1 : self.size]  # type: ignore[index]
                ident = self.layout.component(c.link).identity  # type: ignore[arg-type]
                same |= key == ident
            if not np.all(same):
                bad = int(idx[np.flatnonzero(~same)[0]])
                raise AssertionError(f"FlatFAT node {bad} component {c.name!r} is stale")
        leaves_n = int(self.tree["n"][self.size :].sum())
        if int(self.tree["n"][1]) != leaves_n:
            raise AssertionError("FlatFAT root count differs from the leaves' total")
