#!/usr/bin/env python3
"""Microseconds per command in process, for comparing the compiled and the pure build.

Each command goes the way a connection sends it: its RESP bytes are fed to ``RequestParser``,
``Engine.execute`` runs it and the reply chunks are joined (as ``profile_core.py`` does, one
command per batch). Every request is distinct where it must be (XADD IDMP ids, XACK ids), and
the streams are filled beforehand so that XRANGE, XREADGROUP and XACK have entries to serve.
Prints the build (``headwater_build`` of INFO) and the best of three runs per command.

Usage::

    .venv/bin/python benchmarks/profile_build.py                       # the installed build
    PYTHONPATH=/tmp/pure-src .venv/bin/python benchmarks/profile_build.py   # a pure copy
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

from headwater._build import build_kind
from headwater.engine import Engine
from headwater.resp.parser import RequestParser


def resp(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _ids(n: int) -> list[bytes]:
    return [b"%d-1" % (i + 1) for i in range(n)]


def requests(test: str, n: int) -> tuple[list[bytes], list[list[bytes]]]:
    """(the n requests to time, the commands that set their state up first)"""
    filled = [[b"XADD", b"s", sid, b"f", b"v" * 16] for sid in _ids(10 * n + 10)]
    group = [[b"XGROUP", b"CREATE", b"s", b"g", b"0"]]
    read_all = [[b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", b"s", b">"]]
    if test == "PING":
        return [resp(b"PING")] * n, []
    if test == "SET":
        return [resp(b"SET", b"key:__rand_int__", b"xxx")] * n, []
    if test == "XADD":
        return [resp(b"XADD", b"s", b"*", b"f", b"v" * 16)] * n, []
    if test == "XADD IDMP":
        return [resp(b"XADD", b"s", b"IDMP", b"p", b"i%d" % i, b"*", b"f", b"v" * 16)
                for i in range(n)], []  # fmt: skip
    if test == "XRANGE COUNT 10":
        return [resp(b"XRANGE", b"s", b"-", b"+", b"COUNT", b"10")] * n, filled
    if test == "XREADGROUP COUNT 10":
        request = resp(b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"10", b"STREAMS", b"s", b">")
        return [request] * n, filled + group
    if test == "XACK 10":
        ids = _ids(10 * n)
        return [resp(b"XACK", b"s", b"g", *ids[10 * i : 10 * i + 10]) for i in range(n)], (
            filled + group + read_all
        )
    raise ValueError(test)


TESTS = ("PING", "SET", "XADD", "XADD IDMP", "XRANGE COUNT 10", "XREADGROUP COUNT 10", "XACK 10")


def make_run(test: str, n: int) -> Callable[[], None]:
    engine = Engine()
    client = engine.new_client("127.0.0.1:50000", "127.0.0.1:6379")
    parser = RequestParser(auth_required=not client.authenticated)
    timed, setup = requests(test, n)
    execute, pending, out = engine.execute, engine.pending, client.out
    for argv in setup:
        execute(client, argv)
    out.clear()
    pending.clear()

    def run() -> None:
        for request in timed:
            parser.feed(request)
            while (argv := parser.next()) is not None:
                execute(client, argv)
            b"".join(out)
            out.clear()
            pending.clear()

    return run


def measure(test: str, n: int) -> float:
    """Best of 3 fresh runs (state rebuilt each time), in microseconds per command."""
    best = float("inf")
    for _ in range(3):
        run = make_run(test, n)
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best / n * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Per-command cost in process, this build.")
    p.add_argument("--commands", type=int, default=20_000, help="commands per run")
    args = p.parse_args(argv)
    print(f"build: {build_kind()}")
    for test in TESTS:
        print(f"{test:<22}{measure(test, args.commands):>8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
