#!/usr/bin/env python3
"""Where a command's time goes inside Headwater, without sockets or an event loop.

Drives the same path a connection does (``RequestParser.feed`` → ``next`` →
``Engine.execute`` → join ``client.out``) in a tight loop, with the exact bytes
redis-benchmark sends for PING_INLINE, PING_MBULK, SET and GET, and reports microseconds per
command. ``--cprofile`` also prints the top functions by self time (cProfile adds overhead of
its own to every call, so read its numbers as shares, not absolute costs).

Usage::

    .venv/bin/python benchmarks/profile_core.py                  # us/command, P=16 and P=1
    .venv/bin/python benchmarks/profile_core.py --cprofile SET   # + cProfile of SET, P=16
    PYTHONPATH=/tmp/snapshot/src .venv/bin/python benchmarks/profile_core.py   # another tree

The network side (recv/send/epoll, about one of each per batch) is not included: measure that
with ``bench_core.py`` and a sampling profiler (see README.md).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable, Sequence

from headwater.engine import Engine
from headwater.resp.parser import RequestParser


def resp(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


#: What redis-benchmark 7.0 sends for each test (default key, 3-byte value "xxx").
REQUESTS: dict[str, bytes] = {
    "PING_INLINE": b"PING\r\n",
    "PING_MBULK": resp(b"PING"),
    "SET": resp(b"SET", b"key:__rand_int__", b"xxx"),
    "GET": resp(b"GET", b"key:__rand_int__"),
}


def make_loop(test: str, pipeline: int) -> Callable[[int], None]:
    """A function running ``batches`` batches of ``pipeline`` commands through one client."""
    engine = Engine()
    client = engine.new_client("127.0.0.1:50000", "127.0.0.1:6379")
    parser = RequestParser(auth_required=not client.authenticated)
    batch = REQUESTS[test] * pipeline
    execute, pending, out = engine.execute, engine.pending, client.out
    if test == "GET":
        execute(client, [b"SET", b"key:__rand_int__", b"xxx"])
        out.clear()

    def run(batches: int) -> None:
        for _ in range(batches):
            parser.feed(batch)
            while (argv := parser.next()) is not None:
                execute(client, argv)
            b"".join(out)
            out.clear()
            pending.clear()

    return run


def measure(test: str, pipeline: int, commands: int) -> float:
    """Best of 3 runs, in microseconds per command."""
    run = make_loop(test, pipeline)
    batches = max(commands // pipeline, 1)
    run(max(batches // 10, 1))  # warm up
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        run(batches)
        best = min(best, time.perf_counter() - started)
    return best / (batches * pipeline) * 1e6


def profile(test: str, pipeline: int, commands: int, top: int) -> str:
    run = make_loop(test, pipeline)
    profiler = cProfile.Profile()
    profiler.runcall(run, max(commands // pipeline, 1))
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Headwater's per-command cost, in process.")
    p.add_argument("--commands", type=int, default=200_000, help="commands per measurement")
    p.add_argument("--pipeline", type=int, action="append", help="batch sizes (default: 1 and 16)")
    p.add_argument(
        "--cprofile",
        metavar="TEST",
        choices=sorted(REQUESTS),
        help="also cProfile this test at the largest pipeline",
    )
    p.add_argument("--top", type=int, default=25, help="rows of cProfile output")
    args = p.parse_args(argv)
    pipelines: list[int] = args.pipeline or [1, 16]

    print(f"{'test':<12}" + "".join(f"{f'P={n} us/cmd':>16}" for n in pipelines))
    for test in REQUESTS:
        cells = [measure(test, n, args.commands) for n in pipelines]
        print(f"{test:<12}" + "".join(f"{c:>16.2f}" for c in cells))
    if args.cprofile:
        print()
        print(profile(args.cprofile, max(pipelines), args.commands, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
