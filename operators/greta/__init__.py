"""GRETA: event trend aggregation without constructing trends (Poppe et al., paper 004).

A GRETA query aggregates over *all* trends matched by a Kleene pattern under skip-till-any-match:

    RETURN sector, COUNT(*) PATTERN Stock S+
    WHERE [company, sector] AND S.price > NEXT(S).price
    GROUP-BY sector WITHIN 10 minutes SLIDE 10 seconds

The number of trends is exponential in the number of events; GRETA never enumerates them. Each
event becomes a vertex of a graph whose edges connect events that may be adjacent in a trend, and
aggregates flow along the edges by dynamic programming (``count(e) = [e starts a trend] + sum of
its predecessors' counts``; Thm. 4.3 and 9.1), so every window's result is the sum over its END
events.

Usage (live, without a store)::

    from replaydb.planner.lang.greta import parse, bind
    op = bind(parse(text), schema, "ms")      # schema: t, seq, type, attributes...
    op.push(batch)                            # Arrow batches in (t, seq) order
    op.results()                              # rows of the windows closed so far
    op.flush(); op.results()                  # end of input: the remaining windows

or ``GretaOperator(GretaConfig(...), schema=schema)`` directly.

Semantics (decisions where the paper is silent or inconsistent are marked *decision*):

* Event types come from the string column ``type_column`` (default ``type``); an event of type T
  is a candidate for the variable of T when it satisfies T's local predicates. Each event type
  appears at most once in a pattern (paper Sec. 2).
* Trends: skip-till-any-match; ``SEQ`` and ``+`` require strictly increasing timestamps between
  adjacent events (Def. 1), so events with equal timestamps never follow each other.
* Windows: ``[k*SLIDE, k*SLIDE + WITHIN)`` for every integer k (aligned to time 0, stream units);
  all events of a trend lie in one window; an event in several windows is shared by them (one
  graph, one aggregate per window). *Decision:* SLIDE defaults to WITHIN; a window's row is
  emitted when an event at or after its end arrives, or at flush (then from the events seen).
* Grouping and equivalence partition the stream; a trend never mixes partitions. Only groups with
  at least one trend produce a row.
* Aggregates count occurrences with multiplicity over all trends (paper Sec. 2): ``COUNT(*)`` the
  number of trends, ``COUNT(E)`` the number of E events summed over trends, ``SUM(E.a)`` the sum
  over those occurrences, ``AVG = SUM / COUNT(E)``, ``MIN``/``MAX`` over them.
* Exact integers: counts and sums of integer attributes are exact (multi-limb integers in the
  kernel; never rounded, never wrapped). The output type is chosen by ``exact_type``:
  ``decimal`` = decimal128(38, 0) (default), ``string`` = decimal digits (unlimited), ``int64``;
  a value that does not fit raises :class:`~replaydb.errors.OperatorError`. *Decision:* sums of
  floating attributes are float64 (they may overflow to inf for astronomically many trends), AVG
  is float64 (an exact fraction rounded once for integer attributes). A null aggregated attribute
  is a :class:`~replaydb.errors.DataError`.
* Negation, *decision* on the paper's inconsistency: the paper states the semantics of the three
  cases in terms of trends (Def. 1 and Sec. 5.1) but its runtime rule (Def. 5, Fig. 8) marks or
  deletes *events*, which also kills trends the stated semantics keeps: for ``SEQ(A+, NOT E)`` on
  ``a1 a2 e3 a4 a5`` the rule deletes a1, a2 at e3 and counts 3 trends, while the stated semantics
  counts 12 ((a1, a4), (a1, a2, a4, a5), ... end after e3 and are valid); for ``SEQ(NOT E, A+)`` the
  rule invalidates a4 and a5 (3 trends) while the stated semantics only stops a4, a5 from
  *starting* a trend (12). We implement the **stated semantics**, which agrees with the two-step
  approach the paper claims equivalence with, and which the runtime rule matches in case 1:

  1. ``SEQ(.., Pi, NOT N, Pj, ..)``: an adjacency (x, y) with x = end(Pi), y = start(Pj) is
     invalid when a trend of N starts after x and ends before y (Def. 5). Runtime: the latest
     start M of the N-trends finished so far bounds the valid predecessors (x.time >= M); older
     ones are removed from that transition's index.
  2. ``SEQ(.., Pi, NOT N)``: a trend is invalid in a window when a trend of N starts after its last
     event and ends before the window's end. Runtime: END contributions wait in a per-partition
     queue until the window closes; those older than the latest N-trend start are dropped.
  3. ``SEQ(NOT N, Pj, ..)``: a trend is invalid in a window when a trend of N starts at or after
     the window's start and ends before the trend's first event. Runtime: a START event does not
     start trends in windows already hit by such an N-trend (it may still extend older trends).

  Trends of N are matched with their own nested negations (case 1 only), and constrain a trend
  only when they agree on the partition attributes the two sub-patterns share.

Output schema: ``window_start``, ``window_end`` (int64, stream units, end exclusive), the GROUP-BY
attributes, one column per RETURN aggregate (named by ``AS`` or like ``COUNT(*)``,
``SUM(M.cpu)``), and ``last_seq`` (seq of the last END event that contributed to the row).
Rows come in window order, a window's rows in ascending order of their GROUP-BY values (nulls
last): the order depends on the rows alone, so a plan that replays part of the stream gives
full replay's order.

Complexity per event and index of an incoming transition, n events per window, k windows per
event, L limbs per exact value: O(k L) without edge predicates, O(k L log n) with one
inequality edge predicate (Fenwick prefix aggregates over key ranks), O(n k L) for other edge
predicates (scan) - the paper's O(n^2 k) bound; memory O(n k L). Negation adds O(log n) per
removed vertex (O(n) for indexes carrying MIN/MAX). See :mod:`.kernel`, :mod:`.runtime`,
:mod:`.plan`, :mod:`.template`; :mod:`.oracle` is the brute-force reference.
"""

from replaydb.operators.greta.config import (
    GretaConfig,
    PNot,
    PPlus,
    PSeq,
    PType,
    ReturnItem,
)
from replaydb.operators.greta.operator import GretaOperator

__all__ = ["GretaConfig", "GretaOperator", "PNot", "PPlus", "PSeq", "PType", "ReturnItem"]
