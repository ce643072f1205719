"""``replaydb query`` and ``replaydb explain``."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    return None
