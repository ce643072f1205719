"""The pattern matcher's expression machine: cross-event conditions per (partial match, event).

Conditions that refer only to the current event are evaluated vectorized with NumPy over a batch
(one boolean column per variable, see :mod:`replaydb.operators.pattern.compile`). Conditions that
refer to earlier bound events (``C.temp >= A.temp + 5``, ``abs(b.x - LAST(b.x, 1)) <= d``,
``price > AVG(b.price)``) depend on the partial match; they are lowered once into the shared typed
form (:mod:`replaydb.operators.exprcode`) and run by :func:`vm_eval` inside the matchers' compiled
loops - the CPU matchers (``numba.njit``) and the GPU pattern kernels (``numba.cuda``) compile the
same function. User text is never ``eval``-ed.

The machine is *float-domain*: the matcher's event buffer holds every column as float64 (booleans
0/1, strings as codes of one dictionary shared by all string columns, NULL as NaN), so integers
are exact up to 2**53. Semantics are :mod:`replaydb.operators.exprcode.scalar`'s, the NumPy
evaluator's two-valued logic.

Loads (every other instruction is :func:`~replaydb.operators.exprcode.machine.exec_op`):

* ``LDF a``: column ``a`` of the current event ``g``;
* ``LDBOUND a b`` / ``LDFIRSTCUR a b ic``: column ``b`` of the event in int state slot ``a``
  (NULL when unset; for ``LDFIRSTCUR`` the current event when unset and, if ``ic > 0``, slot
  ``ic - 1`` is set: ``FIRST(V.x, k)`` is the current event when ``V`` bound ``k`` before it);
* ``LDAGG a b ic``: a running aggregate from the float slots ``a..a+3`` (non-null count, sum, min,
  max), function ``b >> 1``, with the current event's column ``ic`` when ``b & 1``;
* ``LDROWS a b``: the row count in float slot ``a``, plus ``b``.
* ``LDSLOT a b ic``: the value of int slot ``a`` as a float - a variable slot holds the
  variable a row was bound to, whose index is its name's string code (``CLASSIFIER()`` of a
  bound row); ``b`` when unset or ``a < 0`` (the variable being defined, for the current row),
  NaN when that is negative or, if ``ic > 0``, slot ``ic - 1`` is unset.

A partial match's state is a row of ``ctx_i``/``ctx_f`` (SASE+'s vector V; a run that is just
starting has unset slots ``ci0`` and ``init_f``). ``rows[g - base, c]`` is column ``c`` of event
``g``. The CPU all-runs matcher evaluates every candidate partial match of an event in one call
(:func:`vm_eval`, column-at-a-time); the other matchers and the GPU threads evaluate one
(:func:`vm_eval_node`).

Complexity: O(program length x candidates) per call, no allocation.
"""

from __future__ import annotations

import math

from numba.core.extending import register_jitable

from replaydb.operators.exprcode.machine import borrowed, exec_op
from replaydb.operators.exprcode.opcodes import (
    FIRST_COMPUTE,
    LDAGG,
    LDBOUND,
    LDF,
    LDFIRSTCUR,
    LDROWS,
    LDSLOT,
)
from replaydb.operators.exprcode.scalar import (
    AGG_AVG,
    AGG_COUNT,
    AGG_MAX,
    AGG_MIN,
    AGG_SUM,
    agg_value,
)

__all__ = ["AGG_AVG", "AGG_COUNT", "AGG_MAX", "AGG_MIN", "AGG_SUM", "PATTERN_LOADS", "vm_eval",
           "vm_eval_node"]

PATTERN_LOADS = frozenset({LDF, LDBOUND, LDFIRSTCUR, LDAGG, LDROWS, LDSLOT})
"""The load instructions of pattern programs."""

@register_jitable(inline="always", error_model="numpy")
def _run(op, ia, ib, fc, ic, lo, hi, rows, base, g, ctx_i, ctx_f, ci0, init_f, nodes, sel, m,
         nd, si, sf):
    """Run program ``[lo, hi)`` for event ``g``: for ``m`` partial matches at once, the state
    rows ``nodes[sel[c]]``, or (``m == 0``) for the one in state row ``nd``; returns the int
    stack's final depth (the results are its top ``max(m, 1)`` entries).

    A state row of -1 is a run just starting (state ``ci0``/``init_f``). The loads are written
    here, in the loop over the partial matches, and every other instruction goes to
    :func:`~replaydb.operators.exprcode.machine.exec_op` once for all of them.
    """
    w = m if m > 0 else 1  # (the builtin max does not compile for CUDA)
    si = borrowed(si)
    sf = borrowed(sf)
    pi = 0
    pf = 0
    for k in range(lo, hi):
        o = op[k]
        if o >= FIRST_COMPUTE:
            pi, pf = exec_op(o, ia[k], fc[k], ic[k], si, sf, pi, pf, w)
            continue
        # one loop per kind of load, so no candidate pays for the dispatch
        s0 = ia[k]
        b = ib[k]
        top = pf * w
        pf += 1
        if o == LDF:
            x = rows[g - base, s0]
            for c in range(w):
                sf[top + c] = x
        elif o == LDBOUND or o == LDFIRSTCUR:
            unset = g if o == LDFIRSTCUR else -1
            pred = ic[k] - 1  # LDFIRSTCUR of a chain: the current event only after pred's
            for c in range(w):
                node = nodes[sel[c]] if m > 0 else nd
                idx = ctx_i[node, s0] if node >= 0 else ci0[s0]
                if idx < 0:
                    idx = unset
                    if pred >= 0 and (ctx_i[node, pred] if node >= 0 else ci0[pred]) < 0:
                        idx = -1
                sf[top + c] = math.nan if idx < 0 else rows[idx - base, b]
        elif o == LDAGG:
            cur = rows[g - base, ic[k]] if b & 1 else math.nan
            fn = b >> 1
            for c in range(w):
                node = nodes[sel[c]] if m > 0 else nd
                if node >= 0:
                    sf[top + c] = agg_value(fn, ctx_f[node, s0], ctx_f[node, s0 + 1],
                                            ctx_f[node, s0 + 2], ctx_f[node, s0 + 3], cur)
                else:
                    sf[top + c] = agg_value(fn, init_f[s0], init_f[s0 + 1], init_f[s0 + 2],
                                            init_f[s0 + 3], cur)
        elif o == LDSLOT:
            pred = ic[k] - 1
            for c in range(w):
                node = nodes[sel[c]] if m > 0 else nd
                v = -1
                if s0 >= 0:
                    v = ctx_i[node, s0] if node >= 0 else ci0[s0]
                if v < 0:
                    v = b
                if pred >= 0 and (ctx_i[node, pred] if node >= 0 else ci0[pred]) < 0:
                    v = -1
                sf[top + c] = math.nan if v < 0 else float(v)
        else:  # LDROWS
            for c in range(w):
                node = nodes[sel[c]] if m > 0 else nd
                sf[top + c] = (ctx_f[node, s0] if node >= 0 else init_f[s0]) + b
    return pi


@register_jitable(error_model="numpy")
def vm_eval(op, ia, ib, fc, ic, lo, hi, rows, base, g, ctx_i, ctx_f, ci0, init_f, nodes, sel,
            m, si, sf, out):
    """Run program ``[lo, hi)`` for event ``g`` against ``m`` partial matches at once.

    Candidate ``c < m`` is the partial match whose state is row ``nodes[sel[c]]`` of
    ``ctx_i``/``ctx_f`` (-1: a run just starting, whose state is ``ci0``/``init_f``); its result
    goes to ``out[sel[c]]`` (True for an empty program). ``si``/``sf`` are scratch stacks of at
    least depth x ``m`` entries. Column-at-a-time: an instruction is fetched once for all
    candidates.
    """
    pi = _run(op, ia, ib, fc, ic, lo, hi, rows, base, g, ctx_i, ctx_f, ci0, init_f, nodes, sel,
              m, -1, si, sf)
    for c in range(m):
        out[sel[c]] = pi == 0 or si[(pi - 1) * m + c] != 0


@register_jitable(error_model="numpy")
def vm_eval_node(op, ia, ib, fc, ic, lo, hi, rows, base, g, ctx_i, ctx_f, ci0, init_f, nd, si,
                 sf):
    """Run program ``[lo, hi)`` for event ``g`` against the one partial match in state row
    ``nd`` (-1: a run just starting); returns the condition's truth."""
    pi = _run(op, ia, ib, fc, ic, lo, hi, rows, base, g, ctx_i, ctx_f, ci0, init_f, ci0, ci0, 0,
              nd, si, sf)
    return pi == 0 or si[pi - 1] != 0
