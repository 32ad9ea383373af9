#!/usr/bin/env python3
"""Durability benchmark (issue #6): Headwater vs. a real redis-server, both writing an AOF.

Both servers run with ``--appendonly yes --save '' --auto-aof-rewrite-percentage 0`` (no
rewrite, so the AOF stays one incremental file) and their data directories side by side
in one temporary directory (``--tmpdir``; its filesystem is printed: on tmpfs fsync is free
and the numbers mean nothing). Servers take turns and never run a load at the same time.

Throughput (redis-benchmark ``XADD s * f <16 bytes>``, no pipelining, median of --repeat runs):
  * ``--appendfsync always``, 1 client and 50 clients (target >= 1.0x Redis for both);
  * ``--appendfsync everysec``, 50 clients (target >= 0.6x Redis).
Replay: N entries (5,000,000; 200,000 with --quick) are loaded into each server (pipelined
raw-socket ``XADD s * f <16 bytes>``, appendfsync everysec), the server is stopped with
SIGTERM, the files in its appendonlydir are listed, and the time from starting it again to the
first ``+PONG`` (polled every 5 ms) is measured (median of --restarts restarts, alternating).
If Redis wrote an RDB base (``aof-use-rdb-preamble yes`` makes an empty one at the very first
start), its load is redone with ``--aof-use-rdb-preamble no`` so that both replay pure AOF.
Target: Headwater's replay <= 2.5x Redis's AOF load time. Headwater's modules are byte-compiled
first, as in an installed package (``--no-compileall``: not).

Usage::

    .venv/bin/python benchmarks/bench_durability.py --quick            # smoke run (~1 min)
    .venv/bin/python benchmarks/bench_durability.py --markdown out.md  # full (~15 min)

Exit status: 0 on success, 1 on bad options, 2 if a server failed to start, 3 if
redis-benchmark failed, 4 if a check (XLEN after a run or a restart) failed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import (
    HOST,
    NOISY,
    REPO,
    ServerProcess,
    ServerStartError,
    children_ticks,
    command_output,
    cpu_times,
    free_port,
    running,
)
from bench_groups import CheckError, Client, encode

VALUE = "0123456789abcdef"  # 16 bytes
STREAM = "s"
XADD_ARGV = ["XADD", STREAM, "*", "f", VALUE]
#: (label, appendfsync, clients, requests, quick requests, target ratio headwater/redis)
THROUGHPUT = (
    ("XADD always", "always", 1, 10_000, 1_000, 1.0),
    ("XADD always", "always", 50, 50_000, 5_000, 1.0),
    ("XADD everysec", "everysec", 50, 200_000, 20_000, 0.6),
)
REPLAY_ENTRIES = 5_000_000
QUICK_REPLAY_ENTRIES = 200_000
REPLAY_TARGET = 2.5  # headwater seconds / redis seconds, at most
LOAD_BATCH = 10_000
POLL = 0.005
HW_VERSION = ["-m", "headwater.cli", "--version"]
RESTART_TIMEOUT = 900.0


class BenchmarkError(RuntimeError):
    """redis-benchmark failed or printed something we cannot parse."""


# -- servers -------------------------------------------------------------------------------


def redis_argv(
    redis_server: str, port: int, data_dir: Path, fsync: str, preamble: bool = True
) -> list[str]:
    return [
        redis_server,
        "--port", str(port),
        "--bind", HOST,
        "--dir", str(data_dir),
        "--save", "",
        "--appendonly", "yes",
        "--appendfsync", fsync,
        "--auto-aof-rewrite-percentage", "0",
        "--aof-use-rdb-preamble", "yes" if preamble else "no",
    ]  # fmt: skip


def headwater_argv(python: str, port: int, data_dir: Path, fsync: str) -> list[str]:
    return [
        python, "-m", "headwater.cli", "server",
        "--port", str(port),
        "--dir", str(data_dir),
        "--save", "",
        "--appendonly", "yes",
        "--appendfsync", fsync,
        "--auto-aof-rewrite-percentage", "0",
    ]  # fmt: skip


def xlen(port: int) -> int:
    with Client(port) as client:
        return int(client.call("XLEN", STREAM))


def load_entries(port: int, entries: int) -> float:
    """``XADD s * f VALUE`` ``entries`` times, pipelined in batches; returns seconds."""
    batch = encode(XADD_ARGV) * LOAD_BATCH
    started = time.perf_counter()
    with Client(port) as client:
        done = 0
        while done < entries:
            n = min(LOAD_BATCH, entries - done)
            client.send_raw(batch if n == LOAD_BATCH else encode(XADD_ARGV) * n, n)
            done += n
    return time.perf_counter() - started


def ping_ok(port: int) -> bool:
    """True once the server answers PING with +PONG (not refused, not -LOADING)."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def aof_files(data_dir: Path) -> dict[str, int]:
    """``{name: bytes}`` of everything in ``<dir>/appendonlydir`` plus stray files in dir."""
    files: dict[str, int] = {}
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            files[str(path.relative_to(data_dir))] = path.stat().st_size
    return files


def show_files(files: dict[str, int]) -> str:
    return ", ".join(f"{name} ({size:,} B)" for name, size in files.items()) or "(none)"


# -- measurement ---------------------------------------------------------------------------


@dataclass
class Sample:
    value: float
    #: share of all CPUs that processes other than ours used meanwhile
    background: float


@dataclass
class Row:
    label: str
    config: str
    unit: str  # "rps" (higher is better) or "s" (lower is better)
    target: float
    redis: list[Sample] = field(default_factory=list)
    headwater: list[Sample] = field(default_factory=list)

    def median(self, server: str) -> float:
        samples = self.redis if server == "redis" else self.headwater
        return statistics.median(s.value for s in samples)

    @property
    def ratio(self) -> float:
        r = self.median("redis")
        return self.median("headwater") / r if r else float("nan")

    @property
    def met(self) -> bool:
        return self.ratio >= self.target if self.unit == "rps" else self.ratio <= self.target

    @property
    def max_background(self) -> float:
        return max((s.background for s in [*self.redis, *self.headwater]), default=0.0)

    def cells(self) -> tuple[str, ...]:
        fmt = "{:,.0f}" if self.unit == "rps" else "{:.2f} s"
        sign = ">=" if self.unit == "rps" else "<="
        return (
            self.label,
            self.config,
            fmt.format(self.median("redis")),
            fmt.format(self.median("headwater")),
            f"{self.ratio:.2f}x",
            f"{sign} {self.target}x",
            ("yes" if self.met else "NO") + (" (noisy)" if self.max_background > NOISY else ""),
        )


HEADER = ("test", "config", "redis", "headwater", "headwater/redis", "target", "met")
SNAPSHOT_ROW = ("snapshot restart", "-", "-", "-", "-", "-", "bench_snapshot_restart.py")


def run_redis_benchmark(args: argparse.Namespace, port: int, clients: int, n: int) -> float:
    argv = [
        args.redis_benchmark,
        "-h", HOST, "-p", str(port),
        "-c", str(clients), "-P", "1", "-n", str(n),
        "--csv", "-q",
        *XADD_ARGV,
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0 or "error" in done.stdout.lower():
        raise BenchmarkError(
            f"{shlex.join(argv)} (status {done.returncode}):\n{done.stdout}{done.stderr}"
        )
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    return float(lines[-1].split(",")[1].strip('"'))


def measured(server: ServerProcess, fn: Any) -> tuple[float, float]:
    """(fn(), share of all CPUs used meanwhile by processes other than ours)."""
    busy0, total0 = cpu_times()
    ours0 = server.cpu_ticks() + children_ticks()
    value: float = fn()
    busy1, total1 = cpu_times()
    ours = server.cpu_ticks() + children_ticks() - ours0
    total = total1 - total0
    other = max(busy1 - busy0 - ours, 0) / total if total > 0 else 0.0
    return value, other


def throughput(args: argparse.Namespace, tmp: Path) -> list[Row]:
    rows: list[Row] = []
    for fsync in ("always", "everysec"):
        configs = [t for t in THROUGHPUT if t[1] == fsync]
        base = tmp / f"throughput-{fsync}"
        (base / "redis").mkdir(parents=True)
        (base / "headwater").mkdir(parents=True)
        rp, hp = free_port(), free_port()
        while hp == rp:
            hp = free_port()
        servers = [
            ServerProcess(
                "redis",
                redis_argv(args.redis_server, rp, base / "redis", fsync),
                rp,
                base / "redis.log",
            ),
            ServerProcess(
                "headwater",
                headwater_argv(args.python, hp, base / "headwater", fsync),
                hp,
                base / "headwater.log",
            ),
        ]
        sent = 0
        with running(servers):
            for label, _, clients, full_n, quick_n, target in configs:
                n = args.requests_scale * (quick_n if args.quick else full_n)
                n = max(int(n), clients)
                row = Row(label, f"c={clients} P=1 -n {n}", "rps", target)
                for rep in range(args.repeat):
                    for server in servers:
                        port = server.port
                        rps, bg = measured(
                            server,
                            lambda port=port, clients=clients, n=n: run_redis_benchmark(
                                args, port, clients, n
                            ),
                        )
                        (row.redis if server.name == "redis" else row.headwater).append(
                            Sample(rps, bg)
                        )
                        log(
                            f"  {label} c={clients} run {rep + 1}/{args.repeat} "
                            f"{server.name:<9} {rps:>10,.0f} rps (background CPU {bg:.0%})"
                        )
                    sent += n
                rows.append(row)
            for server in servers:
                length = xlen(server.port)
                if length != sent:
                    raise CheckError(f"{server.name}: XLEN {STREAM} = {length}, expected {sent}")
        for server in servers:
            files = aof_files(base / server.name)
            log(f"  {fsync}: {server.name} files after {sent:,} XADDs: {show_files(files)}")
    return rows


@dataclass
class Replay:
    row: Row
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    load_seconds: dict[str, float] = field(default_factory=dict)
    empty_start: dict[str, float] = field(default_factory=dict)
    redis_reported: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def timed_start(server: ServerProcess) -> Sample:
    """Start ``server`` and time it until it answers PING (polled every 5 ms)."""
    log_file = open(server.log_path, "ab")  # noqa: SIM115 - closed below
    busy0, total0 = cpu_times()
    started = time.perf_counter()
    server.proc = subprocess.Popen(
        server.argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
    )
    server._log = log_file  # closed by server.stop()
    deadline = started + RESTART_TIMEOUT
    while not ping_ok(server.port):
        if server.proc.poll() is not None:
            raise ServerStartError(
                f"{server.name} exited with status {server.proc.returncode} during startup\n"
                f"{server.log_tail()}"
            )
        if time.perf_counter() > deadline:
            raise ServerStartError(f"{server.name} did not answer PING in {RESTART_TIMEOUT}s")
        time.sleep(POLL)
    seconds = time.perf_counter() - started
    busy1, total1 = cpu_times()
    total = total1 - total0
    other = max(busy1 - busy0 - server.cpu_ticks(), 0) / total if total > 0 else 0.0
    return Sample(seconds, other)


def replay(args: argparse.Namespace, tmp: Path) -> Replay:
    entries = args.entries
    result = Replay(Row("AOF replay", f"{entries:,} entries", "s", REPLAY_TARGET))
    base = tmp / "replay"
    servers: dict[str, ServerProcess] = {}
    for name in ("redis", "headwater"):
        data = base / name
        data.mkdir(parents=True)
        port = free_port()
        if name == "redis":
            argv = redis_argv(args.redis_server, port, data, "everysec")
        else:
            argv = headwater_argv(args.python, port, data, "everysec")
        servers[name] = ServerProcess(name, argv, port, base / f"{name}.log")

    def fill(server: ServerProcess) -> None:
        data = base / server.name
        with running([server]):
            seconds = load_entries(server.port, entries)
            length = xlen(server.port)
            if length != entries:
                raise CheckError(f"{server.name}: XLEN {STREAM} = {length} after loading")
        result.load_seconds[server.name] = seconds
        files = aof_files(data)
        result.files[server.name] = files
        log(
            f"  loaded {entries:,} entries into {server.name} in {seconds:.1f} s "
            f"({entries / seconds:,.0f}/s); after SIGTERM: {show_files(files)}"
        )

    for server in servers.values():
        log(f"replay: loading {server.name}")
        fill(server)
    redis = servers["redis"]
    rdb = [n for n in result.files["redis"] if n.endswith(".rdb")]
    if rdb:
        sizes = ", ".join(f"{n} ({result.files['redis'][n]:,} B)" for n in rdb)
        result.notes.append(
            f"Redis with aof-use-rdb-preamble yes wrote an RDB base: {sizes} (no rewrite ran; "
            "it creates the base, empty, at its first start); redone with "
            "`--aof-use-rdb-preamble no` so that both replay pure AOF."
        )
        log("  redis wrote an RDB base; reloading it with --aof-use-rdb-preamble no")
        shutil.rmtree(base / "redis")
        (base / "redis").mkdir()
        redis.argv = redis_argv(args.redis_server, redis.port, base / "redis", "everysec", False)
        fill(redis)
        leftover = [n for n in result.files["redis"] if n.endswith(".rdb")]
        if leftover:
            result.notes.append(f"Redis still has RDB files: {', '.join(leftover)}")

    for rep in range(args.restarts):
        for server in servers.values():
            try:
                sample = timed_start(server)
                length = xlen(server.port)
            finally:
                server.stop()
            if length != entries:
                raise CheckError(f"{server.name}: XLEN {STREAM} = {length} after restart")
            (result.row.redis if server.name == "redis" else result.row.headwater).append(sample)
            log(
                f"  restart {rep + 1}/{args.restarts} {server.name:<9} {sample.value:.3f} s "
                f"(background CPU {sample.background:.0%})"
            )
    text = (base / "redis.log").read_text(errors="replace")
    result.redis_reported = [
        line.split(" * ", 1)[-1].strip()
        for line in text.splitlines()
        if "DB loaded from append only file" in line
    ]
    # The floor: the same start with an empty data directory.
    for name, server in servers.items():
        empty = base / f"{name}-empty"
        empty.mkdir()
        argv = list(server.argv)
        argv[argv.index("--dir") + 1] = str(empty)
        probe = ServerProcess(f"{name}-empty", argv, server.port, base / f"{name}-empty.log")
        times = []
        for _ in range(3):
            try:
                times.append(timed_start(probe).value)
            finally:
                probe.stop()
        result.empty_start[name] = statistics.median(times)
    return result


def compile_headwater(python: str) -> str:
    """Byte-compile the headwater package that ``python`` imports; returns its directory."""
    where = command_output(
        [python, "-c", "import headwater, os; print(os.path.dirname(headwater.__file__))"]
    )
    subprocess.run([python, "-m", "compileall", "-q", where], check=True)
    return where


# -- reporting -----------------------------------------------------------------------------


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def table_rows(rows: Sequence[Row]) -> list[tuple[str, ...]]:
    return [HEADER, *(r.cells() for r in rows), SNAPSHOT_ROW]


def text_table(rows: Sequence[Row]) -> str:
    cells = table_rows(rows)
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADER))]
    out = []
    for n, line in enumerate(cells):
        out.append(
            "  ".join(
                c.ljust(w) if i in (0, 1, 6) else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_table(rows: Sequence[Row]) -> str:
    cells = table_rows(rows)
    lines = ["| " + " | ".join(cells[0]) + " |", "|---|---|--:|--:|--:|--:|---|"]
    lines += ["| " + " | ".join(c) + " |" for c in cells[1:]]
    return "\n".join(lines)


def every_run(rows: Sequence[Row]) -> str:
    lines = ["| test | config | redis runs (background CPU) | headwater runs (background CPU) |"]
    lines.append("|---|---|--:|--:|")
    for r in rows:
        fmt = "{:,.0f}" if r.unit == "rps" else "{:.3f}"

        def runs(samples: list[Sample], fmt: str = fmt) -> str:
            return ", ".join(f"{fmt.format(s.value)} ({s.background:.0%})" for s in samples)

        lines.append(f"| {r.label} | {r.config} | {runs(r.redis)} | {runs(r.headwater)} |")
    return "\n".join(lines)


def replay_details(rp: Replay, entries: int) -> list[str]:
    hw = rp.row.median("headwater")
    out = [
        f"Headwater replay rate: {entries / hw:,.0f} entries/s "
        f"(Redis: {entries / rp.row.median('redis'):,.0f} entries/s).",
    ]
    for name in ("redis", "headwater"):
        files = rp.files.get(name, {})
        total = sum(files.values())
        out.append(
            f"{name} files after loading and SIGTERM: {show_files(files)}; total {total:,} B"
        )
    out.append(
        "Start with an empty data directory (the floor included in both times): redis "
        f"{rp.empty_start.get('redis', float('nan')):.3f} s, headwater "
        f"{rp.empty_start.get('headwater', float('nan')):.3f} s."
    )
    out.append(
        "Time to load the entries over the network (pipelined, appendfsync everysec): "
        + ", ".join(f"{k} {v:.1f} s" for k, v in rp.load_seconds.items())
        + "."
    )
    if rp.redis_reported:
        out.append(f"Redis's own log, per restart: {'; '.join(rp.redis_reported)}.")
    out.extend(rp.notes)
    return out


def filesystem(path: Path) -> list[str]:
    df = command_output(["df", "-hT", str(path)])
    fstype = command_output(["stat", "-f", "-c", "%T", str(path)])
    return [f"data directories under {path} (`stat -f`: {fstype})", *df.splitlines()]


def noisy_note(rows: Sequence[Row]) -> str:
    noisy = [f"{r.label} {r.config}" for r in rows if r.max_background > NOISY]
    if not noisy:
        return f"Not noisy: other processes used at most {NOISY:.0%} of the CPUs in every run."
    return (
        f"**Noisy**: other processes used more than {NOISY:.0%} of the CPUs during some runs "
        f"of: {', '.join(noisy)} (see every run below). Disk I/O of other processes is not "
        "measured and also disturbs the fsync-bound rows."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs per throughput row (default 5; 1 with --quick)",
    )
    parser.add_argument(
        "--restarts",
        type=int,
        default=None,
        help="timed restarts per server for the replay row (default: --repeat, at most 3)",
    )
    parser.add_argument("--markdown", type=Path, help="also write the results to FILE")
    parser.add_argument(
        "--entries",
        type=int,
        default=None,
        help=f"replay size (default {REPLAY_ENTRIES:,}; {QUICK_REPLAY_ENTRIES:,} with --quick)",
    )
    parser.add_argument(
        "--requests-scale",
        type=float,
        default=1.0,
        help="multiply every redis-benchmark -n by this (default 1)",
    )
    parser.add_argument(
        "--tmpdir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where both servers' data directories go (one filesystem; default the system "
        "temp dir)",
    )
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument(
        "--no-compileall",
        action="store_true",
        help="do not byte-compile Headwater first (with PYTHONDONTWRITEBYTECODE=1 a source "
        "checkout is then compiled again at every start)",
    )
    parser.add_argument("--redis-server", default="redis-server")
    parser.add_argument("--redis-benchmark", default="redis-benchmark")
    parser.add_argument(
        "--python",
        default=str(REPO / ".venv" / "bin" / "python")
        if (REPO / ".venv" / "bin" / "python").exists()
        else sys.executable,
        help="python that runs Headwater",
    )
    args = parser.parse_args(argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 5
    if args.restarts is None:
        args.restarts = min(args.repeat, 3)
    if args.entries is None:
        args.entries = QUICK_REPLAY_ENTRIES if args.quick else REPLAY_ENTRIES
    if min(args.repeat, args.restarts, args.entries) < 1 or args.requests_scale <= 0:
        parser.error("--repeat, --restarts, --entries and --requests-scale must be positive")
    for tool in (args.redis_server, args.redis_benchmark):
        if shutil.which(tool) is None:
            print(f"{tool} not found (make redis-server)", file=sys.stderr)
            return 1
    if not args.no_compileall:
        log(f"byte-compiled {compile_headwater(args.python)} first (as an installed package is)")
    words = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join([".venv/bin/python", "benchmarks/bench_durability.py", *words])
    loadavg = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="hw-bench-durability-", dir=args.tmpdir))
    fs = filesystem(tmp)
    for line in fs:
        log(line)
    if "tmpfs" in fs[0] or "ramfs" in fs[0]:
        log("WARNING: a RAM filesystem: fsync costs nothing here")
    rows: list[Row] = []
    rp: Replay | None = None
    try:
        if not args.skip_throughput:
            rows += throughput(args, tmp)
        if not args.skip_replay:
            rp = replay(args, tmp)
            rows.append(rp.row)
    except ServerStartError as exc:
        print(f"bench_durability: {exc}", file=sys.stderr)
        return 2
    except (BenchmarkError, subprocess.TimeoutExpired) as exc:
        print(f"bench_durability: {exc}", file=sys.stderr)
        return 3
    except CheckError as exc:
        print(f"bench_durability: CHECK FAILED: {exc}", file=sys.stderr)
        return 4
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    details = replay_details(rp, args.entries) if rp is not None else []
    print(text_table(rows))
    print()
    for line in [*details, noisy_note(rows)]:
        print(line)
    end_load = os.getloadavg()
    print(
        "load average at start / end: "
        f"{' '.join(f'{x:.2f}' for x in loadavg)} / {' '.join(f'{x:.2f}' for x in end_load)}"
    )
    if args.markdown is not None:
        env = [
            ("date", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")),
            ("redis-server --version", command_output([args.redis_server, "--version"])),
            (
                "headwater --version",
                command_output([args.python, "-m", "headwater.cli", "--version"]),
            ),
            ("nproc", command_output(["nproc"])),
            ("load average at start", " ".join(f"{x:.2f}" for x in loadavg)),
            ("load average at end", " ".join(f"{x:.2f}" for x in end_load)),
            ("commit", command_output(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])),
        ]
        text = "\n".join(
            [
                f"Command: `{command}` (medians of {args.repeat} throughput run(s) and "
                f"{args.restarts} restart(s); servers take turns)",
                "",
                markdown_table(rows),
                "",
                *(f"{line}\n" for line in [*details, noisy_note(rows)]),
                "Filesystem:",
                "",
                "```",
                *fs,
                "```",
                "",
                "Environment:",
                "",
                *(f"- {k}: `{v}`" for k, v in env),
                "",
                "<details><summary>Every run</summary>",
                "",
                every_run(rows),
                "",
                "</details>",
                "",
            ]
        )
        args.markdown.write_text(text)
        log(f"markdown written to {args.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
