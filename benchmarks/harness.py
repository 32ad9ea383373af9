"""What every benchmark shares (bench.py's rows, bench_repl.py's, bench_spark.py): servers
started on free loopback ports in their own directories, the ``Harness`` a row is given, CPU
accounting, and the load clients (``redis-benchmark``, ``redis-cli --pipe``, and ``drive()``,
a load client built on hiredis).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import selectors
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hiredis
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "RESULTS.md"
HOST = "127.0.0.1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
#: Rows measured while other processes used more than this share of all CPUs are flagged.
NOISY = 0.10
#: A 16-byte field value for the bulk loads (memory, restarts).
VALUE16 = "0123456789abcdef"


class ServerStartError(RuntimeError):
    """A server process exited or never answered PING."""


class LoadError(RuntimeError):
    """redis-benchmark, redis-cli or the load client failed."""


class CheckError(RuntimeError):
    """A server's state after a run is not what the run must have left."""


# -- servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def answers_ping(port: int) -> bool:
    """True once the server answers PING (False while it refuses or answers -LOADING). One
    attempt: redis-py (6+) retries a refused connection by default, backing off up to a
    second, which added up to a second to the start of a server that binds its port only
    once its data is loaded (Headwater), against one that answers -LOADING (Redis)."""
    try:
        with redis.Redis(
            host=HOST, port=port, socket_timeout=2.0, retry=Retry(NoBackoff(), 0)
        ) as r:
            return bool(r.ping())
    except (redis.RedisError, OSError):
        return False


@dataclass
class ServerProcess:
    name: str
    argv: list[str]
    port: int
    log_path: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self, poll: float = 0.05) -> float:
        """Spawn the server; seconds from the spawn until it answers PING (polled every
        ``poll`` seconds: Redis answers -LOADING until its data is loaded)."""
        started = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not answers_ping(self.port):
            if self.proc.poll() is not None:
                raise ServerStartError(
                    f"{self.name} exited with status {self.proc.returncode}\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ServerStartError(f"{self.name} did not answer PING\n{self.log_tail()}")
            time.sleep(poll)
        return time.perf_counter() - started

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(f"  {self.name}| {line}" for line in text.splitlines()[-lines:])

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.name} is not running")
        return self.proc.pid

    def cpu_ticks(self) -> int:
        """User + system CPU time of the server so far, in clock ticks (0 if unknown)."""
        if self.proc is None:
            return 0
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return 0
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)"
        return int(fields[11]) + int(fields[12])

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line")

    def client(self, timeout: float | None = 600.0) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, socket_timeout=timeout)

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.proc = None


def redis_argv(redis_server: str, port: int, data_dir: Path, *extra: str) -> list[str]:
    return [
        redis_server, "--port", str(port), "--bind", HOST, "--save", "",
        "--appendonly", "no", "--dir", str(data_dir), *extra,
    ]  # fmt: skip


def headwater_argv(python: str, port: int, data_dir: Path, *extra: str) -> list[str]:
    return [
        python, "-m", "headwater.cli", "server", "--port", str(port), "--save", "",
        "--appendonly", "no", "--dir", str(data_dir), *extra,
    ]  # fmt: skip


#: Extra options for an append-only server: no rewrite, so each AOF stays one incremental
#: file, and for Redis no RDB preamble, so that both replay pure AOF.
def aof_options(fsync: str) -> tuple[str, ...]:
    return ("--appendonly", "yes", "--appendfsync", fsync, "--auto-aof-rewrite-percentage", "0")


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


@dataclass
class Harness:
    """What every row needs: the options, a scratch directory, and how to make servers."""

    args: argparse.Namespace
    tmp: Path
    details: list[str] = field(default_factory=list)
    _started: dict[str, tuple[ServerProcess, ServerProcess]] = field(default_factory=dict)
    #: servers rows started themselves (``adopt``)
    _own: list[ServerProcess] = field(default_factory=list)

    def make_pair(
        self, label: str, aof: str | None = None, extra: tuple[str, ...] = ()
    ) -> tuple[ServerProcess, ServerProcess]:
        """A (redis, headwater) pair in fresh directories, not started; ``aof`` is an
        ``appendfsync`` mode for append-only servers; ``extra``: options for both."""
        redis_extra = (*aof_options(aof), "--aof-use-rdb-preamble", "no") if aof else ()
        hw_extra = aof_options(aof) if aof else ()
        redis_extra, hw_extra = (*redis_extra, *extra), (*hw_extra, *extra)
        pair = []
        for name in ("redis", "headwater"):
            data = self.tmp / f"{label}-{name}"
            data.mkdir(parents=True, exist_ok=True)
            port = free_port()
            if name == "redis":
                argv = redis_argv(self.args.redis_server, port, data, *redis_extra)
                env = None
            else:
                argv = headwater_argv(self.args.python, port, data, *hw_extra)
                # As the README advises for Headwater: large blocks stay in the heap.
                env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
            pair.append(ServerProcess(name, argv, port, self.tmp / f"{label}-{name}.log", env))
        return pair[0], pair[1]

    def pair(
        self, label: str, aof: str | None = None, extra: tuple[str, ...] = ()
    ) -> tuple[ServerProcess, ServerProcess]:
        """A started pair, shared by every row that asks for the same label."""
        if label not in self._started:
            servers = self.make_pair(label, aof, extra)
            self._started[label] = servers
            for server in servers:
                server.start()
        return self._started[label]

    def adopt(self, label: str, server: ServerProcess) -> None:
        """A server a row started itself, stopped with the rest."""
        self._own.append(server)

    def stop_all(self) -> None:
        for servers in [*self._started.values(), self._own]:
            for server in servers:
                server.stop()
        self._started.clear()
        self._own.clear()

    def note(self, text: str) -> None:
        print(f"  {text}", flush=True)
        self.details.append(text)

    def n(self, full: int) -> int:
        """Request count for a row: ``full``, a tenth with --quick, times --scale."""
        base = full // 10 if self.args.quick else full
        return max(int(base * self.args.scale), 100)


# -- CPU accounting ------------------------------------------------------------------------


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs, from /proc/stat; (0, 0) where unavailable."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def own_ticks() -> float:
    """CPU time of this process and its reaped children (redis-benchmark), in ticks."""
    times = os.times()
    return (times.user + times.system + times.children_user + times.children_system) * (CLOCK_TICKS)


@dataclass
class Sample:
    value: float
    #: share of all CPUs that processes other than ours took meanwhile
    background: float


def measured(server: ServerProcess, work: Callable[[], float]) -> Sample:
    """Run ``work`` (which returns the figure) and measure the CPU others took meanwhile."""
    busy0, total0 = cpu_times()
    ours0 = server.cpu_ticks() + own_ticks()
    value = work()
    busy1, total1 = cpu_times()
    ours = server.cpu_ticks() + own_ticks() - ours0
    total = total1 - total0
    return Sample(value, max(busy1 - busy0 - ours, 0.0) / total if total > 0 else 0.0)


# -- load: redis-benchmark, redis-cli --pipe, the hiredis load client -----------------------


def redis_benchmark(
    h: Harness,
    port: int,
    command: Sequence[str],
    *,
    clients: int,
    n: int,
    pipeline: int = 1,
    cpus: str | None = None,
    user: tuple[str, str] | None = None,
    tls: Sequence[str] = (),
    options: Sequence[str] = (),
) -> float:
    """Requests per second of one redis-benchmark run of ``command`` (pinned to ``cpus``, a
    taskset CPU list, if given; logged in as ``user``, a (name, password) pair, if given;
    ``tls``: redis-benchmark's TLS options, ``port`` being a TLS port; ``options``: any
    other of its options, such as ``-3 --enable-tracking``)."""
    login = ["--user", user[0], "-a", user[1]] if user is not None else []
    argv = [
        h.args.redis_benchmark, "-h", HOST, "-p", str(port), "-c", str(clients),
        "-n", str(n), "-P", str(pipeline), "-r", str(h.args.keyspace), *login, *tls, *options,
        "--csv", *command,
    ]  # fmt: skip
    if cpus is not None:
        argv = ["taskset", "-c", cpus, *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise LoadError(f"{shlex.join(argv)}: status {done.returncode}\n{done.stderr}")
    rows = [r for r in csv.reader(done.stdout.splitlines()) if r]
    if len(rows) < 2 or rows[0][:2] != ["test", "rps"]:
        raise LoadError(f"{shlex.join(argv)} printed:\n{done.stdout}{done.stderr}")
    return float(rows[1][1])


def pipe_load(port: int, command: Sequence[str], count: int, chunk: int = 10_000) -> float:
    """Send ``command`` ``count`` times through ``redis-cli --pipe``; returns seconds."""
    payload = hiredis.pack_command(tuple(command))
    return pipe_chunks(
        port, (payload * min(chunk, count - start) for start in range(0, count, chunk))
    )


def pipe_chunks(port: int, chunks: Iterable[bytes]) -> float:
    """Send the commands (RESP, in chunks) through ``redis-cli --pipe``; returns seconds."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        ["redis-cli", "-h", HOST, "-p", str(port), "--pipe"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    for data in chunks:
        proc.stdin.write(data)
    proc.stdin.close()
    output = proc.stdout.read().decode(errors="replace")
    if proc.wait() != 0 or "errors: 0," not in output:
        raise LoadError(f"redis-cli --pipe: {output}")
    return time.perf_counter() - started


def pack_all(commands: Sequence[Sequence[str | bytes]]) -> list[bytes]:
    return [hiredis.pack_command(tuple(c)) for c in commands]


def drive(
    port: int, payloads: Sequence[bytes], clients: int, expect: Any, setup: Sequence[bytes] = ()
) -> float:
    """Send every payload, ``clients`` connections with one request in flight each, and
    return requests per second; every reply must equal ``expect`` (None: any non-error).
    ``setup``: commands each connection sends first (untimed; HELLO 3, CLIENT TRACKING)."""
    selector = selectors.DefaultSelector()
    readers: dict[socket.socket, Any] = {}
    for _ in range(min(clients, len(payloads))):
        sock = socket.create_connection((HOST, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        readers[sock] = hiredis.Reader()
        for command in setup:
            sock.sendall(command)
            reply = _one_reply(sock, readers[sock])
            if isinstance(reply, hiredis.ReplyError):
                raise LoadError(f"setup {command!r}: {reply}")
        selector.register(sock, selectors.EVENT_READ)
    next_payload, answered = 0, 0
    started = time.perf_counter()
    try:
        for sock in readers:
            sock.sendall(payloads[next_payload])
            next_payload += 1
        while answered < len(payloads):
            for key, _ in selector.select():
                ready = key.fileobj
                assert isinstance(ready, socket.socket)
                reader = readers[ready]
                data = ready.recv(65536)
                if not data:
                    raise LoadError("the server closed a connection")
                reader.feed(data)
                while (reply := reader.gets()) is not False:
                    check_reply(reply, expect)
                    answered += 1
                    if next_payload < len(payloads):
                        ready.sendall(payloads[next_payload])
                        next_payload += 1
        return len(payloads) / (time.perf_counter() - started)
    finally:
        for sock in readers:
            sock.close()
        selector.close()


def _one_reply(sock: socket.socket, reader: Any) -> Any:
    while (reply := reader.gets()) is False:
        data = sock.recv(65536)
        if not data:
            raise LoadError("the server closed a connection")
        reader.feed(data)
    return reply


def check_reply(reply: Any, expect: Any) -> None:
    if isinstance(reply, hiredis.ReplyError) or (expect is not None and reply != expect):
        raise LoadError(f"reply {reply!r}, expected {expect!r}")


# -- helpers the rows share -----------------------------------------------------------------


def expect_len(server: ServerProcess, key: str, length: int) -> None:
    got = server.client().xlen(key)
    if got != length:
        raise CheckError(f"{server.name}: XLEN {key} = {got}, expected {length}")


def fill_numbered(server: ServerProcess, key: str, entries: int, batch: int = 10_000) -> None:
    """``key`` holds exactly the entries 1-0 .. entries-0 (one 16-byte field each)."""
    client = server.client()
    client.delete(key)
    for start in range(1, entries + 1, batch):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + batch, entries + 1)):
            pipe.xadd(key, {"f": VALUE16}, id=f"{i}-0")
        pipe.execute()
    expect_len(server, key, entries)


def compile_headwater(python: str) -> None:
    """Byte-compile Headwater's modules, as in an installed package (with
    PYTHONDONTWRITEBYTECODE a source checkout is compiled again at every start)."""
    code = "import headwater, os; print(os.path.dirname(headwater.__file__))"
    where = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    subprocess.run([python, "-m", "compileall", "-q", where.stdout.strip()], check=False)
