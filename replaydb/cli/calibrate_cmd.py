"""``replaydb calibrate``: fit the pattern planner's cost weights on this machine (and measure
the costs of its tight blocks' member tests), or with ``--window`` the windowed-aggregation cost
model's (index-path merges vs replay merges)."""

from __future__ import annotations

import argparse
import sys

from replaydb.cli import open_store, store_argument
from replaydb.cli.output import print_json


def register(sub: argparse._SubParsersAction) -> None:
    from replaydb.cli import common

    p = common(sub.add_parser(
        "calibrate", help="measure plans and fit the pattern planner's cost weights, or with "
                          "--window the window cost model's (stored in the store's "
                          "configuration)"))
    store_argument(p)
    p.add_argument("stream", nargs="?", help="stream to measure on (default: the only one)")
    p.add_argument("--queries", type=int, default=24,
                   help="random pattern queries to measure (several plans each; default 24)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random queries")
    p.add_argument("--repeat", type=int, default=3, help="runs per plan (best is kept)")
    p.add_argument("--plot", default=None, metavar="PATH",
                   help="save an estimated-vs-measured plot (PNG)")
    p.add_argument("--dry-run", action="store_true",
                   help="fit and report, but do not store the weights")
    p.add_argument("--window", action="store_true",
                   help="calibrate the windowed-aggregation cost model instead: replay and the "
                        "index path on a sample of the stream (weights per stream)")
    p.add_argument("--sample-events", type=int, default=2_000_000,
                   help="--window: events of the sample (from the middle of the stream)")
    p.set_defaults(handler=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from replaydb.planner.pattern.calibrate import calibrate

    store = open_store(args, read_only=args.dry_run)
    if args.window:
        return _window(store, args)

    def progress(qi: int, label: str, sec: float) -> None:
        if sys.stderr.isatty() and not args.json:
            print(f"\rquery {qi + 1}/{args.queries}: {label} {sec * 1000:.0f} ms   ",
                  end="", file=sys.stderr)

    cal = calibrate(store, args.stream, queries=args.queries, seed=args.seed,
                    repeat=args.repeat, save=not args.dry_run, plot=args.plot,
                    progress=progress)
    if sys.stderr.isatty() and not args.json:
        print(file=sys.stderr)
    out = cal.summary()
    if args.plot:
        out["plot"] = args.plot
    if args.json:
        print_json(out)
        return 0
    w = cal.weights
    print(f"calibrated on stream {cal.stream!r}: {len(cal.samples)} measured plans in "
          f"{cal.seconds:.1f} s")
    print(f"  w_PIO  = {w.w_pio:.4g} s/byte   (primary leaves replayed)")
    if w.w_pio_interval is not None:
        print(f"  w_PIO' = {w.w_pio_interval:.4g} s/byte   (primary leaves replayed through "
              f"index-based intervals; {w.w_pio_interval / w.w_pio:.3g} x w_PIO)"
              if w.w_pio else f"  w_PIO' = {w.w_pio_interval:.4g} s/byte")
    print(f"  w_SIO  = {w.w_sio:.4g} s/byte   (index pages read; {w.w_sio / w.w_pio:.3g} x w_PIO)"
          if w.w_pio else f"  w_SIO  = {w.w_sio:.4g} s/byte")
    print(f"  w_sort = {w.w_sort:.4g} s per n log2 n")
    print(f"  navigation {cal.interval_seconds * 1000:.3g} ms per replay interval "
          f"(= {w.interval_events:,.0f} events replayed)")
    print(f"  fixed overhead per query {cal.intercept * 1000:.1f} ms (not used to rank plans)")
    m = w.member_tests
    print(f"  member tests (ns): scan {m.scan_value:.3g} a seq + {m.scan_pass:.3g} a seq "
          f"passing; bitmap {m.bits_bound:.3g} a bit + {m.bits_value:.3g} a seq + "
          f"{m.bits_target:.3g} a candidate; rank codes {m.code_target:.3g} a candidate "
          "and file")
    print(f"fit: R^2 (log times) = {cal.r2:.3f}, median relative error {cal.median_rel_error:.1%}, "
          f"Spearman(estimated cost, time) = {cal.spearman_estimated:.3f}")
    print("weights stored in the store configuration" if not args.dry_run
          else "dry run: weights not stored")
    if args.plot:
        print(f"plot saved to {args.plot}")
    return 0


def _window(store: object, args: argparse.Namespace) -> int:
    from replaydb.planner.window_calibrate import calibrate_window

    cal = calibrate_window(store, args.stream, sample_events=args.sample_events,
                           repeat=max(1, args.repeat), save=not args.dry_run)
    if args.json:
        print_json(cal.summary())
        return 0
    print(f"calibrated the window cost model on stream {cal.stream!r}: {cal.events:,} events "
          f"in {cal.seconds:.1f} s")
    print(f"  replay: {cal.replay_s_per_event * 1e9:.1f} ns per event (one merge)")
    for p in cal.probes:
        print(f"  index path, {p['leaves_per_slice']:.0f} leaves per slice: "
              f"{p['s_per_slice'] * 1e6:.1f} us per slice ({p['merges_per_slice']:.0f} merges, "
              f"{p['slices']:,.0f} slices)")
    print(f"  w_merge = {cal.w_merge:.3g} replay merges per index merge, "
          f"w_slice = {cal.w_slice:,.1f} per slice")
    print("weights stored in the store configuration" if not args.dry_run
          else "dry run: weights not stored")
    return 0
