#!/usr/bin/env python3
"""Consumer-group benchmark (issue #4): Headwater vs. a real redis-server, in the same run.

Throughput, 50 clients, no pipelining, servers taking turns, median of --repeat runs:
  * ``XREADGROUP GROUP g c<n> COUNT 10 STREAMS s >`` driven by redis-benchmark (``-r 50``:
    50 consumer names), without NOACK, over a stream pre-filled with 10 entries per request
    plus a margin, so that every call returns 10 entries; afterwards both servers must hold
    exactly 10 * requests pending entries (which proves it, since no call returns more);
  * ``XACK s ga <10 IDs>`` driven by this script's own load client (epoll, raw sockets, 50
    connections, one request in flight on each), the same client for both servers, because
    redis-benchmark can only substitute random numbers: request j acks IDs 10j+1 .. 10j+10,
    which were all read into the group's PEL beforehand, and every reply must be ``:10``.
Memory: RSS growth of each server (started fresh) while 1,000,000 entries are read with
XREADGROUP into one consumer's PEL, per pending entry.

Usage::

    .venv/bin/python benchmarks/bench_groups.py [--quick] [--repeat 3] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import os
import select
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import hiredis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import (
    CLOCK_TICKS,
    HOST,
    NOISY,
    REPO,
    ServerProcess,
    children_ticks,
    command_output,
    cpu_times,
    free_port,
    headwater_argv,
    redis_argv,
    running,
)
from bench_streams import VALUE, rss_bytes

CLIENTS = 50
#: Distinct consumer names redis-benchmark picks from (``c`` + a 12-digit ``__rand_int__``).
CONSUMERS = 50
COUNT = 10
STREAM = "s"
READ_GROUP = "g"
ACK_GROUP = "ga"
MEMORY_STREAM = "pel"
#: Entries per XREADGROUP call when filling a PEL outside the timed part.
FILL_COUNT = 1000
XREADGROUP_ARGV = [
    "XREADGROUP", "GROUP", READ_GROUP, "c__rand_int__", "COUNT", str(COUNT),
    "STREAMS", STREAM, ">",
]  # fmt: skip
XREADGROUP_LABEL = f"XREADGROUP COUNT {COUNT}"
XACK_LABEL = f"XACK {COUNT} IDs"
TARGETS = {XREADGROUP_LABEL: 0.8, XACK_LABEL: 0.55}
MEMORY_TARGET = 3.0
CLIENT_TOOL = {
    XREADGROUP_LABEL: "redis-benchmark",
    XACK_LABEL: "bench_groups.py load client",
}


T = TypeVar("T")


class CheckError(RuntimeError):
    """A server replied with an error or ended a phase in an unexpected state."""


# -- a small RESP client -------------------------------------------------------------------


def encode(argv: Sequence[str]) -> bytes:
    out = bytearray(b"*%d\r\n" % len(argv))
    for arg in argv:
        raw = arg.encode()
        out += b"$%d\r\n%s\r\n" % (len(raw), raw)
    return bytes(out)


class Client:
    """One blocking connection; replies parsed by hiredis, error replies raised."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pipeline(self, commands: Sequence[Sequence[str]]) -> list[Any]:
        self.sock.sendall(b"".join(encode(c) for c in commands))
        return self.read(len(commands), lambda i: shlex.join(commands[i]))

    def send_raw(self, payload: bytes, replies: int) -> list[Any]:
        """Send pre-encoded commands and read their ``replies`` replies."""
        self.sock.sendall(payload)
        return self.read(replies, lambda i: f"command {i}")

    def read(self, count: int, describe: Callable[[int], str]) -> list[Any]:
        """``count`` replies; an error reply raises CheckError naming its command."""
        replies: list[Any] = []
        while len(replies) < count:
            reply = self.reader.gets()
            if reply is False:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise CheckError("connection closed by the server")
                self.reader.feed(data)
                continue
            if isinstance(reply, hiredis.ReplyError):
                raise CheckError(f"{describe(len(replies))}: {reply}")
            replies.append(reply)
        return replies

    def call(self, *argv: str) -> Any:
        return self.pipeline([argv])[0]


def xadd_fill(client: Client, key: str, first: int, last: int, batch: int = 5000) -> None:
    """``XADD key <i>-0 f VALUE`` for i in first..last, pipelined in batches."""
    for start in range(first, last + 1, batch):
        end = min(start + batch, last + 1)
        client.pipeline([["XADD", key, f"{i}-0", "f", VALUE] for i in range(start, end)])


def reset_group(client: Client, key: str, group: str) -> None:
    """A fresh group at the start of ``key`` (destroying the previous one and its PEL)."""
    client.call("XGROUP", "DESTROY", key, group)
    client.call("XGROUP", "CREATE", key, group, "0")


def read_into_pel(client: Client, key: str, group: str, consumer: str, total: int) -> int:
    """Read ``total`` entries into ``consumer``'s PEL; returns how many were delivered."""
    calls = [
        ["XREADGROUP", "GROUP", group, consumer, "COUNT", str(min(FILL_COUNT, total - done)),
         "STREAMS", key, ">"]
        for done in range(0, total, FILL_COUNT)
    ]  # fmt: skip
    delivered = 0
    for start in range(0, len(calls), 20):
        for reply in client.pipeline(calls[start : start + 20]):
            if reply is not None:  # [[key, [entry, ...]]]
                delivered += len(reply[0][1])
    return delivered


def pending_count(client: Client, key: str, group: str) -> int:
    """The size of a group's PEL: XPENDING's summary form, else XINFO GROUPS's ``pending``."""
    try:
        reply = client.call("XPENDING", key, group)
        return int(reply[0])
    except CheckError:
        for info in client.call("XINFO", "GROUPS", key):
            fields = dict(zip(info[::2], info[1::2], strict=True))
            if fields.get(b"name") == group.encode():
                return int(fields[b"pending"])
        raise


# -- load ----------------------------------------------------------------------------------


def redis_benchmark_rps(redis_benchmark: str, port: int, requests: int, argv: list[str]) -> float:
    command = [
        redis_benchmark,
        "-h", HOST, "-p", str(port),
        "-c", str(CLIENTS), "-P", "1", "-n", str(requests), "-r", str(CONSUMERS),
        "--csv", "-q",
        *argv,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0 or "error" in done.stdout.lower():
        raise CheckError(
            f"{shlex.join(command)} (status {done.returncode}):\n{done.stdout}{done.stderr}"
        )
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    return float(lines[-1].split(",")[1].strip('"'))


@dataclass
class LoadResult:
    rps: float
    #: replies other than the expected one, and the first of them
    unexpected: int
    first_unexpected: bytes
    #: share of one core this process used while driving the load
    client_cpu: float


def drive(port: int, payloads: Sequence[bytes], clients: int, expect: bytes) -> LoadResult:
    """Send every payload once over ``clients`` connections, one request in flight per
    connection (like redis-benchmark -P 1); each payload's reply must be a single line."""
    socks = [socket.create_connection((HOST, port)) for _ in range(clients)]
    poller = select.epoll()
    by_fd: dict[int, socket.socket] = {}
    partial: dict[int, bytes] = {}
    try:
        for sock in socks:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            poller.register(sock.fileno(), select.EPOLLIN)
            by_fd[sock.fileno()] = sock
        total = len(payloads)
        sent = done = unexpected = 0
        first_unexpected = b""
        cpu0, started = time.process_time(), time.perf_counter()
        for sock in socks[:total]:
            sock.sendall(payloads[sent])
            sent += 1
        while done < total:
            for fd, _ in poller.poll():
                sock = by_fd[fd]
                data = sock.recv(4096)
                if not data:
                    raise CheckError("connection closed by the server")
                if fd in partial:
                    data = partial.pop(fd) + data
                if not data.endswith(b"\r\n"):
                    partial[fd] = data
                    continue
                if data != expect:
                    unexpected += 1
                    first_unexpected = first_unexpected or data
                done += 1
                if sent < total:
                    sock.sendall(payloads[sent])
                    sent += 1
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu0
    finally:
        poller.close()
        for sock in socks:
            sock.close()
    return LoadResult(total / elapsed, unexpected, first_unexpected, cpu / elapsed)


def xack_payloads(requests: int) -> list[bytes]:
    """Request j acks the IDs 10j+1 .. 10j+10 (all distinct, all pending)."""
    return [
        encode(["XACK", STREAM, ACK_GROUP, *(f"{COUNT * j + i}-0" for i in range(1, COUNT + 1))])
        for j in range(requests)
    ]


# -- results -------------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    requests: int
    runs: dict[str, list[float]] = field(default_factory=lambda: {"redis": [], "headwater": []})
    #: share of all CPUs other processes used during each run
    background: list[float] = field(default_factory=list)
    #: PEL size after each run, per server (the checks)
    pel: dict[str, list[int]] = field(default_factory=lambda: {"redis": [], "headwater": []})
    client_cpu: dict[str, list[float]] = field(
        default_factory=lambda: {"redis": [], "headwater": []}
    )

    def rps(self, server: str) -> float:
        return statistics.median(self.runs[server])

    @property
    def ratio(self) -> float:
        return self.rps("headwater") / self.rps("redis")

    @property
    def target(self) -> float:
        return TARGETS[self.label]


def measured(server: ServerProcess, work: Callable[[], T]) -> tuple[T, float]:
    """(work's result, share of all CPUs that other processes used meanwhile)."""
    busy0, total0 = cpu_times()
    ours0 = server.cpu_ticks() + children_ticks() + own_ticks()
    result = work()
    busy1, total1 = cpu_times()
    ours = server.cpu_ticks() + children_ticks() + own_ticks() - ours0
    total = total1 - total0
    return result, (max(busy1 - busy0 - ours, 0.0) / total if total > 0 else 0.0)


def own_ticks() -> float:
    times = os.times()
    return (times.user + times.system) * CLOCK_TICKS


def run_xreadgroup(
    args: argparse.Namespace, servers: Sequence[ServerProcess], requests: int
) -> Row:
    row = Row(XREADGROUP_LABEL, requests)
    expected = COUNT * requests
    for rep in range(args.repeat):
        for server in servers:
            with Client(server.port) as client:
                reset_group(client, STREAM, READ_GROUP)
                rps, background = measured(
                    server,
                    partial(
                        redis_benchmark_rps,
                        args.redis_benchmark,
                        server.port,
                        requests,
                        XREADGROUP_ARGV,
                    ),
                )
                pel = pending_count(client, STREAM, READ_GROUP)
                client.call("XGROUP", "DESTROY", STREAM, READ_GROUP)
            row.runs[server.name].append(rps)
            row.background.append(background)
            row.pel[server.name].append(pel)
            print(
                f"  {row.label} run {rep + 1}/{args.repeat} {server.name:<9} {rps:>9,.0f} rps, "
                f"PEL {pel:,} (expected {expected:,}), background CPU {background:.0%}",
                file=sys.stderr,
                flush=True,
            )
            if pel != expected:
                args.failures.append(
                    f"{server.name}: {row.label}: PEL holds {pel:,} entries after "
                    f"{requests:,} calls, expected {expected:,} ({COUNT} per call)"
                )
    return row


def run_xack(args: argparse.Namespace, servers: Sequence[ServerProcess], requests: int) -> Row:
    row = Row(XACK_LABEL, requests)
    payloads = xack_payloads(requests)
    acked = COUNT * requests
    for rep in range(args.repeat):
        for server in servers:
            with Client(server.port) as client:
                reset_group(client, STREAM, ACK_GROUP)
                delivered = read_into_pel(client, STREAM, ACK_GROUP, "acker", acked)
                before = pending_count(client, STREAM, ACK_GROUP)
                if delivered != acked or before != acked:
                    raise CheckError(
                        f"{server.name}: read {delivered:,} entries into the PEL, which holds "
                        f"{before:,}; expected {acked:,}"
                    )
                load, background = measured(
                    server, partial(drive, server.port, payloads, CLIENTS, b":%d\r\n" % COUNT)
                )
                result = load.rps
                after = pending_count(client, STREAM, ACK_GROUP)
                client.call("XGROUP", "DESTROY", STREAM, ACK_GROUP)
            row.runs[server.name].append(result)
            row.background.append(background)
            row.pel[server.name].append(after)
            row.client_cpu[server.name].append(load.client_cpu)
            print(
                f"  {row.label} run {rep + 1}/{args.repeat} {server.name:<9} {result:>9,.0f} rps, "
                f"PEL {acked:,} -> {after:,}, client CPU {load.client_cpu:.0%}, "
                f"background CPU {background:.0%}",
                file=sys.stderr,
                flush=True,
            )
            if load.unexpected:
                args.failures.append(
                    f"{server.name}: {row.label}: {load.unexpected:,} replies were not "
                    f":{COUNT}, the first {load.first_unexpected!r}"
                )
            if after != 0:
                args.failures.append(
                    f"{server.name}: {row.label}: {after:,} entries still pending after acking "
                    f"all {acked:,}"
                )
    return row


@dataclass
class Memory:
    entries: int
    #: RSS growth per entry while the stream was filled, and while its entries were read
    #: into the PEL
    stream: dict[str, float] = field(default_factory=dict)
    pel: dict[str, float] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.pel["headwater"] / self.pel["redis"]


def measure_memory(args: argparse.Namespace, servers: Sequence[ServerProcess]) -> Memory:
    """Each server on its own, freshly started: fill a stream, then read it all into one
    consumer's PEL, RSS measured before and after each phase."""
    memory = Memory(args.memory_entries)
    n = args.memory_entries
    for server in servers:
        with running([server]), Client(server.port) as client:
            assert server.pid is not None
            time.sleep(0.5)
            empty = rss_bytes(server.pid)
            xadd_fill(client, MEMORY_STREAM, 1, n)
            time.sleep(0.5)
            filled = rss_bytes(server.pid)
            client.call("XGROUP", "CREATE", MEMORY_STREAM, "g", "0")
            time.sleep(0.5)
            before = rss_bytes(server.pid)
            delivered = read_into_pel(client, MEMORY_STREAM, "g", "c", n)
            time.sleep(0.5)
            after = rss_bytes(server.pid)
            pending = pending_count(client, MEMORY_STREAM, "g")
        memory.stream[server.name] = (filled - empty) / n
        memory.pel[server.name] = (after - before) / n
        memory.pending[server.name] = pending
        print(
            f"  memory {server.name:<9} stream {memory.stream[server.name]:.1f} B/entry, "
            f"PEL {memory.pel[server.name]:.1f} B/pending entry "
            f"(RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB, {pending:,} pending)",
            file=sys.stderr,
            flush=True,
        )
        if delivered != n or pending != n:
            args.failures.append(
                f"{server.name}: memory: delivered {delivered:,} and {pending:,} pending, "
                f"expected {n:,}"
            )
    return memory


# -- report --------------------------------------------------------------------------------


def client_note(row: Row) -> str:
    if row.label == XACK_LABEL:
        cpu = {s: statistics.median(v) for s, v in row.client_cpu.items()}
        return (
            f"{CLIENT_TOOL[row.label]} (client CPU {cpu['redis']:.0%} / {cpu['headwater']:.0%} "
            "of a core)"
        )
    return CLIENT_TOOL[row.label]


def text_report(rows: Sequence[Row], memory: Memory | None) -> str:
    lines = []
    for row in rows:
        lines.append(
            f"{row.label:<20} c={CLIENTS} -n {row.requests:<7} redis {row.rps('redis'):>9,.0f}  "
            f"headwater {row.rps('headwater'):>9,.0f}  headwater/redis {row.ratio:.2f}x  "
            f"target >= {row.target}x  [{client_note(row)}]"
        )
    if memory is not None:
        lines.append(
            f"{'PEL memory':<20} {memory.entries:,} pending: redis {memory.pel['redis']:.1f} "
            f"B/entry  headwater {memory.pel['headwater']:.1f} B/entry  headwater/redis "
            f"{memory.ratio:.2f}x  target <= {MEMORY_TARGET}x"
        )
    return "\n".join(lines)


def background_note(rows: Sequence[Row]) -> str:
    worst = max((b for r in rows for b in r.background), default=0.0)
    if worst <= NOISY:
        return f"Other processes used at most {worst:.0%} of the CPUs during the timed runs."
    noisy = ", ".join(r.label for r in rows if max(r.background) > NOISY)
    return f"**Noisy**: other processes used up to {worst:.0%} of the CPUs during runs of {noisy}."


def write_markdown(
    path: Path,
    rows: Sequence[Row],
    memory: Memory | None,
    args: argparse.Namespace,
) -> None:
    command = shlex.join([".venv/bin/python", "benchmarks/bench_groups.py", *args.argv])
    lines = [
        f"Command: `{command}` (median of {args.repeat} runs; servers take turns, "
        f"{CLIENTS} clients, no pipelining, no NOACK)",
        "",
        "| test | clients | requests | client | redis rps | headwater rps | ratio | target |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.label} | {CLIENTS} | {row.requests:,} | {client_note(row)} | "
            f"{row.rps('redis'):,.0f} | {row.rps('headwater'):,.0f} | {row.ratio:.2f} | "
            f">= {row.target} |"
        )
    lines += ["", background_note(rows), ""]
    for row in rows:
        runs = "; ".join(
            f"{name} " + ", ".join(f"{x:,.0f}" for x in values) for name, values in row.runs.items()
        )
        pel = "; ".join(f"{name} {values}" for name, values in row.pel.items())
        lines.append(f"- {row.label}: runs {runs}; PEL after each run: {pel}")
    if memory is not None:
        lines += [
            "",
            f"PEL memory, RSS growth while {memory.entries:,} entries are read into one "
            f"consumer's PEL (`XREADGROUP ... COUNT {FILL_COUNT}`): redis "
            f"{memory.pel['redis']:.1f} B, headwater {memory.pel['headwater']:.1f} B per pending "
            f"entry, ratio {memory.ratio:.2f} (target <= {MEMORY_TARGET}). The stream itself: "
            f"redis {memory.stream['redis']:.1f} B, headwater {memory.stream['headwater']:.1f} B "
            "per entry.",
        ]
    if args.failures:
        lines += ["", "**Checks failed:**", "", *(f"- {f}" for f in args.failures)]
    commit = command_output(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = command_output(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"])
    lines += [
        "",
        f"Environment: `{command_output(['redis-server', '--version'])}`; Headwater src at "
        f"{commit}{' plus uncommitted changes' if dirty else ''}"
        f"{' (--against-redis: a second redis-server instead)' if args.against_redis else ''}; "
        f"nproc {os.cpu_count()}; load average at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
    ]
    path.write_text("\n".join(lines) + "\n")


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per test; median reported (default 3)"
    )
    parser.add_argument("--markdown", type=Path, help="also write the results to FILE")
    parser.add_argument(
        "--requests",
        "-n",
        type=int,
        default=None,
        help="requests per XREADGROUP and XACK run (default 100000, 10000 with --quick)",
    )
    parser.add_argument(
        "--memory-entries",
        type=int,
        default=None,
        help="pending entries for the memory test (default 1000000, 100000 with --quick)",
    )
    parser.add_argument(
        "--skip-memory", action="store_true", help="throughput only, no memory test"
    )
    parser.add_argument(
        "--against-redis",
        action="store_true",
        help="validate the harness: a second redis-server takes Headwater's place "
        "(every ratio should come out near 1)",
    )
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.requests is None:
        args.requests = 10_000 if args.quick else 100_000
    if args.memory_entries is None:
        args.memory_entries = 100_000 if args.quick else 1_000_000
    if min(args.repeat, args.requests, args.memory_entries) < 1:
        parser.error("--repeat, --requests and --memory-entries must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.failures = []
    redis_server = shutil.which("redis-server")
    args.redis_benchmark = shutil.which("redis-benchmark")
    if not redis_server or not args.redis_benchmark:
        print("redis-server and redis-benchmark are required (make redis-server)")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    rp, hp = free_port(), free_port()
    while hp == rp:
        hp = free_port()
    (tmp / "r").mkdir()
    (tmp / "h").mkdir()
    if args.against_redis:
        second = redis_argv(redis_server, hp, tmp / "h")
    else:
        second = headwater_argv(sys.executable, hp, tmp / "h")
    servers = [
        ServerProcess("redis", redis_argv(redis_server, rp, tmp / "r"), rp, tmp / "redis.log"),
        ServerProcess("headwater", second, hp, tmp / "headwater.log"),
    ]
    # 10 entries per XREADGROUP call, plus a margin: every call finds 10 new entries.
    stream_entries = COUNT * args.requests + 10 * COUNT * CLIENTS
    rows: list[Row] = []
    memory: Memory | None = None
    try:
        with running(servers):
            print(
                f"redis-server port {rp}; headwater port {hp}"
                + (" (a second redis-server: --against-redis)" if args.against_redis else "")
                + f"; filling stream {STREAM!r} with {stream_entries:,} entries",
                file=sys.stderr,
                flush=True,
            )
            for server in servers:
                with Client(server.port) as client:
                    xadd_fill(client, STREAM, 1, stream_entries)
            rows.append(run_xreadgroup(args, servers, args.requests))
            rows.append(run_xack(args, servers, args.requests))
        if not args.skip_memory:
            memory = measure_memory(args, servers)
    except CheckError as exc:
        print(f"bench_groups: {exc}", file=sys.stderr)
        for server in servers:
            tail = server.log_tail()
            if tail:
                print(tail, file=sys.stderr)
        return 3
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(text_report(rows, memory))
    print(background_note(rows))
    for failure in args.failures:
        print(f"CHECK FAILED: {failure}")
    if args.markdown:
        write_markdown(args.markdown, rows, memory, args)
    return 4 if args.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
