"""Every example of README.md and docs/*.md runs on a fresh working directory and its output has
the documented shape (conventions: tests/docs_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_examples import blocks, run_document

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs").glob("*/*.md"))]
RUNNABLE = [p for p in DOCUMENTS if blocks(p)]


def test_readme_has_examples() -> None:
    readme = blocks(ROOT / "README.md")
    assert any(c.runs for b in readme for c in b.commands), "README shows no replaydb command"


@pytest.mark.parametrize("doc", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_document_examples_run(doc: Path, tmp_path: Path, spark) -> None:
    assert run_document(doc, tmp_path) > 0
