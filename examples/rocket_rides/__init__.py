"""Rocket Rides: the unified log of brandur's "Redis Streams and the Unified Log", on Headwater.

    client ──HTTP──▶ api ──one transaction──▶ rides + staged_log_records   (SQLite / PostgreSQL)
                                                        │
                              streamer: XADD … IDMP streamer <staged id> (pipelined batches)
                                                        ▼
                                         Headwater stream rocket-rides-log
                  ┌──────────────────────┬──────────────┴──────────┬──────────────────────┐
             consumer-0             consumer-1               group-reader        spark (Structured
             (XRANGE)               (XRANGE)        (XREADGROUP/XACK/XAUTOCLAIM)      Streaming)
                  └── total_distance + checkpoint, one DB transaction per batch ──────────┘
                                                        │
          streamer trims below the slowest checkpoint, archiving what it trims (one HSET)
                                                        │
               reconciliation: the archive + a Spark batch job over the rest of the stream

Modules: ``api`` (HTTP), ``db`` (schema and queries), ``log`` (stream set-up, parsing, safe
trimming), ``streamer``, ``consumers`` (plain and group), ``spark_jobs`` (streaming consumer and
reconciliation), ``reconcile`` (its result and pure-Python twin), ``faults``, ``workers`` (one
process per component), ``pipeline`` + ``orchestrator`` + ``load`` + ``report`` (the demo).

Run it with ``python examples/rocket_rides/demo.py`` (see README.md next to this file). Modules
import each other relatively, so the package works as ``rocket_rides`` (``examples/`` on
``sys.path``, as the demo's workers run) and as ``examples.rocket_rides`` (the tests).
"""
