"""Configuration of the imprecise-timestamp pattern operator (frozen, validated once).

The data model (paper 003, section 2.2): every event carries an uncertainty interval
``[lower, upper]`` of integer instants (two int64 columns, by default ``t_lower`` and ``t_upper``)
and a probability mass function over it. The pmf is uniform unless

* ``pmf_column`` names a list column of non-negative weights, one per instant of
  ``[lower, upper]`` (``upper - lower + 1`` entries, normalized by their sum; integer weights give
  exact rational probabilities in exact mode), or
* ``pmf = "triangular"``: the parametric weight ``min(t - lower + 1, upper - t + 1)``.

Instants of zero weight are impossible occurrence times: a possible world never places the event
there (an interval whose end points have weight zero is trimmed to its positive part at ingest).

Decisions where the paper is silent (each one is tested):

* **Window**: ``WITHIN W`` means all matched points lie within ``W`` consecutive instants,
  ``t_l - t_1 < W`` (the paper's ``T_m = e_m1.rub + W - 1`` and ``e.vlb < e_m1.vub + W``).
* **Order inside a world**: a point match needs strictly increasing times ``t_1 < ... < t_l``;
  events at the same instant are not ordered and cannot follow one another.
* **Skip-till-next ties**: from the last selected event at ``t_{j-1}``, the run selects the
  earliest later candidate for component ``j``; several candidates at that same earliest instant
  each extend the run (the paper's ``Theta_j`` excludes events strictly *between* the points).
* **Candidates** for component ``j`` are the events of its type that satisfy every predicate whose
  last variable (in pattern order) is ``j``, evaluated with the partial match's events bound.
* **Reported matches**: a signature is reported iff some world of positive probability returns it,
  i.e. iff its confidence is positive; its time range is the tightest range over the point matches
  of positive probability.
* **Input order** (``max_uncertainty``): with ``None`` the input must be ordered by the lower bound
  (the store's ``t`` of an imprecise stream is its lower bound), which satisfies the paper's arrival
  assumption ``e1.lower <= e2.upper`` and lets every event with ``lower < max lower seen`` count as
  complete. With an integer ``U`` the input may be in any order meeting the arrival assumption as
  long as ``upper - lower <= U``; then events with ``lower < max lower seen - U`` are complete.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from replaydb.errors import OperatorError
from replaydb.operators.expr import Expr

STRATEGIES = ("skip_till_any_match", "skip_till_next_match")
FRAMEWORKS = ("event", "point")
METHODS = ("query_order", "any_state", "selectivity")
PMF_SHAPES = ("uniform", "triangular")

DEFAULT_FRAMEWORK = "event"
"""The default framework: the faster of the two on the benchmark (bench/results/imprecise)."""
DEFAULT_METHOD = "query_order"
"""The default event-based method: the fastest on the synthetic workload
(bench/results/imprecise)."""


@dataclass(frozen=True)
class Component:
    """One pattern component ``Type var`` of ``SEQ(...)``."""

    var: str
    type_name: str


@dataclass(frozen=True)
class ReturnItem:
    """One RETURN item: a variable (its ``seq`` is output) or ``var.attr`` with its Arrow type."""

    var: str
    attr: str | None = None
    arrow_type: pa.DataType | None = None

    @property
    def column_name(self) -> str:
        return f"{self.var}_seq" if self.attr is None else f"{self.var}_{self.attr}"


@dataclass(frozen=True)
class ImpreciseConfig:
    """What to match and how.

    ``predicates`` are the WHERE conjuncts (every column qualified by a pattern variable);
    ``window`` is ``W`` in stream units; ``framework`` is ``"event"`` or ``"point"``; ``method``
    selects the event-based evaluation method (ignored by the point-based framework);
    ``exact`` adds an exact rational ``confidence_exact`` column (slow; meant for tests and small
    inputs); ``max_enumeration`` caps the joint point combinations enumerated for events that can
    spoil several gaps of one skip-till-next match (Eq. 4 of the paper).
    """

    components: tuple[Component, ...]
    window: int
    strategy: str = "skip_till_any_match"
    predicates: tuple[Expr, ...] = ()
    returns: tuple[ReturnItem, ...] = ()
    lower_column: str = "t_lower"
    upper_column: str = "t_upper"
    pmf_column: str | None = None
    pmf: str = "uniform"
    type_column: str = "type"
    framework: str = DEFAULT_FRAMEWORK
    method: str = DEFAULT_METHOD
    max_uncertainty: int | None = None
    exact: bool = False
    max_enumeration: int = 1_000_000

    def __post_init__(self) -> None:
        if not self.components:
            raise OperatorError("imprecise pattern: SEQ needs at least one component")
        names = [c.var for c in self.components]
        if len(set(names)) != len(names):
            raise OperatorError(f"imprecise pattern: duplicate variable names in {names}")
        if self.strategy not in STRATEGIES:
            raise OperatorError(f"imprecise pattern: unknown strategy {self.strategy!r}; "
                                f"use one of {', '.join(STRATEGIES)}")
        if self.framework not in FRAMEWORKS:
            raise OperatorError(f"imprecise pattern: unknown framework {self.framework!r}; "
                                f"use one of {', '.join(FRAMEWORKS)}")
        if self.method not in METHODS:
            raise OperatorError(f"imprecise pattern: unknown method {self.method!r}; "
                                f"use one of {', '.join(METHODS)}")
        if self.pmf not in PMF_SHAPES:
            raise OperatorError(f"imprecise pattern: unknown pmf shape {self.pmf!r}; "
                                f"use one of {', '.join(PMF_SHAPES)}")
        if not isinstance(self.window, int) or self.window < 1:
            raise OperatorError(f"imprecise pattern: window must be a positive integer, "
                                f"got {self.window!r}")
        if self.max_uncertainty is not None and self.max_uncertainty < 0:
            raise OperatorError("imprecise pattern: max_uncertainty must be >= 0")
        if self.max_enumeration < 1:
            raise OperatorError("imprecise pattern: max_enumeration must be >= 1")
        for r in self.returns:
            if r.var not in names:
                raise OperatorError(f"imprecise pattern: RETURN names unknown variable {r.var!r}")

    @property
    def length(self) -> int:
        return len(self.components)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(c.var for c in self.components)

    @property
    def skip_till_next(self) -> bool:
        return self.strategy == "skip_till_next_match"
