import sys

from replaydb.cli import main

sys.exit(main())
