"""Spark UI job names and a progress line on the driver's terminal.

Every query runs in its own Spark *job group* (``replaydb-<id>``, described by the query's
language and the start of its text), and every phase sets a job description (``replaydb sase
[interval replay]: 12 intervals in 4 tasks, ~1.2M events``), so the Spark UI lists the phases by
name. :class:`Progress` polls Spark's status tracker and redraws one line on stderr
(``spark interval replay: 3/4 tasks``) while a phase runs - only when stderr is a terminal; it
prints nothing otherwise (logs, pipes, tests).
"""

from __future__ import annotations

import sys
import threading
import uuid
from typing import Any


def job_group(language: str, text: str) -> tuple[str, str]:
    """(group id, description) for one query."""
    head = " ".join(text.split())
    if len(head) > 80:
        head = head[:77] + "..."
    return f"replaydb-{uuid.uuid4().hex[:10]}", f"replaydb {language}: {head}"


class Progress:
    """Redraws ``label: done/total tasks`` on stderr while a phase runs (TTY only)."""

    def __init__(self, sc: Any, group: str, enabled: bool | None = None,
                 interval: float = 0.5) -> None:
        self.sc = sc
        self.group = group
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.label = ""
        self._width = 0

    def _counts(self) -> tuple[int, int]:
        st = self.sc.statusTracker()
        done = total = 0
        for jid in st.getJobIdsForGroup(self.group) or []:
            info = st.getJobInfo(jid)
            if info is None:
                continue
            for sid in info.stageIds:
                s = st.getStageInfo(sid)
                if s is not None:
                    done += s.numCompletedTasks
                    total += s.numTasks
        return done, total

    def _draw(self, final: bool = False) -> None:
        try:
            done, total = self._counts()
        except Exception:  # noqa: BLE001 - the tracker may be gone while Spark stops
            return
        line = f"spark {self.label}: {done}/{total} tasks"
        pad = " " * max(0, self._width - len(line))
        self._width = len(line)
        sys.stderr.write("\r" + line + pad + ("\n" if final else ""))
        sys.stderr.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()

    def start(self, label: str) -> None:
        self.label = label
        if not self.enabled:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if not self.enabled or self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._draw(final=True)
