"""TPStream: temporal pattern matching over situations (paper 000, dissertation chapter 5).

Situations (maximal runs of events satisfying a condition, with duration constraints and
aggregates) are derived from an event stream and matched against a pattern of Allen interval
relations, either when situations end (normal mode) or at the earliest time a match is certain
(low-latency mode).

Live use (the same operator the replay layer feeds)::

    from replaydb.planner.lang.tpstream import bind, parse
    op = bind(parse('''FROM cars PARTITION BY car_id
                       DEFINE A AS accel > 8 AT LEAST 5s,
                              B AS speed > 70 BETWEEN 4s AND 30s,
                              C AS accel < -9 AT LEAST 3s
                       PATTERN A meets;overlaps;starts;during B
                           AND B contains;finishes;overlaps;meets C AND A before C
                       WITHIN 5 minutes
                       RETURN first(B.car_id) AS id, avg(B.speed) AS avg_speed'''),
              schema, "s")
    op.push(batch)      # Arrow batches with columns t, seq, car_id, speed, accel ...
    op.results()        # one row per match (see TPStream for the output schema)

Modules: :mod:`.relations` (the 13 relations, t_rmin, prefix groups, selectivities),
:mod:`.deriver` (vectorized derivation), :mod:`.kernel` (compiled findMatches/performMatch),
:mod:`.evaluation_order` (cost model, adaptivity), :mod:`.lowlatency` (Alg. 5.4 semantics),
:mod:`.operator` (the operator), :mod:`.oracle` (brute force), :mod:`.parallel` and
:mod:`.kslack` (multi-process execution, result re-ordering).
"""

from replaydb.operators.tpstream.config import (
    Constraint,
    ReturnItem,
    SituationDef,
    TPStreamConfig,
)
from replaydb.operators.tpstream.operator import TPStream
from replaydb.operators.tpstream.relations import RELATIONS

__all__ = ["RELATIONS", "Constraint", "ReturnItem", "SituationDef", "TPStream", "TPStreamConfig"]
