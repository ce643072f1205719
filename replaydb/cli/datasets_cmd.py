"""``replaydb datasets``: generators and real datasets (see :mod:`replaydb.datasets`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from replaydb.datasets.cli import add_arguments, run

    p = add_arguments(sub)
    if not any(a.dest == "debug" for a in p._actions):
        p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.set_defaults(handler=run)
