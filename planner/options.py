"""Typed query options: what a caller may tune per planner and per query language.

``replaydb.query(store, text, **options)`` (and ``explain``, and ``QueryOptions(extra=...)``)
take, besides the options every query has (:class:`~replaydb.planner.query.QueryOptions`:
``plan``, ``stream``, ``state_cap``, ...), options of the query's planner and of its operator.
They are declared here, one frozen dataclass each, with their defaults and meaning:

* planners: :class:`PatternPlannerOptions` (MATCH_RECOGNIZE and SASE+, the index-assisted
  pattern planner), :class:`TPStreamPlannerOptions` (TPStream situation pruning);
* operators, per language (what the language's ``bind`` receives):
  :class:`PatternOperatorOptions` (MATCH_RECOGNIZE, SASE+), :class:`TPStreamOptions`,
  :class:`GretaOptions`, :class:`ImpreciseOptions` (SASE+ on a stream with uncertainty
  intervals), :class:`WindowOptions` (windowing SQL).

:func:`parse_options` checks the options given for a query once its language is known: a name
that is no option of that language's planner or operator is a
:class:`~replaydb.errors.UsageError` naming the valid ones (and the closest, for a misspelled
one), and so is a value of the wrong type. Options of the Spark engine (``mode``, ``tasks``,
...) do not travel with the query options: they are keyword arguments of
:func:`replaydb.replay.spark.run_plan` or its environment variables (``REPLAYDB_SPARK_MODE``,
...), so TPStream's ``mode`` never meets Spark's.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from numbers import Integral, Real
from typing import Any

from replaydb.errors import UsageError

WEIGHT_NAMES = ("w_pio", "w_sio", "w_sort", "interval_events", "w_pio_interval")
"""The cost model's weights that :attr:`PatternPlannerOptions.weights` may override (the fields
of :class:`~replaydb.planner.pattern.cost.Weights` but its ``source`` and its member tests'
costs, which only calibration sets: :attr:`PatternPlannerOptions.scan_members` and
:attr:`PatternPlannerOptions.code_members` force a way instead)."""


# --------------------------------------------------------------------------- planners
@dataclass(frozen=True)
class PatternPlannerOptions:
    """Options of the index-assisted planner of sequential patterns (MATCH_RECOGNIZE and SASE+,
    :mod:`replaydb.planner.pattern.planner`). None of them changes a query's results; they
    change what is read to compute them and how the plan is found."""

    cpm: bool = True
    """Use the coarse pattern map (the regions of a TAB+-tree level where a match is possible,
    and the parameters the cost model re-estimates inside them). False: uniform estimates over
    the whole stream and no region pruning (``--plan cpm`` uses the map whatever this says)."""

    cpm_buckets: int = 4096
    """The coarse pattern map reads the lowest tree level with at most this many nodes
    (:data:`replaydb.planner.pattern.cpm.DEFAULT_MAX_BUCKETS`)."""

    cpm_level: int | None = None
    """The tree level the coarse pattern map reads, directly (clamped to the tree's levels;
    None: chosen by :attr:`cpm_buckets`)."""

    weights: dict[str, float] | None = None
    """Cost-model weights overriding the store's calibrated ones (any of ``w_pio``, ``w_sio``,
    ``w_sort``, ``interval_events``, ``w_pio_interval``; the others stay as calibrated), e.g.
    ``{"interval_events": 0.0}``: no cost per interval, so no two intervals are joined."""

    rivals: bool = True
    """Also run the strategies not chosen, for EXPLAIN's comparison. False: only the chosen
    one (faster planning)."""

    lookups: bool = True
    """Query the selected indexes and compute the intervals. False: estimates only (the plan
    replays everything; calibration and estimate benchmarks)."""

    semi_join: bool | str = True
    """Filter big index results by the window around the small ones before sorting them:
    True where the expected entries say it pays, False never, ``"always"`` whatever the share
    (for tests). The intervals are the same either way."""

    regular_times: bool = True
    """On a regular stream (every gap between events the same) compute the first and last
    selected symbols' times from their seqs instead of sorting them along. The intervals are
    the same either way."""

    probes: bool = True
    """A deferred member of a tight block may test the block's last candidates by reading their
    values in the stream's data pages (see :attr:`primary_probe_ratio`). The intervals are the
    same either way."""

    scan_members: bool | None = None
    """How a tight block tests the candidates it has left against a deferred member: by a scan
    of the member's seqs where they lie (:func:`~replaydb.indexes.membership.members_in_pieces`,
    True), by setting the member's bitmap and reading a bit per candidate (False), or by
    whichever :func:`~replaydb.indexes.membership.scan_pays` finds cheaper (None) with the
    member tests' costs of the store's calibration (``replaydb calibrate``; the defaults
    before). The candidates and intervals are the same either way."""

    code_members: bool | None = None
    """Whether a tight block tests the candidates it has left against a deferred member by the
    rank codes of the member's run files (:func:`~replaydb.indexes.rankcodes.members_by_codes`,
    where every file of the lookup has them): always (True), never (False), or where the cost
    model finds it cheaper than the cheaper of a scan of the member's seqs and their bitmap
    (None), by the calibrated cost per candidate and file
    (:attr:`~replaydb.indexes.membership.MemberTestCosts.code_target`). The candidates and
    intervals are the same either way."""

    primary_probe_ratio: int = 1024
    """A tight block tests the candidates it has left by reading the deferred member's column
    at their events in the data files (the result's ``probe``,
    :meth:`StreamSnapshot.values_at`) when the member has at least this many times as many
    seqs (0: always, where a probe can read them): a probe costs a few cache misses an event
    (its page header and value), a pass over the member's seqs a streaming read a seq, so
    probes pay only for candidates some three orders of magnitude fewer than the seqs. Needs
    :attr:`probes`."""

    meet_in_anchor_bits: bool = True
    """Whether a tight block whose anchor is held as a bitmap tests its first member, when that
    member is deferred, by one pass over the member's seqs against the anchor's bitmap. False:
    that member is tested as any other (scan, bitmap, probe or rank codes, as
    :attr:`scan_members`, :attr:`primary_probe_ratio` and :attr:`code_members` choose). The
    candidates and intervals are the same either way."""

    def __post_init__(self) -> None:
        if not (isinstance(self.semi_join, bool) or self.semi_join == "always"):
            raise UsageError(f"semi_join must be true, false or 'always', not "
                             f"{self.semi_join!r}")
        if self.weights is not None:
            bad = sorted(set(self.weights) - set(WEIGHT_NAMES))
            if bad:
                raise UsageError(f"unknown weight {bad[0]!r} in the weights option"
                                 f"{_suggest(bad[0], WEIGHT_NAMES)}; valid weights: "
                                 f"{', '.join(WEIGHT_NAMES)}")
        if self.cpm_buckets < 1:
            raise UsageError(f"cpm_buckets must be at least 1, not {self.cpm_buckets}")
        if self.primary_probe_ratio < 0:
            raise UsageError(f"primary_probe_ratio must not be negative, not "
                             f"{self.primary_probe_ratio}")


@dataclass(frozen=True)
class TPStreamPlannerOptions:
    """Options of the TPStream situation-pruning planner (:mod:`replaydb.planner.tpstream_plan`).
    None of them changes a query's results; they change what is replayed."""

    index_max_selectivity: float = 0.01
    """Use a situation's index only below this estimated selectivity: reading, sorting and
    merging one index entry costs about as much as replaying 8 events (benchmark), so a lookup
    over 1% of the stream costs 8% of full replay before it has pruned anything, and on the
    benchmark a situation holding 2% of the time already leaves nothing to prune within a
    5-minute window."""

    join_leaves: float | None = None
    """Intervals separated by at most this many leaves are joined (None: ``interval_events``
    divided by the stream's leaf capacity)."""

    max_fraction: float = 0.9
    """Plan full replay when replaying the pruned intervals is estimated to cost more than this
    fraction of the stream's events (``float("inf")``: prune whenever anything is pruned)."""

    interval_events: float = 30_000.0
    """Fixed cost of one replay interval, in events replayed: the operator's end-of-interval
    flush and reset plus opening the interval's first leaves, as the number of events that
    replay in the same time (the default's derivation: ``bench/results/tpstream_plan``)."""


@dataclass(frozen=True)
class CandidatePlannerOptions:
    """Options of the planners that replay around the candidate events of a query's variables:
    GRETA's trend pruning (:mod:`replaydb.planner.greta_plan`) and imprecise-timestamp
    patterns (:mod:`replaydb.planner.imprecise_plan`). None of them changes a query's results;
    they change what is replayed."""

    index_max_selectivity: float = 0.05
    """Look a variable's candidate events up in an index only up to this estimated
    selectivity (above it the region of the candidates covers most windows of ordinary
    lengths, and the entries cost more than the replay they could save; the tree summaries
    still narrow where its events can occur)."""

    join_events: float | None = None
    """Intervals separated by at most this many events are joined (None: the per-interval
    cost: replaying the gap is then no dearer than another interval)."""

    max_fraction: float = 0.9
    """Plan full replay when replaying the pruned intervals is estimated to cost more than this
    fraction of full replay (``float("inf")``: prune whenever anything is pruned)."""

    interval_events: float | None = None
    """Fixed cost of one replay interval, in events replayed (None: one event; the intervals
    are read in one sweep over their leaves and pushed many per batch, so an interval adds a
    part boundary, not a navigation: :data:`replaydb.planner.candidates.SWEEP_INTERVAL_EVENTS`)."""


# --------------------------------------------------------------------------- operators
@dataclass(frozen=True)
class PatternOperatorOptions:
    """Options of the pattern operator of MATCH_RECOGNIZE and SASE+ queries
    (:func:`replaydb.planner.lang.match_recognize.bind`,
    :func:`replaydb.planner.lang.sase.bind`)."""

    vectorized: bool = True
    """Use a vectorized matcher where the pattern's shape has one (a fixed sequence; fixed
    blocks joined by greedy gaps). False: always the automaton (same rows; for comparisons).
    EXPLAIN names the matcher a plan uses (``pattern.matcher``)."""


@dataclass(frozen=True)
class TPStreamOptions:
    """Options of the TPStream operator (:func:`replaydb.planner.lang.tpstream.bind`,
    :class:`~replaydb.operators.tpstream.config.TPStreamConfig`)."""

    mode: str = "normal"
    """``"normal"`` (a match is reported when its situations have ended) or ``"low_latency"``
    (as soon as it is certain)."""

    order: str | tuple[str, ...] = "adaptive"
    """Evaluation order of the situations: ``"adaptive"`` (cost model with EMA statistics and
    re-planning), ``"static"`` (the initial cost-based order), or a tuple of situation names
    (a fixed priority order)."""

    end_policy: str = "drop"
    """Situations still open at the end of input: ``"drop"`` (their end is unknown) or
    ``"close"`` (they end with their partition's last event)."""

    alpha: float = 0.01
    """EMA smoothing factor of the adaptive order's statistics (the paper's 0.01)."""

    threshold: float = 0.2
    """Re-planning threshold of the adaptive order (the paper's 0.2)."""

    use_triggers: bool = True
    """Low-latency mode runs the matcher only at trigger situations; False runs it at every
    start and end (same results, for tests)."""

    initial_buffer: float = 100.0
    """Buffer size assumed for the initial evaluation order (all situation streams alike)."""

    cost_model: str = "calls"
    """The evaluation order's cost model: ``"calls"`` or ``"paper"`` (Eq. 5.2 as printed)."""


@dataclass(frozen=True)
class GretaOptions:
    """Options of the GRETA operator (:func:`replaydb.planner.lang.greta.bind`)."""

    exact_type: str = "decimal"
    """Type of exact integer aggregates: ``"decimal"`` (decimal128(38, 0)), ``"string"``
    (decimal digits, unlimited) or ``"int64"``; a value that does not fit is an error."""


@dataclass(frozen=True)
class ImpreciseOptions:
    """Options of the imprecise-timestamp pattern operator: SASE+ queries over a stream with
    uncertainty intervals (:func:`replaydb.planner.lang.imprecise.bind`)."""

    pmf: str = "uniform"
    """Distribution of an event's time within its interval when the stream has no pmf column:
    ``"uniform"`` or ``"triangular"`` (weight ``min(t - lower + 1, upper - t + 1)``)."""

    framework: str = "auto"
    """``"event"`` (valid intervals), ``"point"`` (stream expansion; same results) or
    ``"auto"`` (event-based, the faster one in ``bench/results/imprecise``)."""

    method: str = "auto"
    """The event-based framework's method: ``"query_order"``, ``"any_state"``,
    ``"selectivity"`` or ``"auto"`` (query order)."""

    max_uncertainty: int | None = None
    """Accept input not ordered by the lower bound as long as ``upper - lower`` is at most
    this (None: the input must be ordered by the lower bound)."""

    exact: bool = False
    """Add an exact rational ``confidence_exact`` column (slow; for tests and small inputs)."""

    max_enumeration: int = 1_000_000
    """Cap on the joint point combinations enumerated for events that can spoil several gaps
    of one skip-till-next match (an error when reached)."""


@dataclass(frozen=True)
class WindowOptions:
    """Options of windowed aggregation queries (:func:`replaydb.planner.lang.window_sql.to_config`);
    the query text's ``ALIGN =>`` / ``EMPTY =>`` arguments take precedence."""

    align: str | None = None
    """``"epoch"`` (window starts are multiples of the slide plus the offset; the default of
    time windows) or ``"first"`` (anchored at the first event)."""

    empty: str | None = None
    """``"skip"`` (default: windows without rows are not reported) or ``"emit"`` (one row per
    window, ungrouped time windows only)."""


@dataclass(frozen=True)
class NoOptions:
    """A planner or language without options."""


PLANNER_OPTIONS: dict[str, type] = {
    "match_recognize": PatternPlannerOptions,
    "sase": PatternPlannerOptions,
    "tpstream": TPStreamPlannerOptions,
    "greta": CandidatePlannerOptions,
    "imprecise": CandidatePlannerOptions,
}
"""language -> its planner's options (absent: the planner has none)."""

OPERATOR_OPTIONS: dict[str, type] = {
    "match_recognize": PatternOperatorOptions,
    "sase": PatternOperatorOptions,
    "tpstream": TPStreamOptions,
    "greta": GretaOptions,
    "imprecise": ImpreciseOptions,
    "window_sql": WindowOptions,
}
"""language -> the options of its operator, passed to its ``bind`` (absent: none)."""


# --------------------------------------------------------------------------- validation
def option_names(language: str) -> list[str]:
    """Every option a query of ``language`` takes (planner's, then operator's)."""
    return [f.name for cls in _classes(language) for f in fields(cls)]


def parse_options(language: str, given: Mapping[str, Any]) -> tuple[Any, Any]:
    """``given`` (name -> value) as ``(planner options, operator options)`` of ``language``
    (instances of its :data:`PLANNER_OPTIONS` and :data:`OPERATOR_OPTIONS` classes, defaults
    for what is not given). ``given`` is not modified.

    Raises :class:`~replaydb.errors.UsageError` for a name that is no option of the
    language (the hint lists the valid ones and the closest), or a value not of the option's
    type (bool, int, float, str, None, a tuple or dict of those, as annotated; an int is taken
    for a float)."""
    planner_cls = PLANNER_OPTIONS.get(language, NoOptions)
    operator_cls = OPERATOR_OPTIONS.get(language, NoOptions)
    owner = {f.name: cls for cls in (planner_cls, operator_cls) for f in fields(cls)}
    split: dict[type, dict[str, Any]] = {planner_cls: {}, operator_cls: {}}
    for name, value in given.items():
        cls = owner.get(name)
        if cls is None:
            raise _unknown(language, name)
        split[cls][name] = _checked(language, name, value, _hints(cls)[name])
    return planner_cls(**split[planner_cls]), operator_cls(**split[operator_cls])


def option_value(text: str) -> Any:
    """An option written as text (a Spark option, a header line): an int, a float, a bool
    (``true``/``false``, any case) or the text itself, in that order of preference."""
    low = str(text).strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(low)
        except ValueError:
            pass
    return text


def as_kwargs(options: Any) -> dict[str, Any]:
    """An options dataclass as keyword arguments (no copies of its values)."""
    return {f.name: getattr(options, f.name) for f in fields(options)}


def _classes(language: str) -> list[type]:
    return [d[language] for d in (PLANNER_OPTIONS, OPERATOR_OPTIONS) if language in d]


def _suggest(name: str, valid: typing.Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the valid name closest to ``name``, else empty."""
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown(language: str, name: str) -> UsageError:
    valid = option_names(language)
    listed = (f"valid options: {', '.join(valid)}" if valid
              else f"{language} queries take no options")
    elsewhere = sorted(lang for lang in set(PLANNER_OPTIONS) | set(OPERATOR_OPTIONS)
                       if name in option_names(lang))
    return UsageError(
        f"unknown option {name!r} for {language} queries{_suggest(name, valid)}; {listed}",
        hint=(f"{name} is an option of {', '.join(elsewhere)} queries" if elsewhere else
              "every option is documented in replaydb.planner.options"))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _checked(language: str, name: str, value: Any, tp: Any) -> Any:
    """``value`` if it has type ``tp`` (an int converted for a float), else UsageError."""
    ok, out = _conform(value, tp)
    if not ok:
        raise UsageError(f"option {name} of {language} queries must be {_type_text(tp)}, not "
                         f"{value!r} ({type(value).__name__})")
    return out


def _conform(value: Any, tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            ok, out = _conform(value, arm)
            if ok:
                return True, out
        return False, value
    if tp is type(None):
        return value is None, value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, Integral) and not isinstance(value, bool), value
    if tp is float:
        ok = isinstance(value, Real) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if tp is str:
        return isinstance(value, str), value
    if origin is tuple:
        item = typing.get_args(tp)[0]
        if not isinstance(value, (tuple, list)):
            return False, value
        got = [_conform(v, item) for v in value]
        return all(ok for ok, _ in got), tuple(v for _, v in got)
    if origin is dict:
        key, item = typing.get_args(tp)
        if not isinstance(value, Mapping):
            return False, value
        got = {k: _conform(v, item) for k, v in value.items()}
        ok = all(_conform(k, key)[0] for k in value) and all(o for o, _ in got.values())
        return ok, {k: v for k, (_, v) in got.items()}
    raise TypeError(f"option type {tp!r} is not supported")  # a declaration error


def _type_text(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "None"
    if typing.get_origin(tp) is tuple:
        return f"a tuple of {_type_text(typing.get_args(tp)[0])}"
    if typing.get_origin(tp) is dict:
        return f"a dict of {_type_text(typing.get_args(tp)[1])}"
    return {bool: "a bool", int: "an int", float: "a number", str: "a string"}.get(tp, str(tp))
