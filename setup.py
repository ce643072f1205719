"""Package discovery for the layer folders.

The repository keeps one top-level folder per layer (store/, indexes/, planner/, ...); all of them
install into the single import namespace ``replaydb`` (``store/`` becomes ``replaydb.store``), for
regular and editable installs alike. Metadata lives in pyproject.toml; this file only maps folders.
"""

from pathlib import Path

from setuptools import setup

LAYERS = ("store", "indexes", "planner", "replay", "operators", "datasets", "bench")
HERE = Path(__file__).parent


def _packages() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {"replaydb": "replaydb"}
    for top, folder in [("replaydb", "replaydb"), *((f"replaydb.{x}", x) for x in LAYERS)]:
        package_dir[top] = folder
        for init in sorted((HERE / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(HERE / folder)
            if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                continue
            packages.append(".".join([top, *rel.parts]) if rel.parts else top)
    return packages, package_dir


_PACKAGES, _PACKAGE_DIR = _packages()
setup(packages=_PACKAGES, package_dir=_PACKAGE_DIR, include_package_data=True)
