"""The golden query corpus: case files, running a case, its plan shape, comparing and rewriting.

A case file (``tests/queries/<language>/<name>.case``, format in ``tests/queries/README.md``) holds
a header (store, strategies, options) and the sections ``query:``, ``plan:`` and ``rows:`` (or
``error:``). :func:`load_case` reads it; :func:`run` executes the query with one strategy (or on
the Spark engine) and returns an :class:`Outcome` (the result table's text form, the plan shape,
or the error); :func:`check` compares an outcome with the case; :func:`render` writes the case
back with new expected sections (``python -m tests.queries.regen``).
"""

from __future__ import annotations

import math
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

import replaydb
from replaydb.errors import ReplayDBError
from replaydb.planner.result import instants_as_text
from tests.queries.stores import StoreSpec, parse_pairs, parse_value

ROOT = Path(__file__).resolve().parent
SECTIONS = ("query", "plan", "rows", "error")
HEADER_KEYS = ("dataset", "store", "strategies", "options", "spark", "order", "ignore", "xfail")
SPARK_MODES = ("fast", "slow", "no")
REL_TOL = 1e-9
ABS_TOL = 1e-12
FLOAT_DIGITS = 12


# --------------------------------------------------------------------------- the case
@dataclass(frozen=True)
class Strategy:
    """A ``--plan`` choice with the planner options it runs with (``optimal:cpm=false``)."""

    plan: str
    extra: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, token: str) -> Strategy:
        plan, _, opts = token.partition(":")
        pairs = parse_pairs([p for p in opts.split(",") if p], f"strategy {token}")
        return cls(plan, tuple((k, parse_value(v)) for k, v in pairs.items()))

    @property
    def name(self) -> str:
        return self.plan + (":" + ",".join(f"{k}={_fmt_opt(v)}" for k, v in self.extra)
                            if self.extra else "")


def _fmt_opt(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


@dataclass
class Case:
    """One case file, parsed. ``expected_*`` are the sections as written (None: absent)."""

    path: Path
    header: list[str]
    store: StoreSpec
    query: str
    strategies: list[Strategy]
    options: dict[str, Any] = field(default_factory=dict)
    spark: str = "slow"
    order: str = "exact"
    ignore: tuple[str, ...] = ()
    xfail: dict[str, str] = field(default_factory=dict)
    expected_plan: dict[str, str] | None = None
    expected_rows: list[str] | None = None
    expected_error: str | None = None

    @property
    def name(self) -> str:
        """``language/name`` (a file outside the corpus: its stem)."""
        if not self.path.is_relative_to(ROOT):
            return self.path.stem
        return self.path.relative_to(ROOT).with_suffix("").as_posix()


def case_files(pattern: str = "") -> list[Path]:
    """Every case file under ``tests/queries`` whose name contains ``pattern``, sorted."""
    return sorted(p for p in ROOT.rglob("*.case")
                  if pattern in p.relative_to(ROOT).with_suffix("").as_posix())


def load_case(path: Path) -> Case:
    """Parse a case file (a ``ValueError`` naming the file and the problem if malformed)."""
    try:
        return _parse(path.resolve(), path.read_text().splitlines())
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _parse(path: Path, lines: list[str]) -> Case:
    header: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        head = line.split(":", 1)[0].strip()
        if head in SECTIONS and not line.startswith((" ", "\t")):
            if head in sections:
                raise ValueError(f"section {head}: appears twice")
            current = sections[head] = [line.split(":", 1)[1].strip()]
        elif current is None:
            header.append(line)
        else:
            current.append(line)
    values: dict[str, str] = {}
    xfail: dict[str, str] = {}
    for line in header:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, value = line.partition(":")
        key = key.strip()
        if not colon or key not in HEADER_KEYS:
            raise ValueError(f"header line {line!r}: expected one of {', '.join(HEADER_KEYS)}")
        if key == "xfail":
            run, _, reason = value.strip().partition(" ")
            xfail[run.rstrip(":")] = reason.strip()
        elif key in values:
            raise ValueError(f"header {key}: given twice")
        else:
            values[key] = value.strip()
    if "dataset" not in values or "store" not in values or "query" not in sections:
        raise ValueError("dataset:, store: and query: are required")
    if "rows" in sections and "error" in sections:
        raise ValueError("rows: and error: exclude each other")
    strategies = [Strategy.parse(t) for t in values.get("strategies", "auto").split()]
    if "error" not in sections and not any(s.plan == "replay" and not s.extra
                                           for s in strategies):
        strategies.insert(0, Strategy("replay"))  # the twin every strategy is compared with
    case = Case(path, header, StoreSpec.parse(values["dataset"], values["store"]),
                _block(sections["query"][1:]), strategies,
                {k: parse_value(v) for k, v in parse_pairs(values.get("options", "").split(),
                                                           "options").items()},
                values.get("spark", "slow"), values.get("order", "exact"),
                tuple(values.get("ignore", "").split()), xfail)
    if case.spark not in SPARK_MODES or case.order not in ("exact", "any"):
        raise ValueError(f"spark: one of {SPARK_MODES}; order: exact or any")
    unknown = set(xfail) - {s.name for s in strategies} - {"spark"}
    if unknown:
        raise ValueError(f"xfail names runs the case does not have: {sorted(unknown)}")
    if "plan" in sections:
        case.expected_plan = {}
        for line in _block(sections["plan"][1:]).splitlines():
            m = re.match(r"(\S+):\s+(.*)$", line)  # a run's name may hold ':' (optimal:cpm=false)
            if m is None:
                raise ValueError(f"plan: expected 'run: shape', got {line!r}")
            case.expected_plan[m.group(1)] = m.group(2).strip()
    if "rows" in sections:
        case.expected_rows = [ln for ln in sections["rows"][1:] if ln.strip()]
        count = sections["rows"][0]
        if count and (not count.isdigit() or int(count) != len(case.expected_rows) - 2):
            raise ValueError(f"rows: {count} but {len(case.expected_rows) - 2} row lines")
    if "error" in sections:
        case.expected_error = (sections["error"][0] or _block(sections["error"][1:])).strip()
    return case


def _block(lines: list[str]) -> str:
    return "\n".join(lines).strip("\n")


# --------------------------------------------------------------------------- plan shape
def plan_shape(d: dict[str, Any]) -> str:
    """A small, stable summary of an EXPLAIN dict, read from the plan value's nodes
    (``d["plan"]``): language, chosen strategy, the source node (``full_scan``,
    ``interval_scan(<reason>)`` with ``+guard`` for a TPStream situation guard,
    ``tree_aggregates(<variant>)``), the operator family, the indexes used as
    ``variable.column`` (pattern lookups, TPStream situations) and the device. No estimate,
    timing or count enters it."""
    node = d["plan"]
    src = node["source"]
    source = src["node"]
    if source == "interval_scan":
        source += f"({src['reason']}{'+guard' if src.get('guard') else ''})"
    elif source == "tree_aggregates":
        source += f"({src['variant']})"
    pattern = d.get("pattern") or {}
    situations = (d.get("tpstream") or {}).get("situations") or {}
    indexes = [_lookup_column(x) for x in (pattern.get("chosen") or {}).get("indexes", [])]
    indexes += [f"{n}.{s['index']}" for n, s in situations.items()
                if s["source"].startswith("index")]
    parts = [f"language={d['language']}", f"strategy={node['strategy']}", f"source={source}",
             f"operator={node['operator']['family']}"]
    if indexes and source.startswith("interval_scan"):
        parts.append("indexes=" + ",".join(sorted(set(indexes))))
    if situations:
        parts.append("situations=" + ",".join(f"{n}:{s['source']}"
                                              for n, s in situations.items()))
    parts.append(f"device={node['operator']['device']}")
    return " ".join(parts)


_NOT_COLUMNS = {"OR", "any", "FALSE", "inf", "nan", "True", "False"}


def _lookup_column(text: str) -> str:
    """``'#1 C: 999 <= volume'`` (an index lookup of EXPLAIN's ``chosen``) -> ``'C.volume'``."""
    m = re.match(r"#\d+ (\S+): (.*)", text)
    if m is None:
        return text
    bare = re.sub(r"'(?:[^']|'')*'", "", m.group(2))
    cols = [w for w in re.findall(r"[A-Za-z_]\w*", bare) if w not in _NOT_COLUMNS]
    return f"{m.group(1)}.{cols[0] if cols else '?'}"


# --------------------------------------------------------------------------- values as text
def format_value(v: Any) -> str:
    """One cell: NULL, true/false, integers and decimals as digits, floats with
    ``FLOAT_DIGITS`` significant digits (NaN, inf, -inf), lists in brackets, strings with
    ``\\`` and ``|`` escaped (``''`` for the empty string, ``\\NULL`` for the text NULL)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return format(v, f".{FLOAT_DIGITS}g")
    if isinstance(v, str):
        if v == "":
            return "''"
        s = v.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n")
        return "\\NULL" if s == "NULL" else s
    if isinstance(v, list | tuple):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {format_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, bytes):
        return "0x" + v.hex()
    return str(v)


def table_lines(table: pa.Table, ignore: tuple[str, ...] = (), order: str = "exact"
                ) -> list[str]:
    """The ``rows:`` section of ``table``: a header of column names, a line of their types,
    then one line per row, cells padded to their column's width and joined by `` | ``
    (sorted by their text with ``order="any"``)."""
    table = table.drop_columns([c for c in ignore if c in table.column_names])
    names = table.column_names
    types = [str(f.type) for f in table.schema]
    rows = [[format_value(v) for v in r.values()]
            for r in instants_as_text(table).to_pylist()]
    if order == "any":
        rows.sort()
    width = [max([len(n), len(t)] + [len(r[i]) for r in rows])
             for i, (n, t) in enumerate(zip(names, types))]

    def line(cells: list[str]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cells, width)).rstrip()

    return [line(names), line(types)] + [line(r) for r in rows]


def split_cells(line: str) -> list[str]:
    """A table line's cells (``|`` separates unless escaped), stripped."""
    cells, cur, esc = [], [], False
    for ch in line:
        if esc:
            cur.append("\\" + ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == "|":
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    cells.append("".join(cur).strip())
    return cells


def rows_equal(expected: list[str], actual: list[str], order: str) -> bool:
    """Whether two ``rows:`` sections agree: names and types exactly, rows cell by cell -
    floating-point cells (by the type line) within ``REL_TOL``/``ABS_TOL``, others as text;
    with ``order="any"`` as multisets."""
    if len(expected) != len(actual) or len(expected) < 2:
        return False
    exp = [split_cells(x) for x in expected]
    act = [split_cells(x) for x in actual]
    if exp[:2] != act[:2]:
        return False
    floats = [t in ("double", "float", "halffloat") for t in act[1]]
    er, ar = exp[2:], act[2:]
    if order == "any":
        er, ar = sorted(er), sorted(ar)
    return all(len(e) == len(a) and all(_cell_equal(x, y, f) for x, y, f in zip(e, a, floats))
               for e, a in zip(er, ar))


def _cell_equal(e: str, a: str, is_float: bool) -> bool:
    if e == a:
        return True
    if not is_float:
        return False
    try:
        x, y = float(e), float(a)
    except ValueError:
        return False
    return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=REL_TOL,
                                                            abs_tol=ABS_TOL)


# --------------------------------------------------------------------------- running a case
@dataclass
class Outcome:
    """What one run gave: ``rows`` (the section's lines) and ``plan`` (its shape), or
    ``error`` (``Class: message``); ``spark_order``: the Spark engine's result order
    (``exact`` or ``any``: partition mode returns partitions in sorted order)."""

    rows: list[str] | None = None
    plan: str | None = None
    error: str | None = None
    spark_order: str = "exact"


def run(case: Case, store: Any, strategy: Strategy | None, *, engine: str = "local"
        ) -> Outcome:
    """Run the case's query with ``strategy`` (None: the default plan) on ``engine``."""
    opts: dict[str, Any] = dict(case.options)
    if strategy is not None:
        opts.update(strategy.extra)
        opts["plan"] = strategy.plan
    try:
        res = replaydb.query(store, case.query, engine=engine, **opts)
    except ReplayDBError as exc:
        return Outcome(error=f"{type(exc).__name__}: {_normalize(str(exc), store)}")
    value = res.plan.physical
    if pickle.loads(pickle.dumps(value)) != value:
        return Outcome(error=f"PlanValueError: the plan does not survive pickle: {value!r}")
    out = Outcome(table_lines(res.table, case.ignore, case.order),
                  plan_shape(res.plan.describe()))
    sp = res.stats.get("spark") or {}
    if sp.get("mode") == "partition" and sp.get("result_order") != "local":
        out.spark_order = "any"
    return out


def spark_strategy(case: Case) -> Strategy | None:
    """The strategy of the case's Spark run: the default plan, or for an error case the
    first strategy it lists (the one its error is about)."""
    return case.strategies[0] if case.expected_error is not None else None


def _normalize(message: str, store: Any) -> str:
    return message.replace(store.uri, "<store>").replace(str(store.path), "<store>")


def check(case: Case, got: Outcome, run_name: str) -> list[str]:
    """What differs between the case's expected sections and ``got`` (empty: nothing)."""
    problems = []
    if case.expected_error is not None:
        if got.error is None:
            problems.append(f"expected error {case.expected_error!r}, got {len(got.rows or [])}"
                            " lines of rows")
        elif not error_matches(case.expected_error, got.error):
            problems.append(f"expected error {case.expected_error!r}, got {got.error!r}")
        return problems
    if case.expected_rows is None:
        return [f"no expected output: run python -m tests.queries.regen {case.name}"]
    if got.error is not None:
        return [f"unexpected error {got.error}"]
    assert got.rows is not None
    order = "any" if got.spark_order == "any" else case.order
    if not rows_equal(case.expected_rows, got.rows, order):
        problems.append("rows differ:\n  expected:\n    " + "\n    ".join(case.expected_rows)
                        + "\n  got:\n    " + "\n    ".join(got.rows))
    if run_name != "spark":
        want = (case.expected_plan or {}).get(run_name)
        if want != got.plan:
            problems.append(f"plan shape of {run_name}: expected {want!r}, got {got.plan!r}")
    return problems


def error_matches(expected: str, actual: str) -> bool:
    """``Class: fragment`` matches an error of that class whose message contains fragment."""
    cls, _, frag = expected.partition(":")
    acls, _, amsg = actual.partition(":")
    return cls.strip() == acls.strip() and frag.strip() in amsg


# --------------------------------------------------------------------------- rewriting
def render(case: Case, plans: dict[str, str] | None, rows: list[str] | None,
           error: str | None) -> str:
    """The case file with its expected sections replaced (header and query kept verbatim)."""
    out = list(case.header)
    while out and not out[-1].strip():
        out.pop()
    out += ["", "query:", case.query, ""]
    if error is not None:
        out += ["error:", error]
    else:
        assert plans is not None and rows is not None
        width = max(len(k) for k in plans) + 1
        out += ["plan:"] + [f"{(k + ':').ljust(width)} {v}" for k, v in plans.items()] + [""]
        out += [f"rows: {len(rows) - 2}"] + rows
    return "\n".join(out) + "\n"

