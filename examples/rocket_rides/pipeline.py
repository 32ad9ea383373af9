"""The demo's processes: one Headwater server and the workers, started and always stopped.

Every child gets its own session (process group), so Ctrl-C in the terminal reaches only the
demo, which then stops the children in order; once a child has exited, its group is killed too,
which ends anything it left behind (a Spark worker's JVM). Output: ``<run dir>/logs/<name>.log``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from .status import read_counters

PACKAGE_PARENT = Path(__file__).resolve().parent.parent  # examples/: makes rocket_rides importable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def headwater_command() -> list[str]:
    """The ``headwater`` script next to this Python (the venv's), else ``python -m``."""
    script = Path(sys.executable).parent / "headwater"
    return [str(script)] if script.exists() else [sys.executable, "-m", "headwater.cli"]


class Pipeline:
    """Owns the child processes of one demo run; a context manager that stops them all."""

    def __init__(self, run_dir: Path, database_url: str, seed: int, faults: bool) -> None:
        self.run_dir = run_dir
        self.database_url = database_url
        self.seed = seed
        self.faults = faults
        self.logs = run_dir / "logs"
        self.status_dir = run_dir / "status"
        self.server_dir = run_dir / "headwater"
        for d in (self.logs, self.status_dir, self.server_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.server: subprocess.Popen[bytes] | None = None
        self.server_port = 0
        self.api_port = free_port()
        self.workers: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.server_port}/0"

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- Headwater ------------------------------------------------------------------------

    def start_server(self, port: int) -> None:
        """``headwater server --port P --dir <run>/headwater``: appendonly yes by default."""
        self.server_port = port
        cmd = [*headwater_command(), "server", "--port", str(port), "--dir", str(self.server_dir)]
        self.server = self._spawn("headwater", cmd)
        self._wait_for_port(port, self.server, timeout=60)

    def kill_server(self) -> None:
        """SIGKILL: no shutdown hook runs, only what reached the AOF survives."""
        assert self.server is not None
        self.server.kill()
        self.server.wait()

    def restart_server(self) -> None:
        self.start_server(self.server_port)

    # -- workers --------------------------------------------------------------------------

    def start_worker(self, role: str, name: str, *extra: str, stdin: bool = False) -> None:
        cmd = [
            sys.executable, "-m", "rocket_rides.workers", role,
            "--name", name,
            "--database", self.database_url,
            "--redis-url", self.redis_url,
            "--status-dir", str(self.status_dir),
            "--seed", str(self.seed),
            "--faults" if self.faults else "--no-faults",
            *extra,
        ]  # fmt: skip
        self.workers[name] = self._spawn(name, cmd, stdin=stdin)

    def wait_ready(self, names: list[str], timeout: float, counter: str = "ready") -> None:
        """Until each named worker's status shows ``counter`` (workers must stay alive)."""
        deadline = time.monotonic() + timeout
        while True:
            counters = read_counters(self.status_dir)
            if all(counters.get(n, {}).get(counter) for n in names):
                return
            self.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers not ready after {timeout:.0f}s: {names}")
            time.sleep(0.1)

    def send_command(self, name: str, line: str) -> None:
        stdin = self.workers[name].stdin
        assert stdin is not None
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def check_alive(self, allow_exit: tuple[str, ...] = ()) -> None:
        """Raise with the log's tail if a worker (or Headwater) died on its own."""
        procs = dict(self.workers)
        if self.server is not None:
            procs["headwater"] = self.server
        for name, proc in procs.items():
            code = proc.poll()
            if code is not None and not (name in allow_exit and code == 0):
                raise RuntimeError(f"{name} exited with status {code}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    # -- plumbing -------------------------------------------------------------------------

    def _spawn(self, name: str, cmd: list[str], stdin: bool = False) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PACKAGE_PARENT), env.get("PYTHONPATH", "")) if p
        )
        with open(self.logs / f"{name}.log", "ab") as log:
            return subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def _wait_for_port(self, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"headwater exited:\n{self.log_tail('headwater')}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return
            time.sleep(0.05)
        raise TimeoutError(f"headwater did not listen on {port} within {timeout:.0f}s")

    def stop(self) -> None:
        """Workers first, then Headwater: SIGTERM to each process (it shuts down what it runs,
        a Spark worker its JVM), then SIGKILL to whatever is left in its group. A second
        Ctrl-C waits until this is done (signals are blocked meanwhile, then delivered)."""
        with _signals_blocked():
            self._stop()

    def _stop(self) -> None:
        for proc in self.workers.values():
            _terminate(proc)
        for proc in self.workers.values():
            _reap(proc, grace=30)
        self.workers.clear()
        if self.server is not None:
            _terminate(self.server)
            _reap(self.server, grace=15)
            self.server = None


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    signals = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Signal the child's process group, unless the child was already reaped (its id may be
    someone else's by now)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)


def _reap(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Wait up to ``grace`` seconds for the process to exit, then SIGKILL its whole group.

    The group is killed while the child is still an unreaped zombie: its pid (the group id)
    cannot be reused yet, so the signal reaches only what it started (the Spark worker's JVM).
    """
    deadline = time.monotonic() + grace
    while proc.returncode is None and not _is_zombie(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal_group(proc, signal.SIGKILL)
    proc.wait()
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def _is_zombie(pid: int) -> bool:
    """Exited but not yet waited for (Linux /proc; elsewhere never, so the grace runs out)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] == "Z"
