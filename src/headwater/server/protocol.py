"""One client connection: bytes in → parser → engine; engine output → one write per loop turn.

Theory of operation
-------------------
``data_received`` feeds the parser and runs every complete command through the engine. The
engine encodes replies into ``client.out`` and marks the client pending; the ``Server`` flushes
all pending clients in one callback per event-loop iteration, so a pipeline of N commands (or N
clients served in one iteration) costs one ``transport.write`` each, not one per reply.

Flow control: when the transport's write buffer passes its high-water mark (a client that does
not read), we stop reading *and* stop executing its already-parsed commands, so the reply
backlog cannot grow without bound. Within one batch, once ``FLUSH_EARLY`` bytes of replies have
piled up in ``client.out`` they are written at once, so the transport can tell us to pause
before the rest of the batch runs (2,000 pipelined GETs of a 1 MB value must not make 2 GB of
replies in one turn). And a read that made ``FLUSH_REPLIES`` replies or more ends with the
server's flush (AOF, replicas, replies), not just the loop turn: libuv reads a busy socket up to
32 times a turn, 256 KB each, and a bulk load (``redis-cli --pipe``) then held the replies of
8 MB of commands, ~170,000 small objects, whose pymalloc pools stayed with the process after
the peak (issue 37: 120 B of RSS an entry where the data takes 54).
``client-output-buffer-limit normal <hard> <soft> <secs>`` additionally disconnects such a
client, as Redis does: checked after each write and, for a client past the soft limit (which,
paused, gets no more writes), from the cron.

The client's ``ReplyGate`` (commands/gate.py), made here and held by the client from its
construction, is the whole line to the engine: while the client is blocked (XREAD BLOCK …) or
paused by flow control its remaining pipelined commands wait in the parser, and ``resume``
picks them up once the engine ends the wait; its replies leave only when the gate's
``may_reply`` (the durability policy) allows it.

Clients that have not authenticated (``requirepass``) get far less: besides the parser's request
limits, their unsent replies may not pass ``UNAUTH_OUTPUT_LIMIT`` (Redis's CVE-2025-21605 fix),
or the connection is dropped at once, whatever ``client-output-buffer-limit`` says; otherwise
100 connections pipelining commands they never read the ``-NOAUTH`` of pin gigabytes. Redis reads
16 KB at a time and writes the replies between reads, so the limit judges the replies of each 16
KB of input; we cut what such a client sends into ``READ_SIZE`` slices to judge it the same way.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from headwater.commands.context import Client, PendingReplies
from headwater.commands.gate import ReplyGate
from headwater.resp.parser import RequestError, RequestParser
from headwater.server.querybuf import note_held, note_read

if TYPE_CHECKING:
    from headwater.server.hosts import ConnectionHost

log = logging.getLogger("headwater")

#: Stop reading from a client whose unsent replies exceed this (bytes).
WRITE_HIGH_WATER = 4 * 1024 * 1024
#: Write a client's replies mid-batch once this many bytes are waiting in ``client.out``.
FLUSH_EARLY = 1024 * 1024
#: Replies one read may make before the server flushes at its end (see the module docstring).
FLUSH_REPLIES = 256
#: Unsent replies an unauthenticated client may have. Redis closes it once its output needs more
#: than 1 KB beyond the 16 KB reply buffer every client has, and anything past that buffer takes
#: a block of at least 16 KB: in effect, unsent replies over 16 KB close it.
UNAUTH_OUTPUT_LIMIT = 16 * 1024
#: Redis's read size (PROTO_IOBUF_LEN): an unauthenticated client's input is run in slices of it.
READ_SIZE = 16 * 1024


#: what a client from another host gets from a server without a password in protected mode
#: (Redis's text, typos included: clients and scripts match on it)
PROTECTED_MODE_DENIED = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no "
    b"password is set for the default user. In this mode connections are only accepted from "
    b"the loopback interface. If you want to connect from external computers to Redis you "
    b"may adopt one of the following solutions: 1) Just disable protected mode sending the "
    b"command 'CONFIG SET protected-mode no' from the loopback interface by connecting to "
    b"Redis from the same host the server is running, however MAKE SURE Redis is not "
    b"publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change "
    b"permanent. 2) Alternatively you can just disable the protected mode by editing the "
    b"Redis configuration file, and setting the protected mode option to 'no', and then "
    b"restarting the server. 3) If you started the server manually just for testing, restart "
    b"it with the '--protected-mode no' option. 4) Setup a an authentication password for the "
    b"default user. NOTE: You only need to do one of the above things in order for the server "
    b"to start accepting connections from the outside.\r\n"
)


def _loopback(peer: str) -> bool:
    """Redis's connIsLocal: a loopback or unix-socket peer."""
    return peer.startswith(("127.", "[::1]", "unix:"))


def _peer(sock: socket.socket | None, local: bool) -> str:
    if sock is None:
        return ""
    try:
        name: Any = sock.getsockname() if local else sock.getpeername()
    except OSError:
        return ""
    if isinstance(name, tuple):
        host, port = name[0], name[1]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"unix:{name}"


class Connection(asyncio.Protocol):
    def __init__(self, server: ConnectionHost) -> None:
        self.server = server
        self.engine = server.engine
        self.transport: asyncio.Transport | None = None
        self.client: Client | None = None
        self.parser: RequestParser | None = None
        #: the client's reply gate: its replies leave when the durability policy says so
        self.gate = ReplyGate(
            server.durability.may_reply, self.resume, self.process, self.query_buffered
        )
        self.soft_limit_since: float | None = None
        #: the configuration's values (read on every batch: no method call per lookup)
        self.settings: dict[str, Any] = server.engine.config.values

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = transport  # type: ignore[assignment]
        if self.client is not None:  # accepted while a script was busy: see server/busy.py
            self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[union-attr]
            return
        engine = self.engine
        if len(engine.clients) >= engine.config["maxclients"]:
            engine.stats.rejected_connections += 1
            self.transport.write(b"-ERR max number of clients reached\r\n")  # type: ignore[union-attr]
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        peer = _peer(sock, False)
        if engine.config["protected-mode"] and engine.acl.default.nopass and not _loopback(peer):
            engine.stats.rejected_connections += 1
            self.transport.write(PROTECTED_MODE_DENIED)  # type: ignore[union-attr]
            transport.close()
            return
        c = engine.new_client(peer, _peer(sock, True), self.gate)
        c.fd = sock.fileno() if sock is not None else -1
        self.client = c
        self.parser = RequestParser(
            engine.config["proto-max-bulk-len"],
            engine.config["client-query-buffer-limit"],
            auth_required=not c.authenticated,
        )
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[union-attr]
        self.server.connections[c] = self

    def query_buffered(self) -> int:
        parser = self.parser
        return 0 if parser is None else parser.buffered()

    def data_received(self, data: bytes) -> None:
        c, parser = self.client, self.parser
        if c is None or parser is None or c.close_after_reply:
            return  # closing (QUIT, protocol error): Redis reads no further either
        engine = self.engine
        stats = engine.stats
        stats.net_input_bytes += len(data)
        stats.total_reads_processed += 1
        c.last_interaction_ms = engine.clock.monotonic_ms()
        # CONFIG SET applies to connected clients too, as in Redis.
        settings = self.settings
        parser.max_bulk_len = settings["proto-max-bulk-len"]
        parser.max_query_buffer = settings["client-query-buffer-limit"]
        note_read(c, len(data))
        if parser.auth_required and len(data) > READ_SIZE:
            self._receive_sliced(parser, data)
        else:
            try:
                parser.feed(data)
            except RequestError as exc:
                self._protocol_error(exc)
                return
            self.process()
            if len(c.out) >= FLUSH_REPLIES:
                self.server.flush()
        note_held(c, parser.buffered(), data)

    def _receive_sliced(self, parser: RequestParser, data: bytes) -> None:
        """An unauthenticated client's input, ``READ_SIZE`` bytes at a time: Redis would write
        the replies to each slice before reading the next one."""
        start = 0
        while parser.auth_required and len(data) - start > READ_SIZE:
            if not self._receive(parser, data[start : start + READ_SIZE]) or not self.flush_now():
                return
            start += READ_SIZE
        self._receive(parser, data[start:] if start else data)

    def _receive(self, parser: RequestParser, data: bytes) -> bool:
        """Parse and run ``data``; False if the connection is closing."""
        try:
            parser.feed(data)
        except RequestError as exc:
            self._protocol_error(exc)
            return False
        self.process()
        transport = self.transport
        return transport is not None and not transport.is_closing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.soft_limited.discard(self)
        if self.client is not None:
            self.server.connections.pop(self.client, None)
            self.server.held.pop(self.client, None)
            self.engine.client_closed(self.client)
            self.client = None

    def pause_writing(self) -> None:
        self.gate.paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.gate.paused = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
        self.resume()

    # -- command processing ----------------------------------------------------------------

    def process(self) -> None:
        c, parser, engine, transport = self.client, self.parser, self.engine, self.transport
        if c is None or parser is None or transport is None:
            return
        execute = engine.execute
        gate = self.gate
        out = c.out
        seen = len(out)  # chunks of out already counted in size
        # bytes of replies produced in this batch and not yet written; before AUTH, those left
        # from earlier batches too, for the unauthenticated output limit
        size = sum(map(len, out)) if parser.auth_required else 0
        # what unauthenticated output may add to that (the transport's backlog is what it is
        # until this batch writes)
        unauth_room = UNAUTH_OUTPUT_LIMIT - transport.get_write_buffer_size()
        try:
            while gate.blocked is None and not gate.paused and not c.close_after_reply:
                argv = parser.next()
                if argv is None:
                    break
                execute(c, argv)
                if parser.auth_required == c.authenticated:
                    parser.authenticated(c.authenticated)
                n = len(out)
                if n == seen + 1:  # the common case: a one-chunk reply
                    size += len(out[seen])
                elif n > seen:
                    size += sum(map(len, out[seen:]))
                elif n < seen:  # out was cleared (CLIENT KILL)
                    size = sum(map(len, out))
                seen = n
                if parser.auth_required and size > unauth_room:
                    self._drop_for_output(c, transport)
                    break
                if size >= FLUSH_EARLY:
                    if not gate.may_reply(c):
                        self.server.durability.persist()  # with always, maybe just starts a sync
                    self.flush()  # may pause_writing (ends the loop) or abort
                    seen, size = len(out), 0
                    unauth_room = UNAUTH_OUTPUT_LIMIT - transport.get_write_buffer_size()
                    if transport.is_closing():
                        break
        except RequestError as exc:
            self._protocol_error(exc)
        server = self.server
        if not server.flush_scheduled:
            server.schedule_flush()

    def resume(self) -> None:
        """The engine unblocked this client: run what it pipelined meanwhile, next turn."""
        self.server.loop.call_soon(self.process)

    def _protocol_error(self, exc: RequestError) -> None:
        c = self.client
        if c is None:
            return
        if exc.reply:
            c.out.append(b"-ERR %s\r\n" % str(exc).encode())
        else:
            self.engine.stats.client_query_buffer_limit_disconnections += 1
            log.warning("closing client that reached max query buffer length (id=%d)", c.id)
        log.info("Protocol error (%s) from client id=%d addr=%s", exc, c.id, c.addr)
        c.close_after_reply = True
        self.engine.pending.add(c)
        self.server.schedule_flush()

    # -- output ----------------------------------------------------------------------------

    def flush_now(self) -> bool:
        """Write the client's replies now rather than at the end of the loop turn; False if
        that closed the connection."""
        self.flush()
        transport = self.transport
        return transport is not None and not transport.is_closing()

    def flush(self) -> bool:
        """Send the client's output; False if it must wait until its writes are durable (the
        caller keeps it in ``Server.held``)."""
        c = self.client
        if c is not None and c.out and not self.gate.may_reply(c):
            return False
        self.send()
        return True

    def send(self) -> None:
        """Send the client's output now (its gate was asked already)."""
        c, transport = self.client, self.transport
        if c is None or transport is None:
            return
        out = c.out
        if out:
            data = b"".join(out) if len(out) > 1 else out[0]
            out.clear()
            stats = self.engine.stats
            stats.net_output_bytes += len(data)
            stats.total_writes_processed += 1
            transport.write(data)
            if self.check_output_limit():
                return
        if c.close_after_reply:
            transport.close()

    def check_output_limit(self) -> bool:
        """Disconnect the client if its unsent output is over ``client-output-buffer-limit``;
        True if it was."""
        c, transport = self.client, self.transport
        if c is None or transport is None or transport.is_closing():
            self.server.soft_limited.discard(self)
            return False
        c.out_bytes = transport.get_write_buffer_size()
        if not c.out_bytes and self.soft_limit_since is None:
            return False  # all written (the usual case): under every limit
        unauthenticated_over = c.out_bytes > UNAUTH_OUTPUT_LIMIT and not c.authenticated
        if not unauthenticated_over and not self._over_output_limit(c.out_bytes):
            return False
        self._drop_for_output(c, transport)
        return True

    def _drop_for_output(self, c: Client, transport: asyncio.Transport) -> None:
        """Close the client over its output limit at once; what it has not received yet is
        lost, as in Redis."""
        self.server.soft_limited.discard(self)
        self.engine.stats.client_output_buffer_limit_disconnections += 1
        log.warning("client id=%d closed for overcoming of output buffer limits", c.id)
        c.out.clear()
        transport.abort()

    def _over_output_limit(self, size: int) -> bool:
        limits: dict[str, tuple[int, int, int]] = self.engine.config["client-output-buffer-limit"]
        c = self.client
        hard, soft, seconds = limits[c.output_class() if c is not None else "normal"]
        if hard and size >= hard:
            return True
        if soft and size >= soft:
            now: float = self.server.loop.time()
            if self.soft_limit_since is None:
                self.soft_limit_since = now
                self.server.soft_limited.add(self)
            return now - self.soft_limit_since >= seconds
        if self.soft_limit_since is not None:
            self.soft_limit_since = None
            self.server.soft_limited.discard(self)
        return False


class ReplySender(Protocol):
    """What ``send_replies`` needs of a connection (``Connection``; tests pass stand-ins)."""

    def send(self) -> None: ...


def send_replies(
    pending: PendingReplies,
    held: dict[Client, None],
    connections: Mapping[Client, ReplySender],
    hold_nobody: bool,
) -> None:
    """Send the replies of every client in ``pending``, in order, except those whose gate
    holds them back (they wait in ``held``); ``hold_nobody``: every gate would let them go
    (``Durability.holds_nobody``), so none is asked. Sending may make more clients pending
    (a client closed for its output limit unblocks nobody, but a resumed one may)."""
    while pending:
        batch = pending.take()
        for client in batch:
            conn = connections.get(client)
            if conn is None:
                continue
            if not hold_nobody and not client.gate.may_reply(client):
                held[client] = None  # its reply waits for the AOF
                continue
            if held:
                held.pop(client, None)
            conn.send()
