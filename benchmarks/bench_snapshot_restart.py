#!/usr/bin/env python3
"""Snapshot restart time (issue #6), side by side with redis-server's RDB.

N entries (default 5,000,000: the issue's target size) of one 16-byte field are loaded over a
pipelined socket and SAVE writes the snapshot, one server after the other; then restarts are
timed from process start until PING answers (median of --restarts, default 3), the servers
taking turns so that both see the same background load. The same start with an empty data
directory is timed too: it is the floor included in both times (Headwater's is the interpreter
and its imports). Target: Headwater <= 1.0x Redis.

Headwater loads a snapshot lazily (the file is read into private memory, and its nodes are
copied out of it when first used, the rest by the cron within seconds), so two more figures say
what that leaves for later: a full XRANGE scan right after PING on both servers, and how long
after the start Headwater's last node was copied (INFO persistence ``snapshot_lazy_nodes:0``);
``--restarts-only`` skips them.

Headwater's modules are byte-compiled first (``compileall``), as in an installed package:
with ``PYTHONDONTWRITEBYTECODE=1`` (set on the project's machines) a source checkout is
otherwise compiled again at every start (~70 ms). ``--no-compileall`` measures that case.
bench_durability.py has the AOF rows.

Usage::

    .venv/bin/python benchmarks/bench_snapshot_restart.py [entries] [--restarts 3] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PORT = 7791
XADD = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nf\r\n$16\r\n0123456789abcdef\r\n"
#: the interpreter running this script (a venv's python): its headwater script is the server
PYTHON = Path(sys.executable)
SERVERS = {
    "redis": ["redis-server", "--save", "", "--appendonly", "no"],
    "headwater": [str(PYTHON.parent / "headwater"), "server", "--save", "", "--appendonly", "no"],
}
TARGET = 1.0  # headwater seconds / redis seconds, at most


def command(port: int, *args: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return s.recv(1000)


def wait_ready(started: float, proc: subprocess.Popen[bytes], port: int) -> float:
    """Seconds from started until the server answers PING."""
    while True:
        try:
            if command(port, b"PING").startswith(b"+PONG"):
                return time.perf_counter() - started
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        time.sleep(0.005)


def load(entries: int, port: int, batch: int = 10_000) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s, s.makefile("rb") as f:
        for start in range(0, entries, batch):
            n = min(batch, entries - start)
            s.sendall(XADD * n)
            for _ in range(n):  # a bulk-string reply is two lines
                f.readline()
                f.readline()


def start(argv: list[str], data: str, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*argv, "--port", str(port), "--dir", data],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, all its threads (ended ones too)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_start(
    argv: list[str], data: str, port: int, check: int | None = None
) -> tuple[float, float]:
    """Seconds from process start until PING answers, and the server's CPU seconds until
    then (10 ms ticks: a steadier figure on a busy machine); the server is stopped again."""
    began = time.perf_counter()
    proc = start(argv, data, port)
    try:
        seconds = wait_ready(began, proc, port), cpu_seconds(proc.pid)
        if check is not None:
            length = command(port, b"XLEN", b"s")
            if length != b":%d\r\n" % check:
                raise SystemExit(f"XLEN {length!r} after a restart of {argv[0]}, expected {check}")
        return seconds
    finally:
        proc.terminate()
        proc.wait()


def first_scan(argv: list[str], data: str, port: int, entries_expected: int) -> tuple[float, float]:
    """Right after PING answers: seconds to read the whole stream (XRANGE pages of 100,000:
    Headwater copies the nodes it has not copied yet out of the snapshot as it goes), and
    until then the seconds to PING; the server is stopped again."""
    began = time.perf_counter()
    proc = start(argv, data, port)
    try:
        ready = wait_ready(began, proc, port)
        began = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as s:
            last, read = b"-", 0
            while True:
                s.sendall(encode(b"XRANGE", b"s", last, b"+", b"COUNT", b"100000"))
                entries = read_reply(s)
                if not isinstance(entries, list):
                    raise SystemExit(f"XRANGE answered {entries!r}")
                if not entries:
                    break
                read += len(entries)
                last = b"(" + entries[-1][0]
        if read != entries_expected:
            raise SystemExit(f"the scan read {read} entries, expected {entries_expected}")
        return ready, time.perf_counter() - began
    finally:
        proc.terminate()
        proc.wait()


def lazy_done(argv: list[str], data: str, port: int) -> float:
    """Headwater: seconds from start until its cron has copied every node out of the
    snapshot (INFO persistence ``snapshot_lazy_nodes:0``)."""
    began = time.perf_counter()
    proc = start(argv, data, port)
    try:
        wait_ready(began, proc, port)
        while b"snapshot_lazy_nodes:0\r\n" not in command(port, b"INFO", b"persistence"):
            time.sleep(0.05)
        return time.perf_counter() - began
    finally:
        proc.terminate()
        proc.wait()


def encode(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def read_reply(s: socket.socket) -> object:
    """One reply, parsed (hiredis is in the venv)."""
    import hiredis

    reader = hiredis.Reader()
    while True:
        reader.feed(s.recv(1 << 20))
        reply = reader.gets()
        if reply is not False:
            return reply


def prepare(name: str, argv: list[str], data: str, port: int, entries: int) -> None:
    """Load the entries and SAVE, unless data holds a snapshot already (--data)."""
    if any(f.startswith("dump.") for f in os.listdir(data)):
        print(f"{name}: reusing the snapshot in {data}", flush=True)
        return
    proc = start(argv, data, port)
    try:
        wait_ready(time.perf_counter(), proc, port)
        began = time.perf_counter()
        load(entries, port)
        load_s = time.perf_counter() - began
        began = time.perf_counter()
        assert command(port, b"SAVE") == b"+OK\r\n"
        save_s = time.perf_counter() - began
    finally:
        proc.terminate()
        proc.wait()
    print(f"{name}: loaded in {load_s:.1f} s, SAVE {save_s:.2f} s", flush=True)


def show(samples: list[float]) -> str:
    return f"{statistics.median(samples):.3f} s (runs {', '.join(f'{t:.3f}' for t in samples)})"


def compile_headwater() -> str:
    """Byte-compile the headwater package the server will import; returns its directory."""
    where = subprocess.run(
        [str(PYTHON), "-c", "import headwater, os; print(os.path.dirname(headwater.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run([str(PYTHON), "-m", "compileall", "-q", where], check=True)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("entries", type=int, nargs="?", default=5_000_000)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--no-compileall", action="store_true")
    parser.add_argument("--restarts-only", action="store_true", help="no scan, no copy time")
    parser.add_argument(
        "--data", help="keep the data directories here, and reuse their snapshots next time"
    )
    args = parser.parse_args()
    loadavg = os.getloadavg()
    if args.no_compileall:
        print("headwater: not byte-compiled first (--no-compileall)")
    else:
        print(f"headwater: byte-compiled {compile_headwater()} first")
    base = args.data or tempfile.mkdtemp(prefix="snap-restart-")
    try:
        dirs = {name: os.path.join(base, name) for name in SERVERS}
        empty = {name: os.path.join(base, f"{name}-empty") for name in SERVERS}
        for name, argv in SERVERS.items():
            for path in (dirs[name], empty[name]):
                os.makedirs(path, exist_ok=True)
            prepare(name, argv, dirs[name], PORT, args.entries)
        files = {name: {f: os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)}
                 for name, d in dirs.items()}  # fmt: skip
        restarts: dict[str, list[float]] = {name: [] for name in SERVERS}
        floors: dict[str, list[float]] = {name: [] for name in SERVERS}
        cpus: dict[str, list[float]] = {name: [] for name in SERVERS}
        floor_cpus: dict[str, list[float]] = {name: [] for name in SERVERS}
        for _ in range(args.restarts):  # the servers take turns, so both see the same load
            for name, argv in SERVERS.items():
                wall, cpu = timed_start(argv, dirs[name], PORT, args.entries)
                restarts[name].append(wall)
                cpus[name].append(cpu)
                wall, cpu = timed_start(argv, empty[name], PORT)
                floors[name].append(wall)
                floor_cpus[name].append(cpu)
        scans = {
            name: first_scan(argv, dirs[name], PORT, args.entries)
            for name, argv in SERVERS.items()
            if not args.restarts_only
        }
        copied = (
            None if args.restarts_only else lazy_done(SERVERS["headwater"], dirs["headwater"], PORT)
        )
    finally:
        if args.data is None:
            shutil.rmtree(base, ignore_errors=True)
    for name in SERVERS:
        print(f"{name}: files {files[name]}")
        print(f"{name}: restart {show(restarts[name])}; empty directory {show(floors[name])}")
        print(
            f"{name}: CPU until PING {show(cpus[name])}; empty directory {show(floor_cpus[name])}"
        )
    redis, headwater = (statistics.median(restarts[name]) for name in ("redis", "headwater"))
    ratio = headwater / redis
    print(
        f"snapshot restart, {args.entries:,} entries (median of {args.restarts}): redis "
        f"{redis:.3f} s, headwater {headwater:.3f} s, headwater/redis {ratio:.2f}x (target <= "
        f"{TARGET}x): {'met' if ratio <= TARGET else 'NOT met'}"
    )
    redis_cpu, headwater_cpu = (statistics.median(cpus[name]) for name in ("redis", "headwater"))
    print(
        f"CPU until PING (median): redis {redis_cpu:.2f} s, headwater {headwater_cpu:.2f} s, "
        f"headwater/redis {headwater_cpu / redis_cpu:.2f}x"
    )
    for name, (ready, scan) in scans.items():
        print(f"{name}: a full XRANGE scan right after PING ({ready:.3f} s) took {scan:.2f} s")
    if copied is not None:
        print(f"headwater: every node copied out of the snapshot {copied:.2f} s after the start")
    end = os.getloadavg()
    print(
        f"load average at start / end: {' '.join(f'{x:.2f}' for x in loadavg)} / "
        f"{' '.join(f'{x:.2f}' for x in end)} (nproc {os.cpu_count()})"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
