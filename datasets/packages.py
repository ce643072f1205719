"""Fetching the packages that ship the real datasets, into a local cache.

The real event data comes inside two published packages: ``vega-datasets`` 3.2.1 from the npm
registry (fetched with ``npm pack``) and ``traffic`` 2.13 from PyPI (fetched with
``pip download --no-deps --only-binary=:all:``; the wheel is read as a zip, never installed).
Each download is checked against a pinned SHA-256, so a changed upload is an error, not a silent
change of the data.

Cache layout: ``$REPLAYDB_CACHE`` (default ``~/.cache/replaydb``) is the cache root; package files
live in ``<root>/packages`` and prepared (cleaned) tables in ``<root>/prepared``. An explicit
``cache_dir`` argument replaces ``<root>/packages``. Once a package file is in the cache no
network, npm or pip is needed. Without them and without a cached file, the loaders raise
:class:`SourceUnavailable` with the command to run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from replaydb.errors import DataError, ReplayDBError

CACHE_ENV = "REPLAYDB_CACHE"


class SourceUnavailable(ReplayDBError):
    """The package holding a real dataset is neither cached nor obtainable (no npm/pip/network)."""


@dataclass(frozen=True)
class PackageSpec:
    """A pinned package file: registry ``kind`` ('npm' or 'pypi'), name, version, file, digest."""

    kind: str
    name: str
    version: str
    filename: str
    sha256: str

    @property
    def fetch_command(self) -> str:
        if self.kind == "npm":
            return f"npm pack {self.name}@{self.version}"
        return (
            f"{Path(sys.executable).name} -m pip download {self.name}=={self.version} "
            "--no-deps --only-binary=:all: -d ."
        )


VEGA_DATASETS = PackageSpec(
    "npm", "vega-datasets", "3.2.1", "vega-datasets-3.2.1.tgz",
    "6f72fda460a9863fae5fcb32f85bcd49e1761fdea6dc6cf9f4962472881cc5a3",
)
TRAFFIC = PackageSpec(
    "pypi", "traffic", "2.13", "traffic-2.13-py3-none-any.whl",
    "5e0cd61d931d03103294361542188f08f959a55e862d5cba80ab61291021e66c",
)


def cache_root() -> Path:
    """The cache root: ``$REPLAYDB_CACHE`` or ``~/.cache/replaydb``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "replaydb"


def packages_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where package files are kept (``cache_dir`` when given)."""
    return Path(cache_dir).expanduser() if cache_dir else cache_root() / "packages"


def prepared_dir() -> Path:
    """Where cleaned tables derived from package files are kept."""
    return cache_root() / "prepared"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cached_file(spec: PackageSpec, cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The cached, verified package file, or None when it is not in the cache."""
    path = packages_dir(cache_dir) / spec.filename
    if not path.is_file():
        return None
    _verify(spec, path)
    return path


def _verify(spec: PackageSpec, path: Path) -> None:
    digest = sha256_of(path)
    if digest != spec.sha256:
        raise DataError(
            f"{path} has SHA-256 {digest}, expected {spec.sha256} for {spec.name} {spec.version}",
            source=str(path),
            hint=f"delete the file and fetch it again ({spec.fetch_command})",
        )


def fetch(spec: PackageSpec, cache_dir: str | os.PathLike[str] | None = None,
          timeout: float = 600.0) -> Path:
    """The package file, from the cache or downloaded into it with npm / pip.

    Raises :class:`SourceUnavailable` (with the command to run by hand) when the tool is missing or
    the download fails, and :class:`DataError` when the file does not match its pinned digest.
    """
    have = cached_file(spec, cache_dir)
    if have is not None:
        return have
    target_dir = packages_dir(cache_dir)
    manual = (
        f"run `{spec.fetch_command}` where the registry is reachable and put {spec.filename} "
        f"into {target_dir}"
    )
    if spec.kind == "npm":
        tool = shutil.which("npm")
        if tool is None:
            raise SourceUnavailable(
                f"{spec.name} {spec.version} is not cached and npm is not installed",
                hint=f"install npm (e.g. `apt-get install npm`), or {manual}",
            )
        cmd = [tool, "pack", f"{spec.name}@{spec.version}", "--silent"]
    else:
        cmd = [sys.executable, "-m", "pip", "download", f"{spec.name}=={spec.version}",
               "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", "."]
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target_dir, prefix=".fetch-") as tmp:
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceUnavailable(
                f"could not fetch {spec.name} {spec.version}: {exc}", hint=manual
            ) from None
        got = Path(tmp) / spec.filename
        if proc.returncode != 0 or not got.is_file():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
            raise SourceUnavailable(
                f"could not fetch {spec.name} {spec.version} ({' '.join(cmd[:3])} exited "
                f"{proc.returncode}): {' / '.join(tail) or 'no output'}",
                hint=manual,
            )
        _verify(spec, got)
        final = target_dir / spec.filename
        os.replace(got, final)
    return final
