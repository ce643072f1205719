"""Windowed aggregation: the online operator and the slide tree both execution paths share.

* :mod:`.operator` - :class:`WindowAggregate` and its :class:`WindowConfig` (semantics, output
  schema and an example in its docstring);
* :mod:`.aggregates` - aggregate functions as mergeable partial aggregates;
* :mod:`.assign` - window geometry (slices, the slide1/slide2 split);
* :mod:`.flatfat` - the FlatFAT slide tree;
* :mod:`.sliding` - per-group sliding state fed with per-slice partials (by replay or by the
  TAB+-tree index path);
* :mod:`.oracle` - the brute-force reference used by the tests.
"""

from replaydb.operators.window.aggregates import AGG_FUNCS, AggSpec
from replaydb.operators.window.assign import SliceGeometry
from replaydb.operators.window.config import WindowConfig
from replaydb.operators.window.operator import WindowAggregate

__all__ = ["AGG_FUNCS", "AggSpec", "SliceGeometry", "WindowAggregate", "WindowConfig"]
