"""Other systems run side by side with replaydb in the benchmarks.

* :mod:`replaydb.bench.peers.flink` - Apache Flink SQL MATCH_RECOGNIZE on a local mini-cluster
  (full replay), in its own environment ``.venv-flink`` (``make bench-env-flink``);
  :mod:`~replaydb.bench.peers.flink_sql` translates replaydb's dialect into Flink SQL,
  :mod:`~replaydb.bench.peers.flink_runner` is the script that runs inside that environment.
  The planner benchmark runs Flink on the synthetic workload of 3.5.3, the real-data pattern
  benchmark on flights and OpenSky, each in the same run as replaydb.
"""
