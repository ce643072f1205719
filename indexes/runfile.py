"""Run files: immutable Parquet files of entries sorted by (key, seq), with their metadata.

A run is one or more files ("parts") of the index's Delta table. Everything needed to plan reads
is recoverable from the Delta log plus each file's footer, with no side files:

* the file name ``run-<id_lo>-<id_hi>-L<level>-p<part>-<uuid>.parquet`` encodes the run's age
  interval (flush counters ``id_lo..id_hi``; runs are ordered by it, higher = newer), its level
  and its part number (parts of a run have ascending, disjoint (key, seq) ranges);
* the Delta AddAction stats hold numRecords and min/max of key, seq and t (so other engines can
  prune on them too);
* the Parquet footer key-value metadata holds ``replaydb.lsm`` (JSON: level, ids, part, seq-range
  tombstone, entry count, seq/t ranges, first/last seq, row-group size, sample step, seq
  histogram parameters) and base64 arrays: the first and last key of every row group (the sparse
  index that lets a range query read only the row groups overlapping [lo, hi]), the key sample
  (:mod:`replaydb.indexes.sketch`) and the seq histogram.

A tombstone ``tomb = s0`` on a run means: every entry with seq >= s0 in an OLDER run is deleted.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from replaydb.errors import CorruptionError
from replaydb.indexes.entries import Entries, arrow_schema
from replaydb.indexes.kernels import seq_histogram
from replaydb.indexes.options import LSMOptions
from replaydb.indexes.rankcodes import write_codes
from replaydb.indexes.sketch import SeqHistogram, byte_ranges, sample_positions, seq_hist_shift
from replaydb.store.mirror import mirror_of
from replaydb.store.remotefile import open_remote

FORMAT_VERSION = 1
META_KEY = "replaydb.lsm"
_ARRAY_KEYS = ("rg_min", "rg_max", "samples", "seq_hist")
NAME_RE = re.compile(
    r"^run-(?P<id_lo>\d{10})-(?P<id_hi>\d{10})-L(?P<level>\d{2})-p(?P<part>\d{5})-(?P<uid>[0-9a-f]+)\.parquet$"
)


def run_file_name(id_lo: int, id_hi: int, level: int, part: int) -> str:
    return f"run-{id_lo:010d}-{id_hi:010d}-L{level:02d}-p{part:05d}-{uuid.uuid4().hex[:16]}.parquet"


def parse_run_file_name(name: str) -> dict[str, int] | None:
    m = NAME_RE.match(os.path.basename(name))
    if m is None:
        return None
    return {k: int(m.group(k)) for k in ("id_lo", "id_hi", "level", "part")}


def _encode_keys(values: Any, key_type: str) -> str:
    if key_type == "string":
        arr = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
        batch = pa.record_batch([arr], names=["v"])
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        return base64.b64encode(sink.getvalue()).decode()
    return base64.b64encode(
        np.ascontiguousarray(values, dtype="<" + np.dtype(key_type).str[1:]).tobytes()
    ).decode()


def _decode_keys(text: str, key_type: str) -> Any:
    raw = base64.b64decode(text)
    if key_type == "string":
        with pa.ipc.open_stream(raw) as r:
            table = r.read_all()
        return table.column("v").to_pylist()
    return np.frombuffer(raw, dtype="<" + np.dtype(key_type).str[1:]).astype(key_type)


@dataclass
class RunFileMeta:
    """Metadata of one run file (one part of a run), read from its footer and the Delta log."""

    name: str
    size_bytes: int
    key_type: str
    level: int
    id_lo: int
    id_hi: int
    part: int
    tomb: int | None
    n: int
    seq_min: int
    seq_max: int
    t_min: int
    t_max: int
    first_seq: int
    last_seq: int
    rg_entries: int
    rg_min: Any
    rg_max: Any
    rg_rows: np.ndarray
    rg_bytes: np.ndarray  # (row groups, columns key/seq/t): compressed bytes
    sample_step: int
    samples: Any
    seq_hist: SeqHistogram
    key_bytes: int
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key_min(self) -> Any:
        return self.rg_min[0] if self.n else None

    @property
    def key_max(self) -> Any:
        return self.rg_max[-1] if self.n else None

    @property
    def byte_ranges(self) -> list[tuple[int, int]] | None:
        """Per-position byte ranges of a string file's key sample (None for numeric keys)."""
        if self.key_type != "string":
            return None
        if "byte_ranges" not in self.cache:
            self.cache["byte_ranges"] = byte_ranges(self.samples)
        return self.cache["byte_ranges"]

    @property
    def num_row_groups(self) -> int:
        return int(self.rg_rows.size)

    @property
    def sample_pos(self) -> np.ndarray:
        """Positions of the sampled keys (computed once per file: every count asks)."""
        got = self.cache.get("sample_pos")
        if got is None:
            got = self.cache["sample_pos"] = sample_positions(self.n, self.sample_step)
        return got

    @property
    def rg_start(self) -> np.ndarray:
        """Position of the first entry of every row group."""
        got = self.cache.get("rg_start")
        if got is None:
            got = self.cache["rg_start"] = np.concatenate(
                [[0], np.cumsum(self.rg_rows)[:-1]]).astype(np.int64)
        return got

    def pages_of(self, a: int, b: int, entries_per_page: int) -> int:
        """Logical pages of row groups ``a:b`` (each row group's entries rounded up to whole
        pages)."""
        rows = self.rg_rows[a:b]
        return int(((rows + (entries_per_page - 1)) // entries_per_page).sum())


def _sample_step(n: int, options: LSMOptions) -> int:
    step = options.sample_every
    if n > step * (options.max_samples_per_file - 1):
        step = -(-n // (options.max_samples_per_file - 1))
    return max(1, step)


def write_run_file(
    directory: str,
    entries: Entries,
    *,
    key_type: str,
    level: int,
    id_lo: int,
    id_hi: int,
    part: int = 0,
    tomb: int | None = None,
    options: LSMOptions,
) -> tuple[RunFileMeta, dict[str, Any]]:
    """Write sorted ``entries`` as one run file (and its rank codes beside it, see
    :mod:`.rankcodes`); returns its metadata and AddAction fields.

    The AddAction fields are a dict with ``path`` (relative to the table), ``size``,
    ``partition_values`` ({}), ``modification_time`` (ms), ``data_change`` (True) and ``stats``
    (Delta stats JSON). The caller must commit it; until then the file is invisible to readers.
    Cost: O(n) plus the Parquet encoding.
    """
    n = len(entries)
    name = run_file_name(id_lo, id_hi, level, part)
    path = os.path.join(directory, name)
    rg = options.row_group_entries
    starts = np.arange(0, max(n, 1), rg, dtype=np.int64) if n else np.empty(0, np.int64)
    ends = np.minimum(starts + rg, n) - 1
    step = _sample_step(n, options)
    pos = sample_positions(n, step)
    if key_type == "string":
        keys_arr = entries.key
        rg_min = keys_arr.take(pa.array(starts)) if n else pa.array([], pa.string())
        rg_max = keys_arr.take(pa.array(ends)) if n else pa.array([], pa.string())
        samples = keys_arr.take(pa.array(pos)) if n else pa.array([], pa.string())
        key_bytes = 0
        if n:
            offs = np.frombuffer(keys_arr.buffers()[1], dtype=np.int32)
            key_bytes = int(offs[keys_arr.offset + n] - offs[keys_arr.offset])
    else:
        keys_np = entries.key
        rg_min, rg_max, samples = keys_np[starts], keys_np[ends], keys_np[pos]
        key_bytes = 8 * n
    seq = entries.seq
    if n:
        seq_min, seq_max = int(seq.min()), int(seq.max())
        t_min, t_max = int(entries.t.min()), int(entries.t.max())
        shift = seq_hist_shift(seq_min, seq_max, options.seq_bins)
        nbins = ((seq_max - seq_min) >> shift) + 1
        hist = seq_histogram(seq, seq_min, shift, nbins)
        first_seq, last_seq = int(seq[0]), int(seq[-1])
    else:
        seq_min = seq_max = t_min = t_max = first_seq = last_seq = 0
        shift = 0
        hist = np.zeros(0, np.int64)
    meta_json = {
        "format": FORMAT_VERSION,
        "key_type": key_type,
        "level": level,
        "id_lo": id_lo,
        "id_hi": id_hi,
        "part": part,
        "tomb": tomb,
        "n": n,
        "seq_min": seq_min,
        "seq_max": seq_max,
        "t_min": t_min,
        "t_max": t_max,
        "first_seq": first_seq,
        "last_seq": last_seq,
        "rg_entries": rg,
        "sample_step": step,
        "seq_hist_lo": seq_min,
        "seq_hist_shift": shift,
        "key_bytes": key_bytes,
    }
    kv = {
        META_KEY: json.dumps(meta_json),
        f"{META_KEY}.rg_min": _encode_keys(rg_min, key_type),
        f"{META_KEY}.rg_max": _encode_keys(rg_max, key_type),
        f"{META_KEY}.samples": _encode_keys(samples, key_type),
        f"{META_KEY}.seq_hist": _encode_keys(hist, "int64"),
    }
    table = entries.to_table(key_type)
    compression = None if options.compression == "none" else options.compression
    with pq.ParquetWriter(
        path,
        arrow_schema(key_type),
        compression=compression,
        use_dictionary=["key"] if key_type == "string" else False,
        write_statistics=True,
        store_schema=False,
    ) as writer:
        if n:
            writer.write_table(table, row_group_size=rg)
        writer.add_key_value_metadata(kv)
    if options.fsync:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    if options.rank_codes and key_type != "string" and compression is None and n:
        write_codes(directory, name, seq, seq_min, seq_max, fsync=options.fsync)
    size = os.path.getsize(path)
    meta = load_run_meta(directory, name, size)
    add = {
        "path": name,
        "size": size,
        "partition_values": {},
        "modification_time": int(time.time() * 1000),
        "data_change": True,
        "stats": delta_stats(meta),
    }
    return meta, add


def _json_key(v: Any) -> Any:
    if isinstance(v, str):
        return v if len(v) <= 256 else None
    if isinstance(v, (np.floating, float)):
        return float(v) if np.isfinite(v) else None
    return int(v)


def delta_stats(meta: RunFileMeta) -> str:
    """Delta AddAction stats JSON (numRecords, min/max of key, seq, t, null counts)."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    if meta.n:
        kmin, kmax = _json_key(meta.key_min), _json_key(meta.key_max)
        if kmin is not None:
            mins["key"] = kmin
        if kmax is not None:
            maxs["key"] = kmax
        mins.update({"seq": meta.seq_min, "t": meta.t_min})
        maxs.update({"seq": meta.seq_max, "t": meta.t_max})
    return json.dumps(
        {
            "numRecords": meta.n,
            "minValues": mins,
            "maxValues": maxs,
            "nullCount": {"key": 0, "seq": 0, "t": 0},
        }
    )


_META_CACHE: dict[tuple[str, int], RunFileMeta] = {}
_META_LOCK = threading.Lock()
_META_CACHE_MAX = 4096


def load_run_meta(directory: str, name: str, size: int | None = None) -> RunFileMeta:
    """Read (or fetch from the process-wide cache) the metadata of run file ``name``.

    Run files are immutable and uniquely named, so the cache key (absolute path, size) never goes
    stale. Raises CorruptionError when the footer is missing or inconsistent with the name.
    """
    path = os.path.abspath(os.path.join(directory, name))
    remote = open_remote(path) if size is None else None
    if size is None:
        size = remote.size if remote is not None else os.path.getsize(path)
    key = (path, int(size))
    with _META_LOCK:
        hit = _META_CACHE.get(key)
    if hit is not None:
        return hit
    try:
        if remote is None:
            remote = open_remote(path)
        md = remote.parquet.metadata if remote is not None else pq.read_metadata(path)
    except (OSError, pa.ArrowException) as exc:
        raise CorruptionError(f"index run file {name} cannot be read: {exc}") from None
    kv = md.metadata or {}
    raw = kv.get(META_KEY.encode())
    if raw is None:
        raise CorruptionError(f"index run file {name} has no {META_KEY} footer metadata")
    m = json.loads(raw)
    if m.get("format") != FORMAT_VERSION:
        raise CorruptionError(f"index run file {name}: unsupported format {m.get('format')!r}")
    kt = m["key_type"]
    arrays = {
        k: _decode_keys(kv[f"{META_KEY}.{k}".encode()].decode(), "int64" if k == "seq_hist" else kt)
        for k in _ARRAY_KEYS
    }
    nrg = md.num_row_groups
    rg_rows = np.array([md.row_group(i).num_rows for i in range(nrg)], dtype=np.int64)
    rg_bytes = np.array(
        [
            [md.row_group(i).column(j).total_compressed_size for j in range(md.num_columns)]
            for i in range(nrg)
        ],
        dtype=np.int64,
    ).reshape(nrg, md.num_columns)
    meta = RunFileMeta(
        name=name,
        size_bytes=int(size),
        key_type=kt,
        level=int(m["level"]),
        id_lo=int(m["id_lo"]),
        id_hi=int(m["id_hi"]),
        part=int(m["part"]),
        tomb=None if m["tomb"] is None else int(m["tomb"]),
        n=int(m["n"]),
        seq_min=int(m["seq_min"]),
        seq_max=int(m["seq_max"]),
        t_min=int(m["t_min"]),
        t_max=int(m["t_max"]),
        first_seq=int(m["first_seq"]),
        last_seq=int(m["last_seq"]),
        rg_entries=int(m["rg_entries"]),
        rg_min=arrays["rg_min"],
        rg_max=arrays["rg_max"],
        rg_rows=rg_rows,
        rg_bytes=rg_bytes,
        sample_step=int(m["sample_step"]),
        samples=arrays["samples"],
        seq_hist=SeqHistogram(int(m["seq_hist_lo"]), int(m["seq_hist_shift"]), arrays["seq_hist"]),
        key_bytes=int(m["key_bytes"]),
    )
    with _META_LOCK:
        if len(_META_CACHE) >= _META_CACHE_MAX:
            _META_CACHE.clear()
        _META_CACHE[key] = meta
    return meta


def read_whole_file(directory: str, meta: RunFileMeta) -> Entries:
    """All entries of a run file (used by compaction and the checker; a run of a store on an
    object store is fetched whole first). O(n)."""
    path = os.path.join(directory, meta.name)
    if not os.path.exists(path):
        got = mirror_of(path)
        if got is not None:
            got[0].ensure(got[1])
    table = pq.ParquetFile(path).read(columns=["key", "seq", "t"])
    return Entries.from_table(table, meta.key_type)
