"""``python -m replaydb.datasets``: the datasets command group on its own."""

from replaydb.datasets.cli import main

raise SystemExit(main())
