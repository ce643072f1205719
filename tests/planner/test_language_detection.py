"""Language detection reads a query's first keywords and loads only that language's module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

QUERIES = {
    "window_sql": "SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), 10)) "
                  "GROUP BY window_start",
    "match_recognize": "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY t PATTERN (A B) "
                       "DEFINE A AS x > 1)",
    "tpstream": "FROM s DEFINE A AS x > 1, B AS x < 0 PATTERN A before B WITHIN 10",
    "greta": "FROM s RETURN COUNT(*) PATTERN Stock S+ WITHIN 10",
    "sase": "FROM s PATTERN SEQ(A a, B b) WITHIN 5",
}
MODULES = {name: f"replaydb.planner.lang.{name}" for name in QUERIES}

PROBE = """
import json, sys
from replaydb.planner.query import detect_language
name, mod = detect_language(sys.argv[1])
print(json.dumps([name, mod.__name__, sorted(m for m in sys.modules if m in set(sys.argv[2:]))]))
"""


@pytest.mark.parametrize("language", sorted(QUERIES))
def test_a_query_loads_only_its_own_language(language: str) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, QUERIES[language], *MODULES.values()],
                         capture_output=True, text=True, check=True).stdout
    name, module, loaded = json.loads(out.strip().splitlines()[-1])
    assert (name, module) == (language, MODULES[language])
    assert loaded == [MODULES[language]]


def test_the_modules_detect_is_the_cheap_one() -> None:
    from replaydb.planner import languages
    from replaydb.planner.lang import detect

    for load, cheap in languages.DETECTORS.items():
        assert load().detect is cheap
    for name, text in QUERIES.items():
        assert [n for n in QUERIES if getattr(detect, n)(text)] == [name]
