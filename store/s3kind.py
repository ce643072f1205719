"""Stores on S3-compatible object stores (``s3://bucket/prefix``; ``s3a://`` is the same).

Credentials and the endpoint come from the standard environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``) and from
explicit storage options, the keys delta-rs takes (upper case here; an explicit option wins).
Commits are made safe against a concurrent writer by conditional puts
(:meth:`S3Kind.write_options`). One of the kinds of :mod:`.location`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from replaydb.errors import UsageError

_ENV_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
             "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP")
"""Environment variables read for an S3 store (an explicit storage option overrides each)."""

_KNOWN_OPTIONS = frozenset(_ENV_KEYS) | {
    "AWS_ENDPOINT", "AWS_S3_ALLOW_UNSAFE_RENAME", "AWS_CONDITIONAL_PUT", "AWS_FORCE_PATH_STYLE",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "AWS_REQUEST_TIMEOUT", "AWS_CONNECT_TIMEOUT",
    "AWS_SKIP_SIGNATURE", "AWS_S3_LOCKING_PROVIDER"}
"""Storage option keys accepted for an S3 store (delta-rs's names, upper case)."""

_CREDENTIAL_SOURCES = ("AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                       "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                       "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SHARED_CREDENTIALS_FILE")

_KEYS_HINT = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (environment or --storage-option)"


class S3Kind:
    """S3 and S3-compatible servers (see the module docstring)."""

    name = "S3"
    schemes = ("s3", "s3a")
    container_word = "bucket"
    usage = "s3://BUCKET[/PREFIX]"
    no_credentials = ("no credentials", _KEYS_HINT)
    failures = (
        (("NO_SUCH_BUCKET", "NoSuchBucket"), "the bucket does not exist",
         "check the bucket name in the URI"),
        (("INVALID_ACCESS_KEY_ID", "InvalidAccessKeyId", "SIGNATURE_DOES_NOT_MATCH",
          "SignatureDoesNotMatch"), "the credentials were refused", _KEYS_HINT),
        (("ACCESS_DENIED", "AccessDenied", "Forbidden", "403"), "permission denied",
         "the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) are not valid there or "
         "may not read or write this prefix"),
        (("NO_CREDENTIALS", "Unable to locate credentials"), "no credentials", _KEYS_HINT),
        (("NETWORK_CONNECTION", "Couldn't connect", "Could not connect", "curlCode: 7",
          "Connection refused", "Timeout", "timed out", "resolve host"),
         "the object store cannot be reached",
         "check AWS_ENDPOINT_URL (environment or --storage-option) and the network"),
    )
    fallback_hint = "check the URI, AWS_ENDPOINT_URL and the credentials"

    def parse(self, uri: str) -> tuple[str, str]:
        """``(bucket, prefix)`` of an ``s3://`` URI."""
        parsed = urlparse(uri)
        if not parsed.netloc:
            raise UsageError(f"{uri}: expected {self.usage}")
        return parsed.netloc, parsed.path.strip("/")

    def options(self, options: Mapping[str, str], uri: str) -> dict[str, str]:
        """The storage options: the environment's standard variables, overridden by
        ``options`` (keys upper-cased; an unknown key is a UsageError naming the known ones)."""
        out = {k: os.environ[k] for k in _ENV_KEYS if os.environ.get(k)}
        for key, value in options.items():
            k = key.upper()
            if k not in _KNOWN_OPTIONS:
                raise UsageError(f"{uri}: unknown storage option {key!r}",
                                 hint="known: " + ", ".join(sorted(_KNOWN_OPTIONS)))
            out[k] = str(value)
        if "AWS_ENDPOINT" in out and "AWS_ENDPOINT_URL" not in out:
            out["AWS_ENDPOINT_URL"] = out.pop("AWS_ENDPOINT")
        if "AWS_REGION" not in out:
            out["AWS_REGION"] = out.get("AWS_DEFAULT_REGION", "us-east-1")
        out.pop("AWS_DEFAULT_REGION", None)
        if out.get("AWS_ENDPOINT_URL", "").startswith("http://"):
            out.setdefault("AWS_ALLOW_HTTP", "true")
        return out

    def has_credentials(self, opts: Mapping[str, str]) -> bool:
        """Whether credentials were configured anywhere the S3 client looks (keys, a profile,
        a role, a credentials file); without any, requests go out unsigned."""
        if "AWS_ACCESS_KEY_ID" in opts or any(os.environ.get(k) for k in _CREDENTIAL_SOURCES):
            return True
        return (Path.home() / ".aws" / "credentials").exists()

    def filesystem(self, opts: Mapping[str, str], uri: str) -> pafs.FileSystem:
        """Arrow's S3 file system for delta-rs-style options (``uri``: the store's, for
        errors)."""
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
                raise UsageError(f"{uri}: AWS_ENDPOINT_URL {endpoint!r}: expected "
                                 "http(s)://HOST[:PORT]")
            kwargs["endpoint_override"] = parsed.netloc
            kwargs["scheme"] = parsed.scheme
            kwargs["force_virtual_addressing"] = False
        kwargs["connect_timeout"] = float(opts.get("AWS_CONNECT_TIMEOUT", "5").rstrip("s") or 5)
        kwargs["request_timeout"] = float(opts.get("AWS_REQUEST_TIMEOUT", "30").rstrip("s")
                                          or 30)
        kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=2)
        return pafs.S3FileSystem(**kwargs)

    def write_options(self, opts: Mapping[str, str]) -> dict[str, str]:
        """The storage options delta-rs commits with: the store's, plus conditional puts
        (``AWS_CONDITIONAL_PUT=etag``) unless a locking provider or another commit mechanism
        is set, so that two commits of one version cannot both succeed."""
        out = dict(opts)
        if not any(k in out for k in ("AWS_CONDITIONAL_PUT", "AWS_S3_LOCKING_PROVIDER",
                                      "AWS_S3_ALLOW_UNSAFE_RENAME")):
            out["AWS_CONDITIONAL_PUT"] = "etag"
        return out
