"""The local cache of a store on an object store: its small files, mirrored on demand.

A store on an object store is read through a *mirror*: a directory of the local cache laid out
like the store, holding the files a query reads whole - the configuration, the Delta logs (from
the newest checkpoint on, :meth:`StoreMirror.sync_log`), the TAB+-tree segments of the chain a
version reads, and the secondary indexes' logs and rank codes - fetched when a snapshot or an
index is opened (:meth:`StoreMirror.sync`, :meth:`StoreMirror.sync_once`). Data files and index
runs are not mirrored by readers: they are read by byte ranges (:mod:`.remotefile`), their
footers, sizes and fetched chunks kept in :data:`FOOTERS` (:mod:`.pagestore`); writers mirror
the runs they rewrite. So the store's reading code runs unchanged on the mirror's directory,
and a selective query fetches the chunks of the index and data row groups it reads.

Files are immutable once written (a Delta commit, a checkpoint, a segment, an index run) except
:data:`REPLACED` ones; an immutable file already in the mirror with its size is not fetched
again. Every file lands under a temporary name and is renamed into place, so two processes
sharing the cache (or a crash) never leave a partial file under a real name.

The cache is bounded (:attr:`CacheOptions.max_bytes`): after a sync, mirrored files other than
Delta logs are deleted, least recently synced first, until the cache fits, never one synced
within the last :attr:`CacheOptions.keep_seconds` (which a reader in another process may be
about to open);
a deleted file is fetched again at its next sync.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from replaydb.errors import UsageError
from replaydb.store.location import RemoteEntry, RemoteLocation
from replaydb.store.pagestore import PAGES, RANGES

REPLACED = frozenset({"_last_checkpoint", "replaydb.json"})
"""Names of files a writer replaces in place (fetched again at every sync)."""

DEFAULT_MAX_BYTES = 4 << 30

MARKER = ".synced-"
"""Prefix of the markers of complete syncs (:meth:`StoreMirror.sync_once`)."""

FOOTERS = ".footers"
"""The mirror's directory of data-file footers (:class:`.remotefile.RemoteFiles`)."""

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1000, "KIB": 1 << 10, "M": 1 << 20, "MB": 10**6,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 10**9, "GIB": 1 << 30, "T": 1 << 40,
          "TB": 10**12, "TIB": 1 << 40}


def parse_size(value: int | str) -> int:
    """A byte count: an int, or text like ``512MiB``, ``2GB``, ``4G`` (binary for ``G``)."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _UNITS:
        raise UsageError(f"cache size {value!r}: expected bytes, e.g. 4GiB, 512MiB or 1000000")
    return int(float(m.group(1)) * _UNITS[unit])


@dataclass(frozen=True)
class CacheOptions:
    """Where the local cache of remote stores lives and how large it may grow.

    ``dir``: default ``$REPLAYDB_CACHE_DIR``, else ``$XDG_CACHE_HOME/replaydb``, else
    ``~/.cache/replaydb``. ``max_bytes``: the bound on mirrored files (default 4 GiB).
    ``keep_seconds``: a mirrored file synced less than this long ago is never evicted (a
    reader in another process may be about to open it)."""

    dir: str | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    keep_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.max_bytes < 0:
            raise UsageError(f"cache size must be >= 0, got {self.max_bytes}")

    def root(self) -> Path:
        if self.dir:
            return Path(self.dir).expanduser()
        env = os.environ.get("REPLAYDB_CACHE_DIR")
        if env:
            return Path(env).expanduser()
        xdg = os.environ.get("XDG_CACHE_HOME")
        return (Path(xdg) if xdg else Path.home() / ".cache") / "replaydb"


class StoreMirror:
    """The mirror of one remote store (see the module docstring); ``root`` is its directory."""

    def __init__(self, location: RemoteLocation, cache: CacheOptions) -> None:
        self.location = location
        self.cache = cache
        digest = hashlib.sha256(location.uri.encode()).hexdigest()[:24]
        self.cache_root = cache.root() / "stores"
        self.root = self.cache_root / digest
        self.root.mkdir(parents=True, exist_ok=True)
        self.footers = self.root / FOOTERS
        self._stored = 0
        self._full = False
        _BY_ROOT[str(self.root)] = self

    def local(self, rel: str) -> Path:
        return self.root / rel

    def ensure(self, rel: str) -> Path | None:
        """The local path of the immutable file ``rel``, fetched if it is not mirrored yet
        (None when the object store has none either)."""
        path = self.local(rel)
        if path.exists():
            _touch(path, time.time())
            return path
        return self.fetch(rel)

    def fetch(self, rel: str) -> Path | None:
        """Fetch the file ``rel`` whole (again); its local path, None when there is none."""
        try:
            data = self.location.read(rel)
        except FileNotFoundError:
            return None
        return self._write(rel, data)

    def sync(self, rel_dir: str, *, recursive: bool = True,
             keep: Callable[[RemoteEntry], bool] | None = None) -> list[RemoteEntry]:
        """Mirror the files under the remote directory ``rel_dir`` (those ``keep`` accepts):
        fetch the ones missing here, of another size, or replaced in place; returns the
        remote listing. One listing request plus one GET per file fetched (concurrent)."""
        listed = self.location.list(rel_dir, recursive=recursive)
        files = [e for e in listed if e.size >= 0 and (keep is None or keep(e))]
        self._fetch_missing(files)
        return listed

    def _fetch_missing(self, files: list[RemoteEntry]) -> None:
        """Fetch the ``files`` missing here, of another size, or replaced in place (several
        at once); mark the others as synced now."""
        todo = [e for e in files if self._stale(e)]
        if len(todo) == 1:  # fetch answers None for a file deleted since the listing
            self.fetch(todo[0].rel)
        elif todo:
            with ThreadPoolExecutor(min(8, len(todo))) as pool:
                list(pool.map(self.fetch, [e.rel for e in todo]))
        now = time.time()
        for e in files:
            if e not in todo and "_delta_log/" not in e.rel:
                _touch(self.local(e.rel), now)
        if todo:
            self.evict(keep={str(self.local(e.rel)) for e in files})

    def sync_log(self, rel_dir: str) -> list[RemoteEntry]:
        """Mirror a Delta log directory from its newest complete checkpoint on: the
        checkpoint, ``_last_checkpoint`` and every later commit (what a Delta reader of the
        latest version reads), not the commits before it, which :func:`.deltaio.commit_info`
        fetches when an older version is read. One listing; O(commits since the checkpoint)
        fetches the first time, the new commits after that."""
        listed = self.location.list(rel_dir, recursive=False)
        cp = _newest_checkpoint([e.rel.rsplit("/", 1)[-1] for e in listed if e.size >= 0])

        def keep(e: RemoteEntry) -> bool:
            name = e.rel.rsplit("/", 1)[-1]
            head = name.split(".", 1)[0]
            if not head.isdigit():
                return True  # _last_checkpoint and other files
            v = int(head)
            return v > cp or (v == cp and ".checkpoint." in name)

        files = [e for e in listed if e.size >= 0 and keep(e)]
        pointer = [e for e in files if e.rel.endswith("/_last_checkpoint")]
        if pointer and self.local(pointer[0].rel).exists() and not any(
                self._stale(e) for e in files if ".checkpoint." in e.rel):
            files = [e for e in files if e not in pointer]  # no new checkpoint: still right
        self._fetch_missing(files)
        return listed

    def sync_once(self, rel_dir: str, token: str,
                  keep: Callable[[RemoteEntry], bool] | None = None) -> None:
        """:meth:`sync` the directory ``rel_dir`` unless it was synced for ``token`` (what the
        caller reads of it: immutable files named by a manifest) and none of its files was
        evicted since: a marker file ``.synced-<token>`` records a complete sync, and
        :meth:`evict` deletes a directory's markers with any file of it. So a query whose
        tree and indexes are mirrored already makes no request for them. ``keep``: as for
        :meth:`sync` (the files it rejects are not mirrored)."""
        d = self.local(rel_dir)
        marker = d / f"{MARKER}{token.replace('/', '~')}"
        if marker.exists():
            now = time.time()
            with os.scandir(d) as it:
                for e in it:
                    if e.is_file() and not e.name.startswith(MARKER):
                        _touch(Path(e.path), now)
            return
        self.sync(rel_dir, keep=keep)
        d.mkdir(parents=True, exist_ok=True)
        marker.touch()

    def _stale(self, e: RemoteEntry) -> bool:
        if os.path.basename(e.rel) in REPLACED:
            return True
        try:
            return os.stat(self.local(e.rel)).st_size != e.size
        except FileNotFoundError:
            return True

    def _write(self, rel: str, data: bytes) -> Path:
        dest = self.local(rel)
        write_atomic(dest, data)
        return dest

    def accepting(self) -> bool:
        """Whether fetched chunks may be kept (:mod:`.pagestore`): not while the cache is
        over its bound with nothing it may evict."""
        return not self._full

    def note_stored(self, nbytes: int) -> None:
        """Count ``nbytes`` of chunks kept; each eighth of the bound kept runs an eviction,
        and when that cannot bring the cache under its bound no more chunks are kept (the
        files in use are never evicted), until a later eviction makes room."""
        self._stored += nbytes
        if self._stored * 8 >= self.cache.max_bytes:
            self._stored = 0
            self._full = self.evict() > self.cache.max_bytes

    def evict(self, keep: set[str] | frozenset[str] = frozenset()) -> int:
        """Delete mirrored files (of every store in the cache; Delta logs, the paths in
        ``keep`` and the files synced within ``keep_seconds`` excepted) least recently synced
        first until the cache fits its bound (see the module docstring); returns the bytes
        the cache holds then."""
        entries = []
        total = 0
        for dirpath, _, names in os.walk(self.cache_root):
            for n in names:
                p = os.path.join(dirpath, n)
                try:
                    st = os.stat(p)
                except FileNotFoundError:
                    continue
                size = st.st_blocks * 512 if n.endswith(PAGES) else st.st_size  # sparse
                total += size
                if n.endswith(RANGES):
                    continue  # goes with its pages
                if ("_delta_log" not in dirpath and n not in REPLACED and p not in keep
                        and not n.startswith(MARKER)):
                    entries.append((st.st_mtime, size, p))
        if total <= self.cache.max_bytes:
            self._full = False
            return total
        cutoff = time.time() - self.cache.keep_seconds
        for mtime, size, p in sorted(entries):
            if total <= self.cache.max_bytes or mtime >= cutoff:
                break
            try:
                _drop_markers(os.path.dirname(p))
                if p.endswith(PAGES):  # its list of ranges first (see .pagestore)
                    ranges = p[:-len(PAGES)] + RANGES
                    with contextlib.suppress(FileNotFoundError):
                        total -= os.stat(ranges).st_size
                        os.unlink(ranges)
                os.unlink(p)
                total -= size
            except FileNotFoundError:
                pass
        return total


_BY_ROOT: dict[str, StoreMirror] = {}
"""Mirrors by their directory: how a write under a mirror finds its object store
(:func:`mirror_of`)."""


def mirror_of(path: str | os.PathLike[str]) -> tuple[StoreMirror, str] | None:
    """The mirror holding ``path`` and the path relative to the store root, or None when
    ``path`` is not under a mirror (a local store). O(depth of path)."""
    text = os.fspath(path)
    if isinstance(text, str) and text.startswith("file://"):
        text = text[len("file://"):]
    p = Path(text)
    for parent in (p, *p.parents):
        m = _BY_ROOT.get(str(parent))
        if m is not None:
            return m, p.relative_to(parent).as_posix()
    return None


def not_a_run(e: RemoteEntry) -> bool:
    """Whether ``e`` is not an index run file (runs are read by ranges, never mirrored by a
    reader: :func:`.remotefile.open_remote`)."""
    name = e.rel.rsplit("/", 1)[-1]
    return not (name.startswith("run-") and name.endswith(".parquet"))


def _newest_checkpoint(names: list[str]) -> int:
    """The newest version with a complete checkpoint among a Delta log's file names (-1
    when none): a single-file checkpoint, or every part of a multi-part one."""
    parts: dict[int, set[int]] = {}
    total: dict[int, int] = {}
    best = -1
    for n in names:
        bits = n.split(".")
        if len(bits) < 3 or bits[1] != "checkpoint" or not bits[0].isdigit():
            continue
        v = int(bits[0])
        if len(bits) == 3:  # <v>.checkpoint.parquet
            best = max(best, v)
        elif len(bits) == 5 and bits[2].isdigit() and bits[3].isdigit():
            parts.setdefault(v, set()).add(int(bits[2]))  # <v>.checkpoint.<i>.<n>.parquet
            total[v] = int(bits[3])
    for v, got in parts.items():
        if len(got) == total[v]:
            best = max(best, v)
    return best


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` under a temporary name, then rename it into place (readers
    and other writers of the cache never see a partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".fetch-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _drop_markers(directory: str) -> None:
    """Delete the sync markers of ``directory`` (one of its files is about to go)."""
    with os.scandir(directory) as it:
        for e in it:
            if e.name.startswith(MARKER):
                try:
                    os.unlink(e.path)
                except FileNotFoundError:
                    pass


def _touch(path: Path, now: float) -> None:
    """Mark a mirrored file as synced now (its mtime orders eviction)."""
    try:
        os.utime(path, (now, now))
    except FileNotFoundError:
        pass
