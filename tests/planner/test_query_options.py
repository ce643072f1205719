"""Typed query options (:mod:`replaydb.planner.options`): every option a query takes is declared
per planner and per language; an unknown or misspelled name and a value of the wrong type are
errors naming the valid options; each option reaches its planner or its operator; the
dataclasses' defaults are the binds' and the documentation names every option."""

from __future__ import annotations

import inspect
import re
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import replaydb
from replaydb.errors import UsageError
from replaydb.indexes.manage import create_index
from replaydb.planner.options import (
    OPERATOR_OPTIONS,
    PLANNER_OPTIONS,
    WEIGHT_NAMES,
    PatternPlannerOptions,
    TPStreamOptions,
    TPStreamPlannerOptions,
    option_names,
    parse_options,
)
from replaydb.planner.query import QueryOptions, plan_query
from replaydb.store.schema import Attribute, StreamSchema

LANGUAGES = sorted(set(PLANNER_OPTIONS) | set(OPERATOR_OPTIONS))
DOCS = Path(__file__).resolve().parents[2] / "docs"

MR = ("SELECT * FROM s MATCH_RECOGNIZE (MEASURES A.t AS at, B.t AS bt PATTERN (A B) WITHIN 5 "
      "DEFINE A AS x = 7, B AS x > 8)")
SASE = ("FROM s PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { a.x = 7 AND b.x > 8 } "
        "WITHIN 5 RETURN a.x, b.x")
TPS = "FROM s DEFINE A AS x = 7, B AS x > 8 PATTERN A before B WITHIN 3"
GRETA = "FROM s RETURN COUNT(*) AS n PATTERN SEQ(A+, B) WITHIN 4 ms"
WINDOW = ("SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, "
          "DESCRIPTOR(t), INTERVAL '50' MILLISECOND)) GROUP BY window_start, window_end")
IMPRECISE = "FROM ev PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) WITHIN 10 RETURN a, b"


@pytest.fixture(scope="module")
def store(tmp_path_factory: Any) -> Any:
    """Stream ``s`` (600 events from t = 7 ms, ``x`` in 0..9 indexed, types A/B/C) and the
    imprecise stream ``ev`` (uncertainty intervals ``[lo, lo + 4]``)."""
    st = replaydb.open(tmp_path_factory.mktemp("opts") / "store", create=True)
    n = 600
    rng = np.random.default_rng(5)
    st.create_stream("s", StreamSchema((Attribute("x", "float64"), Attribute("k", "int64"),
                                        Attribute("type", "string")), time_unit="ms",
                                       type_column="type", leaf_capacity=8, fanout=4))
    st.append("s", pa.table({"t": np.arange(n, dtype=np.int64) + 7,
                             "x": rng.integers(0, 10, n).astype(float),
                             "k": rng.integers(0, 3, n),
                             "type": np.array(["A", "B", "C"])[rng.integers(0, 3, n)]}))
    create_index(st, "s", "x")
    st.create_stream("ev", StreamSchema((Attribute("hi", "int64"), Attribute("type", "string")),
                                        time_unit="s", time_column="lo", upper_column="hi",
                                        type_column="type"))
    lo = np.arange(60) * 3
    st.append("ev", pa.table({"lo": lo, "hi": lo + 4,
                              "type": np.array(["A", "B", "C"])[np.arange(60) % 3]}))
    return st


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("language", LANGUAGES)
def test_an_unknown_option_names_the_valid_ones(language: str) -> None:
    valid = option_names(language)
    assert valid  # every language of the hub takes options
    with pytest.raises(UsageError) as ei:
        parse_options(language, {"no_such_option": 1})
    msg = str(ei.value)
    assert "'no_such_option'" in msg and language in msg
    for name in valid:
        assert re.search(rf"\b{name}\b", msg), (name, msg)


@pytest.mark.parametrize("language, wrong, right", [
    ("match_recognize", "cmp", "cpm"), ("sase", "vectorised", "vectorized"),
    ("tpstream", "max_fractoin", "max_fraction"), ("tpstream", "end_polcy", "end_policy"),
    ("greta", "exact_typ", "exact_type"), ("imprecise", "framwork", "framework"),
    ("window_sql", "alin", "align"), ("match_recognize", "scan_member", "scan_members"),
])
def test_a_misspelled_option_gets_a_suggestion(language: str, wrong: str, right: str) -> None:
    with pytest.raises(UsageError, match=rf"did you mean '{right}'\?"):
        parse_options(language, {wrong: True})


def test_an_option_of_another_language_says_whose_it_is(store: Any) -> None:
    with pytest.raises(UsageError) as ei:
        replaydb.query(store, MR, end_policy="close")
    assert "unknown option 'end_policy' for match_recognize" in str(ei.value)
    assert ei.value.hint == "end_policy is an option of tpstream queries"
    # SASE+ over a stream with uncertainty intervals runs the imprecise operator
    with pytest.raises(UsageError, match="'vectorized' for imprecise queries"):
        replaydb.query(store, IMPRECISE, vectorized=False)
    with pytest.raises(UsageError, match="'cpm' for greta queries"):
        replaydb.explain(store, GRETA, cpm=False)
    with pytest.raises(UsageError, match="'rivals' for window_sql queries"):
        plan_query(store, WINDOW, QueryOptions(extra={"rivals": False}))


@pytest.mark.parametrize("language, name, value", [
    ("match_recognize", "cpm", "no"), ("match_recognize", "cpm", 0),
    ("sase", "cpm_buckets", 1.5), ("sase", "cpm_buckets", True), ("sase", "cpm_level", "3"),
    ("match_recognize", "weights", {"w_pio": "x"}), ("match_recognize", "weights", [1.0]),
    ("match_recognize", "scan_members", "yes"), ("sase", "vectorized", 1),
    ("tpstream", "max_fraction", "high"), ("tpstream", "join_leaves", True),
    ("tpstream", "order", ("A", 1)), ("tpstream", "alpha", None),
    ("greta", "exact_type", 3), ("imprecise", "max_enumeration", 2.0),
    ("imprecise", "exact", "true"), ("window_sql", "align", 0),
])
def test_a_value_of_the_wrong_type_is_an_error(language: str, name: str, value: Any) -> None:
    with pytest.raises(UsageError, match=rf"option {name} of {language} queries must be"):
        parse_options(language, {name: value})


def test_values_are_checked_beyond_their_type() -> None:
    with pytest.raises(UsageError, match="semi_join must be true, false or 'always'"):
        parse_options("match_recognize", {"semi_join": "yes"})
    with pytest.raises(UsageError, match=r"unknown weight 'w_poi'.*did you mean 'w_pio'"):
        parse_options("sase", {"weights": {"w_poi": 1.0}})
    with pytest.raises(UsageError, match="cpm_buckets must be at least 1"):
        parse_options("sase", {"cpm_buckets": 0})


def test_parsed_options_are_typed_and_split() -> None:
    given = {"interval_events": 0, "max_fraction": float("inf"), "order": ["B", "A"],
             "end_policy": "close"}
    planner, operator = parse_options("tpstream", given)
    assert planner == TPStreamPlannerOptions(interval_events=0.0, max_fraction=float("inf"))
    assert isinstance(planner.interval_events, float)  # an int taken for a float
    assert operator == TPStreamOptions(order=("B", "A"), end_policy="close")
    assert given["interval_events"] == 0 and len(given) == 4  # the caller's dict is kept
    planner, operator = parse_options("match_recognize", {"semi_join": "always",
                                                          "weights": {"w_sort": 2}})
    assert planner.semi_join == "always" and planner.weights == {"w_sort": 2.0}
    assert parse_options("greta", {}) == (parse_options("greta", {})[0],
                                          OPERATOR_OPTIONS["greta"]())


def test_no_option_name_is_both_the_planners_and_the_operators() -> None:
    for language in PLANNER_OPTIONS:
        names = option_names(language)
        assert len(names) == len(set(names)), language


# --------------------------------------------------------------------------- defaults
def _defaults(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in fields(cls) if f.default is not MISSING}


def test_defaults_are_those_of_the_binds() -> None:
    """An operator option's default is its bind's (or configuration's) own."""
    from replaydb.operators.tpstream.config import TPStreamConfig
    from replaydb.planner.lang import greta, imprecise, match_recognize, sase

    for language, bind in (("match_recognize", match_recognize.bind), ("sase", sase.bind),
                           ("greta", greta.bind), ("imprecise", imprecise.bind)):
        params = inspect.signature(bind).parameters
        for name, default in _defaults(OPERATOR_OPTIONS[language]).items():
            assert params[name].default == default, (language, name)
    config = _defaults(TPStreamConfig)
    for name, default in _defaults(TPStreamOptions).items():
        assert config[name] == default, name


def test_planner_defaults_are_the_planners_constants() -> None:
    from replaydb.planner.pattern.cost import Weights
    from replaydb.planner.pattern.cpm import DEFAULT_MAX_BUCKETS

    assert PatternPlannerOptions().cpm_buckets == DEFAULT_MAX_BUCKETS
    # the member tests' costs are calibrated, not overridden: their options force a way
    assert set(WEIGHT_NAMES) == {f.name for f in fields(Weights)} - {"source", "member_costs"}


# --------------------------------------------------------------------------- options reach
def test_pattern_planner_options_change_the_plan(store: Any) -> None:
    for text in (MR, SASE):
        base = replaydb.explain(store, text, plan="all")["pattern"]
        assert "cpm" in base and len(base["rivals"]) > 2
        assert base["weights"]["source"] != "option"
        off = replaydb.explain(store, text, plan="all", cpm=False, rivals=False,
                               weights={"interval_events": 0.0})["pattern"]
        assert "cpm" not in off  # no coarse pattern map
        assert [r["strategy"] for r in off["rivals"]] == ["no index", "all"]
        assert off["weights"]["source"] == "option"
        assert off["weights"]["interval_events"] == 0.0
        assert base["cpm"]["level"] == 0  # 75 leaves: at most 4096 buckets
        coarse = replaydb.explain(store, text, plan="all", cpm_buckets=8)["pattern"]["cpm"]
        assert coarse["level"] > 0 and coarse["buckets"] <= 8
        level = replaydb.explain(store, text, plan="all", cpm_level=1)["pattern"]["cpm"]
        assert level["level"] == 1


def test_vectorized_reaches_the_pattern_operator(store: Any) -> None:
    fast = replaydb.explain(store, MR)["pattern"]["matcher"]
    slow = replaydb.explain(store, MR, vectorized=False)["pattern"]["matcher"]
    assert fast == "vectorized fixed sequence" and slow == "automaton"
    for text in (MR, SASE):
        ops = replaydb.explain(store, text, vectorized=False, plan="replay")["plan"]["operator"]
        assert ops["options"]["vectorized"] is False
        a = replaydb.query(store, text).table
        b = replaydb.query(store, text, vectorized=False).table
        assert a.num_rows > 0 and a.equals(b)


def test_tpstream_planner_options_change_pruning(store: Any) -> None:
    prune = {"interval_events": 0, "index_max_selectivity": 1.0}
    extra = dict(prune)
    assert replaydb.explain(store, TPS)["strategy"] == "replay"  # tiny stream: not worth it
    pruned = replaydb.explain(store, TPS, extra=extra)
    assert pruned["strategy"] == "pruned" and extra == prune  # the caller's dict is kept
    cheaper = replaydb.explain(store, TPS, max_fraction=0.0, **prune)
    assert cheaper["strategy"] == "replay" and "full replay is cheaper" in cheaper["note"]
    assert pruned["tpstream"]["situations"]["B"]["index"] == "x"
    unselective = replaydb.explain(store, TPS, index_max_selectivity=0.05, interval_events=0)
    assert "estimated selectivity" in unselective["tpstream"]["situations"]["B"]["index"]
    # operator options reach the operator whatever the plan
    for plan in ("auto", "replay"):
        p = plan_query(store, TPS, QueryOptions(plan=plan, extra={
            **prune, "end_policy": "close", "mode": "low_latency", "order": ["B", "A"]}))
        cfg = p.physical.operator.config
        assert (cfg.end_policy, cfg.mode, cfg.order) == ("close", "low_latency", ("B", "A"))


def test_greta_and_imprecise_options_reach_their_operators(store: Any) -> None:
    assert pa.types.is_decimal(replaydb.query(store, GRETA).table.schema.field("n").type)
    exact = replaydb.query(store, GRETA, exact_type="string").table
    assert pa.types.is_string(exact.schema.field("n").type) and exact.num_rows > 0
    plain = replaydb.query(store, IMPRECISE).table
    assert "confidence_exact" not in plain.column_names
    res = replaydb.query(store, IMPRECISE, exact=True, framework="point", pmf="triangular")
    cfg = res.plan.physical.operator.config
    assert (cfg.exact, cfg.framework, cfg.pmf) == (True, "point", "triangular")
    assert "confidence_exact" in res.table.column_names and res.table.num_rows > 0


def test_window_options_reach_every_path(store: Any) -> None:
    """``align`` reaches the replayed operator and the tree aggregates alike."""
    epoch = replaydb.query(store, WINDOW, plan="replay", time_format="raw").table
    assert epoch.column("window_start")[0].as_py() == 0
    for plan in ("replay", "index", "auto"):
        first = replaydb.query(store, WINDOW, plan=plan, align="first",
                               time_format="raw").table
        assert first.column("window_start")[0].as_py() == 7, plan  # the first event's time


# --------------------------------------------------------------------------- documentation
DOCUMENTED = {
    "planner.md": [PatternPlannerOptions],
    "tpstream.md": [TPStreamPlannerOptions, TPStreamOptions],
    "match_recognize.md": [OPERATOR_OPTIONS["match_recognize"]],
    "sase.md": [OPERATOR_OPTIONS["sase"]],
    "greta.md": [OPERATOR_OPTIONS["greta"]],
    "imprecise.md": [OPERATOR_OPTIONS["imprecise"]],
    "window_sql.md": [OPERATOR_OPTIONS["window_sql"]],
}


@pytest.mark.parametrize("doc", sorted(DOCUMENTED))
def test_the_docs_name_every_option_with_its_default(doc: str) -> None:
    """Each language's documentation has a table row per option: ``| `name` | default |``."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    for cls in DOCUMENTED[doc]:
        for f in fields(cls):
            row = re.search(rf"^\| `{f.name}` \| `([^`]*)` \|", text, re.M)
            assert row, (doc, f.name)
            assert row.group(1) == repr(f.default), (doc, f.name, row.group(1))
