"""A real S3 endpoint for tests and benchmarks: an S3-compatible server in its own process on
the loopback interface (``moto``'s server mode, a test dependency), started by its user and
stopped after.

:class:`S3Endpoint` starts it on a free port, creates buckets and copies local directories into
them through Arrow's S3 client (the same client the store reads with), and gives the storage
options that point replaydb at it; with ``latency_ms`` the options point at a proxy
(:mod:`.latencyproxy`) that delays every request by that much.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow.fs as pafs

KEY = "replaydb-test"
SECRET = "replaydb-test-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Endpoint:
    """One S3-compatible server process (see the module docstring)."""

    def __init__(self, latency_ms: float = 0.0, auth: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proxy: subprocess.Popen[bytes] | None = None
        self.latency_ms = latency_ms
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        if auth:  # requests after the first AUTH_SETUP must be signed by a known user
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(AUTH_SETUP)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=2).close()
                break
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the S3 test endpoint did not start") from None
                time.sleep(0.1)
        if latency_ms > 0:
            proxy = free_port()
            self._proxy = subprocess.Popen(
                [sys.executable, "-m", "replaydb.bench.latencyproxy", str(proxy),
                 str(self.port), str(latency_ms)])
            _wait_listening(proxy, self._proxy)
            self.url = f"http://127.0.0.1:{proxy}"
        self.users: dict[str, tuple[str, str]] = {"admin": (KEY, SECRET)}
        if auth:
            self.users = _create_users(self.url)
        key, secret = self.users["admin"]
        self.fs = pafs.S3FileSystem(access_key=key, secret_key=secret, region="us-east-1",
                                    endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                                    allow_bucket_creation=True, allow_bucket_deletion=True)

    @property
    def options(self) -> dict[str, str]:
        """Storage options (delta-rs's keys) that reach this endpoint (as its admin)."""
        return self.options_of("admin")

    def options_of(self, user: str) -> dict[str, str]:
        """Storage options with the keys of ``user`` (``admin``; with ``auth`` also
        ``nobody``, a user no policy allows anything)."""
        key, secret = self.users[user]
        return {"AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": key,
                "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"}

    @property
    def direct_options(self) -> dict[str, str]:
        """:attr:`options` reaching the server directly (past the latency proxy, if any)."""
        return {**self.options, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}"}

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (a valid S3 name) if missing; returns ``s3://name``."""
        self.fs.create_dir(name)
        return f"s3://{name}"

    def upload(self, local: Path, uri: str) -> str:
        """Copy the directory ``local`` to ``uri`` (``s3://bucket/prefix``); returns ``uri``."""
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        self.bucket(bucket)
        pafs.copy_files(str(local), f"{bucket}/{prefix}".rstrip("/"),
                        source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)
        return uri

    def stop(self) -> None:
        for proc in (self._proxy, self._proc):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


AUTH_SETUP = 5
"""Unsigned requests the server accepts before it checks every request: creating the users."""


def _create_users(url: str) -> dict[str, tuple[str, str]]:
    """On an endpoint that checks credentials: ``admin`` (allowed everything) and ``nobody``
    (allowed nothing), with their keys; exactly :data:`AUTH_SETUP` requests."""
    import json

    import boto3  # a dependency of moto

    iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1",
                       aws_access_key_id="setup", aws_secret_access_key="setup")
    users = {}
    for name in ("admin", "nobody"):
        iam.create_user(UserName=name)
        k = iam.create_access_key(UserName=name)["AccessKey"]
        users[name] = (k["AccessKeyId"], k["SecretAccessKey"])
    iam.put_user_policy(UserName="admin", PolicyName="everything", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    return users


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the latency proxy did not start") from None
            time.sleep(0.05)
