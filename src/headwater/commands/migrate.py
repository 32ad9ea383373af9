"""MIGRATE (Redis 7.0's cluster.c migrateCommand): keys moved to another server as DUMP
payloads, one RESTORE (RESTORE-ASKING in cluster mode) each, pipelined; a key the target
acknowledged is deleted here, and the command propagates as DEL of those keys.

As in Redis, the transfer is synchronous: the node waits for the target (at most the
timeout for each read or write), on a connection kept for 10 seconds for the next MIGRATE to
the same address (64 at most).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from headwater.commands.args import parse_int
from headwater.commands.context import Client, spec
from headwater.commands.notify import lookup_read, notify
from headwater.errors import SYNTAX, ReplyError, err
from headwater.keyevents import GENERIC
from headwater.ops.change import Written, one_line
from headwater.ops.dump import dump_payload
from headwater.resp.types import OK, Raw, Reply

if TYPE_CHECKING:
    from collections.abc import Iterable

#: a cached connection unused this long is closed (Redis's MIGRATE_SOCKET_CACHE_TTL)
CACHE_TTL_MS = 10_000
CACHE_ITEMS = 64
_CHUNK = 64 * 1024

NOKEY = Raw(b"+NOKEY\r\n")


class MigrateIOError(Exception):
    def __init__(self, doing: str) -> None:
        super().__init__(doing)
        self.doing = doing


class Cached:
    """A connection to a target, and the database it has selected (-1: unknown)."""

    def __init__(self, sock: socket.socket, now_ms: int) -> None:
        self.sock = sock
        self.last_db = -1
        self.last_use_ms = now_ms
        self.pending = b""

    def read_line(self) -> bytes:
        while b"\r\n" not in self.pending:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("connection closed")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\r\n")
        return line


class MigrateSockets:
    """The connections MIGRATE keeps, by ``host:port``."""

    def __init__(self) -> None:
        self.cached: dict[str, Cached] = {}

    def get(self, host: str, port: int, timeout_s: float, now_ms: int) -> Cached:
        name = f"{host}:{port}"
        cached = self.cached.get(name)
        if cached is not None:
            cached.last_use_ms = now_ms
            return cached
        if len(self.cached) >= CACHE_ITEMS:
            self.close(next(iter(self.cached)))
        sock = socket.create_connection((host, port), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cached = self.cached[name] = Cached(sock, now_ms)
        return cached

    def close(self, name: str) -> None:
        cached = self.cached.pop(name, None)
        if cached is not None:
            cached.sock.close()

    def close_idle(self, now_ms: int) -> None:
        for name, cached in list(self.cached.items()):
            if now_ms - cached.last_use_ms > CACHE_TTL_MS:
                self.close(name)


def _atoi(raw: bytes) -> int:
    """C's atoi, as Redis reads MIGRATE's port: the leading digits, else 0."""
    text = raw.decode("latin-1").strip()
    sign = -1 if text.startswith("-") else 1
    digits = ""
    for char in text.lstrip("+-"):
        if not char.isdigit():
            break
        digits += char
    return sign * int(digits) if digits else 0


def _bulk(raw: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(raw), raw)


def _command(args: Iterable[bytes]) -> bytes:
    items = list(args)
    return b"*%d\r\n" % len(items) + b"".join(_bulk(a) for a in items)


class Options:
    def __init__(self) -> None:
        self.copy = False
        self.replace = False
        self.username: bytes | None = None
        self.password: bytes | None = None
        self.first_key = 3
        self.keys = 1


def parse_options(argv: list[bytes]) -> Options:
    opts = Options()
    at = 6
    while at < len(argv):
        word = argv[at].lower()
        more = len(argv) - 1 - at
        if word == b"copy":
            opts.copy = True
        elif word == b"replace":
            opts.replace = True
        elif word == b"auth":
            if not more:
                raise SYNTAX
            at += 1
            opts.password = argv[at]
        elif word == b"auth2":
            if more < 2:
                raise SYNTAX
            opts.username, opts.password = argv[at + 1], argv[at + 2]
            at += 2
        elif word == b"keys":
            if argv[3]:
                raise err(
                    "When using MIGRATE KEYS option, the key argument must be set to the "
                    "empty string"
                )
            opts.first_key, opts.keys = at + 1, len(argv) - at - 1
            break
        else:
            raise SYNTAX
        at += 1
    return opts


def cmd_migrate(c: Client, argv: list[bytes]) -> Reply | Written:
    """MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
    [AUTH2 username password] [KEYS key ...]"""
    opts = parse_options(argv)
    timeout_ms = parse_int(argv[5])
    db_index = parse_int(argv[4])
    if timeout_ms <= 0:
        timeout_ms = 1000
    found = [
        (key, value)
        for key in argv[opts.first_key : opts.first_key + opts.keys]
        if (value := lookup_read(c, key)) is not None
    ]
    if not found:
        return NOKEY
    host, port = argv[1].decode("latin-1"), _atoi(argv[2])
    try:
        return _transfer(c, host, port, db_index, timeout_ms, opts, found, retry=True)
    except MigrateIOError as exc:
        raise ReplyError("IOERR", f"error or timeout {exc.doing} to target instance") from None


def _transfer(
    c: Client,
    host: str,
    port: int,
    db_index: int,
    timeout_ms: int,
    opts: Options,
    found: list[tuple[bytes, object]],
    retry: bool,
) -> Reply | Written:
    server = c.server
    sockets: MigrateSockets = server.migrate_sockets
    now = int(server.clock.now_ms())
    try:
        target = sockets.get(host, port, timeout_ms / 1000, now)
    except TimeoutError:
        raise ReplyError("IOERR", "error or timeout connecting to the client") from None
    except OSError:
        # (Redis's connect only waits for the socket to be writable: a refused connection
        # fails at the first write)
        raise MigrateIOError("writing") from None
    target.sock.settimeout(timeout_ms / 1000)
    parts: list[bytes] = []
    if opts.password is not None:
        auth = [b"AUTH", opts.password] if opts.username is None else [b"AUTH", opts.username]
        if opts.username is not None:
            auth.append(opts.password)
        parts.append(_command(auth))
    select = target.last_db != db_index
    if select:
        parts.append(_command([b"SELECT", b"%d" % db_index]))
    restore = b"RESTORE-ASKING" if server.cluster is not None else b"RESTORE"
    moving: list[bytes] = []
    for key, value in found:
        ttl = c.db.ttl_ms(key)
        if ttl is not None and c.db.is_expired(key):
            continue  # (expired since it was looked up)
        line = [restore, key, b"%d" % (max(ttl, 1) if ttl is not None else 0)]
        line.append(dump_payload(value))
        if opts.replace:
            line.append(b"REPLACE")
        parts.append(_command(line))
        moving.append(key)
    name = f"{host}:{port}"
    payload = b"".join(parts)
    try:
        for at in range(0, len(payload), _CHUNK):
            target.sock.sendall(payload[at : at + _CHUNK])
    except OSError:
        sockets.close(name)
        if retry:
            return _transfer(c, host, port, db_index, timeout_ms, opts, found, retry=False)
        raise MigrateIOError("writing") from None
    return _replies(c, sockets, name, target, opts, select, moving, db_index)


def _replies(
    c: Client,
    sockets: MigrateSockets,
    name: str,
    target: Cached,
    opts: Options,
    select: bool,
    moving: list[bytes],
    db_index: int,
) -> Reply | Written:
    try:
        auth_reply = target.read_line() if opts.password is not None else b"+OK"
        select_reply = target.read_line() if select else b"+OK"
    except OSError:
        sockets.close(name)
        raise MigrateIOError("reading") from None
    error: ReplyError | None = None
    moved: list[bytes] = []
    socket_error = False
    for key in moving:
        try:
            reply = target.read_line()
        except OSError:
            socket_error = True
            break
        failed = next((r for r in (auth_reply, select_reply, reply) if r.startswith(b"-")), None)
        if failed is not None:
            if error is None:
                target.last_db = -1
                text = failed[1:].decode("utf-8", "surrogateescape")
                error = err(f"Target instance replied with error: {text}")
            continue
        if not opts.copy:
            c.db.delete(key)
            notify(c, GENERIC, b"del", key)
            moved.append(key)
    if socket_error:
        sockets.close(name)
    change = one_line(len(moved), [b"DEL", *moved]) if moved else None
    if socket_error and error is None:
        if change is not None:  # (what the target acknowledged is gone here: say so)
            lost = ReplyError("IOERR", "error or timeout reading to target instance")
            return Written(lost, change)
        raise MigrateIOError("reading")
    if error is None:
        target.last_db = db_index
    answer: Reply = OK if error is None else error
    return Written(answer, change) if change is not None else answer


SPECS = (spec("migrate", -6, "write movablekeys", (3, 3, 1), cmd_migrate),)
