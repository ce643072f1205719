"""Sequential pattern matching: one logical model, one operator, two languages.

Live use on a stream without the store (the same operator the replay layer feeds)::

    import pyarrow as pa
    from replaydb.planner.lang import match_recognize, sase

    schema = pa.schema([("t", pa.int64()), ("seq", pa.int64()), ("type", pa.string()),
                        ("temp", pa.float64())])
    op = sase.bind(sase.parse(
        "PATTERN SEQ(A a, B* b[], C c) WHERE skip_till_next_match(a, b[], c) "
        "{ b[i].temp > b[i-1].temp AND c.temp >= a.temp + 5 } WITHIN 60 seconds"), schema, "s")
    op.push(batch)            # Arrow record batches in (t, seq) order
    print(op.results())       # one row per match (see PatternOperator for the schema)

    op = match_recognize.bind(match_recognize.parse(
        "SELECT * FROM s MATCH_RECOGNIZE (MEASURES FIRST(A.seq) AS a_seq, LAST(C.temp) AS c "
        "PATTERN (A B* C) WITHIN 60 SECONDS "
        "DEFINE B AS B.temp > PREV(B.temp), C AS C.temp >= A.temp + 5)"), schema, "s")

or build a :class:`~replaydb.operators.pattern.model.PatternSpec` directly and run
``PatternOperator(PatternConfig(spec, schema, time_unit))``.

Modules: :mod:`.model` (the logical model), :mod:`.automaton` (ordered position automaton),
:mod:`.lowering` and :mod:`.compile` (conditions into per-event masks and VM programs),
:mod:`.vm` (the compiled expression machine), :mod:`.nfa_cep` (dissertation / SASE+ strategies),
:mod:`.nfa_sql` (MATCH_RECOGNIZE), :mod:`.engine` (array management, the vectorized fixed-sequence
path), :mod:`.gapseq` (the vectorized path for fixed blocks joined by greedy always-true gaps),
:mod:`.buffer` (events, partitions, PREV), :mod:`.measures`, :mod:`.operator`,
:mod:`.oracle` (brute-force reference semantics for tests).
"""

from replaydb.operators.pattern.config import PatternConfig
from replaydb.operators.pattern.model import (
    AfterMatchSkip,
    Alt,
    Anchor,
    Exclude,
    Measure,
    Neg,
    PatternNode,
    PatternSpec,
    Permute,
    Repeat,
    RowsPerMatch,
    SelectItem,
    Semantics,
    Seq,
    SkipKind,
    Strategy,
    Subset,
    Var,
    VarDef,
)
from replaydb.operators.pattern.operator import PatternOperator

__all__ = [
    "AfterMatchSkip", "Alt", "Anchor", "Exclude", "Measure", "Neg", "PatternConfig", "PatternNode",
    "PatternOperator", "PatternSpec", "Permute", "Repeat", "RowsPerMatch", "SelectItem",
    "Semantics", "Seq", "SkipKind", "Strategy", "Subset", "Var", "VarDef",
]
