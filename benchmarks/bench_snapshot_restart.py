#!/usr/bin/env python3
"""Snapshot restart time (issue #6), side by side with redis-server's RDB.

N entries (default 1,000,000) of one 16-byte field are loaded over a pipelined socket, SAVE
writes the snapshot, then three restarts are timed until PING answers. The servers run one
after the other. bench_durability.py has the AOF rows.

Usage::

    .venv/bin/python benchmarks/bench_snapshot_restart.py [entries]
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PORT = 7791
XADD = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nf\r\n$16\r\n0123456789abcdef\r\n"
ROOT = Path(__file__).resolve().parent.parent
SERVERS = {
    "redis": ["redis-server", "--save", "", "--appendonly", "no"],
    "headwater": [str(ROOT / ".venv/bin/headwater"), "server", "--save", "", "--appendonly", "no"],
}


def command(*args: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", PORT)) as s:
        s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return s.recv(1000)


def wait_ready(started: float, proc: subprocess.Popen[bytes]) -> float:
    """Seconds from started until the server answers PING."""
    while True:
        try:
            if command(b"PING").startswith(b"+PONG"):
                return time.perf_counter() - started
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        time.sleep(0.005)


def load(entries: int, batch: int = 10_000) -> None:
    with socket.create_connection(("127.0.0.1", PORT)) as s, s.makefile("rb") as f:
        for start in range(0, entries, batch):
            n = min(batch, entries - start)
            s.sendall(XADD * n)
            for _ in range(n):  # a bulk-string reply is two lines
                f.readline()
                f.readline()


def start(argv: list[str], data: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*argv, "--port", str(PORT), "--dir", data],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def measure(name: str, argv: list[str], entries: int) -> None:
    data = tempfile.mkdtemp(prefix=f"snap-{name}-")
    try:
        proc = start(argv, data)
        wait_ready(time.perf_counter(), proc)
        load(entries)
        began = time.perf_counter()
        assert command(b"SAVE") == b"+OK\r\n"
        save_s = time.perf_counter() - began
        proc.terminate()
        proc.wait()
        restarts = []
        for _ in range(3):
            began = time.perf_counter()
            proc = start(argv, data)
            restarts.append(wait_ready(began, proc))
            length = command(b"XLEN", b"s")
            proc.terminate()
            proc.wait()
        sizes = {f: os.path.getsize(os.path.join(data, f)) for f in os.listdir(data)}
        print(
            f"{name}: SAVE {save_s:.2f} s; restarts {[round(t, 3) for t in restarts]} s "
            f"(median {sorted(restarts)[1]:.3f}); XLEN {length!r}; files {sizes}"
        )
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    entries = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    for name, argv in SERVERS.items():
        measure(name, argv, entries)


if __name__ == "__main__":
    main()
