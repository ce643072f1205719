"""EXPLAIN for people: the default text of ``replaydb explain`` is a short tree of the plan's
nodes with estimates beside actuals; its golden form (durations masked) is held for one corpus
query per language and source kind (``python -m tests.queries.explain_golden`` rewrites it)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from replaydb.cli import main as cli_main
from tests.queries.explain_golden import CASES, expected_path, explain_text
from tests.queries.golden import ROOT, load_case
from tests.queries.stores import StoreCache


@pytest.mark.parametrize("name, plan", CASES, ids=[f"{n}[{p or 'auto'}]" for n, p in CASES])
def test_explain_text_is_golden(request: pytest.FixtureRequest, golden_stores: StoreCache,
                                name: str, plan: str | None) -> None:
    store = golden_stores.for_test(request, load_case(ROOT / f"{name}.case").store)
    text = explain_text(name, plan, store)
    assert text == expected_path(name, plan).read_text()
    lines = text.splitlines()
    assert len(lines) <= 30
    assert any(line.strip().startswith("estimated:") for line in lines)
    assert any(line.strip().startswith("actual:") for line in lines)


def test_cli_explain_default_verbose_and_json(request: pytest.FixtureRequest,
                                              golden_stores: StoreCache) -> None:
    case = load_case(ROOT / "match_recognize/stock_rare_volumes.case")
    store = golden_stores.for_test(request, case.store)

    def explain(*extra: str) -> str:
        buf = io.StringIO()
        with redirect_stdout(buf):
            assert cli_main(["explain", str(store.path), case.query, *extra]) == 0
        return buf.getvalue()

    short = explain()
    assert short.startswith("match_recognize query over stock") and "actual" not in short
    assert len(short.splitlines()) <= 30
    verbose = explain("--analyze", "--verbose")
    assert "actual rows 4" in verbose and "rivals:" in verbose
    assert len(verbose.splitlines()) > len(short.splitlines()) + 30
    assert '"rivals"' in explain("--json")


def test_explain_renders_in_a_notebook(request: pytest.FixtureRequest,
                                       golden_stores: StoreCache, tmp_path) -> None:
    import replaydb

    case = load_case(ROOT / "match_recognize/stock_rare_volumes.case")
    store = golden_stores.for_test(request, case.store)
    info = replaydb.explain(store, case.query, analyze=True, plot=str(tmp_path / "p.png"))
    assert info["strategy"] == "cpm" and info.text().startswith("match_recognize query over")
    page = info._repr_html_()
    assert page.startswith("<pre>match_recognize query over stock")
    assert "actual rows 4" in page and 'src="data:image/png;base64,' in page
