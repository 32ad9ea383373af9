"""Load and measuring tools of the replication rows (issue 17), used by ``bench.py``.

- ``LinkProxy``: a TCP proxy between a replica and its primary that can cut the link for a
  while (it drops the connections and refuses new ones), and counts the bytes it carried from
  the primary, so a row can tell a partial resync (the backlog) from a full one.
- ``paced_xadd``: XADDs at a fixed rate (in small pipelined bursts over a few connections),
  for load that is sustained rather than flat out.
- ``LagProbe``: a probe entry written to the primary every 20 ms and read on the replica with
  ``XREAD BLOCK``: the lag of each is the time from the primary's reply to the replica's read.

Every client is hiredis's reader and request encoder around plain sockets (no RESP written by
hand), as in ``bench.py``'s ``drive``.
"""

from __future__ import annotations

import selectors
import socket
import statistics
import threading
import time
from typing import Any

import hiredis

HOST = "127.0.0.1"
VALUE16 = "v" * 16


class LinkProxy:
    """Listens on ``port`` (a free one) and forwards each connection to ``target_port``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server((HOST, 0))
        self.port: int = self.listener.getsockname()[1]
        self.refusing_until = 0.0
        self.downstream_bytes = 0  # from the primary to the replica
        self.connections: list[tuple[socket.socket, socket.socket]] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self.refusing_until:
                client.close()
                continue
            try:
                upstream = socket.create_connection((HOST, self.target_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, downstream: bool) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
                if downstream:
                    with self.lock:
                        self.downstream_bytes += len(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, seconds: float) -> None:
        """Drop every connection now and refuse new ones for ``seconds``."""
        self.refusing_until = time.monotonic() + seconds
        with self.lock:
            pairs, self.connections = self.connections, []
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self.closed = True
        self.cut(0)
        self.listener.close()


def paced_xadd(port: int, key: str, rate: float, seconds: float, connections: int = 4) -> int:
    """XADD ``key`` at ``rate`` per second for ``seconds``, in bursts every 5 ms spread over
    ``connections``; waits for every reply (an error reply raises) and returns the count."""
    payload = hiredis.pack_command(("XADD", key, "*", "f", VALUE16))
    socks = [socket.create_connection((HOST, port)) for _ in range(connections)]
    readers = {sock: hiredis.Reader() for sock in socks}
    selector = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    sent = answered = turn = 0
    started = time.monotonic()
    try:
        while True:
            elapsed = time.monotonic() - started
            due = min(int(rate * elapsed), int(rate * seconds)) - sent
            if due > 0:
                sock = socks[turn % connections]
                turn += 1
                sock.setblocking(True)
                sock.sendall(payload * due)
                sock.setblocking(False)
                sent += due
            answered += _read_replies(selector, readers, 0.005)
            if elapsed >= seconds and answered >= sent:
                return sent
    finally:
        selector.close()
        for sock in socks:
            sock.close()


def _read_replies(
    selector: selectors.BaseSelector, readers: dict[socket.socket, Any], timeout: float
) -> int:
    count = 0
    for key, _ in selector.select(timeout):
        sock = key.fileobj
        assert isinstance(sock, socket.socket)
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            continue
        if not data:
            raise ConnectionError("the server closed a load connection")
        reader = readers[sock]
        reader.feed(data)
        while (reply := reader.gets()) is not False:
            if isinstance(reply, hiredis.ReplyError):
                raise RuntimeError(f"load client got {reply}")
            count += 1
    return count


class LagProbe:
    """Writes ``probe`` entries on the primary every ``interval`` s; reads them on the replica."""

    def __init__(self, primary_port: int, replica_port: int, key: str = "bench:probe") -> None:
        self.primary_port, self.replica_port, self.key = primary_port, replica_port, key
        self.acked: dict[bytes, float] = {}
        self.lags_ms: list[float] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._write, daemon=True),
            threading.Thread(target=self._read, daemon=True),
        ]

    def __enter__(self) -> LagProbe:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=5)

    def _write(self, interval: float = 0.02) -> None:
        with _Connection(self.primary_port) as conn:
            while not self.stop.is_set():
                entry_id = conn.call("XADD", self.key, "*", "t", "1")
                self.acked[entry_id] = time.monotonic()
                time.sleep(interval)

    def _read(self) -> None:
        last = "$"
        with _Connection(self.replica_port) as conn:
            while not self.stop.is_set():
                reply = conn.call("XREAD", "BLOCK", "200", "STREAMS", self.key, last)
                seen = time.monotonic()
                if not reply:
                    continue
                for entry_id, _ in reply[0][1]:
                    acked = self.acked.get(entry_id)
                    # (read before its writer saw the reply: no lag to count)
                    self.lags_ms.append(max(seen - acked, 0.0) * 1e3 if acked else 0.0)
                    last = entry_id.decode()

    def summary(self) -> dict[str, float]:
        lags = sorted(self.lags_ms)
        if not lags:
            return {"probes": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
        return {"probes": len(lags), "p50": statistics.median(lags), "p99": p99, "max": lags[-1]}


class _Connection:
    """One blocking request/reply connection (hiredis encoder and reader)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port))
        self.reader = hiredis.Reader()

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def call(self, *argv: str) -> Any:
        self.sock.sendall(hiredis.pack_command(argv))
        while (reply := self.reader.gets()) is False:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the probe's connection")
            self.reader.feed(data)
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"probe got {reply}")
        return reply
