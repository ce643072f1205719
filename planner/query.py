"""Query entry point: detect the language, resolve streams, plan, execute, explain.

Every language module in :mod:`replaydb.planner.lang` exposes ``detect``, ``parse`` and ``bind``
(see :mod:`replaydb.planner.languages`). A query runs in four steps:

1. **parse** - the first language whose ``detect`` accepts the text parses it into its logical
   query (``sources``: the streams it names; ``event_types``: the types it refers to);
2. **resolve** - the streams to read, pinned at one version each (``version`` time-travels):
   the query's FROM clause, else ``stream=``, else the store's only stream; when the query names
   event types and the store has one stream per type, those streams are merged by (t, seq) and
   the type column is synthesized from the stream names;
3. **plan** - a language-specific planner (index-assisted pattern planning, the window-aggregate
   path choice, TPStream situation pruning) registered in :data:`~replaydb.planner.languages.PLANNERS` turns the query into one
   :class:`~replaydb.replay.plan.PhysicalPlan` value - what to read, which operator (its
   :class:`~replaydb.operators.spec.OperatorSpec`), where; the default plan replays everything
   (full replay, the baseline every index path must match); ``--device`` then places the
   operator on the CPU or the GPU (:mod:`replaydb.planner.device`), in the plan value;
4. **execute** - the one executor (:mod:`replaydb.replay.executor`) runs the plan value, locally
   or on Spark; results are one Arrow table. Limits: ``timeout`` (seconds) and ``max_memory``
   (bytes of resident memory) are checked between batches and raise
   :class:`~replaydb.errors.ResourceLimitExceeded`; operators' state caps raise
   :class:`~replaydb.errors.StateCapExceeded`.

EXPLAIN (:func:`explain`) returns the plan as a dict - the plan value node by node under
``plan``, with the planner's estimates and reasons beside it; with ``analyze`` it also executes
and adds what each node actually read and the time per phase.
"""

from __future__ import annotations

import functools
import inspect
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from replaydb.errors import (
    ParseError,
    QueryError,
    ResourceLimitExceeded,
    StreamNotFound,
    UsageError,
)
from replaydb.operators.spec import OperatorSpec
from replaydb.planner import languages
from replaydb.planner.options import NoOptions, as_kwargs, parse_options
from replaydb.planner.result import QueryResult
from replaydb.planner.time_literals import resolve_time_literals
from replaydb.replay import Replay
from replaydb.replay.executor import execute as run_physical
from replaydb.replay.plan import (
    TIME_FORMATS,
    FullScan,
    IntervalScan,
    Output,
    PhysicalPlan,
    StreamRef,
)
from replaydb.store.interval_list import IntervalList
from replaydb.timeunits import check_time_zone

PLAN_CHOICES = ("auto", "replay")


@dataclass
class QueryOptions:
    """What the caller may choose (CLI flags map one to one).

    ``extra``: the options of the query's planner and operator, by name, as given
    (``replaydb.query(store, text, cpm=False)`` puts every keyword that is not a field here).
    They are checked against the query's language when it is resolved
    (:func:`~replaydb.planner.options.parse_options`: an unknown name or a value of the
    wrong type is a :class:`~replaydb.errors.UsageError`) and reach the planner and the
    operator typed (:attr:`QueryContext.planner_options`,
    :attr:`QueryContext.operator_options`); the dict itself is never modified."""

    plan: str = "auto"
    stream: str | None = None
    version: int | None = None
    state_cap: int | None = None
    timeout: float | None = None
    max_memory: int | None = None
    device: str = "auto"
    engine: str = "local"
    master: str | None = None
    time_format: str = "timestamp"
    """``timestamp``: result columns holding stream times are Arrow timestamps where the stream
    declares a time unit; ``raw``: they stay int64 counts of the unit."""
    time_zone: str = "UTC"
    """The zone results show times in, and in which literals without a zone are read."""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class QueryContext:
    """Everything a planner needs: the parsed query, its language module, the pinned streams."""

    store: Any
    text: str
    language: str
    module: Any
    query: Any
    snapshots: list[Any]
    type_column: str | None
    options: QueryOptions
    bind_options: dict[str, Any] = field(default_factory=dict)
    """What the stream decides for the language's ``bind`` (the columns of an imprecise
    stream's uncertainty intervals)."""
    planner_options: Any = field(default_factory=NoOptions)
    """The planner's typed options (e.g. :class:`~replaydb.planner.options.PatternPlannerOptions`),
    from ``options.extra``."""
    operator_options: Any = field(default_factory=NoOptions)
    """The operator's typed options (e.g. :class:`~replaydb.planner.options.TPStreamOptions`),
    from ``options.extra``: what :meth:`bind` passes to the language's ``bind``."""
    _schema: pa.Schema | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def schema(self) -> pa.Schema:
        """The replayed schema of every column (computed once: the streams are pinned)."""
        if self._schema is None:
            self._schema = self.replay_schema()
        return self._schema

    def replay_schema(self, columns: list[str] | None = None) -> pa.Schema:
        return Replay(self.snapshots, None, columns=columns, type_column=self.type_column,
                      aliases=self.aliases).schema

    @property
    def time_unit(self) -> str | None:
        return self.snapshots[0].schema.time_unit

    @property
    def aliases(self) -> dict[str, str]:
        """Source time-column names usable in queries as aliases of ``t``."""
        out = {}
        for s in self.snapshots:
            tc = s.schema.time_column
            if tc and tc != "t":
                out[tc] = "t"
        return out

    @property
    def time_columns(self) -> frozenset[str]:
        """The names the replayed time column goes by: ``t`` and the stream's source name."""
        return frozenset({"t", *self.aliases})

    def output(self, operator: Any) -> Output:
        """The plan's :class:`~replaydb.replay.plan.Output`: the columns ``operator`` declares
        as stream times, shown as timestamps of the stream's unit unless its times are plain
        numbers (no unit, or none declared for a numeric column) or the query asks for raw
        times."""
        instants = self.snapshots[0].schema.time_instants
        unit = self.time_unit if self.options.time_format == "timestamp" and instants else None
        if unit is None:
            return Output()
        return Output(unit, tuple(operator.instant_columns(self.time_columns)),
                      self.options.time_zone)

    def bind(self, **overrides: Any) -> Any:
        """Bind the query to the replayed schema (the operator it runs in): the language's
        ``bind`` gets the state cap, the type column and :attr:`bind_options` where it takes
        them, every field of :attr:`operator_options`, and ``overrides``."""
        opts: dict[str, Any] = {}
        if self.options.state_cap is not None:
            opts["state_cap"] = self.options.state_cap
        if self.type_column:
            opts["type_column"] = self.type_column
        opts.update(self.bind_options)
        if self.aliases and "aliases" in inspect.signature(self.module.bind).parameters:
            opts["aliases"] = dict(self.aliases)  # the stream's time column, as t's alias
        names = _accepted(self.module.bind)
        if names is not None:
            opts = {k: v for k, v in opts.items() if k in names}
        opts.update(as_kwargs(self.operator_options))
        opts.update(overrides)
        return self.module.bind(self.query, self.schema, self.time_unit, **opts)


class Details(dict):  # type: ignore[type-arg]
    """A plan's details (what EXPLAIN shows): a dict whose value under a key given to
    :meth:`defer` is computed when first read (indexing, ``get``, ``in``, :meth:`resolved`).

    A plan's description is read by EXPLAIN, not by the execution, so a query that is only
    executed never pays for building it. Pickled as a plain dict, every value computed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, Callable[[], Any]] = {}

    def defer(self, key: str, compute: Callable[[], Any]) -> None:
        """``self[key]`` is ``compute()`` from its first read on."""
        self.pop(key, None)
        self._pending[key] = compute

    def __missing__(self, key: str) -> Any:
        compute = self._pending.pop(key, None)
        if compute is None:
            raise KeyError(key)
        value = self[key] = compute()
        return value

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or key in self._pending

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[key] if key in self else default

    def resolved(self) -> dict[str, Any]:
        """Every value computed, as a plain dict."""
        for key in list(self._pending):
            self[key]  # noqa: B018 (computes it)
        return dict(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (self.resolved(),)


@dataclass
class Plan:
    """A planned query: the :class:`~replaydb.replay.plan.PhysicalPlan` value that runs, plus
    what surrounds it on the planning side - the query context, EXPLAIN's details and timings,
    the planner's state for EXPLAIN ANALYZE, and the fresh operator bound while planning (the
    first execution uses it instead of building the same operator again)."""

    ctx: QueryContext
    physical: PhysicalPlan
    details: Details = field(default_factory=Details)
    timings: dict[str, float] = field(default_factory=dict)
    operator: Any = None
    """A fresh operator built from ``physical.operator`` (never fed), taken by the first
    execution (:meth:`take_operator`)."""
    annotate: Callable[[dict[str, Any]], None] | None = None
    """Called by :func:`explain` with the ``analyze`` dict after executing (planner extras)."""

    @classmethod
    def of(cls, ctx: QueryContext, strategy: str, intervals: Any = None, *, operator: Any = None,
           spec: OperatorSpec | None = None, reason: str = "index", source: Any = None,
           estimates: dict[str, Any] | None = None, contiguous: bool = False) -> Plan:
        """A plan of ``ctx``: replay ``intervals`` (None: everything; a guard or another
        source through ``source``; ``contiguous``: fed as one stream,
        :attr:`~replaydb.replay.plan.IntervalScan.contiguous`) into ``operator`` (a fresh
        bound operator) or ``spec`` (default: the query bound by its language)."""
        if spec is None:
            if operator is None:
                operator = ctx.bind()
            spec = operator.spec()
        if source is None:
            source = FullScan() if intervals is None else IntervalScan(
                IntervalList.of(intervals), reason, contiguous=contiguous)
        physical = PhysicalPlan(
            language=ctx.language, query=ctx.text.strip(),
            streams=tuple(StreamRef(s.name, s.version, int(s.n_events)) for s in ctx.snapshots),
            source=source, operator=spec, strategy=strategy, type_column=ctx.type_column,
            aliases=tuple(sorted(ctx.aliases.items())), estimates=dict(estimates or {}),
            output=ctx.output(operator if operator is not None else spec.build()))
        return cls(ctx, physical, operator=operator)

    @property
    def strategy(self) -> str:
        return self.physical.strategy

    @property
    def intervals(self) -> IntervalList | None:
        return self.physical.intervals

    @property
    def estimates(self) -> dict[str, Any]:
        return self.physical.estimates

    @property
    def batch_rows(self) -> int | None:
        return self.physical.placement.batch_rows

    def with_intervals(self, intervals: Any, reason: str = "index") -> None:
        """Replace the source by an interval scan of ``intervals`` (None: a full scan)."""
        source = FullScan() if intervals is None else IntervalScan(
            IntervalList.of(intervals), reason)
        self.physical = replace(self.physical, source=source)

    def take_operator(self) -> Any:
        """The operator bound while planning, once (None afterwards)."""
        op, self.operator = self.operator, None
        return op

    def describe(self) -> dict[str, Any]:
        c = self.ctx
        return {
            "language": c.language,
            "query": c.text.strip(),
            "streams": [{"name": s.name, "version": s.version, "events": s.n_events}
                        for s in c.snapshots],
            "time_unit": c.time_unit,
            "type_column": c.type_column,
            "strategy": self.strategy,
            "replay_intervals": None if self.intervals is None else len(self.intervals),
            "estimates": self.estimates,
            "plan": self.physical.describe(),
            **self.details.resolved(),
        }


@functools.lru_cache(maxsize=256)
def _accepted(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword names ``fn`` accepts; None when it takes ``**kwargs``."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return frozenset(params)


# --------------------------------------------------------------------------- parse + resolve
def detect_language(text: str) -> tuple[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty query")
    found = languages.detect(text)
    if found is not None:
        return found
    head = text.strip().split(None, 1)[0][:20]
    raise ParseError(
        f"cannot tell which query language this is (it starts with {head!r})",
        text=text, pos=len(text) - len(text.lstrip()),
        hint="queries start with SELECT ... MATCH_RECOGNIZE / SELECT ... FROM TABLE(TUMBLE|HOP..."
             " (windows) / PATTERN SEQ (SASE+) / RETURN ... PATTERN (GRETA) / "
             "FROM ... DEFINE (TPStream)",
    )


def at_word(message: str, text: str, word: str) -> str:
    """``message`` with the position of ``word``'s first whole-word occurrence in ``text`` (any
    case), when it occurs."""
    m = re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", text, re.IGNORECASE)
    return message if m is None else f"{message} (at position {m.start()})"


def _stream(store: Any, text: str, name: str, version: int | None) -> Any:
    """The snapshot of stream ``name``; StreamNotFound names where the query names it."""
    try:
        return store.stream(name, version)
    except StreamNotFound as exc:
        raise StreamNotFound(at_word(str(exc), text, name), hint=exc.hint) from None


def resolve(store: Any, text: str, options: QueryOptions) -> QueryContext:
    """Parse ``text``, pin the streams it reads and check the options for its language."""
    check_output_options(options)
    language, mod = detect_language(text)
    query = mod.parse(text)
    sources = list(getattr(query, "sources", ()) or ())
    types = list(getattr(query, "event_types", ()) or ())
    type_column = None
    if not sources:
        if options.stream:
            sources = [options.stream]
        elif types and all(store.has_stream(t) for t in types) and len(set(types)) > 1:
            sources = list(dict.fromkeys(types))
            type_column = "type"
        else:
            names = store.streams()
            if len(names) == 1:
                sources = names
            elif not names:
                raise StreamNotFound(f"store {store.uri} has no streams")
            else:
                raise UsageError(
                    "the query names no stream and the store has several",
                    hint=f"add FROM <stream> or pass --stream (streams: {', '.join(names)})")
    snapshots = [_stream(store, text, s, options.version if len(sources) == 1 else None)
                 for s in sources]
    if types and type_column is None:
        tc = snapshots[0].schema.type_column or "type"
        if all(s.schema.has(tc) for s in snapshots):
            type_column = tc
        elif len(snapshots) > 1:
            type_column = "type"
        else:
            raise QueryError(
                at_word(f"the query refers to event types ({', '.join(types)}) but stream "
                        f"{snapshots[0].name!r} has no type column {tc!r}", text, types[0]),
                hint="ingest with --type-column COL, or store one stream per event type")
    bind_options: dict[str, Any] = {}
    sch = snapshots[0].schema
    if sch.upper_column and language == "sase":
        # a stream with uncertainty intervals: SASE+ queries run with imprecise-timestamp
        # semantics (signatures, tightest time ranges, confidences)
        mod = languages.imprecise()
        language = "imprecise"
        query = mod.parse(text)
        lower = "t" if sch.lower_column in (None, sch.time_column) else sch.lower_column
        bind_options = {"lower_col": lower, "upper_col": sch.upper_column,
                        "pmf_col": sch.pmf_column}
    query = resolve_time_literals(query, text, sch.time_unit if sch.time_instants else None,
                                  options.time_zone)
    planner_options, operator_options = parse_options(language, options.extra or {})
    return QueryContext(store, text, language, mod, query, snapshots, type_column, options,
                        bind_options, planner_options, operator_options)


def check_output_options(options: QueryOptions) -> None:
    """UsageError for a time format or zone results cannot be shown in."""
    if options.time_format not in TIME_FORMATS:
        raise UsageError(f"unknown time format {options.time_format!r}",
                         hint=f"use one of {', '.join(TIME_FORMATS)}")
    check_time_zone(options.time_zone)


# --------------------------------------------------------------------------- plan + execute
def plan_query(store: Any, text: str, options: QueryOptions | None = None) -> Plan:
    options = options or QueryOptions()
    t0 = time.perf_counter()
    ctx = resolve(store, text, options)
    parse_s = time.perf_counter() - t0
    planner = languages.planner_for(ctx.language)
    if planner and options.plan != "replay":
        plan = planner(ctx)
    else:
        if options.plan not in PLAN_CHOICES and not planner:
            raise UsageError(f"--plan {options.plan} does not apply to {ctx.language} queries",
                             hint="use auto or replay")
        plan = Plan.of(ctx, "replay")
        plan.details["note"] = "full replay of the streams"
    from replaydb.planner.device import apply_device

    apply_device(plan)  # --device: may swap in the GPU variant of the operator
    plan.timings["parse"] = parse_s
    plan.timings["plan"] = time.perf_counter() - t0 - parse_s
    return plan


class _Limits:
    def __init__(self, options: QueryOptions) -> None:
        if options.timeout is not None and not options.timeout > 0:  # NaN too
            raise UsageError(f"timeout must be a positive number of seconds, not "
                             f"{options.timeout!r}", hint="e.g. --timeout 30")
        if options.max_memory is not None and options.max_memory <= 0:
            raise UsageError(f"max_memory must be a positive size, not {options.max_memory!r}",
                             hint="e.g. --max-memory 4G")
        self.deadline = None if options.timeout is None else time.monotonic() + options.timeout
        self.timeout = options.timeout
        self.max_memory = options.max_memory
        self._proc = None
        if self.max_memory is not None:
            import psutil

            self._proc = psutil.Process()

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ResourceLimitExceeded(
                f"query exceeded its time limit of {self.timeout:g} s",
                hint="raise --timeout, or narrow the query (time range, window, predicates)")
        if self._proc is not None:
            rss = self._proc.memory_info().rss
            if rss > self.max_memory:
                raise ResourceLimitExceeded(
                    f"query exceeded its memory budget: {rss / 2**20:,.0f} MiB resident > "
                    f"{self.max_memory / 2**20:,.0f} MiB",
                    hint="raise --max-memory, or lower the operator's state cap")


def execute(plan: Plan, progress: Callable[[int], None] | None = None) -> QueryResult:
    """Run the plan's value through the one executor (locally or on Spark, as the options
    say), within the query's time and memory limits; ``progress`` is called with the events
    replayed so far (local execution)."""
    opts = plan.ctx.options
    limits = _Limits(opts)
    t0 = time.perf_counter()
    spark = {"master": opts.master} if opts.engine == "spark" else None
    out = run_physical(plan.physical, plan.ctx.snapshots, engine=opts.engine,
                       operator=plan.take_operator(), limits=limits, spark=spark,
                       progress=progress)
    stats = out.stats
    if "index_path" in stats:
        plan.details["index_path"] = stats["index_path"]
    plan.timings["execute"] = time.perf_counter() - t0
    stats["timings"] = dict(plan.timings)
    stats["rows"] = out.table.num_rows
    return QueryResult(out.table, plan, stats)


def query_options(options: dict[str, Any]) -> QueryOptions:
    """Keyword options as :class:`QueryOptions`: its fields by name, every other keyword an
    option of the query's planner or operator (``extra``, merged over an ``extra`` given;
    checked when the query's language is known)."""
    known = {k: v for k, v in options.items() if k in QueryOptions.__annotations__}
    rest = {k: v for k, v in options.items() if k not in QueryOptions.__annotations__}
    known["extra"] = {**(known.get("extra") or {}), **rest}
    return QueryOptions(**known)


def run_query(store: Any, text: str, **options: Any) -> QueryResult:
    """Parse, plan and execute ``text`` against ``store`` (options: see :class:`QueryOptions`
    and :mod:`replaydb.planner.options`). For a store on an object store, ``stats`` has
    ``object_store``: the requests and bytes this process fetched (:func:`fetched_since`)."""
    before = _fetched(store)
    res = execute(plan_query(store, text, query_options(options)))
    if before is not None:
        res.stats["object_store"] = fetched_since(store, before)
    return res


def _fetched(store: Any) -> dict[str, int] | None:
    """The fetch counters of a store on an object store (None for a local store)."""
    loc = getattr(store, "location", None)
    return None if loc is None else loc.counters.as_dict()


def fetched_since(store: Any, before: dict[str, int]) -> dict[str, int]:
    """What this process fetched from ``store``'s object store since ``before`` (requests,
    bytes, listings: planning's index and metadata reads included, a Spark executor's not)."""
    now = store.location.counters.as_dict()
    return {k: now[k] - before[k] for k in now}


def explain(store: Any, text: str, *, analyze: bool = False, plot: str | None = None,
            **options: Any) -> dict[str, Any]:
    """The plan as a dict; with ``analyze``, executed, with what was read and time per phase.

    ``plot`` (a PNG path) also executes the plan and draws the timeline with the replay
    intervals, the coarse pattern map and the results (:func:`replaydb.planner.plot.plot_plan`).
    """
    before = _fetched(store)
    plan = plan_query(store, text, query_options(options))
    res = execute(plan) if (analyze or plot) else None
    if res is not None and before is not None:
        res.stats["object_store"] = fetched_since(store, before)
    out = plan.describe()  # after executing: some paths record what they did in the details
    if plot:
        from replaydb.planner.plot import plot_plan

        out["plot"] = str(plot_plan(plan, plot, result=res.table))
    if analyze and res is not None:
        out["analyze"] = {**res.stats, "timings": dict(plan.timings)}
        if plan.annotate is not None:
            plan.annotate(out["analyze"])
        out["result_rows"] = res.table.num_rows
        record_actuals(out["plan"], res.stats)
    else:
        out["timings"] = dict(plan.timings)
    return out


SOURCE_ACTUALS = ("intervals", "leaves", "row_groups", "events", "bytes", "read_seconds")
"""What a scan node records of its replay (EXPLAIN ANALYZE)."""


def record_actuals(tree: dict[str, Any], stats: dict[str, Any]) -> None:
    """Put what each node of the executed plan recorded beside its estimates: the source's
    reads (the replay's, or the tree aggregates'), the operator's counters, the guard's
    drops."""
    src = tree["source"]
    if "index_path" in stats:
        src["actual"] = dict(stats["index_path"])
    elif "replay" in stats:
        rep = stats["replay"]
        src["actual"] = {k: rep[k] for k in SOURCE_ACTUALS if k in rep}
    if "guard" in stats:
        src.setdefault("actual", {})["guard"] = dict(stats["guard"])
    if stats.get("operator"):
        tree["operator"]["actual"] = dict(stats["operator"])
    if "spark" in stats:
        tree["engine"] = {"name": "spark", "mode": stats["spark"].get("mode")}
