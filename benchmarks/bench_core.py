#!/usr/bin/env python3
"""Core benchmark (issue #2): PING/SET/GET throughput, Headwater vs. a real redis-server.

Both servers are started side by side by this script, each on a free port with its own
temporary ``--dir``. ``redis-benchmark -t ping,set,get`` is then run against each, for every
combination of clients (1, 50) and pipeline depth (1, 16). On a small box the client and the
server share the CPU, so the servers take turns: for each configuration (and each repeat) the
redis run comes first and the Headwater run right after it; the two never run at once.

The reported rps is the median over ``--repeat`` runs. The table prints to stdout, and with
``--markdown FILE`` also goes to FILE together with the command line and the environment.

Usage::

    .venv/bin/python benchmarks/bench_core.py                 # full size (~2 minutes)
    .venv/bin/python benchmarks/bench_core.py --quick         # smoke run (~5 seconds)
    .venv/bin/python benchmarks/bench_core.py --repeat 5 --max-background 0.1 --markdown out.md

Exit status: 0 on success, 1 on bad options, 2 if a server failed to start, 3 if
redis-benchmark failed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import io
import os
import platform
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
TESTS = "ping,set,get"
#: The rows redis-benchmark 7.0 prints for ``-t ping,set,get``, in table order.
TEST_ORDER = ("PING_INLINE", "PING_MBULK", "SET", "GET")
CLIENTS = (1, 50)
PIPELINES = (1, 16)
#: Requests for the (clients=50, pipeline=16) configuration; the others scale down from it
#: (see ``SCALE``) so that every redis-benchmark run takes roughly the same, few, seconds.
DEFAULT_REQUESTS = 400_000
QUICK_REQUESTS = 40_000
#: Fraction of ``--requests`` used for each (clients, pipeline) configuration.
SCALE: dict[tuple[int, int], float] = {
    (1, 1): 1 / 20,
    (50, 1): 1 / 4,
    (1, 16): 1 / 2,
    (50, 16): 1.0,
}
MIN_REQUESTS = 1_000
#: Flag results measured while other processes used more than this share of all CPUs.
NOISY = 0.10
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


class ServerStartError(RuntimeError):
    """A server process exited or never accepted connections."""


class BenchmarkError(RuntimeError):
    """redis-benchmark failed or printed something we cannot parse."""


# -- servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ServerProcess:
    name: str
    argv: list[str]
    port: int
    log_path: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    _log: io.BufferedWriter | None = field(default=None, repr=False)

    def start(self) -> None:
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Wait until the port accepts connections and answers PING with +PONG."""
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        last_error = "no attempt"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerStartError(
                    f"{self.name} exited with status {self.proc.returncode} during startup\n"
                    f"{self.log_tail()}"
                )
            try:
                with socket.create_connection((HOST, self.port), timeout=1.0) as s:
                    s.sendall(b"*1\r\n$4\r\nPING\r\n")
                    reply = s.recv(64)
                if reply.startswith(b"+PONG"):
                    return
                last_error = f"unexpected reply {reply!r}"
            except OSError as exc:
                last_error = str(exc)
            time.sleep(0.05)
        raise ServerStartError(
            f"{self.name} did not accept connections on {HOST}:{self.port} within "
            f"{START_TIMEOUT:.0f}s ({last_error})\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(f"  {self.name}| {line}" for line in text.splitlines()[-lines:])

    def cpu_ticks(self) -> int:
        """User + system CPU time of the server so far, in clock ticks (0 if unknown)."""
        if self.proc is None:
            return 0
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return 0
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)"
        return int(fields[11]) + int(fields[12])  # utime, stime

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


def redis_argv(redis_server: str, port: int, data_dir: Path) -> list[str]:
    return [
        redis_server,
        "--port", str(port),
        "--bind", HOST,
        "--save", "",
        "--appendonly", "no",
        "--dir", str(data_dir),
    ]  # fmt: skip


def headwater_argv(python: str, port: int, data_dir: Path) -> list[str]:
    return [
        python, "-m", "headwater.cli", "server",
        "--port", str(port),
        "--dir", str(data_dir),
        "--appendonly", "no",
        "--save", "",
    ]  # fmt: skip


@contextlib.contextmanager
def running(servers: Sequence[ServerProcess]) -> Iterator[None]:
    """Start every server (in order); always stop all of them on the way out."""
    try:
        for server in servers:
            server.start()
        yield
    finally:
        for server in servers:
            server.stop()


# -- redis-benchmark -----------------------------------------------------------------------


def benchmark_argv(
    redis_benchmark: str, port: int, clients: int, pipeline: int, requests: int
) -> list[str]:
    return [
        redis_benchmark,
        "-h", HOST,
        "-p", str(port),
        "-t", TESTS,
        "-c", str(clients),
        "-P", str(pipeline),
        "-n", str(requests),
        "--csv", "-q",
    ]  # fmt: skip


def parse_csv(text: str) -> dict[str, float]:
    """``{"test": rps}`` from redis-benchmark's ``--csv`` output (header row included)."""
    rows = list(csv.reader(line for line in text.splitlines() if line.strip()))
    if not rows or [c.lower() for c in rows[0][:2]] != ["test", "rps"]:
        raise BenchmarkError(f"unexpected redis-benchmark output:\n{text}")
    result: dict[str, float] = {}
    for row in rows[1:]:
        if len(row) < 2:
            continue
        try:
            result[row[0]] = float(row[1])
        except ValueError as exc:
            raise BenchmarkError(f"bad rps in row {row!r}") from exc
    missing = [t for t in TEST_ORDER if t not in result]
    if missing:
        raise BenchmarkError(f"redis-benchmark printed no row for {missing}:\n{text}")
    return result


def run_benchmark(argv: list[str]) -> dict[str, float]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise BenchmarkError(
            f"{shlex.join(argv)} exited with status {done.returncode}\n{done.stderr}"
        )
    return parse_csv(done.stdout)


@dataclass
class Run:
    rps: dict[str, float]
    #: share of all CPUs that processes other than the server and redis-benchmark used
    #: during the run: how much the rest of the box disturbed it
    background: float


def children_ticks() -> float:
    """CPU time of reaped children (here: the redis-benchmark runs), in clock ticks."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * CLOCK_TICKS


def measured_run(argv: list[str], server: ServerProcess) -> Run:
    busy0, total0 = cpu_times()
    ours0 = server.cpu_ticks() + children_ticks()
    rps = run_benchmark(argv)
    busy1, total1 = cpu_times()
    ours = server.cpu_ticks() + children_ticks() - ours0
    total = total1 - total0
    other = max(busy1 - busy0 - ours, 0.0) / total if total > 0 else 0.0
    return Run(rps, other)


# -- results -------------------------------------------------------------------------------


@dataclass
class Row:
    test: str
    clients: int
    pipeline: int
    redis: list[float] = field(default_factory=list)
    headwater: list[float] = field(default_factory=list)
    #: background CPU share during each run (see ``Run``), parallel to the rps lists
    redis_bg: list[float] = field(default_factory=list)
    headwater_bg: list[float] = field(default_factory=list)

    def add(self, server: str, run: Run) -> None:
        if server == "redis":
            self.redis.append(run.rps[self.test])
            self.redis_bg.append(run.background)
        else:
            self.headwater.append(run.rps[self.test])
            self.headwater_bg.append(run.background)

    @property
    def max_background(self) -> float:
        return max([*self.redis_bg, *self.headwater_bg], default=0.0)

    @property
    def redis_rps(self) -> float:
        return statistics.median(self.redis)

    @property
    def headwater_rps(self) -> float:
        return statistics.median(self.headwater)

    @property
    def ratio(self) -> float:
        return self.headwater_rps / self.redis_rps if self.redis_rps else float("nan")


HEADER = ("test", "clients", "pipeline", "redis rps", "headwater rps", "headwater/redis")


def table_cells(rows: Sequence[Row]) -> list[tuple[str, ...]]:
    return [
        (
            r.test,
            str(r.clients),
            str(r.pipeline),
            f"{r.redis_rps:,.0f}",
            f"{r.headwater_rps:,.0f}",
            f"{r.ratio:.2f}x",
        )
        for r in rows
    ]


def text_table(rows: Sequence[Row]) -> str:
    cells = [HEADER, *table_cells(rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADER))]
    out = []
    for n, line in enumerate(cells):
        out.append(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [
        "| " + " | ".join(HEADER) + " |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_cells(rows)]
    return "\n".join(lines)


def _runs(rps: Sequence[float], background: Sequence[float]) -> str:
    return ", ".join(f"{x:,.0f} ({b:.0%})" for x, b in zip(rps, background, strict=True))


def runs_table(rows: Sequence[Row]) -> str:
    lines = [
        "| test | clients | pipeline | redis runs (background CPU) | headwater runs "
        "(background CPU) |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in rows:
        redis_runs = _runs(r.redis, r.redis_bg)
        hw_runs = _runs(r.headwater, r.headwater_bg)
        lines.append(f"| {r.test} | {r.clients} | {r.pipeline} | {redis_runs} | {hw_runs} |")
    return "\n".join(lines)


def noisy_note(rows: Sequence[Row], limit: float | None) -> str:
    """A warning (markdown paragraph) naming rows measured while the box was busy."""
    threshold = limit if limit is not None else NOISY
    noisy = [r for r in rows if r.max_background > threshold]
    if not noisy:
        return ""
    names = ", ".join(f"{r.test} c={r.clients} P={r.pipeline}" for r in noisy)
    return (
        f"**Noisy**: other processes used more than {threshold:.0%} of the CPUs during some "
        f"runs of: {names} (see every run below).\n\n"
    )


def summary(rows: Sequence[Row]) -> str:
    parts = []
    for test in ("PING_MBULK", "PING_INLINE", "SET", "GET"):
        at50 = [r for r in rows if r.test == test and r.clients == 50]
        ratios = [f"P={r.pipeline}: {r.ratio:.2f}x" for r in at50]
        if ratios:
            parts.append(f"{test} {', '.join(ratios)}")
    target = "(issue #2 target: PING and SET >= 0.7x)"
    return f"At 50 clients, headwater/redis: {'; '.join(parts)} {target}."


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs, from /proc/stat; (0, 0) where unavailable."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def background_busy(seconds: float = 0.5) -> float:
    """Share of all CPUs busy while nothing of ours is running (other users of the box)."""
    busy0, total0 = cpu_times()
    time.sleep(seconds)
    busy1, total1 = cpu_times()
    return (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0


def wait_quiet(limit: float, max_wait: float) -> float:
    """Wait (up to max_wait seconds) until other work uses at most ``limit`` of the CPUs;
    returns the last sample."""
    deadline = time.monotonic() + max_wait
    busy = background_busy()
    while busy > limit and time.monotonic() < deadline:
        busy = background_busy(1.0)
    return busy


def command_output(argv: list[str], env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, check=False, env=env
        )
    except OSError as exc:
        return f"({exc})"
    return (done.stdout or done.stderr).strip()


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def environment(args: argparse.Namespace) -> list[tuple[str, str]]:
    commit = command_output(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = command_output(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"])
    py = [args.python, "-c", "import platform; print(platform.python_version())"]
    hw_env = headwater_env(args.headwater_src)
    deps = [
        args.python,
        "-c",
        "from importlib.metadata import version as v; print(v('uvloop'), v('hiredis'))",
    ]
    if args.headwater_src is not None:
        source = f"{args.headwater_src} (--headwater-src; HEAD of {REPO}: {commit})"
    else:
        source = f"{display_path(str(REPO / 'src'))} at {commit}" + (
            " plus uncommitted changes" if dirty else ""
        )
    return [
        ("date", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("redis-server --version", command_output([args.redis_server, "--version"])),
        (
            "headwater --version",
            command_output([args.python, "-m", "headwater.cli", "--version"], hw_env),
        ),
        ("python (headwater)", f"{command_output(py)} ({args.python})"),
        ("uvloop, hiredis", command_output(deps, hw_env)),
        ("nproc", command_output(["nproc"])),
        ("cpu", cpu_model()),
        ("niceness of servers and client", str(os.nice(0))),
        ("load average (1/5/15 min) at start", " ".join(f"{x:.2f}" for x in args.loadavg)),
        ("load average (1/5/15 min) at end", " ".join(f"{x:.2f}" for x in os.getloadavg())),
        (
            "share of all CPUs used by other processes during the kept runs (median / max)",
            f"{statistics.median(args.background):.0%} / {max(args.background):.0%}"
            if args.background
            else "n/a",
        ),
        ("runs discarded for background load (--max-background)", str(args.discarded)),
        ("headwater source", source),
    ]


def write_markdown(path: Path, rows: Sequence[Row], args: argparse.Namespace, command: str) -> None:
    env = "\n".join(f"- {k}: `{v}`" for k, v in environment(args))
    sizes = ", ".join(
        f"c={c} P={p}: -n {requests_for(args.requests, c, p)}" for c in CLIENTS for p in PIPELINES
    )
    example = shlex.join(benchmark_argv("redis-benchmark", 0, 50, 16, args.requests))
    text = (
        f"Command: `{command}`\n\n"
        f"Each cell is the median rps of {args.repeat} run(s) of\n"
        f"`{example.replace(' -p 0 ', ' -p PORT ')}` (clients, pipeline and -n per row;"
        f" {sizes}), redis and headwater alternating, never concurrent.\n\n"
        f"{markdown_table(rows)}\n\n"
        f"{noisy_note(rows, args.max_background)}"
        f"{summary(rows)}\n\n"
        f"Environment:\n\n{env}\n\n"
        f"<details><summary>Every run (rps, in run order)</summary>\n\n"
        f"{runs_table(rows)}\n\n</details>\n"
    )
    path.write_text(text)


# -- main ----------------------------------------------------------------------------------


def run_pair(
    args: argparse.Namespace,
    servers: Sequence[ServerProcess],
    clients: int,
    pipeline: int,
    n: int,
) -> list[tuple[ServerProcess, Run]]:
    """One redis-benchmark run against each server in turn. With ``--max-background``, wait
    for the box to be quiet first and redo the pair (up to ``--retries`` times) if other
    processes took more than that share of the CPUs during it."""
    limit: float | None = args.max_background
    for attempt in range(args.retries + 1):
        if limit is not None:
            wait_quiet(limit, args.quiet_wait)
        pair = []
        for server in servers:
            bench = benchmark_argv(args.redis_benchmark, server.port, clients, pipeline, n)
            run = measured_run(bench, server)
            shown = " ".join(f"{t}={run.rps[t]:,.0f}" for t in TEST_ORDER)
            print(
                f"  {server.name:<9} {shown} (background CPU {run.background:.0%})",
                file=sys.stderr,
            )
            pair.append((server, run))
        worst = max(run.background for _, run in pair)
        if limit is None or worst <= limit or attempt == args.retries:
            return pair
        args.discarded += 1
        print(f"  background CPU {worst:.0%} > {limit:.0%}: redoing this pair", file=sys.stderr)
    raise AssertionError("unreachable")


def requests_for(base: int, clients: int, pipeline: int) -> int:
    n = round(base * SCALE[(clients, pipeline)])
    return max(n, MIN_REQUESTS, clients)


def display_path(path: str) -> str:
    """``path`` relative to the repository when it lies inside it (``.venv/bin/python``)."""
    with contextlib.suppress(ValueError):
        return str(Path(path).absolute().relative_to(REPO))
    return path


def headwater_env(src: Path | None) -> dict[str, str] | None:
    """The environment for Headwater: with ``--headwater-src``, that tree goes first on
    PYTHONPATH (ahead of the venv's editable install)."""
    if src is None:
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH", "")]))
    return env


def default_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="PING/SET/GET with redis-benchmark: Headwater vs. redis-server."
    )
    p.add_argument(
        "--requests",
        "-n",
        type=int,
        default=None,
        help=f"requests for clients=50 pipeline=16; other configs scale down from it "
        f"(default {DEFAULT_REQUESTS}, {QUICK_REQUESTS} with --quick)",
    )
    p.add_argument("--quick", action="store_true", help="a smoke run: fewer requests, one repeat")
    p.add_argument(
        "--repeat", type=int, default=None, help="runs per config; median reported (default 3)"
    )
    p.add_argument("--markdown", type=Path, help="also write the table as markdown to FILE")
    p.add_argument("--redis-server", default="redis-server", help="redis-server binary")
    p.add_argument("--redis-benchmark", default="redis-benchmark", help="redis-benchmark binary")
    p.add_argument("--python", default=default_python(), help="python that runs Headwater")
    p.add_argument(
        "--max-background",
        type=float,
        metavar="SHARE",
        help="redo a redis/headwater pair when other processes used more than SHARE (0-1) of "
        "all CPUs during it, after waiting for the box to be that quiet (default: never; "
        f"results measured above {NOISY:.0%}% are flagged either way)",
    )
    p.add_argument("--retries", type=int, default=3, help="redos per pair (default 3)")
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        help="seconds to wait for a quiet box before each pair (default 30)",
    )
    p.add_argument(
        "--nice",
        type=int,
        default=0,
        help="add this to the scheduling priority of this script, both servers and "
        "redis-benchmark (negative values, needing root, help on a box shared with other work)",
    )
    p.add_argument(
        "--headwater-src",
        type=Path,
        help="run Headwater from this source tree (the directory holding the headwater "
        "package) instead of the installed one, e.g. a `git archive` snapshot for A/B runs",
    )
    args = p.parse_args(argv)
    if args.requests is None:
        args.requests = QUICK_REQUESTS if args.quick else DEFAULT_REQUESTS
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.requests < 1 or args.repeat < 1:
        p.error("--requests and --repeat must be positive")
    if args.headwater_src is not None:
        args.headwater_src = args.headwater_src.resolve()
        if not (args.headwater_src / "headwater" / "__init__.py").is_file():
            p.error(f"--headwater-src: no headwater package in {args.headwater_src}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.nice:
        try:
            os.nice(args.nice)  # inherited by every process started below
        except OSError as exc:
            print(f"bench_core: --nice {args.nice}: {exc}", file=sys.stderr)
            return 1
    args.loadavg = os.getloadavg()
    args.background = []
    args.discarded = 0
    words = sys.argv if argv is None else [display_path(__file__), *argv]
    command = shlex.join([display_path(sys.executable), *words])
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "redis").mkdir()
        (tmpdir / "headwater").mkdir()
        redis_port, hw_port = free_port(), free_port()
        while hw_port == redis_port:
            hw_port = free_port()
        redis = ServerProcess(
            "redis",
            redis_argv(args.redis_server, redis_port, tmpdir / "redis"),
            redis_port,
            tmpdir / "redis.log",
        )
        headwater = ServerProcess(
            "headwater",
            headwater_argv(args.python, hw_port, tmpdir / "headwater"),
            hw_port,
            tmpdir / "headwater.log",
            env=headwater_env(args.headwater_src),
        )
        rows: dict[tuple[str, int, int], Row] = {}
        try:
            with running([redis, headwater]):
                print(
                    f"redis-server pid {redis.pid} port {redis_port}; "
                    f"headwater pid {headwater.pid} port {hw_port}",
                    file=sys.stderr,
                )
                for clients in CLIENTS:
                    for pipeline in PIPELINES:
                        n = requests_for(args.requests, clients, pipeline)
                        for rep in range(args.repeat):
                            print(
                                f"clients={clients} pipeline={pipeline} -n {n} "
                                f"run {rep + 1}/{args.repeat}",
                                file=sys.stderr,
                            )
                            pair = run_pair(args, (redis, headwater), clients, pipeline, n)
                            for server, run in pair:
                                args.background.append(run.background)
                                for test in TEST_ORDER:
                                    key = (test, clients, pipeline)
                                    row = rows.setdefault(key, Row(test, clients, pipeline))
                                    row.add(server.name, run)
        except ServerStartError as exc:
            print(f"bench_core: {exc}", file=sys.stderr)
            return 2
        except (BenchmarkError, subprocess.TimeoutExpired) as exc:
            print(f"bench_core: {exc}", file=sys.stderr)
            for server in (redis, headwater):
                tail = server.log_tail()
                if tail:
                    print(tail, file=sys.stderr)
            return 3

    ordered = sorted(rows.values(), key=lambda r: (TEST_ORDER.index(r.test), r.clients, r.pipeline))
    print(text_table(ordered))
    print()
    print(summary(ordered))
    if args.markdown is not None:
        write_markdown(args.markdown, ordered, args, command)
        print(f"markdown written to {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
