"""Per-key sliding state: slice partials in, window aggregates out.

:class:`SlideState` is the part of the online windowed aggregation that both execution paths share:
the replay path reduces events into per-slice partials (:func:`reduce_segments`), the index path
(``replaydb.planner.window_path``) computes the same per-slice partials from the TAB+-tree's node
aggregates; both feed them here, into the same slide tree.

State: a :class:`~replaydb.operators.window.flatfat.FlatFAT` ring holding the ``W`` slices of the
last window produced (window ``k_r``: slices ``[k_r*p, k_r*p + W)``), up to ``p-1`` *pending*
closed slices of the next step, and the *open* slice (the one that may still receive events).
The ring starts "virtually" full of empty slices that precede the first window
(``k_r = k_first - ceil(W/p)``), so filling the first window is no special case.

:meth:`SlideState.feed` takes the non-empty slices of a batch (sorted slice indices and their
partials) and the index ``closed_before`` of the first slice that may still change. It merges them
into the open slice, densifies the closed ones (empty slices become identity leaves), and advances
the ring one window step per ``p`` slices:

* ``n = k*p <= W`` new leaves (the usual case): window ``i`` of the batch is
  ``prefix(new)[(i+1)p - 1] + suffix(old)[(i+1)p] + rest``, where ``old`` are the leaves being
  replaced and ``rest`` the merge of the untouched ring positions (one O(log W) range query); then
  the new leaves are written with one O(n + log W) bulk update. O(1) NumPy work per window.
* ``n > W``: the windows are computed by the van Herk/Gil-Werman block scheme over the ring's leaves
  followed by the new ones (a prefix and a suffix scan per block of ``W``), and the ring is
  reloaded with the last ``W`` leaves. O(1) per window, O(n + W) per call.

Runs of more than ``W + 2p`` empty slices are not densified: once the ring holds no event the state
*jumps* past them in O(1) (their windows are empty; they are reported only when ``emit_empty``).

Windows ``k < k_first`` are never reported; with ``emit_empty`` False, neither are windows without
events.
"""

from __future__ import annotations

import numpy as np

from replaydb.operators.window.aggregates import Layout, Partials, concat, length, take
from replaydb.operators.window.assign import SliceGeometry
from replaydb.operators.window.flatfat import FlatFAT

CHUNK_SLICES = 1 << 21
"""Largest number of slices densified at once (bounds the memory of one step)."""


class SlideState:
    """Sliding state of one group (or of the whole stream when ungrouped)."""

    host_ring = True
    """The ring is a host :class:`FlatFAT` (the tumbling fast path writes it directly);
    subclasses that keep the ring elsewhere set False and take the general path."""

    def __init__(self, layout: Layout, geom: SliceGeometry, k_first: int,
                 *, emit_empty: bool = False) -> None:
        self.layout = layout
        self.geom = geom
        self.k_first = int(k_first)
        self.emit_empty = emit_empty
        W, p = geom.W, geom.p
        self.k_r = self.k_first - (W + p - 1) // p
        self.ring = FlatFAT(layout, W)
        self.pending: Partials = layout.identity(0)
        self.open_slice: int | None = None
        self.open_part: Partials | None = None
        self.last_rel: int | None = None  # relative position of this group's last event

    # ------------------------------------------------------------------ properties
    @property
    def next_slice(self) -> int:
        """Index of the next slice the ring will take."""
        return self.k_r * self.geom.p + self.geom.W + length(self.pending)

    @property
    def size(self) -> int:
        """State entries held (ring leaves + pending + open)."""
        return self.geom.W + length(self.pending) + (self.open_slice is not None)

    def idle(self) -> bool:
        """True when no event is held anywhere (the group can be dropped)."""
        return self.open_slice is None and self._ring_idle()

    def _ring_idle(self) -> bool:
        return int(self.ring.tree["n"][1]) == 0 and int(self.pending["n"].sum()) == 0

    def next_window(self) -> int:
        """Index of the next window this state can report."""
        return max(self.k_r + 1, self.k_first)

    # ------------------------------------------------------------------ feeding
    def feed(self, slices: np.ndarray, parts: Partials, closed_before: int
             ) -> tuple[np.ndarray, Partials]:
        """Add non-empty slices (sorted, ``>= next_slice``); close every slice ``< closed_before``.

        Returns the windows completed: their indices ``k`` (ascending) and aggregates.
        """
        lay = self.layout
        slices = np.asarray(slices, dtype=np.int64)
        if self.open_slice is not None:
            if len(slices) and slices[0] == self.open_slice:
                parts = concat([lay.combine(self.open_part, take(parts, slice(0, 1))),  # type: ignore[arg-type]
                                take(parts, slice(1, None))])
            else:
                slices = np.concatenate([np.array([self.open_slice], np.int64), slices])
                parts = concat([self.open_part, parts])  # type: ignore[list-item]
            self.open_slice, self.open_part = None, None
        if len(slices):
            if slices[0] < self.next_slice:
                raise AssertionError(
                    f"slice {slices[0]} arrived after slice {self.next_slice - 1} was closed")
            ncl = int(np.searchsorted(slices, closed_before, "left"))
            if ncl < len(slices):
                if ncl != len(slices) - 1:
                    raise AssertionError("more than one open slice")
                self.open_slice = int(slices[-1])
                self.open_part = take(parts, slice(ncl, None))
                slices, parts = slices[:ncl], take(parts, slice(0, ncl))
        out_k: list[np.ndarray] = []
        out_p: list[Partials] = []
        self._advance(slices, parts, closed_before, out_k, out_p)
        if not out_k:
            return np.zeros(0, np.int64), lay.identity(0)
        return np.concatenate(out_k), concat(out_p)

    def _advance(self, slices: np.ndarray, parts: Partials, target: int,
                 out_k: list[np.ndarray], out_p: list[Partials]) -> None:
        lay = self.layout
        W, p = self.geom.W, self.geom.p
        if W == 1 and p == 1 and self.host_ring:
            self._advance_tumbling(slices, parts, target, out_k, out_p)
            return
        gap = W + 2 * p
        i, nseg = 0, len(slices)
        while self.next_slice < target:
            idle = self._ring_idle()
            if idle:
                s_next = int(slices[i]) if i < nseg else target
                k_new = (s_next - W) // p
                if k_new > self.k_r:
                    self._jump(k_new, out_k, out_p)
            nxt = self.next_slice
            if nxt >= target:
                break
            pts = slices[i:]
            if not idle:
                pts = np.concatenate([np.array([nxt - 1], np.int64), pts])
            end = target
            if len(pts):
                big = np.flatnonzero(np.diff(pts) > gap)
                if len(big):
                    end = int(pts[big[0]]) + W + p
                elif target - int(pts[-1]) > gap:
                    end = int(pts[-1]) + W + p
            end = min(end, target, nxt + max(CHUNK_SLICES, 2 * W))
            c = int(np.searchsorted(slices, end, "left"))
            dense = lay.identity(end - nxt)
            if c > i:
                at = slices[i:c] - nxt
                for k in dense:
                    dense[k][at] = parts[k][i:c]
            i = c
            x = concat([self.pending, dense])
            self.pending = lay.identity(0)
            self._steps(x, out_k, out_p)

    def _advance_tumbling(self, slices: np.ndarray, parts: Partials, target: int,
                          out_k: list[np.ndarray], out_p: list[Partials]) -> None:
        """Close every slice before ``target`` when ``W = p = 1`` (tumbling windows): window
        ``k`` is slice ``k``, so the closed non-empty slices are the windows themselves (with
        ``emit_empty``, the empty ones between them are identity windows, in chunks of at most
        :data:`CHUNK_SLICES`). The ring keeps the last closed slice, as a step of
        :meth:`_steps` leaves it. O(slices + windows reported), no densifying."""
        lo = self.next_slice
        if target <= lo:
            return
        first = max(lo, self.k_first)
        if self.emit_empty:
            for a in range(first, target, CHUNK_SLICES):
                b = min(a + CHUNK_SLICES, target)
                res = self.layout.identity(b - a)
                i, j = np.searchsorted(slices, [a, b])
                for k in res:
                    res[k][slices[i:j] - a] = parts[k][i:j]
                out_k.append(np.arange(a, b, dtype=np.int64))
                out_p.append(res)
        else:
            keep = (slices >= first) & (parts["n"] > 0)
            if np.any(keep):
                out_k.append(slices[keep])
                out_p.append(take(parts, keep))
        ends_here = len(slices) and int(slices[-1]) == target - 1
        self.ring.set_leaves(0, take(parts, slice(-1, None)) if ends_here
                             else self.layout.identity(1))
        self.k_r = target - 1

    def _jump(self, k_new: int, out_k: list[np.ndarray], out_p: list[Partials]) -> None:
        """Skip windows ``k_r+1 .. k_new``: the ring holds no event, so all of them are empty."""
        if self.emit_empty:
            lo = max(self.k_r + 1, self.k_first)
            if k_new >= lo:
                out_k.append(np.arange(lo, k_new + 1, dtype=np.int64))
                out_p.append(self.layout.identity(k_new + 1 - lo))
        self.k_r = k_new
        self.pending = self.layout.identity(0)

    def _whole_steps(self, x: Partials) -> Partials | None:
        """The leading whole window steps of ``x`` (``len(x) // p`` of them, or None when there
        is none); the remainder becomes ``pending``."""
        p = self.geom.p
        use = (length(x) // p) * p
        if use == 0:
            self.pending = x
            return None
        self.pending = take(x, slice(use, None))
        return take(x, slice(0, use))

    def _steps(self, x: Partials, out_k: list[np.ndarray], out_p: list[Partials]) -> None:
        """Advance the ring by ``len(x) // p`` window steps; keep the remainder pending."""
        new = self._whole_steps(x)
        if new is None:
            return
        lay = self.layout
        W, p = self.geom.W, self.geom.p
        use = length(new)
        k = use // p
        pos0 = (self.k_r * p) % W
        if use <= W:
            old = self.ring.gather(pos0, use)
            rest = self.ring.range_total(pos0 + use, W - use)
            pre = lay.scan(new)
            suf = concat([lay.scan(old, reverse=True), lay.identity(1)])
            ends = np.arange(1, k + 1) * p
            res = lay.combine(lay.combine(take(pre, ends - 1), take(suf, ends)), rest)
            self.ring.set_leaves(pos0, new)
        else:
            y = concat([self.ring.in_order(pos0), new])
            res = self._windows_over(y, np.arange(1, k + 1) * p)
            self.ring.load(take(y, slice(length(y) - W, None)), ((self.k_r + k) * p) % W)
        ks = np.arange(self.k_r + 1, self.k_r + k + 1, dtype=np.int64)
        self.k_r += k
        keep = ks >= self.k_first
        if not self.emit_empty:
            keep &= res["n"] > 0
        if not np.all(keep):
            ks, res = ks[keep], take(res, keep)
        if len(ks):
            out_k.append(ks)
            out_p.append(res)

    def _windows_over(self, y: Partials, starts: np.ndarray) -> Partials:
        """Merge of ``y[s : s + W]`` for every ``s`` in ``starts`` (van Herk/Gil-Werman)."""
        lay = self.layout
        W = self.geom.W
        n = length(y)
        nb = -(-n // W)
        pad = nb * W - n
        if pad:
            y = concat([y, lay.identity(pad)])
        blocks = {k: v.reshape(nb, W) for k, v in y.items()}
        pre = {k: v.reshape(-1) for k, v in lay.scan(blocks, axis=1).items()}
        suf = {k: v.reshape(-1) for k, v in lay.scan(blocks, axis=1, reverse=True).items()}
        head = take(suf, starts)
        aligned = starts % W == 0
        if np.any(aligned):
            ident = lay.identity(1)
            head = {k: np.where(aligned, ident[k], v) for k, v in head.items()}
        return lay.combine(head, take(pre, starts + W - 1))

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict:
        return {
            "k_first": self.k_first, "k_r": self.k_r, "tree": self.ring.tree,
            "pending": self.pending, "open_slice": self.open_slice, "open_part": self.open_part,
            "last_rel": self.last_rel,
        }

    def set_state(self, st: dict) -> None:
        self.k_first, self.k_r = st["k_first"], st["k_r"]
        self.ring.tree = st["tree"]
        self.pending = st["pending"]
        self.open_slice, self.open_part = st["open_slice"], st["open_part"]
        self.last_rel = st["last_rel"]

    def _check(self) -> None:
        """Invariants: tree consistent, pending shorter than one step, open slice not yet closed."""
        self.ring._check()
        if length(self.pending) >= self.geom.p:
            raise AssertionError("a full window step is pending")
        if self.open_slice is not None:
            if self.open_slice < self.next_slice:
                raise AssertionError("open slice lies before the ring's next slice")
            if self.open_part is None or int(self.open_part["n"][0]) < 1:
                raise AssertionError("open slice without events")
