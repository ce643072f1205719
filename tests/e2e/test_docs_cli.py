"""The CLI reference in docs/ is generated from the CLI and must be current."""

from __future__ import annotations

from pathlib import Path

from replaydb.cli.docgen import generate

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_reference_is_current():
    assert DOC.exists(), "docs/cli.md is missing: python -m replaydb.cli.docgen > docs/cli.md"
    assert DOC.read_text(encoding="utf-8") == generate(), (
        "docs/cli.md is out of date: run python -m replaydb.cli.docgen > docs/cli.md")
