"""How long writes pause when a live Redis primary hands over to Headwater (issue 35).

Debian's redis-server takes XADDs from redis-benchmark (50 clients, no pipeline) and
Headwater replicates from it; the documented cut-over runs under that load:
``CLIENT PAUSE <ms> WRITE`` on Redis, wait until Headwater's ``slave_repl_offset`` reaches
Redis's ``master_repl_offset``, ``REPLICAOF NO ONE`` on Headwater, then the first write
Headwater accepts. The pause is the time from CLIENT PAUSE to that write; printed with the
parts, best and median of ``--repeat`` runs, each on fresh servers.

    .venv/bin/python benchmarks/cutover.py [--repeat 5] [--entries 200000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import start_headwater, start_redis  # noqa: E402


def offset(r: redis.Redis, field: str) -> int:
    return int(r.info("replication").get(field, -1))


def one_run(entries: int) -> tuple[float, float, float]:
    """(caught up after pause, promoted after that, whole pause) in seconds."""
    primary = start_redis()
    replica = start_headwater("--replicaof", "127.0.0.1", str(primary.port))
    load = None
    try:
        theirs = redis.Redis(port=primary.port)
        ours = redis.Redis(port=replica.port)
        pipe = theirs.pipeline(transaction=False)
        for i in range(entries):
            pipe.xadd("rides", {"n": i, "fare": "12.50"})
            if i % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()
        deadline = time.monotonic() + 60
        while offset(ours, "slave_repl_offset") != offset(theirs, "master_repl_offset"):
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not catch up")
            time.sleep(0.05)
        load = subprocess.Popen(
            ["redis-benchmark", "-p", str(primary.port), "-c", "50", "-n", "100000000", "-q",
             "XADD", "rides", "*", "field", "value"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(2)  # (under load)
        started = time.perf_counter()
        theirs.execute_command("CLIENT", "PAUSE", 10_000, "WRITE")
        target = offset(theirs, "master_repl_offset")
        while offset(ours, "slave_repl_offset") < target:
            time.sleep(0.001)
        caught_up = time.perf_counter()
        ours.execute_command("REPLICAOF", "NO", "ONE")
        ours.xadd("rides", {"first": "on headwater"})
        done = time.perf_counter()
        if ours.xlen("rides") != theirs.xlen("rides") + 1:
            raise RuntimeError("the cut-over lost writes")
        return caught_up - started, done - caught_up, done - started
    finally:
        if load is not None:
            load.kill()
            load.wait()
        replica.stop()
        primary.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs on fresh servers")
    parser.add_argument("--entries", type=int, default=200_000, help="entries before the load")
    args = parser.parse_args()
    runs = [one_run(args.entries) for _ in range(args.repeat)]
    print("| part | best (ms) | median (ms) |\n|---|---:|---:|")
    for i, part in enumerate(("caught up", "promoted and first write", "writes paused")):
        values = [run[i] * 1000 for run in runs]
        print(f"| {part} | {min(values):.1f} | {statistics.median(values):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
