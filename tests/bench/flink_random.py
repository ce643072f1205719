"""Random MATCH_RECOGNIZE queries that Flink SQL runs with replaydb's meaning, and their streams.

``random_query(seed)`` draws one query (the same text for the same seed) for
``test_flink_differential.py``: a sequence of 1-5 distinct variables with quantifiers (``?``,
``*``, ``+``, ``{n}``, ``{n,}``, ``{n,m}``, greedy and reluctant), DEFINE conditions over the
numeric columns (comparisons joined by AND/OR, ``+ - *``, the current row, other variables'
last rows, ``FIRST``/``LAST``, ``LAST(v.x, 1)``, ``COUNT/SUM/AVG/MIN/MAX`` over a variable,
``IS NULL``), an optional ``PARTITION BY k``, an optional ``WITHIN``, MEASURES (every variable's
first and last ``seq``, which pin the match, plus random navigation, aggregates and
differences), ONE ROW PER MATCH and every AFTER MATCH SKIP mode.

Where Flink refuses a construct or gives it another meaning, the generator keeps out of its way;
each rule is named in the code (``# rule <name>``) with its reason, and the semantic ones are in
docs/decisions.md ("Flink's MATCH_RECOGNIZE against SQL:2016"):

* ``first_completed_match``: Flink's NFA does not backtrack and reports, per start row, the
  first run that completes, not the one SQL:2016's preferment picks (a greedy ``A+ B`` finds
  nothing when A's condition also holds on B's row; ``A B? C`` skips B when C can take B's row;
  reluctant ``A+? B+? C`` gives A two rows instead of one). So every variable-length variable
  gets a guard on column ``g`` (read by no other condition) disjoint from the guards of the
  variables that can follow it: the match of a start row is then unique and preferment cannot
  matter.
* ``always_true_loops``: a variable without condition is never a greedy loop (the translator
  makes such loops reluctant, which keeps match starts only) and never follows a
  variable-length one (it cannot be disjoint from it).
* ``avg_of_integers``: Flink's AVG of an integer column is an integer (truncated), replaydb's
  (as Trino's) a double: AVG only over the float columns.
* ``greedy_at_end``: Flink refuses a greedy loop as the last variable; a greedy ``?`` there,
  or a greedy variable followed by optional ones only (``A+ B C? D*?``), ends the match
  without the rows the greedy variable could still take (the first completed match again).
  So a greedy variable-length variable is always followed by a variable of at least one row
  (else it becomes reluctant, or plain for ``?``).
* ``optional_after_greedy_loop``: Flink refuses an optional variable right after a greedy loop
  ("Optional pattern cannot be preceded by greedy pattern").
* ``lower_bound_zero``: Flink refuses ``{,m}`` and ``{0,m}`` ("The from should be a positive
  number"); ``?`` and ``*`` are drawn instead. Reluctant ``??`` is refused too and never drawn.
* ``no_prev``: Flink refuses PREV on a variable's own column ("physical offsets") and finds no
  match with PREV of another variable's: PREV is not drawn.
* ``no_empty_match``: every pattern has a variable of at least one row (replaydb, as Trino,
  reports empty matches in ONE ROW PER MATCH; Flink has none).
* ``loops_within``: a pattern with an unbounded loop always has WITHIN: without it Flink keeps
  every partial match of a loop whose condition keeps holding (minutes on a thousand rows).
* ``unsafe_skip``: AFTER MATCH SKIP TO FIRST/LAST v targets a variable of at least one row
  after another such variable, so the target exists and is not the match's first row; a few
  queries (``UNSAFE_SKIP_SHARE``) target any variable, and where SQL:2016 raises its exception
  there Flink must fail too ("Could not skip to ...").
* Not drawn, as replaydb's documented expression semantics differ from SQL's there: ``/``
  (replaydb divides integers exactly, Flink truncates) and NOT (replaydb's two-valued null
  logic). Unqualified columns appear only as plain operands: inside navigation or an
  aggregate they mean the whole match, which the translator refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

VARS = ("A", "B", "C", "D", "E")
INT_COLS = ("a", "b", "c")
FLOAT_COLS = ("x", "y", "z")
COL_RANGE = {"a": (0.0, 9.0), "b": (-3.0, 3.0), "c": (0.0, 3.0), "x": (0.0, 10.0),
             "y": (-5.0, 5.0), "z": (0.0, 10.0)}
"""Each column's range in :func:`random_events` (``z`` has NULLs)."""
PARTITION_COL = "k"
GUARD_COL = "g"
GUARD_VALUES = 4
UNSAFE_SKIP_SHARE = 0.08
"""Share of the AFTER MATCH SKIP TO FIRST/LAST draws (half of all) whose target may be
missing or the match's first row (rule unsafe_skip)."""
QUANTS = [  # (lo, hi, text, weight); rule lower_bound_zero: no {,m} or {0,m}
    (1, 1, "", 6), (0, 1, "?", 2), (0, None, "*", 2), (1, None, "+", 3), (2, 2, "{2}", 1),
    (3, 3, "{3}", 1), (2, None, "{2,}", 1), (1, 3, "{1,3}", 1), (2, 4, "{2,4}", 1),
]


def random_events(seed: int, n: int) -> pa.Table:
    """``n`` rows ordered by ``(t, seq)`` with many ties in ``t`` (steps of 0-3 units): ``seq``
    the row number, partition key ``k`` (0-2), the guard ``g`` (0-3), small integers ``c``
    (0-3), ``a`` (0-9), ``b`` (-3..3) and floats with two decimals ``x`` (0-10), ``y``
    (-5..5), ``z`` (0-10, 15% NULL)."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.choice([0, 0, 1, 1, 2, 3], n)).astype(np.int64)
    return pa.table({
        "t": t, "seq": np.arange(n, dtype=np.int64),
        "k": rng.integers(0, 3, n).astype(np.int64),
        "c": rng.integers(0, 4, n).astype(np.int64),
        "g": rng.integers(0, GUARD_VALUES, n).astype(np.int64),
        "a": rng.integers(0, 10, n).astype(np.int64),
        "b": rng.integers(-3, 4, n).astype(np.int64),
        "x": np.round(rng.random(n) * 10, 2),
        "y": np.round(rng.random(n) * 10 - 5, 2),
        "z": pa.array(np.round(rng.random(n) * 10, 2), mask=rng.random(n) < 0.15),
    })


@dataclass(frozen=True)
class Var:
    """A pattern variable: quantifier bounds (``hi`` None: unbounded), greediness, the
    quantifier as written, its condition (None: always true) and its guard values of ``c``."""

    name: str
    lo: int
    hi: int | None
    greedy: bool
    quant: str
    cond: str | None = None
    guard: frozenset[int] | None = None

    @property
    def variable_length(self) -> bool:
        return self.hi is None or self.hi > self.lo


@dataclass
class RandomQuery:
    """A drawn query: its seed, text, variables, output columns (the partition key, then the
    measures: ``f_v``/``l_v`` the first/last ``seq`` of each variable ``v``, then ``m0``...),
    and tags naming the features it uses."""

    seed: int
    text: str
    variables: list[Var]
    partitioned: bool
    columns: list[str]
    tags: set[str] = field(default_factory=set)

    @property
    def unsafe_skip(self) -> bool:
        """SQL:2016 may raise on this query's AFTER MATCH SKIP (rule unsafe_skip)."""
        return "unsafe_skip" in self.tags


class _Retry(Exception):
    """The drawn pattern needs more disjoint guards than there are values: draw again."""


class _Gen:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.tags: set[str] = set()
        self.prev_rows: list[str] = []

    def choice(self, xs):  # noqa: ANN001, ANN201 - any sequence
        return xs[int(self.rng.integers(0, len(xs)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    # ---------------------------------------------------------------- conditions
    def term(self, v: str, earlier: list[str],
             later: list[str]) -> tuple[str, tuple[float, float], bool]:
        """A numeric term of variable ``v``'s condition: (text, rough range, is float)."""
        col = self.choice(INT_COLS + FLOAT_COLS)
        rng, is_float = COL_RANGE[col], col in FLOAT_COLS
        kind = self.choice(["cur"] * 6 + ["bare", "other", "first", "last", "last1", "agg",
                                          "agg", "later"])
        if kind in ("other", "last") and not earlier or kind == "later" and not later:
            kind = "cur"
        if kind == "cur":
            return f"{v}.{col}", rng, is_float
        if kind == "bare":  # the current row's column, a plain operand only
            return col, rng, is_float
        self.tags.add(kind)
        if kind in ("other", "later"):  # a later variable has no row yet: NULL
            return f"{self.choice(earlier if kind == 'other' else later)}.{col}", rng, is_float
        if kind == "first":
            return f"FIRST({self.choice(earlier + [v])}.{col})", rng, is_float
        if kind == "last":
            return f"LAST({self.choice(earlier)}.{col})", rng, is_float
        if kind == "last1":
            self.prev_rows.append(f"LAST({v}.{col}, 1)")
            return self.prev_rows[-1], rng, is_float
        return self.aggregate(self.choice(earlier + [v, v]), col)

    def aggregate(self, w: str, col: str) -> tuple[str, tuple[float, float], bool]:
        fn = self.choice(["SUM", "COUNT", "MIN", "MAX", "AVG"])
        if fn == "COUNT":
            return f"COUNT({w}.{col})", (1.0, 4.0), False
        if fn == "AVG" and col in INT_COLS:  # rule avg_of_integers
            col = self.choice(FLOAT_COLS)
        lo, hi = COL_RANGE[col]
        if fn == "SUM":
            lo, hi = min(3 * lo, lo), max(3 * hi, hi)
        return f"{fn}({w}.{col})", (lo, hi), col in FLOAT_COLS

    def literal(self, rng: tuple[float, float], op: str, is_float: bool) -> str:
        """A literal making ``term op literal`` hold on about 70% of the term's range; float
        literals end in 49 ten-thousandths, which no sum of the two-decimal values hits."""
        lo, hi = rng
        q = self.rng.uniform(0.05, 0.55) if op in (">", ">=") else self.rng.uniform(0.45, 0.95)
        value = lo + q * (hi - lo)
        return f"{round(value, 2) + 0.0049:.4f}" if is_float else str(int(round(value)))

    def comparison(self, v: str, earlier: list[str], later: list[str]) -> str:
        """A comparison; one reading the variable's previous row (NULL on its first row) also
        holds when there is none, as Flink's documentation writes it."""
        self.prev_rows = []
        text = self._comparison(v, earlier, later)
        if self.prev_rows:
            text = f"({self.prev_rows[0]} IS NULL OR {text})"
        return text

    def _comparison(self, v: str, earlier: list[str], later: list[str]) -> str:
        left, lr, lf = self.term(v, earlier, later)
        op = self.choice(["<", "<=", ">", ">=", "<>", "<", ">"])
        r = self.rng.random()
        if r < 0.2:
            right, _, rf = self.term(v, earlier, later)
            if self.chance(0.3):
                right = f"{right} {self.choice(['+', '-'])} {int(self.rng.integers(0, 4))}"
            if (lf or rf) and op == "<>":
                op = "<"
            return f"{left} {op} {right}"
        if r < 0.35:
            arith = self.choice(["+", "-", "*"])
            if arith == "*":
                k = int(self.rng.integers(2, 4))
                left, lr = f"{left} * {k}", (lr[0] * k, lr[1] * k)
            else:
                other, orng, of = self.term(v, earlier, later)
                left = f"{left} {arith} {other}"
                lr = ((lr[0] + orng[0], lr[1] + orng[1]) if arith == "+"
                      else (lr[0] - orng[1], lr[1] - orng[0]))
                lf = lf or of
        if lf and op == "<>":
            op = ">"
        return f"{left} {op} {self.literal(lr, op, lf)}"

    def condition(self, v: str, earlier: list[str], later: list[str],
                  guard: frozenset[int] | None) -> str:
        """One comparison, or two joined by OR or AND, after the guard if any. A later
        variable (no row yet: NULL) is read only in the second operand of an OR."""
        r = self.rng.random()
        text = self.comparison(v, earlier, [])
        if r > 0.6:
            joiner = "OR" if r < 0.85 else "AND"
            other = self.comparison(v, earlier, later if joiner == "OR" else [])
            text = f"({text} {joiner} {other})"
        if guard is not None:
            vals = sorted(guard)
            g = (f"{v}.{GUARD_COL} = {vals[0]}" if len(vals) == 1
                 else f"{v}.{GUARD_COL} IN ({', '.join(map(str, vals))})")
            text = f"{g} AND {text}"
        return text

    # ---------------------------------------------------------------- pattern
    def quantifier(self, name: str) -> Var:
        weights = np.array([q[3] for q in QUANTS], float)
        lo, hi, q, _ = QUANTS[int(self.rng.choice(len(QUANTS), p=weights / weights.sum()))]
        var = Var(name, lo, hi, True, q)
        if var.variable_length and q != "?" and self.chance(0.5):
            var = replace(var, greedy=False, quant=q + "?")  # no '??': Flink refuses it
        return var

    def pattern(self) -> list[Var]:
        n = int(self.rng.integers(1, 6))
        out = [self.quantifier(VARS[i]) for i in range(n)]
        for i in range(n - 1):  # rule optional_after_greedy_loop
            v, w = out[i], out[i + 1]
            if v.greedy and v.variable_length and v.quant != "?" and w.lo == 0:
                out[i + 1] = (replace(w, lo=1, quant="+" + w.quant[1:])
                              if w.quant.startswith("*")
                              else replace(w, lo=1, hi=1, quant="", greedy=True))
        for i, v in enumerate(out):  # rule greedy_at_end
            if v.greedy and v.variable_length and all(w.lo == 0 for w in out[i + 1:]):
                out[i] = (replace(v, lo=1, hi=1, quant="") if v.quant == "?"
                          else replace(v, greedy=False, quant=v.quant + "?"))
        if all(v.lo == 0 for v in out):  # rule no_empty_match
            out[-1] = replace(out[-1], lo=1, hi=1, quant="", greedy=True)
        return out

    @staticmethod
    def followers(vars_: list[Var], i: int) -> list[int]:
        """The variables that can take the row right after a row of variable ``i``."""
        out = []
        for j in range(i + 1, len(vars_)):
            out.append(j)
            if vars_[j].lo > 0:
                break
        return out

    def guards(self, vars_: list[Var]) -> list[frozenset[int] | None]:
        """Rule first_completed_match: guard values of ``g`` per variable, disjoint between
        every variable-length variable and its followers (None: no guard)."""
        excl: dict[int, set[int]] = {}
        for i, v in enumerate(vars_):
            if v.variable_length:
                excl.setdefault(i, set())
                for j in self.followers(vars_, i):
                    excl.setdefault(j, set()).add(i)
        guards: list[frozenset[int] | None] = [None] * len(vars_)
        for i in sorted(excl):
            forbidden = set().union(*(guards[j] or set() for j in excl[i]))
            allowed = [g for g in range(GUARD_VALUES) if g not in forbidden]
            if not allowed:
                raise _Retry
            size = 1 if len(allowed) < 3 or self.chance(0.2) else 2
            guards[i] = frozenset(int(g) for g in self.rng.choice(allowed, size, replace=False))
        return guards

    def variables(self) -> list[Var]:
        vars_ = self.pattern()
        guards = self.guards(vars_)
        out: list[Var] = []
        for i, v in enumerate(vars_):
            earlier = [u.name for u in vars_[:i]]
            later = [u.name for u in vars_[i + 1:]]
            # rule always_true_loops: only where no guard is needed and no greedy loop
            if guards[i] is None and not (v.greedy and v.variable_length) and self.chance(0.2):
                out.append(replace(v, cond="TRUE") if self.chance(0.3) else v)
                continue
            out.append(replace(v, cond=self.condition(v.name, earlier, later, guards[i]),
                               guard=guards[i]))
        return out

    def skip(self, vars_: list[Var]) -> str:
        kind = self.choice(["PAST LAST ROW", "TO NEXT ROW", "TO FIRST", "TO LAST"])
        if kind in ("PAST LAST ROW", "TO NEXT ROW"):
            return kind
        if self.chance(UNSAFE_SKIP_SHARE):  # rule unsafe_skip
            self.tags.add("unsafe_skip")
            return f"{kind} {self.choice([v.name for v in vars_])}"
        safe = [v.name for i, v in enumerate(vars_)
                if v.lo > 0 and any(u.lo > 0 for u in vars_[:i])]
        if not safe:
            return self.choice(["PAST LAST ROW", "TO NEXT ROW"])
        return f"{kind} {self.choice(safe)}"

    def measure(self, vars_: list[Var]) -> str:
        v = self.choice(vars_).name
        col = self.choice(INT_COLS + FLOAT_COLS)
        kind = self.choice(["first", "last", "first1", "last1", "agg", "agg", "diff", "ref"])
        if kind == "agg":
            return self.aggregate(v, col)[0]
        self.tags.add("m_" + kind)
        if kind == "diff":
            return f"LAST({v}.{col}) - FIRST({self.choice(vars_).name}.{col})"
        return {"first": f"FIRST({v}.{col})", "last": f"LAST({v}.{col})",
                "first1": f"FIRST({v}.{col}, 1)", "last1": f"LAST({v}.{col}, 1)",
                "ref": f"{v}.{col}"}[kind]

    def query(self, seed: int) -> RandomQuery:
        vars_ = self.variables()
        partitioned = self.chance(0.5)
        within = int(self.rng.integers(0, 40)) if self.chance(0.5) else None
        if within is None and any(v.hi is None for v in vars_):  # rule loops_within
            within = int(self.rng.integers(5, 40))
        skip = self.skip(vars_)
        measures = [f"{fn}({v.name}.seq) AS {fn[0].lower()}_{v.name.lower()}"
                    for v in vars_ for fn in ("FIRST", "LAST")]
        measures += [f"{self.measure(vars_)} AS m{j}" for j in range(int(self.rng.integers(1, 4)))]
        columns = ([PARTITION_COL] if partitioned else []) + [m.split(" AS ")[-1]
                                                              for m in measures]
        body = [f"PARTITION BY {PARTITION_COL}" if partitioned else "",
                self.choice(["ORDER BY t", "ORDER BY t, seq", ""]),
                "MEASURES " + ", ".join(measures), "ONE ROW PER MATCH",
                f"AFTER MATCH SKIP {skip}",
                "PATTERN (" + " ".join(v.name + v.quant for v in vars_) + ")",
                "" if within is None else f"WITHIN {within}"]
        defs = [f"{v.name} AS {v.cond}" for v in vars_ if v.cond is not None]
        if defs:
            body.append("DEFINE " + ", ".join(defs))
        text = "SELECT * FROM s MATCH_RECOGNIZE (" + " ".join(b for b in body if b) + ")"
        return RandomQuery(seed, text, vars_, partitioned, columns, self.tags)


def random_query(seed: int) -> RandomQuery:
    """The random query of ``seed`` (reproducible: numpy's generator seeded with it)."""
    rng = np.random.default_rng(seed)
    while True:
        gen = _Gen(rng)
        try:
            return gen.query(seed)
        except _Retry:
            continue
