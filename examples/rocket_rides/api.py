"""The Rocket Rides API: ``POST /rides {"distance": 456.7}`` on the stdlib's threading server.

A valid request becomes one database transaction that inserts the ride and its staged log record
(:func:`db.insert_ride`), so the log can never mention a ride that rolled back nor miss one that
committed; the streamer moves the record to Headwater later. The reply is ``201`` with the ride.
Anything else gets a JSON error and changes nothing: ``422`` for a body that is not
``{"distance": <number>}`` with 0.01 ≤ distance ≤ 1,000,000 (rounded half-even to the cent),
``404``/``405``/``411``/``413`` for the wrong URL, method or size, ``503`` if the database failed
(the transaction rolled back, so the client may retry).
"""

from __future__ import annotations

import json
import queue
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import db
from .money import to_cents

MAX_BODY = 64 * 1024
MAX_CENTS = 100_000_000  # 1,000,000.00: a jetpack's range, and far from integer overflow


class InvalidRide(ValueError):
    """A request body the API refuses with 422 (the message is the reply's error text)."""


def _reject_constant(name: str) -> Any:
    raise InvalidRide(f"{name} is not a distance")


def parse_ride(body: bytes) -> int:
    """The requested distance in cents, or InvalidRide. Numbers never pass through a float."""
    try:
        payload = json.loads(
            body, parse_float=Decimal, parse_int=Decimal, parse_constant=_reject_constant
        )
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, InvalidRide):
            raise
        raise InvalidRide("the body must be JSON") from None
    if not isinstance(payload, dict):
        raise InvalidRide('the body must be a JSON object like {"distance": 456.7}')
    unknown = sorted(set(payload) - {"distance"})
    if unknown:
        raise InvalidRide(f"unknown field: {unknown[0]}")
    if "distance" not in payload:
        raise InvalidRide("distance is required")
    distance = payload["distance"]
    if not isinstance(distance, Decimal):
        raise InvalidRide("distance must be a number")
    try:
        cents = to_cents(distance)
    except ValueError:
        cents = 0  # too large to be a distance; reported as out of range below
    if not 1 <= cents <= MAX_CENTS:
        raise InvalidRide("distance must be between 0.01 and 1000000")
    return cents


class RidesServer(ThreadingHTTPServer):
    """The HTTP server plus the database it writes to (a connection pool shared by threads)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], database: db.Database) -> None:
        super().__init__(address, RidesHandler)
        self.database = database
        self.pool: queue.LifoQueue[db.Connection] = queue.LifoQueue()
        # SQLite has one writer: queueing our own threads here is cheaper than its busy-wait.
        self.write_lock = threading.Lock() if not database.postgres else None

    def create_ride(self, cents: int) -> int:
        try:
            conn = self.pool.get_nowait()
        except queue.Empty:
            conn = self.database.connect()
        try:
            if self.write_lock is None:
                ride_id = db.insert_ride(conn, cents)
            else:
                with self.write_lock:
                    ride_id = db.insert_ride(conn, cents)
        except BaseException:
            conn.close()  # its state is unknown after a failure: never reuse it
            raise
        self.pool.put(conn)
        return ride_id

    def server_close(self) -> None:
        super().server_close()
        while not self.pool.empty():
            self.pool.get_nowait().close()


class RidesHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the load generator reuses its connections
    server: RidesServer

    def do_POST(self) -> None:
        if self.path != "/rides":
            self._reply(404, {"error": "not found"})
            return
        body = self._body()
        if body is None:
            return
        try:
            cents = parse_ride(body)
        except InvalidRide as exc:
            self._reply(422, {"error": str(exc)})
            return
        try:
            ride_id = self.server.create_ride(cents)
        except Exception as exc:
            if not db.is_transient(exc):
                raise
            self._reply(503, {"error": f"database unavailable: {exc}"})
            return
        self._reply(201, {"ride": {"id": ride_id, "distance": float(Decimal(cents) / 100)}})

    def do_GET(self) -> None:
        if self.path == "/health":
            self._reply(200, {"ok": True})
        else:
            self._reply(404 if self.path != "/rides" else 405, {"error": "not found"})

    def _body(self) -> bytes | None:
        """The request body, or None after replying 411/413 (and closing the connection)."""
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            self._reply(411, {"error": "Content-Length required"})
            return None
        if int(length) > MAX_BODY:
            self.close_connection = True
            self._reply(413, {"error": f"body larger than {MAX_BODY} bytes"})
            return None
        return self.rfile.read(int(length))

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: 10,000 access-log lines would bury the demo's output."""


def serve(database: db.Database, host: str = "127.0.0.1", port: int = 0) -> RidesServer:
    """A bound server (port 0: any free one); the caller runs ``serve_forever``."""
    return RidesServer((host, port), database)
