#!/usr/bin/env python3
"""Idempotent producers: XADD vs XADD IDMP vs XADD IDMPAUTO on Headwater (the seed's table).

The seed measured Redis 8.6 with memtier_benchmark, 1 client, no pipelining, values of 8 to 512
bytes, the stream's IDMP MAXSIZE at 10000. This script does the same for Headwater:

Throughput, for each value size (8, 21, 24, 26, 36, 64, 128, 256, 512 bytes) and mode
  * ``XADD s * f <value>``                     (plain, the baseline)
  * ``XADD s IDMP p <iid> * f <value>``        (a fresh 16-character iid per request)
  * ``XADD s IDMPAUTO p * f <value>``          (values differ per request: nothing dedupes)
driven by this script's own load client (one blocking connection, one request in flight),
which sends exact value sizes with a unique part in every value. Each run starts from a fresh
stream: created by one XADD of the run's mode, then ``XCFGSET s IDMP-MAXSIZE 10000``, then
10,000 pipelined XADDs of the mode (so the IDMP map is full and every timed IDMP XADD also
evicts, as in the seed's 2,000,000-request runs), then the timed requests. The three modes
alternate within each repeat (their order rotates), the median rps over ``--repeat`` runs is
reported, and so is the spread of the per-repeat (paired) overheads. Afterwards XLEN, and
XINFO STREAM's iids-tracked / iids-duplicates, must show that nothing was deduplicated.

Memory, for each size and mode, a freshly started server: RSS growth after 1,000,000 XADDs of
the mode (pipelined, not timed), MAXSIZE 10000, so 10,000 iids are tracked at the end.

Targets (the seed's claims): throughput overhead <= 3% (IDMP) and <= 4% (IDMPAUTO) against
plain XADD; memory overhead <= 1.5% of the stream's memory at 10,000 tracked iids.

A ``redis-server`` that knows IDMP (8.6+) is run the same way for reference; Debian's 7.0 does
not, so then the seed's Redis 8.6 figures are quoted beside ours instead.

Usage::

    .venv/bin/python benchmarks/bench_idmp.py [--quick] [--repeat 5] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hiredis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import (
    NOISY,
    REPO,
    ServerProcess,
    ServerStartError,
    command_output,
    free_port,
    headwater_argv,
    redis_argv,
    running,
)
from bench_groups import CheckError, Client, measured
from bench_streams import rss_bytes

SIZES = (8, 21, 24, 26, 36, 64, 128, 256, 512)
MODES = ("XADD", "IDMP", "IDMPAUTO")
IDMP_MODES = MODES[1:]
PID = b"p"
MAXSIZE = 10_000
#: Pipelined XADDs of the run's mode before each timed run: the IDMP map starts full.
WARMUP = MAXSIZE
#: Pipeline depth when loading outside the timed part.
BATCH = 1000
#: Targets: at most this much overhead, in percent of plain XADD.
THROUGHPUT_TARGET = {"IDMP": 3.0, "IDMPAUTO": 4.0}
MEMORY_TARGET = 1.5

#: The seed's Redis 8.6 figures: size -> (XADD ops/s, IDMP overhead %, IDMPAUTO overhead %),
#: and size -> (XADD MB, IDMP overhead %, IDMPAUTO overhead %). Overheads as the seed prints
#: them, signs flipped so that a positive number is a cost (slower, or more memory).
SEED_THROUGHPUT = {
    8: (69_066, 2.6, 2.9),
    21: (68_915, 2.3, 2.7),
    24: (68_928, 2.4, 3.0),
    26: (69_029, 2.7, 3.4),
    36: (68_833, 2.7, 3.1),
    64: (68_675, 2.8, 3.5),
    128: (68_367, 2.8, 3.8),
    256: (67_867, 3.2, 4.0),
    512: (67_188, 5.0, 5.2),
}
SEED_MEMORY = {
    8: (40.73, 1.0, 1.1),
    21: (69.07, 1.1, 1.0),
    24: (69.19, 0.9, 1.0),
    26: (81.02, 1.1, 0.8),
    36: (96.26, 1.4, 0.8),
    64: (155.55, 0.8, 0.6),
    128: (289.43, 0.7, 0.3),
    256: (541.78, 0.6, 0.1),
    512: (1160.58, 0.6, 0.1),
}

#: The fixed part of every value (its first 8 bytes are a per-request counter, in hex).
FILLER = (b"q7Zk2mXw9RbT4vLc" * 32)[:512]
_MASK64 = (1 << 64) - 1
_SCRAMBLE = 0x9E3779B97F4A7C15  # odd: i -> i * _SCRAMBLE mod 2**64 is a bijection


# -- requests ------------------------------------------------------------------------------


class Requests:
    """XADD payloads. One counter for the whole process makes every value (and every IDMP
    iid) unique, across modes and repeats alike."""

    def __init__(self) -> None:
        self.counter = 0

    def make(self, mode: str, size: int, key: str, count: int) -> list[bytes]:
        start, self.counter = self.counter, self.counter + count
        # A %-template of the request, with the placeholders' real lengths in the headers.
        k = key.encode()
        value = (b"%08x" + FILLER[: size - 8], size)
        if mode == "XADD":
            args = [b"XADD", k, b"*", b"f", value]
        elif mode == "IDMP":
            args = [b"XADD", k, b"IDMP", PID, (b"%016x", 16), b"*", b"f", value]
        else:
            args = [b"XADD", k, b"IDMPAUTO", PID, b"*", b"f", value]
        template = b"*%d\r\n" % len(args)
        for arg in args:
            text, length = arg if isinstance(arg, tuple) else (arg, len(arg))
            template += b"$%d\r\n%s\r\n" % (length, text)
        if mode == "IDMP":
            return [
                template % ((i * _SCRAMBLE) & _MASK64, i & 0xFFFFFFFF)
                for i in range(start, start + count)
            ]
        return [template % (i & 0xFFFFFFFF) for i in range(start, start + count)]


class RawClient(Client):
    """bench_groups.Client plus pre-encoded pipelines and the one-at-a-time timed loop."""

    def __enter__(self) -> RawClient:
        return self

    def raw(self, payloads: Sequence[bytes]) -> list[Any]:
        replies: list[Any] = []
        for start in range(0, len(payloads), BATCH):
            chunk = payloads[start : start + BATCH]
            self.sock.sendall(b"".join(chunk))
            got = 0
            while got < len(chunk):
                reply = self.reader.gets()
                if reply is False:
                    data = self.sock.recv(1 << 20)
                    if not data:
                        raise CheckError("connection closed by the server")
                    self.reader.feed(data)
                    continue
                if isinstance(reply, hiredis.ReplyError):
                    raise CheckError(f"XADD: {reply}")
                replies.append(reply)
                got += 1
        return replies

    def one_by_one(self, payloads: Sequence[bytes]) -> tuple[int, bytes]:
        """Send each payload and wait for its reply (an entry ID, a bulk string) before the
        next; returns (replies that were not bulk strings, the first of them)."""
        sock = self.sock
        send, recv = sock.sendall, sock.recv
        bad, first_bad = 0, b""
        for payload in payloads:
            send(payload)
            data = recv(65536)
            if data[:1] == b"$" and data.count(b"\r\n") == 2 and data[-2:] == b"\r\n":
                continue
            data = self._finish(data)
            if data[:1] != b"$":
                bad += 1
                first_bad = first_bad or data
        return bad, first_bad

    def _finish(self, data: bytes) -> bytes:
        while True:
            if data[:1] == b"$" and b"\r\n" in data:
                header, _, rest = data.partition(b"\r\n")
                if len(rest) >= int(header[1:]) + 2:
                    return data
            elif data[:1] not in (b"", b"$") and data.endswith(b"\r\n"):
                return data
            more = self.sock.recv(65536)
            if not more:
                raise CheckError("connection closed by the server")
            data += more


def xinfo(client: Client, key: str) -> dict[str, Any]:
    reply = client.call("XINFO", "STREAM", key)
    return {k.decode(): v for k, v in zip(reply[::2], reply[1::2], strict=True)}


def new_stream(client: RawClient, requests: Requests, mode: str, size: int, key: str) -> None:
    """Create ``key`` with one XADD of ``mode``, then set IDMP-MAXSIZE (which forgets the
    iids, so the maps only ever hold iids of entries added after it)."""
    client.call("DEL", key)
    client.raw(requests.make(mode, size, key, 1))
    client.call("XCFGSET", key, "IDMP-MAXSIZE", str(MAXSIZE))


def check_stream(
    client: Client, key: str, mode: str, length: int, tracked: int, where: str
) -> list[str]:
    """XLEN must be ``length`` (nothing deduplicated) and the IDMP counters as expected."""
    failures = []
    xlen = int(client.call("XLEN", key))
    info = xinfo(client, key)
    want = tracked if mode in IDMP_MODES else 0
    got = int(info.get("iids-tracked", -1))
    dups = int(info.get("iids-duplicates", -1))
    if xlen != length:
        failures.append(f"{where}: XLEN {xlen:,}, expected {length:,}")
    if got != want:
        failures.append(f"{where}: iids-tracked {got:,}, expected {want:,}")
    if dups != 0:
        failures.append(f"{where}: iids-duplicates {dups:,}, expected 0")
    return failures


def server_cpu_ns(pid: int) -> int:
    """CPU time of every thread of ``pid`` so far, in ns (``/proc/PID/task/*/schedstat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


# -- throughput ----------------------------------------------------------------------------


@dataclass
class Run:
    rps: float
    #: server CPU time per request, in microseconds
    cpu_us: float
    #: share of one core this script used while driving the load
    client_cpu: float
    #: share of all CPUs other processes used during the run
    background: float


@dataclass
class Throughput:
    server: str
    requests: int
    runs: dict[tuple[int, str], list[Run]] = field(default_factory=dict)

    def rps(self, size: int, mode: str) -> float:
        return statistics.median(r.rps for r in self.runs[size, mode])

    def cpu_us(self, size: int, mode: str) -> float:
        return statistics.median(r.cpu_us for r in self.runs[size, mode])

    def overhead(self, size: int, mode: str) -> float:
        """Throughput overhead of ``mode`` in percent: 100 * (1 - rps / plain rps)."""
        return 100 * (1 - self.rps(size, mode) / self.rps(size, "XADD"))

    def cpu_overhead(self, size: int, mode: str) -> float:
        return 100 * (self.cpu_us(size, mode) / self.cpu_us(size, "XADD") - 1)

    def paired(self, size: int, mode: str) -> list[float]:
        """Per-repeat overheads against the same repeat's plain XADD run."""
        return [
            100 * (1 - r.rps / base.rps)
            for r, base in zip(self.runs[size, mode], self.runs[size, "XADD"], strict=True)
        ]

    def sizes(self) -> list[int]:
        return sorted({size for size, _ in self.runs})

    def all_runs(self) -> Iterator[Run]:
        for runs in self.runs.values():
            yield from runs


def rotated(rep: int) -> tuple[str, ...]:
    k = rep % len(MODES)
    return MODES[k:] + MODES[:k]


def timed_run(
    server: ServerProcess,
    client: RawClient,
    requests: Requests,
    mode: str,
    size: int,
    n: int,
    failures: list[str],
) -> Run:
    key = "bench"
    new_stream(client, requests, mode, size, key)
    client.raw(requests.make(mode, size, key, WARMUP))
    payloads = requests.make(mode, size, key, n)
    assert server.pid is not None
    pid = server.pid

    def work() -> tuple[float, float, int, bytes]:
        cpu0, started = time.process_time(), time.perf_counter()
        bad, first_bad = client.one_by_one(payloads)
        elapsed = time.perf_counter() - started
        return elapsed, time.process_time() - cpu0, bad, first_bad

    gc.disable()
    try:
        server_ns = server_cpu_ns(pid)
        (elapsed, client_cpu, bad, first_bad), background = measured(server, work)
        server_ns = server_cpu_ns(pid) - server_ns
    finally:
        gc.enable()
    where = f"{server.name} {mode} {size} B"
    if bad:
        failures.append(f"{where}: {bad:,} replies were not entry IDs, the first {first_bad!r}")
    failures.extend(check_stream(client, key, mode, 1 + WARMUP + n, MAXSIZE, where))
    client.call("DEL", key)
    return Run(n / elapsed, server_ns / 1000 / n, client_cpu / elapsed, background)


def measure_throughput(
    args: argparse.Namespace, server: ServerProcess, requests: Requests
) -> Throughput:
    result = Throughput(server.name, args.requests)
    with running([server]), RawClient(server.port) as client:
        for rep in range(args.repeat):
            for s, size in enumerate(args.sizes):
                for mode in rotated(rep + s):
                    run = timed_run(
                        server, client, requests, mode, size, args.requests, args.failures
                    )
                    result.runs.setdefault((size, mode), []).append(run)
                    print(
                        f"  {server.name} run {rep + 1}/{args.repeat} {size:>3} B "
                        f"{mode:<8} {run.rps:>8,.0f} rps, server {run.cpu_us:5.1f} us/req, "
                        f"client CPU {run.client_cpu:.0%}, background CPU {run.background:.0%}",
                        file=sys.stderr,
                        flush=True,
                    )
    return result


# -- memory --------------------------------------------------------------------------------


@dataclass
class Memory:
    server: str
    entries: int
    #: (size, mode) -> RSS growth in bytes
    growth: dict[tuple[int, str], int] = field(default_factory=dict)
    tracked: dict[tuple[int, str], int] = field(default_factory=dict)
    xlen: dict[tuple[int, str], int] = field(default_factory=dict)

    def mb(self, size: int, mode: str) -> float:
        return self.growth[size, mode] / 2**20

    def overhead(self, size: int, mode: str) -> float:
        return 100 * (self.growth[size, mode] / self.growth[size, "XADD"] - 1)

    def per_iid(self, size: int, mode: str) -> float:
        """Bytes of extra RSS per tracked iid."""
        tracked = self.tracked[size, mode]
        extra = self.growth[size, mode] - self.growth[size, "XADD"]
        return extra / tracked if tracked else float("nan")

    def sizes(self) -> list[int]:
        return sorted({size for size, _ in self.growth})


def measure_memory(
    args: argparse.Namespace, make_server: Callable[[], ServerProcess], requests: Requests
) -> Memory:
    """Each (size, mode) on a freshly started server: RSS before and after loading the
    stream (pipelined, in batches of BATCH)."""
    n = args.memory_entries
    tracked = min(n - 1, MAXSIZE)
    memory = Memory("", n)
    key = "mem"
    for s, size in enumerate(args.sizes):
        for mode in rotated(s):
            server = make_server()
            with running([server]), RawClient(server.port) as client:
                assert server.pid is not None
                time.sleep(0.5)
                before = rss_bytes(server.pid)
                new_stream(client, requests, mode, size, key)
                for start in range(1, n, 100_000):
                    count = min(100_000, n - start)
                    client.raw(requests.make(mode, size, key, count))
                time.sleep(0.5)
                after = rss_bytes(server.pid)
                where = f"{server.name} memory {mode} {size} B"
                args.failures.extend(check_stream(client, key, mode, n, tracked, where))
                info = xinfo(client, key)
                memory.tracked[size, mode] = int(info.get("iids-tracked", 0))
                memory.xlen[size, mode] = int(client.call("XLEN", key))
            memory.server = server.name
            memory.growth[size, mode] = after - before
            print(
                f"  {server.name} memory {size:>3} B {mode:<8} RSS +{(after - before) / 2**20:.2f}"
                f" MiB ({before / 2**20:.1f} -> {after / 2**20:.1f}), XLEN "
                f"{memory.xlen[size, mode]:,}, iids-tracked {memory.tracked[size, mode]:,}",
                file=sys.stderr,
                flush=True,
            )
    return memory


# -- redis ---------------------------------------------------------------------------------


def redis_has_idmp(redis_server: str, tmp: Path) -> bool:
    """Does this redis-server accept ``XADD key IDMP pid iid * f v``?"""
    port = free_port()
    (tmp / "probe").mkdir(exist_ok=True)
    server = ServerProcess("redis", redis_argv(redis_server, port, tmp / "probe"), port,
                           tmp / "probe.log")  # fmt: skip
    try:
        with running([server]), Client(port) as client:
            client.call("XADD", "probe", "IDMP", "p", "1", "*", "f", "v")
            return True
    except (CheckError, ServerStartError, OSError):
        return False


# -- report --------------------------------------------------------------------------------


def verdict(value: float, target: float) -> str:
    return "yes" if value <= target else "**no**"


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.1f}..{max(values):.1f}"


def throughput_lines(t: Throughput, markdown: bool) -> list[str]:
    if markdown:
        lines = [
            "| size (B) | XADD rps | IDMP rps | IDMPAUTO rps | IDMP overhead (paired range) "
            "| IDMPAUTO overhead (paired range) | server us/req XADD / IDMP / IDMPAUTO "
            "| server CPU overhead IDMP / IDMPAUTO | seed Redis 8.6: IDMP / IDMPAUTO |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    else:
        lines = [
            f"{'size':>4} {'XADD':>8} {'IDMP':>8} {'AUTO':>8}  {'IDMP ovh (range)':<22}"
            f"{'AUTO ovh (range)':<22}{'us/req X/I/A':<22}{'CPU ovh I/A':<19}seed I/A"
        ]
    for size in t.sizes():
        cells = [
            f"{size}",
            f"{t.rps(size, 'XADD'):,.0f}",
            f"{t.rps(size, 'IDMP'):,.0f}",
            f"{t.rps(size, 'IDMPAUTO'):,.0f}",
            *(f"{t.overhead(size, m):+.1f}% ({spread(t.paired(size, m))})" for m in IDMP_MODES),
            " / ".join(f"{t.cpu_us(size, m):.1f}" for m in MODES),
            " / ".join(f"{t.cpu_overhead(size, m):+.1f}%" for m in IDMP_MODES),
            f"{SEED_THROUGHPUT[size][1]:+.1f}% / {SEED_THROUGHPUT[size][2]:+.1f}%"
            if size in SEED_THROUGHPUT
            else "-",
        ]
        if markdown:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append(
                f"{cells[0]:>4} {cells[1]:>8} {cells[2]:>8} {cells[3]:>8}  {cells[4]:<22}"
                f"{cells[5]:<22}{cells[6]:<22}{cells[7]:<19}{cells[8]}"
            )
    return lines


def memory_lines(m: Memory, markdown: bool) -> list[str]:
    if markdown:
        lines = [
            "| size (B) | XADD MiB | IDMP MiB | IDMPAUTO MiB | IDMP overhead | IDMPAUTO overhead "
            "| extra B per tracked iid IDMP / IDMPAUTO | seed Redis 8.6: XADD MB, IDMP / "
            "IDMPAUTO |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    else:
        lines = [
            f"{'size':>4} {'XADD MiB':>9} {'IDMP MiB':>9} {'AUTO MiB':>9} {'IDMP ovh':>9} "
            f"{'AUTO ovh':>9}  {'B/iid I/A':<14}seed MB, I/A"
        ]
    for size in m.sizes():
        seed = SEED_MEMORY.get(size)
        cells = [
            f"{size}",
            *(f"{m.mb(size, mode):.2f}" for mode in MODES),
            *(f"{m.overhead(size, mode):+.2f}%" for mode in IDMP_MODES),
            " / ".join(f"{m.per_iid(size, mode):.0f}" for mode in IDMP_MODES),
            f"{seed[0]:.2f}, {seed[1]:+.1f}% / {seed[2]:+.1f}%" if seed else "-",
        ]
        if markdown:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append(
                f"{cells[0]:>4} {cells[1]:>9} {cells[2]:>9} {cells[3]:>9} {cells[4]:>9} "
                f"{cells[5]:>9}  {cells[6]:<14}{cells[7]}"
            )
    return lines


def targets_lines(t: Throughput | None, m: Memory | None) -> list[str]:
    lines = []
    if t is not None:
        for mode in IDMP_MODES:
            target = THROUGHPUT_TARGET[mode]
            worst = max(t.sizes(), key=lambda s: t.overhead(s, mode))
            missed = [s for s in t.sizes() if t.overhead(s, mode) > target]
            median_rps = statistics.median(t.overhead(s, mode) for s in t.sizes())
            median_cpu = statistics.median(t.cpu_overhead(s, mode) for s in t.sizes())
            lines.append(
                f"Throughput {mode}: overhead <= {target:.0f}% "
                + (
                    "met at every size"
                    if not missed
                    else f"**missed** at {', '.join(f'{s} B' for s in missed)}"
                )
                + f" (worst {t.overhead(worst, mode):+.1f}% at {worst} B; median over sizes "
                f"{median_rps:+.1f}%; server CPU per request, median over sizes "
                f"{median_cpu:+.1f}%)."
            )
    if m is not None:
        for mode in IDMP_MODES:
            missed = [s for s in m.sizes() if m.overhead(s, mode) > MEMORY_TARGET]
            worst = max(m.sizes(), key=lambda s: m.overhead(s, mode))
            lines.append(
                f"Memory {mode}: overhead <= {MEMORY_TARGET}% at {MAXSIZE:,} tracked iids "
                + (
                    "met at every size"
                    if not missed
                    else f"**missed** at {', '.join(f'{s} B' for s in missed)}"
                )
                + f" (worst {m.overhead(worst, mode):+.2f}% at {worst} B)."
            )
    return lines


def noise_line(t: Throughput | None) -> str:
    if t is None:
        return ""
    background = [r.background for r in t.all_runs()]
    client = [r.client_cpu for r in t.all_runs()]
    worst = max(background)
    noisy = sum(b > NOISY for b in background)
    text = (
        f"Other processes used {statistics.median(background):.0%} of the CPUs during the "
        f"median timed run, {worst:.0%} at most"
    )
    if noisy:
        text = f"**Noisy**: {text}; {noisy} of {len(background)} runs above {NOISY:.0%}"
    return (
        f"{text}. The load client used {statistics.median(client):.0%} of a core (median). "
        f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}."
    )


def text_report(
    t: Throughput | None, m: Memory | None, redis_note: str, args: argparse.Namespace
) -> str:
    lines: list[str] = []
    if t is not None:
        lines += [
            f"Throughput, {t.server}, 1 client, pipeline 1, median of {args.repeat} x "
            f"{t.requests:,} requests; overhead = 1 - rps/XADD rps (positive = slower), "
            "paired range = min..max over repeats; seed overheads are Redis 8.6's:",
            *throughput_lines(t, markdown=False),
            "",
        ]
    if m is not None:
        lines += [
            f"Memory, {m.server}, RSS growth after {m.entries:,} XADDs on a fresh server, "
            f"IDMP-MAXSIZE {MAXSIZE}:",
            *memory_lines(m, markdown=False),
            "",
        ]
    lines += [*targets_lines(t, m), noise_line(t), redis_note]
    return "\n".join(line for line in lines if line is not None)


def write_markdown(
    path: Path,
    results: Sequence[tuple[Throughput | None, Memory | None]],
    redis_note: str,
    args: argparse.Namespace,
) -> None:
    command = shlex.join([".venv/bin/python", "benchmarks/bench_idmp.py", *args.argv])
    lines = [f"Command: `{command}`", ""]
    for t, m in results:
        lines += markdown_section(t, m, redis_note, args)
    commit = command_output(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = command_output(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"])
    lines += [
        "",
        f"Environment: Headwater src at {commit}{' plus uncommitted changes' if dirty else ''}; "
        f"Python {sys.version.split()[0]}; nproc {os.cpu_count()}; load average at the start "
        f"{' '.join(f'{x:.2f}' for x in args.loadavg)}, at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
    ]
    path.write_text("\n".join(lines) + "\n")


def markdown_section(
    t: Throughput | None, m: Memory | None, redis_note: str, args: argparse.Namespace
) -> list[str]:
    lines: list[str] = []
    if t is not None:
        lines += [
            f"Throughput on {t.server}: this script's load client, 1 connection, one request in "
            f"flight, {t.requests:,} timed requests per run after {WARMUP:,} pipelined ones "
            f"(fresh stream per run, IDMP-MAXSIZE {MAXSIZE}); median of {args.repeat} runs, the "
            "three modes alternating within each repeat. Overhead = 1 - rps / XADD rps "
            "(positive = slower); the paired range is the min..max of the per-repeat overheads. "
            "Server us/req = the server's CPU time (schedstat) per request.",
            "",
            *throughput_lines(t, markdown=True),
            "",
        ]
    if m is not None:
        lines += [
            f"Memory on {m.server}: RSS growth of a freshly started server after {m.entries:,} "
            f"pipelined XADDs (IDMP-MAXSIZE {MAXSIZE}, so {min(m.entries - 1, MAXSIZE):,} iids "
            "tracked at the end; XLEN and iids-tracked checked). Overhead = RSS growth / plain "
            "XADD's - 1.",
            "",
            *memory_lines(m, markdown=True),
            "",
        ]
    lines += [*(f"- {line}" for line in targets_lines(t, m)), "", noise_line(t), "", redis_note]
    if args.failures:
        lines += ["", "**Checks failed:**", "", *(f"- {f}" for f in args.failures)]
    if t is not None:
        lines += ["", "<details><summary>Every run (rps)</summary>", ""]
        for (size, mode), runs in sorted(t.runs.items()):
            lines.append(
                f"- {size} B {mode}: "
                + ", ".join(f"{r.rps:,.0f} ({r.background:.0%} bg)" for r in runs)
            )
        lines += ["", "</details>", ""]
    return lines


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per size and mode (default 5)"
    )
    parser.add_argument("--markdown", type=Path, help="also write the results to FILE")
    parser.add_argument(
        "--requests",
        "-n",
        type=int,
        default=None,
        help="timed requests per run (default 30000, 2000 with --quick)",
    )
    parser.add_argument(
        "--memory-entries",
        type=int,
        default=None,
        help="XADDs per memory measurement (default 1000000, 100000 with --quick)",
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=list(SIZES),
        help="comma-separated value sizes in bytes, each >= 8 (default: the seed's nine)",
    )
    parser.add_argument("--skip-memory", action="store_true", help="no memory test")
    parser.add_argument("--skip-throughput", action="store_true", help="no throughput test")
    parser.add_argument(
        "--redis-server",
        default=shutil.which("redis-server"),
        help="redis-server to run the same benchmark against for reference, if it supports "
        "IDMP (default: the one on PATH)",
    )
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 5
    if args.requests is None:
        args.requests = 2_000 if args.quick else 30_000
    if args.memory_entries is None:
        args.memory_entries = 100_000 if args.quick else 1_000_000
    if min(args.repeat, args.requests) < 1 or args.memory_entries < 2:
        parser.error("--repeat and --requests must be positive, --memory-entries >= 2")
    if any(not 8 <= s <= len(FILLER) + 8 for s in args.sizes):
        parser.error(f"--sizes: each size must be between 8 and {len(FILLER) + 8}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.failures = []
    args.loadavg = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="bench-idmp-"))
    requests = Requests()

    def server_factory(name: str) -> Callable[[], ServerProcess]:
        def make() -> ServerProcess:
            port = free_port()
            data = tmp / f"{name}-{port}"
            data.mkdir()
            if name == "redis":
                argv = redis_argv(args.redis_server, port, data)
            else:
                argv = headwater_argv(sys.executable, port, data)
            return ServerProcess(name, argv, port, tmp / f"{name}-{port}.log")

        return make

    names = ["headwater"]
    if args.redis_server and redis_has_idmp(args.redis_server, tmp):
        version = command_output([args.redis_server, "--version"])
        names.append("redis")
        redis_note = f"`{version}` supports IDMP: its figures are printed for reference."
    else:
        version = command_output([args.redis_server, "--version"]) if args.redis_server else ""
        redis_note = (
            f"Redis {version.split('v=')[-1].split()[0] if 'v=' in version else '(none)'} has "
            "no IDMP; the seed's Redis 8.6 figures are quoted for reference."
        )
    print(redis_note, file=sys.stderr, flush=True)
    results: list[tuple[Throughput | None, Memory | None]] = []
    try:
        for name in names:  # one server at a time, never two loads at once
            make = server_factory(name)
            t = None if args.skip_throughput else measure_throughput(args, make(), requests)
            m = None if args.skip_memory else measure_memory(args, make, requests)
            results.append((t, m))
    except (CheckError, ServerStartError) as exc:
        print(f"bench_idmp: {exc}", file=sys.stderr)
        return 3
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for t, m in results:
        print(text_report(t, m, redis_note, args))
        print()
    for failure in args.failures:
        print(f"CHECK FAILED: {failure}")
    if args.markdown:
        write_markdown(args.markdown, results, redis_note, args)
    return 4 if args.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
