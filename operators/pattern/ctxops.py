"""Computation-state (SASE+'s vector V) helpers shared by the compiled matchers.

A run's state is one row of ``ctx_i`` (int64: global index of the last/first event bound to a
variable, or to any variable, or of the ``k``-th first/last one in a chain of slots - or, for the
``*_VAR`` slots, the variable that event was bound to; -1 when unset) and one row of ``ctx_f`` (float64: running row
counts and, per (variable, column), the block non-null count, sum, min, max). The layout comes
from :mod:`replaydb.operators.pattern.compile`; only what some cross-event condition reads is
kept, so two runs with equal rows behave the same from now on and may be merged.
"""

from __future__ import annotations

from numba import njit
from numba.core.extending import register_jitable

from replaydb.operators.exprcode.scalar import fadd

CI_LAST = 0
"""An int slot holding the last event bound (to its variable code)."""
CI_FIRST = 1
"""An int slot holding the first event bound."""
CI_SHIFT = 2
"""An int slot after a ``CI_LAST`` or ``CI_SHIFT`` slot: on each bind it takes the value its
predecessor slot had, so a chain ``LAST, SHIFT x k`` holds the last ``k + 1`` bound events."""
CI_NTH = 3
"""An int slot after a ``CI_FIRST`` or ``CI_NTH`` slot: set by the first bind after its
predecessor is set, so a chain ``FIRST, NTH x k`` holds the first ``k + 1`` bound events."""
CI_LAST_VAR = 4
"""Like ``CI_LAST``, holding the variable the event was bound to instead of the event (what
``CLASSIFIER()`` of bound rows reads); ``CI_SHIFT`` chains copy it alike."""
CI_FIRST_VAR = 5
"""Like ``CI_FIRST``, holding the variable."""
CI_NTH_VAR = 6
"""Like ``CI_NTH``, holding the variable."""
CF_ROWS = 0


@njit(cache=True, inline="always")
def init_row(nid, ctx_i, ctx_f, init_f):
    for s in range(ctx_i.shape[1]):
        ctx_i[nid, s] = -1
    for s in range(init_f.shape[0]):
        ctx_f[nid, s] = init_f[s]


@njit(cache=True, inline="always")
def copy_row(dst, src, ctx_i, ctx_f):
    for s in range(ctx_i.shape[1]):
        ctx_i[dst, s] = ctx_i[src, s]
    for s in range(ctx_f.shape[1]):
        ctx_f[dst, s] = ctx_f[src, s]


@register_jitable(inline="always")
def bind_update(v, g, ci_kind, ci_var, cf_kind, cf_var, cf_col, ci, cf, rows, base):
    """Update the 1-D state rows ``ci``/``cf`` (a GPU thread's local state) for event ``g``
    bound to variable ``v``; the CPU matchers use :func:`bind_update_row`. A slot's variable
    code is a variable's index, -1 (every row) or ``-3 - mask`` (a union variable: ``v`` is one
    of its variables when bit ``v`` of ``mask`` is set); a slot's kind is one of ``CI_LAST``,
    ``CI_FIRST``, ``CI_SHIFT``, ``CI_NTH`` (chains, see their definitions) or a ``*_VAR`` kind
    holding ``v`` instead of ``g``. ``rows[g - base,
    c]`` is column ``c`` of event ``g``. NULLs are skipped by the running aggregates. O(slots)."""
    for s in range(ci_kind.shape[0] - 1, -1, -1):  # a chain slot reads its predecessor's
        cv = ci_var[s]                             # value from before this bind
        if cv == v or cv == -1 or (cv <= -3 and ((-3 - cv) >> v) & 1):
            kind = ci_kind[s]
            if kind == CI_LAST:
                ci[s] = g
            elif kind == CI_FIRST:
                if ci[s] < 0:
                    ci[s] = g
            elif kind == CI_SHIFT:
                ci[s] = ci[s - 1]
            elif kind == CI_NTH:
                if ci[s] < 0 and ci[s - 1] >= 0:
                    ci[s] = g
            elif kind == CI_LAST_VAR:
                ci[s] = v
            elif kind == CI_FIRST_VAR:
                if ci[s] < 0:
                    ci[s] = v
            elif ci[s] < 0 and ci[s - 1] >= 0:
                ci[s] = v
    for s in range(cf_kind.shape[0]):
        cv = cf_var[s]
        if cv == v or cv == -1 or (cv <= -3 and ((-3 - cv) >> v) & 1):
            kind = cf_kind[s]
            if kind == CF_ROWS:
                cf[s] += 1.0
            else:
                x = rows[g - base, cf_col[s]]
                if x == x:
                    j = kind - 1
                    if j == 0:
                        cf[s] += 1.0
                    elif j == 1:
                        cf[s] = fadd(cf[s], x)
                    elif j == 2:
                        if x < cf[s]:
                            cf[s] = x
                    elif x > cf[s]:
                        cf[s] = x


@register_jitable(inline="always")
def bind_update_row(nid, v, g, ci_kind, ci_var, cf_kind, cf_var, cf_col, ci, cf, rows, base):
    """:func:`bind_update` on row ``nid`` of the CPU matchers' state arenas ``ci``/``cf``.

    The same rules as :func:`bind_update`, indexed in place: a row view (``ci[nid]``) made
    inside the compiled matcher loop would cost atomic reference counts per bound event. The
    GPU kernels keep a thread's state in local 1-D arrays and call :func:`bind_update`; the
    two are held to each other by the CPU/GPU pattern tests. O(slots)."""
    for s in range(ci_kind.shape[0] - 1, -1, -1):
        cv = ci_var[s]
        if cv == v or cv == -1 or (cv <= -3 and ((-3 - cv) >> v) & 1):
            kind = ci_kind[s]
            if kind == CI_LAST:
                ci[nid, s] = g
            elif kind == CI_FIRST:
                if ci[nid, s] < 0:
                    ci[nid, s] = g
            elif kind == CI_SHIFT:
                ci[nid, s] = ci[nid, s - 1]
            elif kind == CI_NTH:
                if ci[nid, s] < 0 and ci[nid, s - 1] >= 0:
                    ci[nid, s] = g
            elif kind == CI_LAST_VAR:
                ci[nid, s] = v
            elif kind == CI_FIRST_VAR:
                if ci[nid, s] < 0:
                    ci[nid, s] = v
            elif ci[nid, s] < 0 and ci[nid, s - 1] >= 0:
                ci[nid, s] = v
    for s in range(cf_kind.shape[0]):
        cv = cf_var[s]
        if cv == v or cv == -1 or (cv <= -3 and ((-3 - cv) >> v) & 1):
            kind = cf_kind[s]
            if kind == CF_ROWS:
                cf[nid, s] += 1.0
            else:
                x = rows[g - base, cf_col[s]]
                if x == x:
                    j = kind - 1
                    if j == 0:
                        cf[nid, s] += 1.0
                    elif j == 1:
                        cf[nid, s] = fadd(cf[nid, s], x)
                    elif j == 2:
                        if x < cf[nid, s]:
                            cf[nid, s] = x
                    elif x > cf[nid, s]:
                        cf[nid, s] = x


@njit(cache=True, inline="always")
def rows_equal(a, b, ctx_i, ctx_f):
    for s in range(ctx_i.shape[1]):
        if ctx_i[a, s] != ctx_i[b, s]:
            return False
    for s in range(ctx_f.shape[1]):
        x = ctx_f[a, s]
        y = ctx_f[b, s]
        if x != y and not (x != x and y != y):
            return False
    return True


@njit(cache=True, inline="always")
def row_hash(q, nid, ctx_i):
    h = q * 1000003 + 12345
    for s in range(ctx_i.shape[1]):
        h = (h ^ (ctx_i[nid, s] + 0x9E3779B9)) * 1000003
        h = h & 0x3FFFFFFFFFFFFFFF
    return h
