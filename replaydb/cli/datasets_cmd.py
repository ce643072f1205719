"""``replaydb datasets``: generators and real datasets (see :mod:`replaydb.datasets`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from replaydb.cli import common

    p = sub.add_parser("datasets", help="list and make datasets (generators, real data)")
    try:
        from replaydb.datasets.cli import add_arguments, run
    except ImportError:
        return
    dsub = p.add_subparsers(dest="datasets_command", metavar="ACTION")
    dsub.required = True
    add_arguments(dsub)
    for action in dsub.choices.values():
        if not any(a.dest == "json" for a in action._actions):
            common(action)
    p.set_defaults(handler=run)
