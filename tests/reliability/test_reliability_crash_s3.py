"""Crash safety on a store on the S3 endpoint: the append crash trials and an index compaction
killed midway, with the store living only on the object store.

The writer child reaches the endpoint through the standard environment variables (as a user's
process would), shares the local cache directory with the checking process, and is SIGKILLed at
every commit step of an append (between its file writes, side-table commits, uploads and the
events commit) and at a random time. After every kill the checks of
:mod:`tests.reliability.test_reliability_crash_append` hold on the object store: the store
checks clean, the batches present are a prefix with every acknowledged one, the stream equals
the crash-free reference event for event, quarantine rows match, and a re-run completes the
sequence exactly once. Then vacuum (with no age threshold) leaves a store that still checks
clean.

Slow: ``make test-all``.
"""

from __future__ import annotations

import random
import textwrap
import uuid

import pytest

import replaydb
from replaydb.store.vacuum import vacuum_stream
from tests.crash import run_after_ready
from tests.reliability.test_reliability_crash_append import (
    BATCHES,
    COMMIT_STEP_KILLS,
    WRITER,
    make_store,
    reference,  # noqa: F401
    verify,
)
from tests.reliability.test_reliability_crash_ingest import template  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def s3_env(s3, tmp_path, monkeypatch) -> dict[str, str]:
    """The environment that points this process and the writer child at the endpoint."""
    env = {**s3.options, "REPLAYDB_CACHE_DIR": str(tmp_path / "cache")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def _trial(s3, env: dict[str, str], states, *, failpoint=None, kill_after=None) -> None:
    uri = s3.bucket(f"crash-{uuid.uuid4().hex[:10]}") + "/s"
    make_store(uri)
    run = run_after_ready(WRITER.replace('sys.argv[1] + "-warm"', 'sys.argv[3]'),
                          [uri, str(BATCHES), env["REPLAYDB_CACHE_DIR"] + "-warm"],
                          failpoint=failpoint, kill_after=kill_after, env=env)
    assert run.killed or run.returncode == 0, run.stderr
    verify(uri, run.acked, states)
    store = replaydb.open(uri)
    vacuum_stream(store, "s", min_age=0)
    assert replaydb.open(uri).check("s") == {"s": []}
    again = run_after_ready(WRITER.replace('sys.argv[1] + "-warm"', 'sys.argv[3]'),
                            [uri, str(BATCHES), env["REPLAYDB_CACHE_DIR"] + "-warm"], env=env)
    assert again.returncode == 0, again.stderr
    verify(uri, [str(i) for i in range(BATCHES)], states, complete=True)


@pytest.mark.parametrize(("point", "n"), COMMIT_STEP_KILLS)
def test_kill_at_commit_steps_on_s3(s3, s3_env, reference, point, n) -> None:  # noqa: F811
    _trial(s3, s3_env, reference, failpoint=f"{point}:{n}")


def test_kill_at_random_time_on_s3(s3, s3_env, reference) -> None:  # noqa: F811
    _trial(s3, s3_env, reference, kill_after=random.Random(11).uniform(0.5, 3.0))


COMPACTOR = textwrap.dedent("""
    import replaydb
    from replaydb.indexes.manage import compact
    store = replaydb.open(sys.argv[1])
    print("READY", flush=True)
    compact(store, "s", full=True)
    print("PHASE done", flush=True)
""")


def test_kill_during_compaction_on_s3(s3, s3_env, reference) -> None:  # noqa: F811
    """An index compaction killed at a random time leaves the store as it was or compacted,
    never between: it checks clean and equals the reference; a re-run completes."""
    from tests.reliability.test_reliability_crash_append import append_batch

    uri = s3.bucket(f"compact-{uuid.uuid4().hex[:10]}") + "/s"
    make_store(uri)
    store = replaydb.open(uri)
    for i in range(BATCHES):
        append_batch(store, i)
    acked = [str(i) for i in range(BATCHES)]
    run = run_after_ready(COMPACTOR, [uri], env=s3_env,
                          kill_after=random.Random(5).uniform(0.05, 1.0))
    assert run.killed or run.returncode == 0, run.stderr
    verify(uri, acked, reference, complete=True)
    done = run_after_ready(COMPACTOR, [uri], env=s3_env)
    assert done.returncode == 0, done.stderr
    verify(uri, acked, reference, complete=True)


INGEST_KILLS = [("ingest.files_written:2", None), ("ingest.before_commit:2", None),
                (None, 4.0)]
"""Ingest trials: data files and index runs written (nothing committed), index and quarantine
tables committed (events not), and a kill at a time inside the second ingest or so."""


@pytest.mark.spark
@pytest.mark.parametrize("through", [False, True], ids=["mirror", "through-store"])
@pytest.mark.parametrize(("failpoint", "kill_after"), INGEST_KILLS)
def test_kill_during_ingest_on_s3(s3, s3_env, spark, template, failpoint,  # noqa: F811
                                  kill_after, through) -> None:
    """The Spark ingest crash trials of :mod:`..test_reliability_crash_ingest` on a store that
    lives on the endpoint, with the tasks writing into the driver's mirror (a local master's
    way) and through the store (a cluster's: staged rows and every file on the object store
    before the commit): after the kill the store checks clean and equals the crash-free
    reference at a prefix holding every acknowledged ingest; re-running completes it once;
    vacuum leaves no staged object behind."""
    from tests.reliability import test_reliability_crash_ingest as ci

    uri = s3.upload(template["store"], f"s3://ingest-{uuid.uuid4().hex[:10]}/store")
    env = {**ci.CHILD_ENV, **s3_env, "CRASH_TRIAL_THROUGH_STORE": "1" if through else "0"}
    run = run_after_ready(ci.CHILD, [uri, *template["sources"]], failpoint=failpoint,
                          kill_after=kill_after, env=env)
    assert run.killed or run.returncode == 0, run.stderr
    present = ci.verify(uri, run.acked, template)
    store = replaydb.open(uri)
    for j in range(ci.FILES):
        got = ci.run_ingest(store, template["sources"], j, spark, through_store=through or None)
        assert got.skipped == (j < present)
    ci.verify(uri, [str(j) for j in range(ci.FILES)], template, complete=True)
    vacuum_stream(store, "ev", min_age=0)
    assert replaydb.open(uri).check("ev") == {"ev": []}
    assert not [e for e in store.location.list("streams/ev", recursive=True)
                if "/_staging/" in e.rel and e.size >= 0]

