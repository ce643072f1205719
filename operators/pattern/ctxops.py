"""Computation-state (SASE+'s vector V) helpers shared by the compiled matchers.

A run's state is one row of ``ctx_i`` (int64: global index of the last/first event bound to a
variable, or to any variable, the ``k``-th first one, or the ``k``-th last one in a chain of
slots - or, for the ``*_VAR`` slots, the variable that event was bound to; negative when unset)
and one row of ``ctx_f`` (float64: running row counts and, per (variable, column), the block
non-null count, sum, min, max). The layout comes from
:mod:`replaydb.operators.pattern.codegen`; only what some cross-event condition reads is kept,
so two runs with equal rows behave the same from now on and may be merged.
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
"""An int slot after a ``CI_LAST``, ``CI_LAST_VAR`` or ``CI_SHIFT`` slot: on each bind it takes the value its
predecessor slot had, so a chain ``LAST, SHIFT x k`` holds the last ``k + 1`` bound events."""
CI_LAST_VAR = 4
"""Like ``CI_LAST``, holding the variable the event was bound to instead of the event (what
``CLASSIFIER()`` of bound rows reads); ``CI_SHIFT`` chains copy it alike."""
CI_FIRST_VAR = 5
"""Like ``CI_FIRST``, holding the variable."""
CI_NTH_VAR = 6
"""An int slot after another: the variable of the first row bound after that slot is set (a
chain of them after the slot of a variable's ``k``-th row holds the variables of the rows after
it)."""
CI_KTH = 4 << 40
"""``CI_KTH + k``: the ``k``-th (0-based) event bound to the slot's variable; before it is
bound, ``-1 - c`` after ``c`` binds (negative: unset for every reader), so any offset takes
one slot."""
CI_KTH_VAR = 5 << 40
"""Like ``CI_KTH``, holding the variable."""
CI_SNAP = 1 << 40
"""``CI_SNAP + d``: on each bind, the value slot ``s - d`` had before it (a snapshot, taken at
each of the slot's variable's rows, of the variable of the row ``n`` rows before it when slot
``s - d`` is an every-row ``CI_LAST_VAR`` chain's ``n - 1``-th slot)."""
CI_FOLLOW = 2 << 40
"""``CI_FOLLOW + (gate << 20) + src``: on each bind, while slot ``s + gate`` is unset after the
bind, the value slot ``s + src`` has after it; frozen from the bind that sets ``s + gate`` on."""
CI_AFTER = 3 << 40
"""``CI_AFTER + (stride << 2) + (header << 1) + first``: the variables of the rows after one of
the last rows of the slot's variable ``v`` (see :func:`after_update`), in chains of ``stride``
slots - a header (set while the chain's row exists) and the rows after it; updated on every
bind, not only ``v``'s."""
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


@register_jitable
def after_update(kind, bound_v, v, old, pred, src, src_pred):
    """The new value of a ``CI_AFTER`` slot for a row bound to variable ``v`` (``bound_v``: the
    slot's variable covers the row). Chain ``j`` (``first``: ``j == 0``) follows the ``j``-th
    last row of the slot's variable: its header holds that row's variable, its element ``i``
    the variable of the ``i + 1``-th row after it, -1 while not bound yet. At a row of the slot's
    variable every chain moves one back (chain ``j`` takes chain ``j - 1``'s values, ``src``, and
    this row if it is the next after chain ``j - 1``'s row: ``src_pred``, the slot before
    ``src``, is set) and chain 0 restarts at this row; another row extends every chain whose
    previous slot (``pred``) is set. ``old``: the slot's value before the bind."""
    header = (kind >> 1) & 1
    if bound_v:
        if kind & 1:
            return v if header else -1
        if header or src >= 0:
            return src
        return v if src_pred >= 0 else -1
    if header or old >= 0 or pred < 0:
        return old
    return v


@register_jitable
def kth_update(kind, old, v, g):
    """The new value of a ``CI_KTH``/``CI_KTH_VAR`` slot at a bind of event ``g`` to variable
    ``v``: the event (or the variable) when this is the ``k``-th bind, the count otherwise."""
    if old >= 0:
        return old
    if -1 - old == (kind & 0xFFFFFFFFFF):
        return v if kind >= CI_KTH_VAR else g
    return old - 1


@register_jitable
def covers(cv, v):
    """Whether a slot of variable code ``cv`` (see :func:`bind_update`) covers a row bound to
    variable ``v``."""
    return cv == v or cv == -1 or (cv <= -3 and (((-3 - cv) >> v) & 1) == 1)


@register_jitable
def after_slot(ci, s, kind, bound_v, v):
    """:func:`after_update` of slot ``s`` of the 1-D state ``ci`` (chain ``j > 0`` reads chain
    ``j - 1``, one stride before)."""
    stride = (kind >> 2) & 0x3FFFF
    first = kind & 1
    pred = ci[s - 1] if s > 0 else -1
    src = -1 if first else ci[s - stride]
    src_pred = -1 if first else ci[s - stride - 1]
    return after_update(kind, bound_v, v, ci[s], pred, src, src_pred)


@register_jitable
def after_slot_row(ci, nid, s, kind, bound_v, v):
    """:func:`after_slot` of row ``nid`` of the CPU matchers' state arena ``ci``."""
    stride = (kind >> 2) & 0x3FFFF
    first = kind & 1
    pred = ci[nid, s - 1] if s > 0 else -1
    src = -1 if first else ci[nid, s - stride]
    src_pred = -1 if first else ci[nid, s - stride - 1]
    return after_update(kind, bound_v, v, ci[nid, s], pred, src, src_pred)


@register_jitable(inline="always")
def bind_update(v, g, ci_kind, ci_var, cf_kind, cf_var, cf_col, ci, cf, rows, base):
    """Update the 1-D state rows ``ci``/``cf`` (a GPU thread's local state) for event ``g``
    bound to variable ``v``; the CPU matchers use :func:`bind_update_row`. A slot's variable
    code is a variable's index, -1 (every row) or ``-3 - mask`` (a union variable: ``v`` is one
    of its variables when bit ``v`` of ``mask`` is set); a slot's kind is one of ``CI_LAST``,
    ``CI_FIRST``, ``CI_SHIFT`` (chains, see their definitions), a ``*_VAR`` kind
    holding ``v`` instead of ``g``, or one of the parametrized kinds ``CI_KTH``/``CI_KTH_VAR``
    (the ``k``-th bound event), ``CI_SNAP``, ``CI_FOLLOW`` and ``CI_AFTER`` (the variables of
    rows around one of a variable's rows). ``rows[g - base,
    c]`` is column ``c`` of event ``g``. NULLs are skipped by the running aggregates. O(slots)."""
    for s in range(ci_kind.shape[0] - 1, -1, -1):  # a chain slot reads its predecessor's
        cv = ci_var[s]                             # value from before this bind
        kind = ci_kind[s]
        hit = covers(cv, v)
        if kind >= CI_KTH:
            if hit:
                ci[s] = kth_update(kind, ci[s], v, g)
        elif kind >= CI_AFTER:
            ci[s] = after_slot(ci, s, kind, hit, v)
        elif hit:
            if kind == CI_LAST:
                ci[s] = g
            elif kind == CI_FIRST:
                if ci[s] < 0:
                    ci[s] = g
            elif kind == CI_SHIFT:
                ci[s] = ci[s - 1]
            elif kind == CI_LAST_VAR:
                ci[s] = v
            elif kind == CI_FIRST_VAR:
                if ci[s] < 0:
                    ci[s] = v
            elif kind == CI_NTH_VAR:
                if ci[s] < 0 and ci[s - 1] >= 0:
                    ci[s] = v
            elif kind >= CI_FOLLOW:
                if ci[s + ((kind >> 20) & 0xFFFFF)] < 0:
                    ci[s] = ci[s + (kind & 0xFFFFF)]
            else:  # CI_SNAP
                ci[s] = ci[s - (kind - CI_SNAP)]
    for s in range(cf_kind.shape[0]):
        if covers(cf_var[s], v):
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
        kind = ci_kind[s]
        hit = covers(cv, v)
        if kind >= CI_KTH:
            if hit:
                ci[nid, s] = kth_update(kind, ci[nid, s], v, g)
        elif kind >= CI_AFTER:
            ci[nid, s] = after_slot_row(ci, nid, s, kind, hit, v)
        elif hit:
            if kind == CI_LAST:
                ci[nid, s] = g
            elif kind == CI_FIRST:
                if ci[nid, s] < 0:
                    ci[nid, s] = g
            elif kind == CI_SHIFT:
                ci[nid, s] = ci[nid, s - 1]
            elif kind == CI_LAST_VAR:
                ci[nid, s] = v
            elif kind == CI_FIRST_VAR:
                if ci[nid, s] < 0:
                    ci[nid, s] = v
            elif kind == CI_NTH_VAR:
                if ci[nid, s] < 0 and ci[nid, s - 1] >= 0:
                    ci[nid, s] = v
            elif kind >= CI_FOLLOW:
                if ci[nid, s + ((kind >> 20) & 0xFFFFF)] < 0:
                    ci[nid, s] = ci[nid, s + (kind & 0xFFFFF)]
            else:  # CI_SNAP
                ci[nid, s] = ci[nid, s - (kind - CI_SNAP)]
    for s in range(cf_kind.shape[0]):
        if covers(cf_var[s], v):
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
