"""The connector's door to the server: redis-py over RESP2, raw replies (``nodes.py`` picks
the server of each key in a Redis Cluster).

Why raw: redis-py's reply callbacks turn every XRANGE entry into a dict in Python, which costs
more than the read itself; the connector reads lists straight from hiredis and shapes them once
(into Arrow columns, see ``arrow.py``). Why RESP2: XINFO replies are flat pairs on every server
and redis-py version alike. Only commands that Redis 8.6+ and Headwater share are used: PING,
INFO, SCAN, XRANGE, XREVRANGE, XINFO STREAM, XGROUP CREATE/SETID, XADD IDMP, XCFGSET,
MULTI/EXEC, and in a cluster CLUSTER SLOTS and ASKING.

Connections are opened where they are used (driver methods, executor ``read``/``write``),
never pickled.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import hiredis
import redis
from redis.backoff import ExponentialBackoff
from redis.client import Pipeline
from redis.connection import Connection
from redis.retry import Retry

from headwater.spark.offsets import StreamId, exclusive, parse_id
from headwater.spark.options import OptionError

if TYPE_CHECKING:
    from headwater.spark.nodes import Nodes

#: Socket timeout for commands once connected (s): generous, a loaded server may be slow.
COMMAND_TIMEOUT = 120.0
#: A server that restarts (kill -9, failover) is waited for this long (s) before a driver call
#: or a task fails: reads are pure and appends carry IDMP pairs, so a retry is harmless.
RETRY_SECONDS = 30.0
_BACKOFF_CAP = 2.0
_RETRIES = 20  # 0.1, 0.2 ... 1.6, then 2 s: about RETRY_SECONDS in all
_RECOVERIES = 5  # reconnections per pipelined batch before the task gives up
#: The first Redis release with XADD IDMP (Headwater reports this version too).
IDMP_VERSION = (8, 6)


log = logging.getLogger("headwater.spark")

#: Errors after which a command may be sent again on a new connection.
RETRYABLE = (redis.ConnectionError, redis.TimeoutError, OSError)


class ServerUnavailable(ConnectionError):
    """The server at the ``url`` option cannot be reached (raised before the query starts)."""


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def open_client(url: str, connect_timeout: float, *, retry: bool = True) -> redis.Redis:
    """A client for ``url`` with reply callbacks removed (replies are raw RESP2 values) that
    retries through a server restart (``retry``), or fails at once, also when the server
    accepts connections but does not answer (the start-up check)."""
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise OptionError(f"option 'url' must be redis://, rediss:// or unix://, got {redact(url)}")
    try:
        client = redis.Redis.from_url(
            url,
            protocol=2,
            socket_connect_timeout=connect_timeout,
            socket_timeout=COMMAND_TIMEOUT if retry else connect_timeout,
            retry=Retry(ExponentialBackoff(_BACKOFF_CAP, 0.1), _RETRIES if retry else 0),
        )
    except ValueError as exc:
        raise OptionError(f"option 'url' is not a valid Redis URL ({exc}): {redact(url)}") from None
    client.response_callbacks.clear()
    return client


def check_server(url: str, connect_timeout: float, *, need_idmp: bool = False) -> None:
    """Fail now, with a clear message, if the server is unreachable (or lacks XADD IDMP)."""
    client = open_client(url, connect_timeout, retry=False)
    try:
        call(client, "PING")
        if need_idmp:
            _check_idmp(client, url)
    except redis.AuthenticationError as exc:
        raise ServerUnavailable(f"authentication failed at {redact(url)}: {exc}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise ServerUnavailable(
            f"cannot reach a Redis-protocol server at {redact(url)} within "
            f"{connect_timeout:g}s (option 'connectTimeout'): {exc}"
        ) from None
    finally:
        client.close()


def _check_idmp(client: redis.Redis, url: str) -> None:
    info = bytes(call(client, "INFO", "server")).decode(errors="replace")
    version = next(
        (
            line.split(":", 1)[1].strip()
            for line in info.splitlines()
            if line.startswith("redis_version:")
        ),
        "0",
    )
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if numbers < IDMP_VERSION:
        raise ServerUnavailable(
            f"the server at {redact(url)} reports redis_version {version}: idempotent writes "
            "(XADD IDMP) need Redis 8.6+ or Headwater; use option idempotence=none otherwise"
        )


def call(client: redis.Redis | Pipeline, *args: Any) -> Any:
    """``execute_command`` with a type (redis-py leaves it untyped); raw RESP2 reply."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class Redirect:
    """A ``MOVED``/``ASK`` reply: the command was not run; ``address`` would run it."""

    ask: bool
    slot: int
    address: str


def parse_redirect(message: str) -> Redirect | None:
    """``MOVED 3999 127.0.0.1:7002`` (or ASK) as a Redirect; None for any other error."""
    words = message.split()
    if len(words) != 3 or words[0] not in ("MOVED", "ASK") or not words[1].isdigit():
        return None
    return Redirect(words[0] == "ASK", int(words[1]), words[2])


class RawPipeline:
    """Pipelined commands with C packing and C reply parsing (hiredis), on a connection that
    redis-py opened (so AUTH, SELECT and TLS from the URL apply).

    redis-py's own pipeline costs ~15 us of Python per command (packing, reply dispatch), more
    than the server spends on an XADD. Here a batch is sent, and the previous batch's replies
    are read while the server works on it (two batches in flight at most: their replies fit in
    the socket buffers, so neither side can block the other). If the connection breaks, the
    batches in flight are sent again on a new one (for up to RETRY_SECONDS): with IDMP that is
    harmless, without it the rows that had arrived are appended twice (at-least-once).

    A ``MOVED``/``ASK`` reply (a Redis Cluster node that no longer owns the key) is not an
    error here: the command, which did not run, waits in ``redirected`` for the caller to send
    it where it belongs (``writer.Appender``); any other error reply raises.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        connection = client.connection_pool.get_connection()
        assert isinstance(connection, Connection)
        self.connection = connection
        self.reader = hiredis.Reader()
        self.in_flight: deque[tuple[Sequence[Sequence[Any]], bytes]] = deque()  # (batch, packed)
        self.redirected: list[tuple[Sequence[Any], Redirect]] = []

    def send(self, commands: Sequence[Sequence[Any]]) -> None:
        """Send a batch; wait for older batches so that at most two are in flight."""
        packed = b"".join(map(_pack, commands))
        self.in_flight.append((commands, packed))
        try:
            self._socket().sendall(packed)
        except RETRYABLE as exc:
            self._recover(exc)  # sends this batch too
        while len(self.in_flight) > 2:
            self.receive()

    def drain(self) -> None:
        while self.in_flight:
            self.receive()

    def receive(self) -> list[Any]:
        """Read the oldest batch's replies; raise its first error reply (but redirections)."""
        commands = self.in_flight[0][0]
        count = len(commands)
        for attempt in range(_RECOVERIES + 1):
            try:
                replies = self._read(count)
                break
            except RETRYABLE as exc:
                if attempt == _RECOVERIES:
                    raise
                self._recover(exc)
        self.in_flight.popleft()
        errors = []
        for command, reply in zip(commands, replies, strict=True):
            if isinstance(reply, hiredis.ReplyError):
                redirect = parse_redirect(str(reply))
                if redirect is None:
                    errors.append(reply)
                else:
                    self.redirected.append((command, redirect))
        if errors:
            raise redis.ResponseError(f"{len(errors)} of {count} commands failed: {errors[0]}")
        return replies

    def _read(self, count: int) -> list[Any]:
        replies: list[Any] = []
        while len(replies) < count:
            reply = self.reader.gets()
            if reply is False:
                data = self._socket().recv(1 << 17)
                if not data:
                    raise redis.ConnectionError("connection closed by the server")
                self.reader.feed(data)
            elif isinstance(reply, hiredis.ReplyError) and str(reply).startswith("LOADING"):
                raise redis.BusyLoadingError(str(reply))
            else:
                replies.append(reply)
        return replies

    def _recover(self, error: Exception) -> None:
        """Reconnect and send every batch in flight again, or raise after RETRY_SECONDS."""
        deadline, delay = time.monotonic() + RETRY_SECONDS, 0.1
        while True:
            log.warning("connection lost (%s): reconnecting in %.1fs", error, delay)
            time.sleep(delay)
            try:
                self.connection.disconnect()  # type: ignore[no-untyped-call]
                self.connection.connect()  # type: ignore[no-untyped-call]
                self.reader = hiredis.Reader()
                for _, packed in self.in_flight:
                    self._socket().sendall(packed)
                return
            except RETRYABLE as exc:
                if time.monotonic() + delay > deadline:
                    raise exc from error
                error, delay = exc, min(delay * 2, _BACKOFF_CAP)

    def _socket(self) -> socket.socket:
        sock = self.connection._sock  # redis-py's socket, after its handshake
        if sock is None:
            raise redis.ConnectionError("not connected")
        return sock

    def close(self) -> None:
        self.connection.disconnect()  # type: ignore[no-untyped-call]  # replies may be unread
        self.client.close()


def _pack(command: Sequence[Any]) -> bytes:
    return bytes(hiredis.pack_command(tuple(command)))


def to_id(raw: bytes) -> StreamId:
    return parse_id(raw.decode())


# -- stream state ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamState:
    """The parts of XINFO STREAM the connector uses."""

    length: int
    last_generated: StreamId
    max_deleted: StreamId
    entries_added: int
    first: StreamId | None  # the first live entry
    last: StreamId | None  # the last live entry
    idmp_maxsize: int | None  # None before Redis 8.6
    idmp_duration: int | None


def stream_keys(nodes: Nodes, explicit: Sequence[str], pattern: str | None) -> list[str]:
    """The keys to read: ``explicit`` ones, then (sorted) the streams matching ``pattern``
    (``SCAN ... MATCH pattern TYPE stream`` on every primary of a cluster). Keys that are not
    UTF-8 are skipped with a warning: options and offsets name keys as text."""
    keys = list(explicit)
    if pattern is None:
        return keys
    if nodes.clustered:
        nodes.refresh()  # a reshard may have brought in a new primary
    found: set[str] = set()
    for address in nodes.primaries():
        found.update(_scan_streams(nodes.client_at(address), pattern))
    return keys + sorted(found.difference(keys))


def _scan_streams(client: redis.Redis, pattern: str) -> Iterator[str]:
    cursor = b"0"
    while True:
        cursor, batch = call(
            client, "SCAN", cursor, "MATCH", pattern, "COUNT", 1000, "TYPE", "stream"
        )
        for raw in batch:
            try:
                yield bytes(raw).decode()
            except UnicodeDecodeError:
                log.warning("streamsPattern %r: skipping key %r (not UTF-8)", pattern, raw)
        if bytes(cursor) == b"0":
            return


def stream_states(nodes: Nodes, keys: Sequence[str]) -> dict[str, StreamState | None]:
    """XINFO STREAM for every key, one round trip per node; None for a missing key. A key
    that moved since the map was made is asked again where it went."""
    replies: dict[str, Any] = {}
    for address, group in nodes.split(((key,) for key in keys), key_at=0).items():
        pipe = nodes.client_at(address).pipeline(transaction=False)
        for (key,) in group:
            call(pipe, "XINFO", "STREAM", key)
        for (key,), reply in zip(group, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(reply, redis.exceptions.AskError):  # MOVED or ASK
                reply = _xinfo_or_error(nodes, key)
            replies[key] = reply
    return {key: _stream_state(key, replies[key]) for key in keys}


def _xinfo_or_error(nodes: Nodes, key: str) -> Any:
    try:
        return nodes.call(key, "XINFO", "STREAM", key)
    except redis.ResponseError as exc:
        return exc


def _stream_state(key: str, reply: Any) -> StreamState | None:
    if isinstance(reply, redis.ResponseError):
        if "no such key" in str(reply).lower():
            return None
        raise redis.ResponseError(f"XINFO STREAM {key}: {reply}")
    info = {bytes(reply[i]).decode(): reply[i + 1] for i in range(0, len(reply), 2)}
    zero = b"0-0"
    return StreamState(
        length=int(info["length"]),
        last_generated=to_id(info["last-generated-id"]),
        max_deleted=to_id(info.get("max-deleted-entry-id", zero)),
        entries_added=int(info.get("entries-added", -1)),
        first=to_id(info["first-entry"][0]) if info.get("first-entry") else None,
        last=to_id(info["last-entry"][0]) if info.get("last-entry") else None,
        idmp_maxsize=_optional_int(info.get("idmp-maxsize")),
        idmp_duration=_optional_int(info.get("idmp-duration")),
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def first_id_after(nodes: Nodes, key: str, after: StreamId) -> StreamId | None:
    """The first live entry ID strictly after ``after``."""
    reply = nodes.call(key, "XRANGE", key, exclusive(after), "+", "COUNT", 1)
    return to_id(reply[0][0]) if reply else None


def last_id_within(nodes: Nodes, key: str, after: StreamId, until: StreamId) -> StreamId | None:
    """The last live entry ID in ``(after, until]``."""
    reply = nodes.call(key, "XREVRANGE", key, str(until), exclusive(after), "COUNT", 1)
    return to_id(reply[0][0]) if reply else None
