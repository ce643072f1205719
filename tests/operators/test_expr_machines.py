"""Every evaluator of the typed expression form against the NumPy evaluator.

One random predicate over a random batch (integers, floats with NULL, NaN, +-0 and +-inf,
strings with NULL, booleans) is evaluated by

* the NumPy evaluator (:func:`replaydb.operators.expr.evaluate_mask`, the reference);
* the float-domain machine of the pattern matcher (:func:`replaydb.operators.pattern.vm.vm_eval`,
  compiled by Numba for the CPU);
* GRETA's edge machine (:class:`~replaydb.operators.greta.edgecode.EdgeProgram` and
  :func:`~replaydb.operators.greta.edgecode.eval_edge`: the packed encoding);
* the row machine of the GPU filter and join with NumPy's column kinds
  (:func:`replaydb.operators.exprcode.machine.eval_rows`) compiled for the CPU, and the GPU filter
  operator itself (on the GPU when there is one, else under the CUDA simulator);

and every one must give NumPy's answer on every row. A second property runs cross-event pattern
conditions through the pattern operator against the pattern oracle (which evaluates with
NumPy). The scalar helpers are held to NumPy's ufuncs bit for bit (NaN and the sign of zero
included), in Python and compiled.
"""

from __future__ import annotations

from replaydb.operators.gpu.testing import fast_thread_switching, use_simulator_unless_gpu

BACKEND = use_simulator_unless_gpu()

import math  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from numba import njit  # noqa: E402

from replaydb.errors import QueryError  # noqa: E402
from replaydb.operators.base import column_np  # noqa: E402
from replaydb.operators.expr import (  # noqa: E402
    Between,
    Binary,
    Call,
    Column,
    Expr,
    InList,
    IsNull,
    Literal,
    Unary,
    evaluate_mask,
)
from replaydb.operators.exprcode import opcodes as oc  # noqa: E402
from replaydb.operators.exprcode import scalar as sc  # noqa: E402
from replaydb.operators.exprcode.machine import eval_rows  # noqa: E402
from replaydb.operators.exprcode.program import lower  # noqa: E402
from replaydb.operators.exprcode.typed import Typed, type_condition  # noqa: E402
from replaydb.operators.filter import FilterConfig, FilterOperator  # noqa: E402
from replaydb.operators.gpu.columns import ColumnSet, Source  # noqa: E402
from replaydb.operators.gpu.exprvm import NotCompilable, compile_predicate  # noqa: E402
from replaydb.operators.gpu.filter import GpuFilterOperator  # noqa: E402
from replaydb.operators.gpu.testing import same_table  # noqa: E402
from replaydb.operators.greta.edgecode import STACK_SLOTS, EdgeProgram, eval_edge  # noqa: E402
from replaydb.operators.pattern import model as pm  # noqa: E402
from replaydb.operators.pattern import oracle  # noqa: E402
from replaydb.operators.pattern.vm import vm_eval_node  # noqa: E402

SCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("i", pa.int64()),
                    ("f", pa.float64()), ("s", pa.string()), ("b", pa.bool_())])
KINDS = {"t": "i", "seq": "i", "i": "i", "f": "f", "s": "s", "b": "b"}
FLOATS = [0.0, -0.0, 0.5, -2.5, 3.0, -7.0, 1e300, math.inf, -math.inf, math.nan]


@pytest.fixture(autouse=True, scope="module")
def _threads():  # type: ignore[no-untyped-def]
    with fast_thread_switching():
        yield


# --------------------------------------------------------------------------- random input
@st.composite
def tables(draw, max_rows: int = 10) -> pa.Table:
    n = draw(st.integers(1, max_rows))
    ints = draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n))
    floats = draw(st.lists(st.one_of(st.none(), st.sampled_from(FLOATS),
                                     st.floats(-100, 100)), min_size=n, max_size=n))
    strs = draw(st.lists(st.sampled_from(["a", "b", "ab", None]), min_size=n, max_size=n))
    bools = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return pa.table([pa.array(range(n), pa.int64()), pa.array(range(n), pa.int64()),
                     pa.array(ints, pa.int64()), pa.array(floats, pa.float64()),
                     pa.array(strs, pa.string()), pa.array(bools, pa.bool_())], schema=SCHEMA)


def numbers(col: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    """Numeric expressions of depth <= 3 (integers stay far below 2**53)."""
    leaf = st.one_of(col, st.integers(-5, 5).map(Literal), st.sampled_from(FLOATS[:7]).map(Literal))

    def grow(sub: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        unary = st.sampled_from(["ABS", "FLOOR", "CEIL", "SQRT", "EXP", "LN", "LOG10"])
        return st.one_of(
            st.tuples(st.sampled_from(["+", "-", "*", "/", "%"]), sub, sub).map(
                lambda p: Binary(p[0], p[1], p[2])),
            sub.map(lambda x: Unary("neg", x)),
            st.tuples(unary, sub).map(lambda p: Call(p[0], (p[1],))),
            st.tuples(st.sampled_from(["LEAST", "GREATEST"]), st.lists(sub, min_size=1,
                                                                        max_size=3)).map(
                lambda p: Call(p[0], tuple(p[1]))),
            st.tuples(sub, sub).map(lambda p: Call("POWER", p)),
            st.tuples(sub, st.integers(-1, 2)).map(lambda p: Call("ROUND", (p[0],
                                                                            Literal(p[1])))),
        )

    return st.recursive(leaf, grow, max_leaves=5)


def predicates(col: st.SearchStrategy[Expr], strings: bool = True, bools: bool = True,
               number_truth: bool = True) -> st.SearchStrategy[Expr]:
    """Conditions of depth <= 3; ``number_truth``: numbers used as conditions among them
    (refused by the pattern languages, whose conditions must be boolean)."""
    num = numbers(col)
    cmp = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
    atoms = [
        st.tuples(cmp, num, num).map(lambda p: Binary(p[0], p[1], p[2])),
        st.tuples(st.sampled_from(["=", "!="]), num).map(  # NumPy cannot order None
            lambda p: Binary(p[0], p[1], Literal(None))),
        st.tuples(num, num, num, st.booleans()).map(lambda p: Between(*p)),
        st.tuples(num, st.lists(num, min_size=1, max_size=3), st.booleans()).map(
            lambda p: InList(p[0], tuple(p[1]), p[2])),
        st.tuples(num, st.booleans()).map(lambda p: IsNull(*p)),
    ]
    if number_truth:
        atoms.append(num)  # a number as a condition: NULL and 0 are false
    if bools:
        atoms.append(st.just(Column("b")))
    if strings:
        s = st.one_of(st.just(Column("s")), st.sampled_from(["a", "ab", "zz"]).map(Literal))
        atoms += [st.tuples(st.sampled_from(["=", "!="]), st.just(Column("s")), s).map(
                      lambda p: Binary(*p)),
                  st.booleans().map(lambda neg: IsNull(Column("s"), neg))]
    atom = st.one_of(*atoms)
    return st.recursive(atom, lambda sub: st.one_of(
        sub.map(lambda x: Unary("not", x)),
        st.tuples(st.sampled_from(["and", "or"]), sub, sub).map(lambda p: Binary(*p))),
        max_leaves=3)


COLS = st.sampled_from([Column("i"), Column("f")])


# --------------------------------------------------------------------------- evaluators
def numpy_mask(expr: Expr, tab: pa.Table) -> np.ndarray:
    cols = {name: column_np(tab, name) for name in tab.column_names}
    return evaluate_mask(expr, cols, tab.num_rows)


class _FloatScope:
    """The pattern machine's view of a batch: every column float64 in ``rows``, strings as
    codes (NULL NaN), loaded by ``LDF``."""

    float_domain = True
    ordered_strings = False
    boolean_conditions = False

    def __init__(self, codes: dict[str, int]) -> None:
        self.codes = codes

    def leaf(self, e: Expr) -> Typed:
        assert isinstance(e, Column)
        return Typed(oc.LDF, KINDS[e.name], "F", a=SCHEMA.names.index(e.name))

    def string(self, value: str, e: Expr) -> Typed:
        return Typed(oc.CF, "s", "F", fc=float(self.codes.setdefault(value, len(self.codes))))

    def call(self, e: Call) -> Typed:  # pragma: no cover - the generator makes none
        raise AssertionError(e)

    def error(self, message: str, e: Expr) -> Exception:
        return QueryError(message)


def float_rows(tab: pa.Table, codes: dict[str, int]) -> np.ndarray:
    out = np.empty((tab.num_rows, len(SCHEMA)), np.float64)
    for j, name in enumerate(SCHEMA.names):
        vals = tab.column(name).to_pylist()
        if name == "s":
            out[:, j] = [math.nan if v is None else codes.setdefault(v, len(codes)) for v in vals]
        else:
            out[:, j] = [math.nan if v is None else float(v) for v in vals]
    return out


@njit(cache=True)
def _pattern_machine(op, a, b, fc, ic, n_ops, rows, si, sf, out):
    ctx = np.zeros((1, 1), np.int64)
    ctx_f = np.zeros((1, 1), np.float64)
    for r in range(rows.shape[0]):
        out[r] = vm_eval_node(op, a, b, fc, ic, 0, n_ops, rows, 0, r, ctx, ctx_f, ctx[0],
                              ctx_f[0], -1, si, sf)


@njit(cache=True)
def _edge_machine(code, arg, rows, stack, out):
    for r in range(rows.shape[0]):
        out[r] = eval_edge(code, arg, 0, code.shape[0], rows, r, rows, r, stack)


@njit(cache=True)
def _row_machine(op, a, b, fc, ic, n_ops, strc, im, fm, si, sf, out):
    for r in range(out.shape[0]):
        out[r] = eval_rows(op, a, b, fc, ic, 0, n_ops, strc, im, fm, r, im, fm, r, si, sf)


def pattern_mask(expr: Expr, tab: pa.Table) -> np.ndarray:
    codes: dict[str, int] = {}
    prog = lower(type_condition(expr, _FloatScope(codes)))
    rows = float_rows(tab, codes)
    out = np.zeros(tab.num_rows, np.bool_)
    _pattern_machine(prog.op, prog.a, prog.b, prog.fc, prog.ic, prog.n_ops, rows,
                     np.empty(prog.depth_i + 1, np.int64), np.empty(prog.depth_f + 1), out)
    return out


def edge_mask(expr: Expr, tab: pa.Table) -> np.ndarray:
    names: list[str] = []
    code, arg = EdgeProgram(expr, names, KINDS.__getitem__).arrays()
    full = float_rows(tab, {})
    rows = np.ascontiguousarray(full[:, [SCHEMA.names.index(c) for c in names] or [0]])
    out = np.zeros(tab.num_rows, np.bool_)
    _edge_machine(code, arg, rows, np.zeros(STACK_SLOTS), out)
    return out


def row_mask(expr: Expr, tab: pa.Table) -> np.ndarray | None:
    """The GPU's row machine compiled for the CPU; None when the batch's kinds fall back."""
    src = Source(tab.num_rows)
    for name in tab.column_names:
        col = tab.column(name)
        vals = col.to_numpy(zero_copy_only=False) if name == "s" else column_np(tab, name)
        src.add(name, vals, col.type, col.null_count)
    cs = ColumnSet([src])
    try:
        prog = compile_predicate(expr, lambda c: cs.slot(0, c.name))
    except NotCompilable:
        return None
    strc = cs.finish(prog.str_literals)
    im, fm = cs.matrices(0)
    out = np.zeros(tab.num_rows, np.bool_)
    _row_machine(prog.op, prog.a, prog.b, prog.fc, prog.ic, prog.n_ops, strc, im, fm,
                 np.empty(prog.depth_i + 1, np.int64), np.empty(prog.depth_f + 1), out)
    return out


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@SETTINGS
@given(predicates(COLS), tables())
def test_cpu_machines_agree_with_numpy(expr: Expr, tab: pa.Table) -> None:
    want = numpy_mask(expr, tab)
    assert np.array_equal(pattern_mask(expr, tab), want), (str(expr), tab.to_pydict())
    got = row_mask(expr, tab)
    assert got is None or np.array_equal(got, want), (str(expr), tab.to_pydict())


@SETTINGS
@given(predicates(COLS, strings=False), tables())
def test_greta_edge_machine_agrees_with_numpy(expr: Expr, tab: pa.Table) -> None:
    assert np.array_equal(edge_mask(expr, tab), numpy_mask(expr, tab)), (str(expr),
                                                                          tab.to_pydict())


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(predicates(COLS), tables(8))
def test_gpu_filter_agrees_with_numpy(expr: Expr, tab: pa.Table) -> None:
    """The GPU filter (the device, or the CUDA simulator) against the CPU filter; ROUND is
    refused at bind time by the GPU filter, so those predicates are left out."""
    if any(isinstance(n, Call) and n.name == "ROUND" for n in expr.walk()):
        return
    cfg = FilterConfig(expr)
    cpu = FilterOperator(cfg).process(tab)
    op = GpuFilterOperator(cfg)
    gpu = op.process(tab)
    assert op.backend == BACKEND
    assert same_table(gpu, cpu), (str(expr), tab.to_pydict())
    if row_mask(expr, tab) is not None:  # compiled for the device: no CPU fallback
        assert op.counters.extra.get("cpu_fallback_batches", 0) == 0


# --------------------------------------------------------------------------- pattern oracle
PSCHEMA = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("i", pa.int64()),
                     ("f", pa.float64())])


@st.composite
def pattern_tables(draw) -> pa.Table:
    n = draw(st.integers(2, 8))
    ints = draw(st.lists(st.one_of(st.none(), st.integers(-20, 20)), min_size=n, max_size=n))
    floats = draw(st.lists(st.one_of(st.none(), st.sampled_from(FLOATS)), min_size=n,
                           max_size=n))
    return pa.table([pa.array(range(n), pa.int64()), pa.array(range(n), pa.int64()),
                     pa.array(ints, pa.int64()), pa.array(floats, pa.float64())],
                    schema=PSCHEMA)


PCOLS = st.sampled_from([Column("i"), Column("f"), Column("i", "A"), Column("f", "A")])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(predicates(PCOLS, strings=False, bools=False, number_truth=False), pattern_tables())
def test_pattern_conditions_agree_with_the_oracle(expr: Expr, tab: pa.Table) -> None:
    """``PATTERN (A B)``, ``B``'s condition refers to ``A`` and to the current row: the
    compiled pattern machine (with the pattern compiler's own typing) against the oracle."""
    spec = pm.PatternSpec(pm.Seq((pm.Var("A"), pm.Var("B"))), (pm.VarDef("A", None), pm.VarDef("B", expr)),
                       None, pm.Strategy.CONTIGUOUS, pm.Semantics.SQL, (),
                       after_match_skip=pm.AfterMatchSkip(pm.SkipKind.TO_NEXT_ROW))
    assert oracle.run_operator(spec, tab, batch_rows=3) == oracle.matches(spec, tab), (
        str(expr), tab.to_pydict())


# --------------------------------------------------------------------------- scalar helpers
def _bits(x: np.ndarray) -> np.ndarray:
    """Comparable bit patterns (every NaN alike, the sign of zero kept)."""
    x = np.asarray(x, np.float64)
    return np.where(np.isnan(x), np.nan, x).view(np.int64)


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, 7.0, -7.0, 1e300, -1e300,
                    5e-324, math.inf, -math.inf, math.nan])


@njit(cache=True)
def _compiled_binary(xs, ys, out):
    for k in range(xs.shape[0]):
        out[0, k] = sc.mod_f(xs[k], ys[k])
        out[1, k] = sc.min_f(xs[k], ys[k])
        out[2, k] = sc.max_f(xs[k], ys[k])
        out[3, k] = sc.fdiv(xs[k], ys[k])
        out[4, k] = sc.fpow(xs[k], ys[k])
        out[5, k] = sc.round_f(xs[k], 2)
        out[6, k] = sc.round_f(xs[k], -1)
        out[7, k] = sc.cmp_f(sc.LT, xs[k], ys[k])
        out[8, k] = sc.cmp_f(sc.NE, xs[k], ys[k])


POW_ROW = 4
"""The row of ``fpow`` in :func:`_reference`."""


def _reference(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.array([np.mod(xs, ys), np.minimum(xs, ys), np.maximum(xs, ys), xs / ys,
                         np.power(xs, ys), np.round(xs, 2), np.round(xs, -1),
                         (xs < ys).astype(float),
                         ((xs != ys) & ~np.isnan(xs) & ~np.isnan(ys)).astype(float)])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(list(SPECIAL)), st.floats(-1e6, 1e6)), min_size=1,
                max_size=40),
       st.lists(st.one_of(st.sampled_from(list(SPECIAL)), st.floats(-1e3, 1e3)), min_size=1,
                max_size=40))
def test_scalar_helpers_are_numpys_ufuncs(xs: list[float], ys: list[float]) -> None:
    n = min(len(xs), len(ys))
    x, y = np.array(xs[:n]), np.array(ys[:n])
    want = _reference(x, y)
    compiled = np.empty_like(want)
    _compiled_binary(x, y, compiled)
    python = np.array([[sc.mod_f(a, b), sc.min_f(a, b), sc.max_f(a, b), sc.fdiv(a, b),
                        sc.fpow(a, b), sc.round_f(a, 2), sc.round_f(a, -1),
                        sc.cmp_f(sc.LT, a, b), sc.cmp_f(sc.NE, a, b)]
                       for a, b in zip(x, y)], np.float64).T
    # POWER is the C library's (NumPy's own takes sqrt for an exponent of 0.5, giving -0.0
    # for -0.0 where C gives +0.0, and its integer powers may differ from C's in the last
    # bit): its row is compared as values to two units in the last place, the others bit
    # for bit
    exact = np.arange(want.shape[0]) != POW_ROW
    assert np.array_equal(_bits(compiled[exact]), _bits(want[exact])), (x, y)
    assert np.array_equal(_bits(python[exact]), _bits(want[exact])), (x, y)
    np.testing.assert_allclose(compiled[POW_ROW], want[POW_ROW], rtol=2 * np.finfo(float).eps,
                               atol=0, equal_nan=True, err_msg=repr((x, y)))


def test_modulo_is_floor_modulo_on_every_number() -> None:
    """``%`` takes the divisor's sign on integers and floats alike; ``x % 0`` is NULL."""
    a = np.array([-7, 7, -7, 7, 6, 5], np.int64)
    b = np.array([3, -3, -3, 3, -3, 0], np.int64)
    want = [2.0, -2.0, -1.0, 1.0, 0.0, math.nan]
    for x, y in ((a, b), (a.astype(float), b.astype(float))):
        got = [sc.mod_f(float(p), float(q)) for p, q in zip(x, y)]
        assert np.array_equal(got, want, equal_nan=True)
        tab = pa.table({"t": range(6), "seq": range(6), "x": x, "y": y})
        got_np = FilterOperator(FilterConfig(Binary("=", Binary("%", Column("x"), Column("y")),
                                                    Literal(2)))).process(tab)
        assert got_np.column("x").to_pylist() == [-7]
