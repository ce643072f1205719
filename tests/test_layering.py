"""Dependencies between replaydb's layers point one way.

The layers, from the top (a layer may use every layer below it, never one above)::

    API/CLI (the ``replaydb`` package: ``replaydb/__init__.py``, cli/, ingest/, demo.py)
      -> planner -> replay -> operators
    planner and replay may read store and indexes; indexes may read store;
    store and operators import no other layer.

The ground floor (:data:`GROUND`: errors, time units, the Spark session, Arrow input
normalization) may be used by every layer and imports only the ground floor. ``datasets`` uses
the ground floor only; ``bench`` and ``tests`` sit on top and may import anything (they are not
read here). A lower layer that needs a higher one at run time is handed it by the layer that
composes them (``replaydb/__init__.py`` wires the indexes' side tables into the store).

Every module of the layer folders and of ``replaydb/`` is read with :mod:`ast`, and every edge is
counted wherever it is written: ``import`` statements at any depth (functions, ``TYPE_CHECKING``
blocks), relative imports (resolved against the module's package), and string constants that
name a replaydb module (``"replaydb.x.y"``, ``"replaydb.x.y:Name"``, a prefix ``"replaydb.x."``
or an f-string starting with one; a string counts when its second part is a layer folder or a
module of ``replaydb/``, so metadata keys such as ``"replaydb.segment"`` do not). An
``importlib.import_module`` / ``__import__`` / ``pkgutil.resolve_name`` call passes only when its
name is known statically: such a string, a module-level string constant, or
``f"{__name__}.{sub}"`` / ``f"{__package__}.{sub}"`` (the module's own package); a name computed
at run time (from data, a table, a payload) cannot be checked and is reported as
``<computed at run time>``. There is no list of exceptions. Cost: one parse per module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Folders that install as ``replaydb.<folder>`` (see setup.py), each one layer.
LAYER_FOLDERS = ("store", "indexes", "planner", "replay", "operators", "datasets", "bench")
#: Ground-floor modules: every layer may import them; they import only each other.
GROUND = ("replaydb.errors", "replaydb.timeunits", "replaydb.spark", "replaydb.batches")
#: Folders read by the check (bench sits on top and may import anything).
CHECKED = ("replaydb", "store", "indexes", "planner", "replay", "operators", "datasets")

_BELOW_PLANNER = {"replay", "operators", "store", "indexes", "ground"}
#: The layers each layer may import (its own included).
ALLOWED: dict[str, frozenset[str]] = {
    "ground": frozenset({"ground"}),
    "store": frozenset({"store", "ground"}),
    "operators": frozenset({"operators", "ground"}),
    "indexes": frozenset({"indexes", "store", "ground"}),
    "replay": frozenset({"replay", "operators", "store", "indexes", "ground"}),
    "planner": frozenset({"planner", *_BELOW_PLANNER}),
    "datasets": frozenset({"datasets", "ground"}),
    "api": frozenset({"api", "planner", "datasets", *_BELOW_PLANNER}),
    "bench": frozenset({"bench", "api", "planner", "datasets", *_BELOW_PLANNER}),
}

_NAME = r"[A-Za-z_]\w*"
#: A string that names a replaydb module: dotted path, optional ``:attr``, or a ``prefix.``.
_MODULE_STRING = re.compile(rf"replaydb(?:\.{_NAME})+(?:\.|:{_NAME}(?:\.{_NAME})*)?")
_MODULE_PREFIX = re.compile(rf"replaydb(?:\.{_NAME})+")
_DYNAMIC_CALLS = frozenset({"import_module", "__import__", "resolve_name"})


@dataclass(frozen=True)
class Edge:
    """One reference from a module to another replaydb module (or a run-time-computed name)."""

    path: str          # file, relative to the repository root
    line: int
    source: str        # importing module
    target: str        # imported module, or "<computed at run time>"
    how: str           # import | from-import | relative import | string | dynamic import

    def describe(self) -> str:
        src, dst = layer_of(self.source), layer_of(self.target)
        where = f"{self.path}:{self.line}: {self.source} ({src})"
        if dst == "unknown":
            return f"{where} imports a module by a name computed at run time [{self.how}]"
        return f"{where} -> {self.target} ({dst}) [{self.how}]"


def module_name(rel: Path) -> str:
    """The import name of the file ``rel`` (relative to the repository root)."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    top = parts[0]
    head = ["replaydb"] if top == "replaydb" else ["replaydb", top]
    return ".".join(head + parts[1:])


def layer_of(module: str) -> str:
    """The layer a module (or ``<computed at run time>``) belongs to."""
    if module.startswith("<"):
        return "unknown"
    if any(module == g or module.startswith(g + ".") for g in GROUND):
        return "ground"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYER_FOLDERS:
        return parts[1]
    return "api"


def _package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _names_module(name: str, modules: set[str]) -> bool:
    """Whether the dotted ``name`` (``replaydb.x...``) lies in a layer folder or a module of the
    ``replaydb`` package (``"replaydb.json"``, a file name, or ``"replaydb.segment"``, a metadata
    key, name none)."""
    parts = name.split(".")
    return len(parts) > 1 and (parts[1] in LAYER_FOLDERS or ".".join(parts[:2]) in modules)


def _string_target(value: str, modules: set[str]) -> str | None:
    """The module a string constant names, if it names one."""
    if not _MODULE_STRING.fullmatch(value):
        return None
    name = value.split(":")[0].rstrip(".")
    return name if _names_module(name, modules) else None


def _joined_target(node: ast.JoinedStr, source: str, package: str,
                   modules: set[str]) -> str | None:
    """The module (or package) an f-string names by its fixed start, if it names one:
    ``f"replaydb.planner.lang.{x}"`` names ``replaydb.planner.lang``; ``f"{__name__}.{x}"`` and
    ``f"{__package__}.{x}"`` a submodule of the module's own package (not decidable in the top
    package ``replaydb``, whose submodules span every layer)."""
    first = node.values[0] if node.values else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        match = _MODULE_PREFIX.match(first.value)
        if match and _names_module(match.group(0), modules):
            return match.group(0)
    rest = node.values[1] if len(node.values) > 1 else None
    own = {"__name__": source, "__package__": package}
    if (isinstance(first, ast.FormattedValue) and isinstance(first.value, ast.Name)
            and own.get(first.value.id, "replaydb") != "replaydb"
            and isinstance(rest, ast.Constant) and str(rest.value).startswith(".")):
        return own[first.value.id]
    return None


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _constant_names(tree: ast.Module) -> set[str]:
    """Names bound exactly once in the module, at its top level, to a string constant."""
    bound: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound[node.id] = bound.get(node.id, 0) + 1
    names = set()
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            else stmt.target if isinstance(stmt, ast.AnnAssign) else None
        value = getattr(stmt, "value", None)
        if (isinstance(target, ast.Name) and bound.get(target.id) == 1
                and isinstance(value, ast.Constant) and isinstance(value.value, str)):
            names.add(target.id)
    return names


def _skipped_constants(tree: ast.Module) -> set[int]:
    """Docstrings, and the fixed parts of f-strings (an f-string is read as a whole)."""
    skip = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    return skip | {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}


def _import_from_target(node: ast.ImportFrom, package: str) -> tuple[str, str]:
    """The module an ``from ... import`` reads from (relative imports resolved), and how."""
    if not node.level:
        return node.module or "", "from-import"
    anchor = package.split(".")
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else [])), "relative import"


def _dynamic_is_checked(arg: ast.expr | None, source: str, package: str, modules: set[str],
                        constants: set[str]) -> bool:
    """Whether the name a dynamic import gets is known statically (and counted elsewhere): a
    string constant, a module-level constant, or an f-string / sum with a module prefix."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return True
    if isinstance(arg, ast.Name) and arg.id in constants:
        return True
    if isinstance(arg, ast.JoinedStr):
        return _joined_target(arg, source, package, modules) is not None
    return (isinstance(arg, ast.BinOp) and isinstance(arg.left, ast.Constant)
            and _string_target(str(arg.left.value), modules) is not None)


def edges_of(rel: Path, text: str, modules: set[str]) -> list[Edge]:
    """Every reference of the module in ``text`` (file ``rel``) to a replaydb module.

    ``modules`` is the set of known module names; ``from package import name`` counts as an edge
    to ``package.name`` when that is a module. Linear in the size of the syntax tree.
    """
    source = module_name(rel)
    package = _package_of(source, rel.name == "__init__.py")
    tree = ast.parse(text, filename=str(rel))
    skip, constants = _skipped_constants(tree), _constant_names(tree)
    found: list[Edge] = []

    def add(node: ast.AST, target: str, how: str) -> None:
        if target == "replaydb" or target.startswith("replaydb.") or target.startswith("<"):
            found.append(Edge(str(rel), getattr(node, "lineno", 0), source, target, how))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name, "import")
        elif isinstance(node, ast.ImportFrom):
            base, how = _import_from_target(node, package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(node, sub if sub in modules else base, how)
        elif isinstance(node, ast.Call) and _call_name(node.func) in _DYNAMIC_CALLS:
            named = {k.arg: k.value for k in node.keywords}
            arg = node.args[0] if node.args else named.get("name")
            if not _dynamic_is_checked(arg, source, package, modules, constants):
                add(node, "<computed at run time>", "dynamic import")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            target = _string_target(node.value, modules)
            if target is not None:
                add(node, target, "string")
        elif isinstance(node, ast.JoinedStr):
            target = _joined_target(node, source, package, modules)
            if target is not None:
                add(node, target, "string")
    return found


def violations(edges: list[Edge]) -> list[Edge]:
    """The edges that point the wrong way (against :data:`ALLOWED`)."""
    wrong = [e for e in edges if layer_of(e.target) not in ALLOWED[layer_of(e.source)]]
    return sorted(wrong, key=lambda e: (e.path, e.line, e.target))


def checked_files() -> list[Path]:
    """Every module of the checked folders, relative to the repository root."""
    files = []
    for folder in CHECKED:
        files += [p.relative_to(ROOT) for p in sorted((ROOT / folder).rglob("*.py"))
                  if "__pycache__" not in p.parts]
    return files


def known_modules() -> set[str]:
    """Import names of every module in ``replaydb/`` and the layer folders."""
    names = set()
    for folder in ("replaydb", *LAYER_FOLDERS):
        names |= {module_name(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*.py")}
    return names


def test_layers_point_one_way() -> None:
    modules = known_modules()
    files = checked_files()
    edges = [e for rel in files for e in edges_of(rel, (ROOT / rel).read_text(), modules)]
    wrong = violations(edges)
    if wrong:
        pytest.fail(
            f"{len(wrong)} edge(s) break the layering (the rule is in tests/test_layering.py; "
            "move the code to the right layer, have the layer that composes both hand the lower "
            "one what it needs, and name imported modules statically):\n"
            + "\n".join(e.describe() for e in wrong), pytrace=False)


def test_every_layer_is_read() -> None:
    files = checked_files()
    layers = {layer_of(module_name(rel)) for rel in files}
    assert layers == set(ALLOWED) - {"bench"}
    assert len(files) > 200


SYNTHETIC_STORE = '''"""replaydb.planner.query"""
from typing import TYPE_CHECKING
from replaydb.errors import StoreError
from replaydb.store import manifest
import replaydb.planner.query
from replaydb.indexes import lsm
from .. import planner
from ..operators.base import as_batches
LOADERS = {"x": "replaydb.replay.replay:Replay", "y": "replaydb.indexes."}
META_KEY, FILE = "replaydb.segment", "replaydb.json"
OWN = "replaydb.store.quarantine"
if TYPE_CHECKING:
    from replaydb.planner.query import Plan


def late(name):
    import importlib
    from replaydb import demo
    importlib.import_module(f"replaydb.planner.lang.{name}")
    importlib.import_module(OWN)
    importlib.import_module(f"{__package__}.{name}")
    importlib.import_module("numba.cuda")
    return importlib.import_module(name=name)
'''


def test_checker_reports_wrong_edges() -> None:
    """A fake store module with one wrong edge of every form the checker reads: each is
    reported with its line; docstrings, metadata keys and allowed edges are not."""
    rel = Path("store/fake_module.py")
    edges = edges_of(rel, SYNTHETIC_STORE, known_modules())
    wrong = {(e.line, e.target, e.how) for e in violations(edges)}
    assert wrong == {
        (5, "replaydb.planner.query", "import"),
        (6, "replaydb.indexes.lsm", "from-import"),
        (7, "replaydb.planner", "relative import"),
        (8, "replaydb.operators.base", "relative import"),
        (9, "replaydb.replay.replay", "string"),
        (9, "replaydb.indexes", "string"),
        (13, "replaydb.planner.query", "from-import"),
        (18, "replaydb.demo", "from-import"),
        (19, "replaydb.planner.lang", "string"),
        (23, "<computed at run time>", "dynamic import"),
    }
    ok = {e.target for e in edges} - {t for _, t, _ in wrong}
    assert ok == {"replaydb.errors", "replaydb.store.manifest", "replaydb.store.quarantine",
                  "replaydb.store"}
    message = violations(edges)[0].describe()
    assert message == ("store/fake_module.py:5: replaydb.store.fake_module (store) -> "
                       "replaydb.planner.query (planner) [import]")


def test_checker_allows_downward_edges_only() -> None:
    text = ("from replaydb.store.store import Store\nfrom replaydb.replay import replay\n"
            "from replaydb.operators import base\nfrom replaydb.indexes import lsm\n"
            "from replaydb.timeunits import to_unit\n")
    modules = known_modules()
    edges = edges_of(Path("planner/fake_module.py"), text, modules)
    assert len(edges) == 5 and not violations(edges)
    below = {"replaydb.store.store", "replaydb.replay.replay", "replaydb.indexes.lsm"}
    for rel, wrong in [("operators/fake_module.py", below),
                       ("datasets/fake_module.py", below | {"replaydb.operators.base"}),
                       ("replaydb/timeunits.py", below | {"replaydb.operators.base"}),
                       ("indexes/fake_module.py", below - {"replaydb.store.store",
                                                           "replaydb.indexes.lsm"}
                        | {"replaydb.operators.base"})]:
        got = {e.target for e in violations(edges_of(Path(rel), text, modules))}
        assert got == wrong, rel
    to_bench = edges_of(Path("replaydb/cli/fake.py"), "import replaydb.bench.bench_gpu\n", modules)
    assert [e.target for e in violations(to_bench)] == ["replaydb.bench.bench_gpu"]
