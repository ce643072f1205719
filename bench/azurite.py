"""A real Azure Blob Storage endpoint for tests: the Azurite emulator (npm package ``azurite``,
pinned) in its own process on the loopback interface, started by its user and stopped after.

The package is installed with ``npm`` into the cache (``$REPLAYDB_CACHE``, default
``~/.cache/replaydb``, under ``npm/``) the first time; later runs start it from there.
:class:`AzuriteEndpoint` starts it on a free port with its data in memory, creates containers
and copies local directories into them through Arrow's Azure client (the one the store reads
with), and gives the storage options that point replaydb at it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pyarrow.fs as pafs

from replaydb.bench.s3endpoint import free_port
from replaydb.store.azurekind import EMULATOR_ACCOUNT, EMULATOR_KEY

VERSION = "3.35.0"
"""The Azurite release the tests run."""


class EmulatorUnavailable(RuntimeError):
    """Node.js or npm is missing, or the package cannot be installed."""


def install(cache: Path | None = None) -> Path:
    """The ``azurite-blob`` entry script of the pinned release, installed with ``npm`` into
    the cache when missing (EmulatorUnavailable without node or npm)."""
    root = (cache or Path(os.environ.get("REPLAYDB_CACHE", Path.home() / ".cache" / "replaydb"))
            ) / "npm" / f"azurite-{VERSION}"
    script = root / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    if script.exists():
        return script
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise EmulatorUnavailable("the Azure emulator needs Node.js and npm on the PATH")
    root.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent",
                           "--prefix", str(root), f"azurite@{VERSION}"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not script.exists():
        raise EmulatorUnavailable(f"npm could not install azurite@{VERSION}: "
                                  f"{(done.stderr or done.stdout).strip()[-300:]}")
    return script


class AzuriteEndpoint:
    """One Azurite blob service process (see the module docstring)."""

    def __init__(self, cache: Path | None = None) -> None:
        script = install(cache)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base_url}/{EMULATOR_ACCOUNT}"
        self._proc = subprocess.Popen(
            [shutil.which("node") or "node", str(script), "--blobHost", "127.0.0.1",
             "--blobPort", str(self.port), "--inMemoryPersistence", "--silent",
             "--skipApiVersionCheck", "--loose", "--disableTelemetry"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.fs = pafs.AzureFileSystem(EMULATOR_ACCOUNT, account_key=EMULATOR_KEY,
                                       blob_storage_authority=f"127.0.0.1:{self.port}",
                                       blob_storage_scheme="http",
                                       dfs_storage_authority=f"127.0.0.1:{self.port}",
                                       dfs_storage_scheme="http")
        deadline = time.monotonic() + 60
        while True:
            try:
                self.fs.get_file_info(pafs.FileSelector("", recursive=False))
                break
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the Azure test endpoint did not start") from None
                time.sleep(0.2)

    @property
    def options(self) -> dict[str, str]:
        """Storage options (delta-rs's keys) that reach this endpoint, with
        ``AZURITE_BLOB_STORAGE_URL`` in the environment set to :attr:`base_url` (where both
        Arrow's and delta-rs's clients look for the emulator): see :meth:`environment`."""
        return {"AZURE_STORAGE_USE_EMULATOR": "true"}

    @property
    def options_key(self) -> str:
        """The emulator account's key (for options that name an endpoint explicitly)."""
        return EMULATOR_KEY

    @property
    def environment(self) -> dict[str, str]:
        """The environment variable that points the emulator mode at this process."""
        return {"AZURITE_BLOB_STORAGE_URL": self.base_url}

    def container(self, name: str) -> str:
        """Create container ``name`` if missing; returns ``az://name``."""
        self.fs.create_dir(name)
        return f"az://{name}"

    def upload(self, local: Path, uri: str) -> str:
        """Copy the directory ``local`` to ``uri`` (``az://container/prefix``); returns
        ``uri``."""
        container, _, prefix = uri[len("az://"):].partition("/")
        self.container(container)
        pafs.copy_files(str(local), f"{container}/{prefix}".rstrip("/"),
                        source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)
        return uri

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
