"""Brute-force TPStream for small inputs: the reference the operator is tested against.

Written for obviousness, not speed, and independent of the operator's algorithms:

* derivation walks every partition's events one by one (Alg. 5.1);
* relations are evaluated from the documents' endpoint chains (``A.ts < A.te = B.ts < B.te``),
  parsed once - not from the operator's classification or range queries;
* normal mode tries every combination of one situation per stream (Def. 5.8) and checks the
  pattern and the window ``max(te) - min(ts) <= w``;
* low-latency mode simulates knowledge over time: at every candidate time ``tau`` it considers
  every combination of situations known by then, and calls it certain when the pattern holds for
  *every* ordering (ties included) of the still unknown ends of its ongoing members placed after
  ``tau``; a combination is reported at the first such ``tau`` with ``tau - min(ts) <= w``.

Inputs: ``events`` is a dict of equal-length lists/arrays with ``t``, ``seq`` and attribute
columns, in ``(t, seq)`` order. Output rows are dicts with the operator's result columns.
Complexity: exponential in the number of streams; meant for a few dozen situations.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from replaydb.operators.expr import ColumnsEnv, compile_predicate
from replaydb.operators.tpstream.config import TPStreamConfig
from replaydb.operators.tpstream.relations import DEFINITIONS, REL_ID

INF = math.inf

_CHAINS: dict[int, list[tuple[str, str, str]]] = {}
for _name, _chain in DEFINITIONS.items():
    toks = _chain.split()
    _CHAINS[REL_ID[_name]] = [(toks[i], toks[i + 1], toks[i + 2]) for i in range(0, len(toks) - 2, 2)]


def relation_holds(rel: int, a: tuple[float, float], b: tuple[float, float]) -> bool:
    """``A rel B`` from the documents' chain (``a``/``b`` are ``(ts, te)``)."""
    env = {"A.ts": a[0], "A.te": a[1], "B.ts": b[0], "B.te": b[1]}
    for lhs, op, rhs in _CHAINS[rel]:
        x, y = env[lhs], env[rhs]
        if op == "<" and not x < y:
            return False
        if op == "=" and not x == y:
            return False
    return True


def _rows(events: dict[str, Any]) -> list[dict[str, Any]]:
    n = len(events["t"])
    keys = list(events)
    return [{k: events[k][i] for k in keys} for i in range(n)]


def derive(events: dict[str, Any], config: TPStreamConfig) -> dict[tuple, list[list[dict]]]:
    """Situations per partition key and definition, event by event.

    Each situation: ``ts, te`` (te = inf while open at the end under the ``drop`` policy),
    ``known`` (when it is certain to exist), ``rows`` (its events, in order).
    """
    cols = {k: np.asarray(v) for k, v in events.items()}
    n = len(cols["t"])
    env = ColumnsEnv(cols, frozenset({config.stream_alias} if config.stream_alias else ()))
    masks = [np.broadcast_to(np.asarray(compile_predicate(s.condition)(env), dtype=bool), (n,))
             for s in config.situations]
    parts: dict[tuple, list[int]] = {}
    for i in range(n):
        key = tuple(cols[c][i].item() if hasattr(cols[c][i], "item") else cols[c][i]
                    for c in config.partition_by)
        parts.setdefault(key, []).append(i)
    out: dict[tuple, list[list[dict]]] = {}
    for key, idx in parts.items():
        per_def = []
        for d, sdef in enumerate(config.situations):
            sits: list[dict] = []
            run: list[int] = []
            for i in idx:
                if masks[d][i]:
                    run.append(i)
                elif run:
                    sits.append(_finish(run, int(cols["t"][i]), cols, sdef, closed=True))
                    run = []
            if run:
                if config.end_policy == "close":
                    sits.append(_finish(run, int(cols["t"][run[-1]]) + 1, cols, sdef, closed=True))
                else:
                    sits.append(_finish(run, INF, cols, sdef, closed=False))
            per_def.append([s for s in sits if s is not None])
        out[key] = per_def
    return out


def _finish(run: list[int], te: float, cols: dict[str, np.ndarray], sdef: Any,
            closed: bool) -> dict | None:
    ts = int(cols["t"][run[0]])
    if closed:
        dur = te - ts
        if dur <= 0:
            return None
        if sdef.min_duration is not None and dur < sdef.min_duration:
            return None
        if sdef.max_duration is not None and dur > sdef.max_duration:
            return None
    # known time
    if sdef.max_duration is not None:
        known = te
    elif sdef.min_duration is not None and sdef.min_duration > 1:
        known = te
        for i in run:
            k = int(cols["t"][i])
            if k + 1 - ts >= sdef.min_duration and k < te:
                known = k
                break
    else:
        known = ts
        if not (ts < te):
            return None
    return {"ts": ts, "te": te, "known": known, "rows": list(run)}


def _pattern(config: TPStreamConfig) -> list[tuple[int, int, int]]:
    idx = {n: i for i, n in enumerate(config.names)}
    return [(idx[c.left], idx[c.right], c.mask) for c in config.constraints]


def _holds_all(pattern: list[tuple[int, int, int]], ivals: list[tuple[float, float]]) -> bool:
    for a, b, mask in pattern:
        if not any(relation_holds(r, ivals[a], ivals[b]) for r in range(13) if mask >> r & 1):
            return False
    return True


def _aggregate(func: str, vals: list[Any]) -> Any:
    if func == "first":
        return vals[0]
    if func == "last":
        return vals[-1]
    nn = [v for v in vals if not (isinstance(v, float) and v != v) and v is not None]
    if func == "count":
        return len(nn)
    if func == "sum":
        return sum(nn)
    if func == "avg":
        return sum(nn) / len(nn) if nn else None
    if func == "min":
        return min(nn) if nn else None
    if func == "max":
        return max(nn) if nn else None
    raise ValueError(func)


def _row(config: TPStreamConfig, key: tuple, combo: tuple[dict, ...], tau: int,
         cols: dict[str, np.ndarray]) -> dict[str, Any]:
    row: dict[str, Any] = {"detection_time": int(tau)}
    for c, v in zip(config.partition_by, key):
        row[c] = v
    for name, s in zip(config.names, combo):
        row[f"{name}_ts"] = s["ts"]
        row[f"{name}_te"] = None if s["te"] > tau else int(s["te"])
    for item in config.returns:
        s = combo[config.names.index(item.symbol)]
        rows = [i for i in s["rows"] if cols["t"][i] <= tau]
        if item.attr is None:
            row[item.alias] = len(rows)
        else:
            vals = [cols[item.attr][i] for i in rows]
            vals = [v.item() if hasattr(v, "item") else v for v in vals]
            row[item.alias] = _aggregate(item.func, vals)
    return row


def match(events: dict[str, Any], config: TPStreamConfig) -> list[dict[str, Any]]:
    """All results of the query on ``events`` (normal or low-latency per ``config.mode``)."""
    cols = {k: np.asarray(v) for k, v in events.items()}
    sits = derive(events, config)
    pattern = _pattern(config)
    w = config.window
    out: list[dict[str, Any]] = []
    for key, per_def in sits.items():
        if config.mode == "normal":
            fin = [[s for s in lst if s["te"] != INF] for lst in per_def]
            for combo in itertools.product(*fin):
                ivals = [(s["ts"], s["te"]) for s in combo]
                if max(v[1] for v in ivals) - min(v[0] for v in ivals) > w:
                    continue
                if _holds_all(pattern, ivals):
                    out.append(_row(config, key, combo, max(v[1] for v in ivals), cols))
        else:
            out.extend(_match_ll(config, key, per_def, pattern, cols))
    return out


def _weak_orders(k: int) -> list[tuple[int, ...]]:
    """All rankings of ``k`` items with ties (ordered set partitions), as rank tuples."""
    res = []
    for ranks in itertools.product(range(k), repeat=k):
        used = sorted(set(ranks))
        if used == list(range(len(used))):
            res.append(ranks)
    return res or [()]


def _match_ll(config: TPStreamConfig, key: tuple, per_def: list[list[dict]],
              pattern: list[tuple[int, int, int]], cols: dict[str, np.ndarray]) -> list[dict]:
    w = config.window
    times = sorted({v for lst in per_def for s in lst for v in (s["ts"], s["te"], s["known"])
                    if v != INF})
    reported: set[tuple] = set()
    out = []
    for tau in times:
        known = [[s for s in lst if s["known"] <= tau] for lst in per_def]
        for combo in itertools.product(*known):
            ident = tuple(s["ts"] for s in combo)
            if ident in reported:
                continue
            if tau - min(s["ts"] for s in combo) > w:
                continue
            ongoing = [j for j, s in enumerate(combo) if s["te"] > tau]
            certain = True
            for ranks in _weak_orders(len(ongoing)):
                ivals = [(s["ts"], s["te"]) for s in combo]
                for j, r in zip(ongoing, ranks):
                    ivals[j] = (combo[j]["ts"], tau + 1 + r)
                if not _holds_all(pattern, ivals):
                    certain = False
                    break
            if certain:
                reported.add(ident)
                out.append(_row(config, key, combo, tau, cols))
    return out


def result_key(row: dict[str, Any], config: TPStreamConfig) -> tuple:
    """A hashable, comparable identity of a result row (for set comparisons in tests)."""
    parts = [row["detection_time"]]
    parts += [row[c] for c in config.partition_by]
    for n in config.names:
        parts += [row[f"{n}_ts"], row[f"{n}_te"]]
    for item in config.returns:
        v = row[item.alias]
        if isinstance(v, float):
            v = None if v != v else round(v, 6)
        parts.append(v)
    return tuple(parts)

