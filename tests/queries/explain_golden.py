"""Golden EXPLAIN text: the tree ``replaydb explain --analyze`` prints for a few corpus queries
(one per language and source kind), with durations and the device's reason masked.

``python -m tests.queries.explain_golden`` rewrites the expected files under
``tests/queries/explain/`` (review the diff before committing it, as for the corpus)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import replaydb
from replaydb.cli.explain_text import plan_tree
from tests.queries.golden import ROOT, load_case
from tests.queries.stores import StoreCache

EXPLAIN_DIR = ROOT / "explain"
CASES: tuple[tuple[str, str | None], ...] = (
    ("match_recognize/stock_rare_volumes", None),
    ("match_recognize/stock_fixed_sequence", None),
    ("match_recognize/stock_fixed_sequence", "optimal"),
    ("sase/stock_kleene_return", None),
    ("tpstream/traffic_speeding_braking", None),
    ("greta/stock_q1_downtrends", None),
    ("greta/traffic_after_accident", None),
    ("imprecise/selective_pruned", None),
    ("imprecise/cross_event_predicate", None),
    ("window_sql/count_windows", None),
)
"""(corpus case, plan): the default plan when None."""
DURATION = re.compile(r"\b\d+(?:\.\d+)? (?:ms|s)\b")


def expected_path(name: str, plan: str | None) -> Path:
    return EXPLAIN_DIR / f"{name.replace('/', '__')}{'__' + plan if plan else ''}.txt"


def masked(text: str) -> str:
    """``text`` with every duration as ``<time>`` and the device line's reason dropped."""
    lines = []
    for line in text.splitlines():
        if line.startswith("device: "):
            line = line.split(" (", 1)[0]
        lines.append(DURATION.sub("<time>", line))
    return "\n".join(lines) + "\n"


def explain_text(name: str, plan: str | None, store: Any) -> str:
    """The masked EXPLAIN ANALYZE tree of corpus case ``name`` (with ``plan``) on ``store``."""
    case = load_case(ROOT / f"{name}.case")
    options = {**case.options, **({"plan": plan} if plan else {})}
    out: dict[str, Any] = replaydb.explain(store, case.query, analyze=True, **options)
    return masked(plan_tree(out))


def main() -> None:
    EXPLAIN_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cache = StoreCache(Path(tmp))
        for name, plan in CASES:
            store = cache.get(load_case(ROOT / f"{name}.case").store)
            expected_path(name, plan).write_text(explain_text(name, plan, store))
            print(f"wrote {expected_path(name, plan)}")


if __name__ == "__main__":
    main()
