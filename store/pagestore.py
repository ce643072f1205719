"""Fetched byte ranges of remote files, kept in the local cache across processes.

A :class:`PageStore` keeps what was fetched of one immutable remote file (a data file or an
index run of a store on an object store) in two files of the cache directory:

* ``<key>.pages``: a sparse file of the remote file's size holding the fetched ranges at their
  offsets (only written blocks take disk space);
* ``<key>.ranges``: one line per stored range, ``start end crc32``, appended after the range's
  bytes are written.

:meth:`load` copies every listed range whose bytes still match their checksum into a buffer and
returns those ranges; a range whose bytes do not match (the pages file was evicted and started
again by another process, or a crash came between the bytes and the line) is left out and is
fetched again. Several processes may store ranges of one file at once: the bytes at an offset
are the same for all of them, a line is appended in one write, and the checksum settles every
interleaving. Eviction (:meth:`.mirror.StoreMirror.evict`) deletes a file's ``.ranges`` then its
``.pages``.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

PAGES = ".pages"
RANGES = ".ranges"


class PageStore:
    """The stored ranges of one remote file of ``size`` bytes, under ``stem`` (a path in the
    cache directory, without suffix)."""

    def __init__(self, stem: Path, size: int) -> None:
        self.pages = stem.with_name(stem.name + PAGES)
        self.ranges = stem.with_name(stem.name + RANGES)
        self.size = size

    def load(self, into: np.ndarray) -> list[tuple[int, int]]:
        """Copy the stored ranges whose checksums hold into ``into`` (the file's buffer);
        returns them. O(bytes stored)."""
        try:
            lines = self.ranges.read_text(encoding="ascii").splitlines()
            fd = os.open(self.pages, os.O_RDONLY)
        except (FileNotFoundError, UnicodeDecodeError):
            return []
        got: list[tuple[int, int]] = []
        try:
            for line in lines:
                parts = line.split()
                if len(parts) != 3 or not all(p.isdigit() for p in parts):
                    continue
                a, b, crc = (int(p) for p in parts)
                if not 0 <= a < b <= self.size:
                    continue
                data = os.pread(fd, b - a, a)
                if len(data) == b - a and zlib.crc32(data) == crc:
                    into[a:b] = np.frombuffer(data, np.uint8)
                    got.append((a, b))
        finally:
            os.close(fd)
        if got:  # used now: eviction goes least recently used first
            os.utime(self.pages)
        return got

    def store(self, a: int, data: bytes | memoryview) -> None:
        """Keep the fetched bytes ``data`` of offset ``a``: write them, then list them."""
        self.pages.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.pages, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, a)
        finally:
            os.close(fd)
        line = f"{a} {a + len(data)} {zlib.crc32(data)}\n".encode("ascii")
        fd = os.open(self.ranges, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
