"""EventBuffer.at: t, seq and partition id of kept events at global indices, across the
batches (chunks) the buffer holds and after trims, against the concatenated columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from replaydb.operators.pattern.buffer import EventBuffer


def test_at_matches_the_concatenated_columns_across_chunks_and_trims() -> None:
    rng = np.random.default_rng(11)
    for trial in range(60):
        buf = EventBuffer(n_cols=1, track_next=False)
        ts, seqs, pids = [], [], []
        for _ in range(int(rng.integers(1, 7))):
            n = int(rng.integers(1, 50))
            t = np.sort(rng.integers(0, 10_000, n)).astype(np.int64)
            seq = rng.integers(0, 1 << 40, n).astype(np.int64)
            pid = rng.integers(0, 5, n).astype(np.int64)
            batch = pa.record_batch([pa.array(t)], names=["t"])
            buf.append(batch, np.zeros((1, n)), t, seq, pid)
            ts.append(t), seqs.append(seq), pids.append(pid)
        t_all, s_all, p_all = (np.concatenate(x) for x in (ts, seqs, pids))
        keep = int(rng.integers(0, buf.end)) if trial % 2 else 0
        buf.trim(keep)
        first = buf.chunks[0][0]  # trimming drops whole chunks only
        for size in (0, 1, 7, 200):
            g = rng.integers(first, buf.end, size).astype(np.int64)
            if size == 7:
                g[:] = g[0]  # all in one chunk
            assert np.array_equal(buf.at("t", g), t_all[g]), trial
            assert np.array_equal(buf.at("seq", g), s_all[g]), trial
            assert np.array_equal(buf.at("pid", g), p_all[g]), trial
