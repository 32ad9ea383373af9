"""Test helpers: spawn servers, and a raw RESP client that returns reply bytes untouched."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import hiredis

ROOT = Path(__file__).resolve().parent.parent
HEADWATER = [sys.executable, "-m", "headwater.cli"]


#: Each pytest-xdist worker takes its ports from its own slice below the kernel's ephemeral
#: range (32768+). Ports the kernel hands out for bind(0) could be handed to two workers at
#: once: the second server then fails to bind, and its test, seeing the port answer, talked to
#: the first test's server (seen under load: an AOF with the other test's writes).
PORT_SLICE = 2000
PORT_BASE = 12000


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


#: (from a random place in the slice: two test runs at once on one machine do not march in step)
_next_port = PORT_BASE + (_worker_index() % 10) * PORT_SLICE + random.randrange(PORT_SLICE)


def free_port() -> int:
    """A port nothing listens on, from this worker's slice (tried by binding it)."""
    global _next_port
    start = PORT_BASE + (_worker_index() % 10) * PORT_SLICE
    for _ in range(PORT_SLICE):
        port = _next_port
        _next_port = start + (port + 1 - start) % PORT_SLICE
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {start}..{start + PORT_SLICE - 1}")


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Until the server answers on ``port`` and has loaded its data (a load that lasts
    answers -LOADING meanwhile, as Redis does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"server exited with {proc.returncode}: {out}")
        if loaded(port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"server did not listen on {port} within {timeout}s")


def loaded(port: int) -> bool:
    """The server on ``port`` accepts connections and is not loading (False meanwhile)."""
    try:
        with socket.create_connection(("127.0.0.1", port), 0.2) as sock:
            sock.settimeout(10)
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    return not reply.startswith(b"-LOADING")


class ServerProcess:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, workdir: str) -> None:
        self.proc = proc
        self.port = port
        self.workdir = workdir

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_headwater(*args: str, port: int | None = None) -> ServerProcess:
    port = port or free_port()
    workdir = tempfile.mkdtemp(prefix="hw-")
    cmd = [*HEADWATER, "server", "--port", str(port), "--dir", workdir, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    wait_for_port(port, proc)
    return ServerProcess(proc, port, workdir)


def start_redis(*args: str) -> ServerProcess:
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed (make test installs it)")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="redis-")
    cmd = [
        exe,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        workdir,
        "--enable-debug-command",
        "yes",
        *args,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_for_port(port, proc)
    return ServerProcess(proc, port, workdir)


def encode_command(*args: bytes | str | int) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(parts)


def bulk_load(port: int, command: bytes, count: int) -> None:
    """Send ``command`` (RESP) ``count`` times in one stream, from a thread, while reading
    the replies here (as ``redis-cli --pipe`` does); raises on an error reply."""
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sender = threading.Thread(target=sock.sendall, args=(command * count,))
        sender.start()
        replies, got = hiredis.Reader(), 0
        while got < count:
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError(f"closed after {got} of {count} replies")
            replies.feed(data)
            while (reply := replies.gets()) is not False:
                if isinstance(reply, hiredis.ReplyError):
                    raise reply
                got += 1
        sender.join()
    finally:
        sock.close()


class RawClient:
    """A blocking socket that sends commands and returns each reply's exact bytes."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args: bytes | str | int) -> bytes:
        self.sock.sendall(encode_command(*args))
        return self.read_reply()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk

    def _line(self, pos: int) -> int:
        while True:
            end = self.buf.find(b"\r\n", pos)
            if end >= 0:
                return end
            self._fill()

    def _skip(self, pos: int) -> int:
        """Index just after the reply starting at pos."""
        end = self._line(pos)
        kind, head = self.buf[pos : pos + 1], self.buf[pos + 1 : end]
        pos = end + 2
        if kind in b"$=!" and head != b"-1" and head != b"?":
            size = int(head)
            while len(self.buf) < pos + size + 2:
                self._fill()
            return pos + size + 2
        if kind in b"*~>" and head not in (b"-1",):
            for _ in range(int(head)):
                pos = self._skip(pos)
            return pos
        if kind in b"%|":
            for _ in range(2 * int(head)):
                pos = self._skip(pos)
            return pos
        return pos

    def read_reply(self) -> bytes:
        if not self.buf:
            self._fill()
        end = self._skip(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply

    def read_until_closed(self, timeout: float = 5.0) -> bytes:
        self.sock.settimeout(timeout)
        data = self.buf
        self.buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                return data
            if not chunk:
                return data
            data += chunk


@contextlib.contextmanager
def raw_client(port: int) -> Iterator[RawClient]:
    client = RawClient(port)
    try:
        yield client
    finally:
        client.close()


def redis_available() -> bool:
    return shutil.which("redis-server") is not None and os.environ.get("HW_NO_REDIS") != "1"


class ReplicationStream:
    """What a replica reads (``redis-cli --replica`` style): ``SYNC``, the snapshot skipped,
    then the stream's commands, each as its words."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), 10)
        self.sock.sendall(b"SYNC\r\n")
        self.buf = b""
        size = self._payload_size()
        while len(self.buf) < size:
            self._fill()
        self.buf = self.buf[size:]

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk

    def _payload_size(self) -> int:
        """The snapshot's ``$<size>`` line (after the newlines a primary sends while it
        prepares it)."""
        while True:
            while b"\r\n" not in self.buf.lstrip(b"\n"):
                self._fill()
            line, _, self.buf = self.buf.lstrip(b"\n").partition(b"\r\n")
            if not line.startswith(b"$"):
                raise ValueError(f"not a snapshot's size: {line!r}")
            return int(line[1:])

    def commands(self, quiet_s: float = 0.3) -> list[list[bytes]]:
        """The commands the stream brought until it stayed quiet for ``quiet_s``."""
        self.sock.settimeout(quiet_s)
        with contextlib.suppress(TimeoutError):
            while True:
                self._fill()
        reader = hiredis.Reader()
        reader.feed(self.buf)
        self.buf = b""
        out: list[list[bytes]] = []
        while (command := reader.gets()) is not False:
            out.append(command)
        return out

    def close(self) -> None:
        self.sock.close()
