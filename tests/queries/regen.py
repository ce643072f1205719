"""Regenerate the expected sections of golden query cases after a reviewed change.

    python -m tests.queries.regen [PATTERN] [--dry-run]      (or: make golden-update)

Runs every case whose name (``language/name``) contains PATTERN: the full replay gives the
expected rows (or error), every listed strategy its plan shape. A section is rewritten only where
the case's expectation no longer holds (floats within tolerance, an error's message fragment
still contained in the message are kept as written); the header and the query are never touched.
Prints each file it changed, and every strategy whose rows differ from full replay's - such a
difference is a bug to report and mark ``xfail:`` in the case, never to regenerate away.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.queries.golden import (
    Case,
    case_files,
    error_matches,
    load_case,
    render,
    rows_equal,
    run,
)
from tests.queries.stores import StoreCache


def regenerate(case: Case, cache: StoreCache) -> tuple[str, list[str]]:
    """The case file's new text and the twin mismatches found (strategy: what differed)."""
    store = cache.get(case.store)
    outcomes = {s.name: run(case, store, s) for s in case.strategies}
    # the reference: full replay (an error case: its first strategy), unless marked xfail
    ref_name = next((s.name for s in case.strategies if s.name not in case.xfail),
                    case.strategies[0].name)
    ref = outcomes[ref_name]
    warnings = []
    if ref.error is not None:
        keep = case.expected_error is not None and error_matches(case.expected_error, ref.error)
        error = case.expected_error if keep else ref.error
        for name, o in outcomes.items():
            if o.error is None or not error_matches(error, o.error):
                warnings.append(f"{name}: {o.error or 'no error'} instead of {error}")
        return render(case, None, None, error), warnings
    assert ref.rows is not None
    keep = case.expected_rows is not None and rows_equal(case.expected_rows, ref.rows,
                                                         case.order)
    rows = case.expected_rows if keep else ref.rows
    plans: dict[str, str] = {}
    for name, o in outcomes.items():
        if o.error is not None:
            warnings.append(f"{name}: {o.error} where full replay gives rows")
            plans[name] = f"error {o.error}"
        else:
            assert o.plan is not None and o.rows is not None
            plans[name] = o.plan
            if not rows_equal(ref.rows, o.rows, case.order):
                warnings.append(f"{name}: rows differ from full replay's")
    return render(case, plans, rows, None), warnings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.queries.regen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pattern", nargs="?", default="", help="only cases whose name contains it")
    ap.add_argument("--dry-run", action="store_true", help="report, change no file")
    args = ap.parse_args(argv)
    files = case_files(args.pattern)
    if not files:
        print(f"no case matches {args.pattern!r}", file=sys.stderr)
        return 2

    def spark():  # noqa: ANN202 (only for stores ingested through Spark)
        from replaydb.spark import get_spark

        return get_spark("local[2]", app_name="replaydb-golden", quiet=True)

    changed = 0
    mismatches = 0
    with tempfile.TemporaryDirectory(prefix="replaydb-golden-") as tmp:
        cache = StoreCache(Path(tmp), spark)
        for path in files:
            case = load_case(path)
            text, warnings = regenerate(case, cache)
            for w in warnings:
                run_name = w.split(":", 1)[0]
                known = run_name in case.xfail
                print(f"{'known (xfail)' if known else 'TWIN MISMATCH'} {case.name} {w}")
                mismatches += not known
            if text != path.read_text():
                changed += 1
                print(f"updated {case.name}")
                if not args.dry_run:
                    path.write_text(text)
    print(f"{len(files)} case(s), {changed} {'would change' if args.dry_run else 'changed'}, "
          f"{mismatches} twin mismatch(es)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
