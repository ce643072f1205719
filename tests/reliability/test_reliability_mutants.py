"""The mutation fuzzer: corpus queries with one clause-level edit, run end to end on real stores.

Where ``test_reliability_fuzz.py`` throws arbitrary tokens at each parser, this test asks whether
a query that is almost right is ever misread. Every golden-corpus query and every query of a
``replaydb query`` command in the README and docs, of each of the six languages, is mutated (``tests/reliability/mutants.py``: a clause keyword duplicated, misspelled,
dropped or swapped with another, a number replaced by an extreme value or nested in parentheses)
and run with ``replaydb.query`` on a store built from the case's dataset and seed (its first 500
events, ingested through the Python API). Every mutant must either run or fail with a replaydb
error whose message names a position in the text (``line L, column C`` or ``position N``); a
state or resource limit reached while running (it names the option, not a position) also counts
as a clear failure. A mutant whose clause keyword was duplicated or misspelled must fail.

The default suite runs 2,000 mutants per language, the slow suite 50,000.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import pytest

import replaydb
from replaydb.errors import ReplayDBError, ResourceLimitExceeded, StateCapExceeded
from replaydb.planner.query import detect_language
from tests.docs_examples import blocks
from tests.queries.golden import Case, case_files, load_case
from tests.queries.stores import StoreCache
from tests.reliability.mutants import CLAUSE_KEYWORDS, Mutant, mutants

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = sorted(CLAUSE_KEYWORDS)
STORE_EVENTS = 500
POSITION = re.compile(r"line \d+, column \d+|position \d+")
LIMITS = (StateCapExceeded, ResourceLimitExceeded)


@pytest.fixture(scope="module")
def small_stores(tmp_path_factory: pytest.TempPathFactory) -> StoreCache:
    return StoreCache(tmp_path_factory.mktemp("mutants"))


def corpus(language: str) -> dict[str, Case]:
    cases = [load_case(p) for p in case_files(language + "/")]
    return {c.name: c for c in cases}


def documented_queries() -> dict[str, list[tuple[str, str]]]:
    """The queries of the README's and docs' ``replaydb query`` commands, per language, named
    by document and line."""
    out: dict[str, list[tuple[str, str]]] = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in blocks(doc):
            for cmd in block.commands:
                if cmd.argv[:2] != ["replaydb", "query"] or len(cmd.argv) < 4:
                    continue
                text = cmd.argv[3]
                try:
                    language, _ = detect_language(text)
                except ReplayDBError:
                    continue
                out.setdefault(language, []).append((f"{doc.name}:{cmd.line}", text))
    return out


def outcome(m: Mutant, case: Case, stores: StoreCache) -> str:
    """'ran', 'error' or 'limit'; an AssertionError naming the mutant for anything else."""
    spec = dataclasses.replace(case.store, events=min(case.store.events, STORE_EVENTS),
                               ingest="append")
    try:
        replaydb.query(stores.get(spec), m.text, **case.options)
    except LIMITS:
        return "limit"
    except ReplayDBError as exc:
        assert POSITION.search(str(exc)), (
            f"{m.kind} mutant of {m.source}: {type(exc).__name__} names no position: "
            f"{exc}\n{m.text}")
        return "error"
    except Exception as exc:  # noqa: BLE001 - the point of the test
        raise AssertionError(f"{m.kind} mutant of {m.source} leaked {type(exc).__name__}: "
                             f"{exc}\n{m.text}") from exc
    assert not m.must_fail, f"{m.kind} mutant of {m.source} ran:\n{m.text}"
    return "ran"


def run_mutants(language: str, count: int, seed: int, stores: StoreCache) -> Counter[str]:
    """``count`` mutants of the corpus's and the documents' queries of ``language``; a
    documented query runs on the store (and with the options) of the language's first case, so
    one naming another stream fails with StreamNotFound and its position."""
    cases = corpus(language)
    assert cases, f"no corpus cases for {language}"
    seeds = [(name, c.query) for name, c in cases.items()]
    # imprecise patterns are written in SASE+ syntax (the stream decides): SASE+'s examples
    docs = documented_queries().get("sase" if language == "imprecise" else language, [])
    seeds += docs
    first = next(iter(cases.values()))
    of_source = {**{name: first for name, _ in docs}, **cases}
    made = mutants(seeds, language, count, seed)
    assert len(made) == count
    return Counter((m.kind, outcome(m, of_source[m.source], stores)) for m in made)


@pytest.mark.parametrize("language", LANGUAGES)
def test_mutants_run_or_fail_with_a_position(language: str, small_stores: StoreCache) -> None:
    seen = run_mutants(language, 2_000, seed=56, stores=small_stores)
    # every kind of edit was drawn, and the must-fail kinds failed every time
    assert {k for k, _ in seen} == {"duplicate", "misspell", "drop", "swap", "extreme", "nest"}
    assert seen[("duplicate", "error")] > 0 and seen[("misspell", "error")] > 0


@pytest.mark.slow
@pytest.mark.parametrize("language", LANGUAGES)
def test_mutants_50k(language: str, small_stores: StoreCache) -> None:
    seen = run_mutants(language, 50_000, seed=5_600, stores=small_stores)
    assert sum(seen.values()) == 50_000


def test_the_documents_give_queries_of_every_language() -> None:
    docs = documented_queries()
    assert sorted(docs) == [lang for lang in LANGUAGES if lang != "imprecise"], sorted(docs)
    assert sum(len(v) for v in docs.values()) >= 20


def test_the_corpus_has_every_language() -> None:
    assert sorted(p.name for p in Path(case_files()[0]).parents[1].iterdir()
                  if p.is_dir() and p.name in CLAUSE_KEYWORDS) == LANGUAGES
