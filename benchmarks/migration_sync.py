"""Replication across the two servers (issue 35), against Redis→Redis in the same run.

Full sync of import-rdb's 5M-element mix (streams, hashes, lists, sets, sorted sets; half in
4 big keys per type, half in keys of 10): the time from a replica's start until its link is
up and its offset is the primary's, for Redis→Redis, Redis→Headwater (target ≤ 2x) and
Headwater→Redis (target ≤ 1.5x; Headwater holds the same data, having synced from Redis and
been promoted). Then the steady state: a Redis primary under redis-benchmark XADD at 50
clients, full speed, with a Headwater replica; every 100 ms the offsets are sampled, and
the replica's lag is how long ago the primary was where the replica is now (target: under
1 s throughout).

    .venv/bin/python benchmarks/migration_sync.py [--elements 5000000] [--lag-seconds 20]
        [--runs 3]
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from harness import pipe_chunks  # noqa: E402
from import_mix import import_rdb_mix  # noqa: E402
from tests.helpers import ServerProcess, start_headwater, start_redis  # noqa: E402


def offsets(primary: redis.Redis, replica: redis.Redis) -> tuple[int, int, bool]:
    theirs = primary.info("replication")
    ours = replica.info("replication")
    up = ours.get("master_link_status") == "up"
    return int(theirs["master_repl_offset"]), int(ours.get("slave_repl_offset", -1)), up


def synced_after(primary: ServerProcess, start_replica: object) -> tuple[float, ServerProcess]:
    """Seconds from the replica's start until it is in step."""
    p = redis.Redis(port=primary.port, socket_timeout=600)
    started = time.perf_counter()
    replica: ServerProcess = start_replica()  # type: ignore[operator]
    r = redis.Redis(port=replica.port, socket_timeout=600)
    while True:
        try:
            master, slave, up = offsets(p, r)
        except redis.BusyLoadingError:
            master, slave, up = 0, -1, False
        if up and master == slave:
            return time.perf_counter() - started, replica
        time.sleep(0.02)


def settled(r: redis.Redis) -> None:
    """Waits until the server has no child at work: the AOF rewrite a replica starts after
    its full sync (Headwater's appendonly is on by default) is done before the way back is
    timed, as it is long done when a migrated team moves back."""
    while True:
        info = r.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["rdb_bgsave_in_progress"]:
            return
        time.sleep(0.05)


def median_sync(primary: ServerProcess, start_replica: object, runs: int) -> float:
    """The median of ``runs`` full syncs of a fresh replica (each stopped after)."""
    times = []
    for _ in range(runs):
        seconds, replica = synced_after(primary, start_replica)
        replica.stop()
        times.append(seconds)
    return statistics.median(times)


def full_syncs(elements: int, runs: int) -> list[tuple[str, float]]:
    """Each direction's median of ``runs`` full syncs (they vary by ±20% run to run)."""
    primary = start_redis("--repl-diskless-sync-delay", "0")
    try:
        chunks, _ = import_rdb_mix(elements)
        filled = pipe_chunks(primary.port, chunks)
        print(f"filled redis with {elements:,} elements in {filled:.1f} s", flush=True)
        replica_of_redis = ("--replicaof", "127.0.0.1", str(primary.port))
        seconds_rr = median_sync(primary, lambda: start_redis(*replica_of_redis), runs)
        seconds_rh = median_sync(primary, lambda: start_headwater(*replica_of_redis), runs)
        _, hw = synced_after(primary, lambda: start_headwater(*replica_of_redis))
    finally:
        primary.stop()
    try:
        promoted = redis.Redis(port=hw.port)
        promoted.execute_command("REPLICAOF", "NO", "ONE")
        settled(promoted)
        replica_of_hw = ("--replicaof", "127.0.0.1", str(hw.port))
        seconds_hr = median_sync(hw, lambda: start_redis(*replica_of_hw), runs)
    finally:
        hw.stop()
    return [("Redis → Redis", seconds_rr), ("Redis → Headwater", seconds_rh),
            ("Headwater → Redis", seconds_hr)]  # fmt: skip


def steady_lag(seconds: float) -> tuple[float, float, int]:
    """(max lag s, p99 lag s, XADDs a second) of a Headwater replica under a c=50 load."""
    primary = start_redis()
    replica = start_headwater("--replicaof", "127.0.0.1", str(primary.port))
    load = None
    try:
        p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
        while not offsets(p, r)[2]:
            time.sleep(0.05)
        load = subprocess.Popen(
            ["redis-benchmark", "-p", str(primary.port), "-c", "50", "-n", "1000000000", "-q",
             "XADD", "rides", "MAXLEN", "~", "1000000", "*", "field", "value-of-sixteen"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        times: list[float] = []
        masters: list[int] = []
        lags: list[float] = []
        started = time.perf_counter()
        first = int(p.info("replication")["master_repl_offset"])
        while time.perf_counter() - started < seconds:
            now = time.perf_counter()
            master, slave, _ = offsets(p, r)
            times.append(now)
            masters.append(master)
            # when was the primary where the replica is now? (offsets only grow)
            at = bisect.bisect_left(masters, slave)
            lags.append(now - times[at] if at < len(times) else 0.0)
            time.sleep(0.1)
        rate = (masters[-1] - first) / (times[-1] - started)
    finally:
        if load is not None:
            load.kill()
            load.wait()
        replica.stop()
        primary.stop()
    lags.sort()
    return lags[-1], lags[int(len(lags) * 0.99) - 1], int(rate)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=5_000_000)
    parser.add_argument("--lag-seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=3, help="full syncs per direction (median)")
    args = parser.parse_args()
    rows = full_syncs(args.elements, args.runs)
    base = rows[0][1]
    print(
        f"\n| full sync of {args.elements:,} elements (median of {args.runs}) | seconds "
        "| ratio to Redis → Redis | target |"
    )
    print("|---|---:|---:|---:|")
    targets = {"Redis → Headwater": "≤ 2x", "Headwater → Redis": "≤ 1.5x"}
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {seconds / base:.2f} | {targets.get(name, '')} |")
    worst, p99, rate = steady_lag(args.lag_seconds)
    print(
        f"\nsteady state, Redis primary under XADD c=50 ({rate:,} stream bytes/s), Headwater "
        f"replica: lag max {worst * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms (sampled every "
        "100 ms: 0 means within the same sample; target < 1 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
