"""Where a store lives: a local directory or an object store, named by a URI.

A store is named by a local path, a ``file://`` URI, or an ``s3://bucket/prefix`` URI (``s3a://``
is the same). For an object store, credentials and the endpoint come from the standard
environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION``, ``AWS_ENDPOINT_URL``) and from explicit *storage options*, the keys delta-rs
takes in its ``storage_options`` (``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ...; case does not
matter); an explicit option wins over the environment.

:class:`RemoteLocation` reads objects through Arrow's file system for that kind of store and
counts what it asks for (:class:`FetchCounters`: requests and bytes), so that a benchmark and
EXPLAIN ANALYZE can report them. Every failure of the object store becomes a one-line
:class:`~replaydb.errors.StoreError` naming the URI and what to set (:func:`remote_error`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from replaydb.errors import StoreError, UsageError

S3_SCHEMES = ("s3", "s3a")
"""URI schemes of S3-compatible object stores."""

OTHER_OBJECT_SCHEMES = ("gs", "gcs", "az", "abfs", "abfss", "azure")
"""URI schemes of object stores replaydb recognises but does not read or write yet."""

_ENV_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
             "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP")
"""Environment variables read for an S3 store (an explicit storage option overrides each)."""

_KNOWN_S3_OPTIONS = frozenset(_ENV_KEYS) | {
    "AWS_ENDPOINT", "AWS_S3_ALLOW_UNSAFE_RENAME", "AWS_CONDITIONAL_PUT", "AWS_FORCE_PATH_STYLE",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "AWS_REQUEST_TIMEOUT", "AWS_CONNECT_TIMEOUT",
    "AWS_SKIP_SIGNATURE", "AWS_S3_LOCKING_PROVIDER"}
"""Storage option keys accepted for an S3 store (delta-rs's names, upper case)."""


def is_remote(path: Any) -> bool:
    """Whether ``path`` names a store on an object store (a URI with an object-store scheme)."""
    if not isinstance(path, str) or "://" not in path:
        return False
    scheme = path.split("://", 1)[0].lower()
    return scheme in S3_SCHEMES or scheme in OTHER_OBJECT_SCHEMES


def local_path(path: str | os.PathLike[str]) -> Path:
    """The local directory a local store name means (a path or a ``file://`` URI)."""
    text = os.fspath(path)
    if isinstance(text, str) and text.startswith("file://"):
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"{text}: a file:// URI names this machine's files (file:///path)")
        text = parsed.path
    return Path(text).resolve()


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (the CLI's repeatable ``--storage-option``) as a dict."""
    out: dict[str, str] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--storage-option {p!r}: expected KEY=VALUE "
                             "(e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000)")
        out[key.strip()] = value
    return out


@dataclass
class FetchCounters:
    """What reads from an object store cost: requests (GET of a whole object or a byte range,
    HEAD, LIST) and bytes received; of those, the GETs of byte ranges (``ranges``, the data
    files' chunks and footers) and their bytes. Thread-safe through :meth:`add`."""

    requests: int = 0
    bytes: int = 0
    lists: int = 0
    ranges: int = 0
    range_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, requests: int = 0, nbytes: int = 0, lists: int = 0, ranges: int = 0,
            range_bytes: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes += nbytes
            self.lists += lists
            self.ranges += ranges
            self.range_bytes += range_bytes

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "bytes": self.bytes, "lists": self.lists,
                "ranges": self.ranges, "range_bytes": self.range_bytes}


@dataclass(frozen=True)
class RemoteEntry:
    """One object under a listed prefix: its path relative to the store root, its size (-1
    for a directory) and when it was written (seconds since the epoch; 0 when unknown)."""

    rel: str
    size: int
    mtime: float = 0.0


class RemoteLocation:
    """A store's root on an S3-compatible object store (see the module docstring).

    Paths given to the methods are relative to the store root, with ``/`` separators.
    Objects a store writes are immutable except the few it replaces whole (its configuration,
    a Delta log's ``_last_checkpoint``); reads here take no lock."""

    def __init__(self, uri: str, options: Mapping[str, str] | None = None) -> None:
        parsed = urlparse(uri)
        scheme = parsed.scheme.lower()
        if scheme in OTHER_OBJECT_SCHEMES:
            raise UsageError(f"{uri}: stores on {scheme}:// are not supported yet; "
                             "replaydb reads stores on local disks and S3-compatible "
                             "object stores (s3://)")
        if scheme not in S3_SCHEMES or not parsed.netloc:
            raise UsageError(f"{uri}: expected s3://BUCKET[/PREFIX]")
        self.uri = uri.rstrip("/")
        self.bucket = parsed.netloc
        prefix = parsed.path.strip("/")
        self.root = f"{self.bucket}/{prefix}" if prefix else self.bucket
        self.options = s3_options(options or {}, uri)
        self.fs = _s3_filesystem(self.options)
        self.counters = FetchCounters()
        self.has_credentials = _has_credentials(self.options)

    # ------------------------------------------------------------------ naming
    def key(self, rel: str) -> str:
        """The file system path (``bucket/prefix/rel``) of ``rel``."""
        return f"{self.root}/{rel}" if rel else self.root

    def uri_of(self, rel: str) -> str:
        """The URI of ``rel`` (what delta-rs and error messages are given)."""
        return f"{self.uri}/{rel}" if rel else self.uri

    # ------------------------------------------------------------------ reading
    def list(self, rel: str, *, recursive: bool = False) -> list[RemoteEntry]:
        """Objects under the directory ``rel`` (sorted by path; [] when there is none);
        with ``recursive=False`` also its immediate sub-directories (size -1)."""
        sel = pafs.FileSelector(self.key(rel), allow_not_found=True, recursive=recursive)
        with self.errors(rel):
            infos = self.fs.get_file_info(sel)
        self.counters.add(requests=1, lists=1)
        cut = len(self.root) + 1
        out = [RemoteEntry(i.path[cut:], i.size if i.type == pafs.FileType.File else -1,
                           i.mtime.timestamp() if i.mtime is not None else 0.0)
               for i in infos if i.type in (pafs.FileType.File, pafs.FileType.Directory)]
        return sorted(out, key=lambda e: e.rel)

    def bucket_exists(self) -> bool:
        """Whether the URI's bucket exists (one request)."""
        with self.errors(""):
            info = self.fs.get_file_info(self.bucket)
        self.counters.add(requests=1)
        return info.type == pafs.FileType.Directory

    def read(self, rel: str) -> bytes:
        """The whole object ``rel`` (one GET; FileNotFoundError when there is none)."""
        with self.errors(rel):
            with self.fs.open_input_stream(self.key(rel), compression=None) as f:
                data = f.read()
        self.counters.add(requests=1, nbytes=len(data))
        return data

    def open_file(self, rel: str) -> pafs.NativeFile:
        """Object ``rel`` opened for reads of byte ranges (one HEAD request, which gives its
        size: ``.size()``); FileNotFoundError when there is none."""
        with self.errors(rel):
            f = self.fs.open_input_file(self.key(rel))
        self.counters.add(requests=1)
        return f

    def read_ranges(self, f: pafs.NativeFile, rel: str, ranges: Sequence[tuple[int, int]]
                    ) -> list[bytes]:
        """The byte ranges ``[start, end)`` of object ``rel`` opened as ``f``, one GET each,
        issued concurrently (up to 8 at a time)."""
        def one(r: tuple[int, int]) -> bytes:
            with self.errors(rel):
                return f.read_at(r[1] - r[0], r[0])

        if len(ranges) == 1:
            got = [one(ranges[0])]
        else:
            with ThreadPoolExecutor(min(8, len(ranges))) as pool:
                got = list(pool.map(one, ranges))
        n = sum(len(g) for g in got)
        self.counters.add(requests=len(ranges), nbytes=n, ranges=len(ranges), range_bytes=n)
        return got

    # ------------------------------------------------------------------ writing
    def put(self, rel: str, data: bytes) -> None:
        """Write object ``rel`` (whole; replaces one of the same name). One PUT."""
        with self.errors(rel):
            with self.fs.open_output_stream(self.key(rel), compression=None) as f:
                f.write(data)
        self.counters.add(requests=1)

    def delete(self, rels: Sequence[str]) -> None:
        """Delete the objects ``rels`` (missing ones are skipped), in the order given."""
        for rel in rels:
            with self.errors(rel):
                try:
                    self.fs.delete_file(self.key(rel))
                except FileNotFoundError:
                    pass
            self.counters.add(requests=1)

    def delete_tree(self, rel: str) -> None:
        """Delete everything under the directory ``rel`` (and its directory markers)."""
        with self.errors(rel):
            try:
                self.fs.delete_dir(self.key(rel))
            except FileNotFoundError:
                pass
        self.counters.add(requests=1)

    def write_options(self) -> dict[str, str]:
        """The storage options delta-rs commits with: the store's, plus conditional puts
        (``AWS_CONDITIONAL_PUT=etag``) unless a locking provider or another commit
        mechanism is set, so that two commits of one version cannot both succeed."""
        out = dict(self.options)
        if not any(k in out for k in ("AWS_CONDITIONAL_PUT", "AWS_S3_LOCKING_PROVIDER",
                                      "AWS_S3_ALLOW_UNSAFE_RENAME")):
            out["AWS_CONDITIONAL_PUT"] = "etag"
        return out

    @contextmanager
    def errors(self, rel: str) -> Iterator[None]:
        """Turn an object-store failure while touching ``rel`` into a clear StoreError."""
        try:
            yield
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise remote_error(self.uri_of(rel), exc, self.has_credentials) from None


def s3_options(options: Mapping[str, str], uri: str) -> dict[str, str]:
    """The storage options of an S3 store: the environment's standard variables, overridden by
    ``options`` (keys upper-cased; an unknown key is a UsageError naming the known ones)."""
    out = {k: os.environ[k] for k in _ENV_KEYS if os.environ.get(k)}
    for key, value in options.items():
        k = key.upper()
        if k not in _KNOWN_S3_OPTIONS:
            raise UsageError(f"{uri}: unknown storage option {key!r}",
                             hint="known: " + ", ".join(sorted(_KNOWN_S3_OPTIONS)))
        out[k] = str(value)
    if "AWS_ENDPOINT" in out and "AWS_ENDPOINT_URL" not in out:
        out["AWS_ENDPOINT_URL"] = out.pop("AWS_ENDPOINT")
    if "AWS_REGION" not in out:
        out["AWS_REGION"] = out.get("AWS_DEFAULT_REGION", "us-east-1")
    out.pop("AWS_DEFAULT_REGION", None)
    endpoint = out.get("AWS_ENDPOINT_URL", "")
    if endpoint.startswith("http://"):
        out.setdefault("AWS_ALLOW_HTTP", "true")
    return out


_CREDENTIAL_SOURCES = ("AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                       "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                       "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SHARED_CREDENTIALS_FILE")


def _has_credentials(opts: Mapping[str, str]) -> bool:
    """Whether credentials were configured anywhere the S3 client looks (keys, a profile, a
    role, a credentials file); without any, requests go out unsigned."""
    if "AWS_ACCESS_KEY_ID" in opts or any(os.environ.get(k) for k in _CREDENTIAL_SOURCES):
        return True
    return (Path.home() / ".aws" / "credentials").exists()


def _s3_filesystem(opts: Mapping[str, str]) -> pafs.S3FileSystem:
    """Arrow's S3 file system for delta-rs-style options."""
    kwargs: dict[str, Any] = {"region": opts["AWS_REGION"]}
    if "AWS_ACCESS_KEY_ID" in opts:
        kwargs["access_key"] = opts["AWS_ACCESS_KEY_ID"]
        kwargs["secret_key"] = opts.get("AWS_SECRET_ACCESS_KEY", "")
        if "AWS_SESSION_TOKEN" in opts:
            kwargs["session_token"] = opts["AWS_SESSION_TOKEN"]
    endpoint = opts.get("AWS_ENDPOINT_URL")
    if endpoint:
        parsed = urlparse(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"AWS_ENDPOINT_URL {endpoint!r}: expected http(s)://HOST[:PORT]")
        kwargs["endpoint_override"] = parsed.netloc
        kwargs["scheme"] = parsed.scheme
        kwargs["force_virtual_addressing"] = False
    kwargs["connect_timeout"] = float(opts.get("AWS_CONNECT_TIMEOUT", "5").rstrip("s") or 5)
    kwargs["request_timeout"] = float(opts.get("AWS_REQUEST_TIMEOUT", "30").rstrip("s") or 30)
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=2)
    return pafs.S3FileSystem(**kwargs)


NO_CREDENTIALS = ("no credentials",
                  "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (environment or "
                  "--storage-option)")

_FAILURES = (
    (("NO_SUCH_BUCKET", "NoSuchBucket"), "the bucket does not exist",
     "check the bucket name in the URI"),
    (("INVALID_ACCESS_KEY_ID", "InvalidAccessKeyId", "SIGNATURE_DOES_NOT_MATCH",
      "SignatureDoesNotMatch"), "the credentials were refused",
     "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (environment or --storage-option)"),
    (("ACCESS_DENIED", "AccessDenied", "Forbidden", "403"), "permission denied",
     "the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) are not valid there or may "
     "not read or write this prefix"),
    (("NO_CREDENTIALS", "Unable to locate credentials"), *NO_CREDENTIALS),
    (("NETWORK_CONNECTION", "Couldn't connect", "Could not connect", "curlCode: 7",
      "Connection refused", "Timeout", "timed out", "resolve host"),
     "the object store cannot be reached",
     "check AWS_ENDPOINT_URL (environment or --storage-option) and the network"),
)


def remote_error(uri: str, exc: BaseException, credentials: bool = True) -> StoreError:
    """A one-line StoreError for a failure of the object store behind ``uri``;
    ``credentials``: whether any were configured (a refusal without them says so)."""
    text = str(exc)
    for needles, what, hint in _FAILURES:
        if any(n in text for n in needles):
            if what == "permission denied" and not credentials:
                what, hint = NO_CREDENTIALS
            return StoreError(f"{uri}: {what}", hint=hint)
    if not credentials:  # refused, unexplained, and unsigned: say what is missing
        return StoreError(f"{uri}: {NO_CREDENTIALS[0]}", hint=NO_CREDENTIALS[1])
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return StoreError(f"{uri}: the object store failed: {first}",
                      hint="check the URI, AWS_ENDPOINT_URL and the credentials")
