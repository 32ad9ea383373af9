#!/usr/bin/env python3
"""Streams benchmark (issue #3): Headwater vs. a real redis-server, in the same run.

Throughput (redis-benchmark, servers taking turns, median of --repeat runs):
  * XADD with 1 client, 50 clients, and 50 clients with pipeline 16;
  * XRANGE <random start> + COUNT 10 with 50 clients over a 100,000-entry stream.
Memory: RSS growth of each server after 1,000,000 ``XADD mem * f <16-byte value>``.
GC: the time of a full ``gc.collect()`` in a process holding a 1,000,000-entry Stream.

Usage::

    .venv/bin/python benchmarks/bench_streams.py [--quick] [--repeat 3] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import gc
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from bench_core import (
    HOST,
    ServerProcess,
    free_port,
    headwater_argv,
    redis_argv,
    running,
)

VALUE = "0123456789abcdef"  # 16 bytes
XRANGE_KEYS = 100_000

# (label, clients, pipeline, command) -- the command is passed to redis-benchmark as is
THROUGHPUT = (
    ("XADD", 1, 1, ["XADD", "s1", "*", "f", VALUE]),
    ("XADD", 50, 1, ["XADD", "s50", "*", "f", VALUE]),
    ("XADD", 50, 16, ["XADD", "s50p", "*", "f", VALUE]),
    ("XRANGE COUNT 10", 50, 1, ["XRANGE", "r", "__rand_int__", "+", "COUNT", "10"]),
)
TARGETS = {
    ("XADD", 1, 1): 0.8,
    ("XADD", 50, 1): 0.6,
    ("XADD", 50, 16): 0.45,
    ("XRANGE COUNT 10", 50, 1): 0.65,
}


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def send_pipelined(port: int, commands: Sequence[Sequence[str]], batch: int = 5000) -> None:
    """Send commands over one connection in batches, reading (and discarding) every reply."""
    with socket.create_connection((HOST, port)) as sock:
        reader = sock.makefile("rb")
        for start in range(0, len(commands), batch):
            chunk = commands[start : start + batch]
            payload = bytearray()
            for argv in chunk:
                payload += b"*%d\r\n" % len(argv)
                for arg in argv:
                    raw = arg.encode()
                    payload += b"$%d\r\n%s\r\n" % (len(raw), raw)
            sock.sendall(payload)
            for _ in chunk:
                line = reader.readline()
                if line.startswith(b"$"):
                    reader.read(int(line[1:]) + 2)
                elif line.startswith(b"-"):
                    raise RuntimeError(line.decode())


def bench_rps(
    redis_benchmark: str, port: int, clients: int, pipeline: int, n: int, command: list[str]
) -> float:
    argv = [
        redis_benchmark,
        "-h",
        HOST,
        "-p",
        str(port),
        "-c",
        str(clients),
        "-P",
        str(pipeline),
        "-n",
        str(n),
        "-r",
        str(XRANGE_KEYS),
        "--csv",
        "-q",
        *command,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    return float(lines[-1].split(",")[1].strip('"'))


def gc_time_ms(entries: int) -> float:
    from headwater.stream.stream import Stream

    stream = Stream()
    pairs = [b"f", VALUE.encode()]
    for i in range(entries):
        stream.append((i + 1, 0), pairs, 4096, 100)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    memory_entries = 100_000 if args.quick else 1_000_000
    requests = 20_000 if args.quick else 200_000
    redis_server = shutil.which("redis-server")
    redis_benchmark = shutil.which("redis-benchmark")
    if not redis_server or not redis_benchmark:
        print("redis-server and redis-benchmark are required (make redis-server)")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    rp, hp = free_port(), free_port()
    servers = [
        ServerProcess("redis", redis_argv(redis_server, rp, tmp / "r"), rp, tmp / "redis.log"),
        ServerProcess(
            "headwater", headwater_argv(sys.executable, hp, tmp / "h"), hp, tmp / "headwater.log"
        ),
    ]
    for server in servers:
        (tmp / server.name[0]).mkdir()
    rows: list[tuple[str, int, int, float, float]] = []
    memory: dict[str, float] = {}
    with running(servers):
        fill = [["XADD", "r", f"{i}-0", "f", VALUE] for i in range(1, XRANGE_KEYS + 1)]
        for server in servers:
            send_pipelined(server.port, fill)
        for label, clients, pipeline, command in THROUGHPUT:
            n = requests // (4 if clients == 1 and pipeline == 1 else 1)
            runs: dict[str, list[float]] = {"redis": [], "headwater": []}
            for _ in range(args.repeat):
                for server in servers:
                    runs[server.name].append(
                        bench_rps(redis_benchmark, server.port, clients, pipeline, n, command)
                    )
            r, h = statistics.median(runs["redis"]), statistics.median(runs["headwater"])
            rows.append((label, clients, pipeline, r, h))
            print(
                f"{label:16} c={clients:<3} P={pipeline:<3} redis {r:>10.0f}  "
                f"headwater {h:>10.0f}  ratio {h / r:.2f}",
                flush=True,
            )
        adds = [["XADD", "mem", "*", "f", VALUE]] * memory_entries
        for server in servers:
            assert server.pid is not None
            before = rss_bytes(server.pid)
            send_pipelined(server.port, adds)
            time.sleep(0.5)
            memory[server.name] = (rss_bytes(server.pid) - before) / memory_entries
            print(f"memory {server.name}: {memory[server.name]:.1f} B/entry", flush=True)
    gc_ms = gc_time_ms(memory_entries)
    print(f"gc.collect() with {memory_entries} entries: {gc_ms:.1f} ms")
    if args.markdown:
        write_markdown(args.markdown, rows, memory, gc_ms, memory_entries, args)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def write_markdown(
    path: Path,
    rows: list[tuple[str, int, int, float, float]],
    memory: dict[str, float],
    gc_ms: float,
    entries: int,
    args: argparse.Namespace,
) -> None:
    command = shlex.join([".venv/bin/python", "benchmarks/bench_streams.py", *sys.argv[1:]])
    lines = [
        f"Command: `{command}` (median of {args.repeat} runs; servers take turns)",
        "",
        "| test | clients | pipeline | redis rps | headwater rps | ratio | target |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, c, p, r, h in rows:
        target = TARGETS.get((label, c, p))
        lines.append(f"| {label} | {c} | {p} | {r:,.0f} | {h:,.0f} | {h / r:.2f} | >= {target} |")
    ratio = memory["headwater"] / memory["redis"]
    lines += [
        "",
        f"Memory, RSS growth per entry after {entries:,} `XADD mem * f <16 bytes>`: redis "
        f"{memory['redis']:.1f} B, headwater {memory['headwater']:.1f} B, ratio {ratio:.2f} "
        "(target <= 2.0).",
        "",
        f"Full `gc.collect()` in a process holding a {entries:,}-entry stream: {gc_ms:.1f} ms "
        "(target < 50 ms).",
        "",
    ]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
