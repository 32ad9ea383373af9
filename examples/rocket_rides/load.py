"""The demo's clients: N ``POST /rides`` over keep-alive HTTP connections, a few threads wide.

Distances come from the seed (1.00 to 1,000.00, whole cents), so a run can be repeated. A ``503``
(the API's database failed and rolled back) is retried; any other non-201 reply is an error,
except for the deliberately invalid requests of :func:`refused_requests`, which must get 422.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .money import format_cents

INVALID_BODIES = (
    b'{"distance": -5}',
    b'{"distance": "far"}',
    b'{"distance": 12.5, "pilot": "x"}',
    b"not json",
)


def distances(n: int, seed: int) -> list[int]:
    """N ride distances in cents, reproducible from the seed."""
    rng = random.Random(seed)
    return [rng.randint(100, 100_000) for _ in range(n)]


class Client:
    """One keep-alive connection per thread (http.client connections are not thread-safe)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def post(self, body: bytes) -> tuple[int, dict[str, object]]:
        for attempt in range(2):  # a dropped keep-alive connection is retried once
            conn = self._conn()
            try:
                conn.request("POST", "/rides", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                return resp.status, json.loads(resp.read() or b"{}")
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            self.local.conn = conn
        return conn

    def create_ride(self, cents: int) -> int:
        """POST one ride until it is stored (503 means rolled back: safe to retry)."""
        body = b'{"distance": ' + format_cents(cents).encode() + b"}"  # exact decimal text
        while True:
            status, reply = self.post(body)
            if status == 201:
                ride = reply["ride"]
                assert isinstance(ride, dict)
                return int(ride["id"])
            if status != 503:
                raise RuntimeError(f"POST /rides replied {status}: {reply}")


def refused_requests(port: int) -> int:
    """Send the invalid bodies; how many got 422 (each must, or the demo fails)."""
    client = Client(port)
    refused = 0
    for body in INVALID_BODIES:
        status, _ = client.post(body)
        refused += status == 422
    return refused


def drive(port: int, cents: list[int], threads: int, progress: Callable[[int], None]) -> int:
    """Create every ride, ``threads`` requests in flight; calls ``progress(i)`` per ride done."""
    client = Client(port)
    done = 0
    pool = ThreadPoolExecutor(threads, thread_name_prefix="rider")
    try:
        for _ in pool.map(client.create_ride, cents):
            done += 1
            progress(done)
    finally:
        pool.shutdown(cancel_futures=True)  # on Ctrl-C: drop the rides not yet sent
    return done
