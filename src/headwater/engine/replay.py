"""Replaying an append-only file through the engine (recovery at startup, DEBUG LOADAOF).

Every command runs as it did live, through ``Engine.apply``, from a client flagged
``replaying`` (it may give XADD IDMP a concrete ID, as the effect carries it). What can go
wrong, and what happens:

* The file ends inside a command (a crash mid-write): with ``aof-load-truncated yes`` the
  torn tail is cut off with a warning and loading goes on; otherwise loading fails.
* The file ends inside MULTI … EXEC: the transaction never happened; it is discarded and cut
  off the same way.
* Bytes that are not RESP, an unknown command, or a command that is not an array of bulk
  strings (as Redis's loader, which reads only ``$`` arguments): the file is corrupt; loading
  fails with the file and offset, and the server refuses to start (``headwater check-aof
  --fix`` repairs it).
* A known command that replies with an error (inside a transaction too): loading stops
  with ``FailedCommand`` (file, offset, command, error), and so does the server's startup.
  Every line the server writes must load: going on would start the server without that
  command and without whatever depended on it, a silently shorter log. (Redis does not
  check replies; Headwater refuses to lose data quietly.) Nothing expires while loading
  (``Keyspace.loading``): a command logged while its key was alive finds it alive.

Theory of operation: the fast path
----------------------------------
An AOF is mostly the effects of XADD: ``XADD key <ms>-<seq> field value …``, with
``IDMP pid iid`` or ``IDMPAUTO pid`` before the ID for idempotent producers. The reader feeds
hiredis 64 KiB at a time (hiredis moves its unread bytes after every KiB it consumes, so
bigger chunks cost more). ``_XaddBatch`` takes the XADDs of that shape and queues runs of them
for one stream (at most ``RUN_MAX``), and appends each run with ``Stream.extend``, without the
per-command dispatch, option parsing, reply and bookkeeping of the handler. It takes a command
only when the handler would certainly append it: the key holds a stream with no TTL, the ID
is decimal ``<ms>-<seq>`` and greater than the last one queued, the entry is not too large,
nobody WATCHes or blocks on the database, no effect sink listens and no transaction is open.
Anything else, including every error, goes through ``Engine.apply`` after the queued run has
been appended, so the order of effects on the keyspace is that of the file. A queued IDMP
XADD is a retry if its iid maps to its very ID, else it was appended: the run decides it when it
is appended, in order, with the handler's own operations (``ops.streams``). The result
is the same keyspace as the generic path, node layout included
(``tests/unit/test_replay_fast.py`` checks this on random workloads).

Offsets (where a torn tail or a corrupt command starts, where an unfinished MULTI began) are
not counted as the file is read: the replay counts commands, and only when an offset is
needed (rarely) reads the file again to sum the encoded sizes (``wire_size``: the AOF is
always canonical RESP) of the commands before it. Whether the file ends inside a command is
asked of hiredis: fed a sentinel command after the last byte, it reads the sentinel back
alone only if nothing unfinished came before it.

Consumer groups add one ``XCLAIM key group consumer 0 <id> TIME <ms> RETRYCOUNT <n> FORCE
JUSTID LASTID <id>`` per delivered entry: ``Replayer._claim`` applies exactly that shape with
the operations ``cmd_xclaim`` calls (``ops.groups``), without its option parsing (under the
same conditions as the XADD runs, and no ``stream-consumer-idle-reclaim-ms``). An XREADGROUP's
XCLAIMs come inside its MULTI … EXEC, which the fast paths leave to ``Engine.execute``: an
XCLAIM or XAUTOCLAIM that claimed one entry takes this path. Every change either path makes is
counted by ``Engine.apply_change``, as live. Other XCLAIMs and ``XGROUP`` subcommands (SETID
once per read, CREATECONSUMER) run their handler directly (``Engine.apply_row``), skipping the
generic dispatch (``XGROUP`` is a container command, which ``Engine.apply`` sends through
``execute``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import hiredis

from headwater.commands.args import strict_int
from headwater.commands.context import Client, CommandSpec
from headwater.engine.core import Engine
from headwater.errors import ReplyError, err
from headwater.keyevents import STREAM
from headwater.ops.change import ONE, Change, as_given
from headwater.ops.groups import claim_entry, forget_entry, move_last_id, touch_consumer
from headwater.ops.streams import (
    Entry,
    IdmpKey,
    append_entries,
    idmp_original,
    idmp_retry,
    record_idmp,
)
from headwater.persistence.aof import CorruptAof, TornTail
from headwater.resp.parser import wire_size
from headwater.resp.split import CommandSplitter
from headwater.stream.groups import claim_time, claimed_count, id_key
from headwater.stream.idmp import auto_iid
from headwater.stream.ids import StreamID, follows, parse_id
from headwater.stream.node import entry_fits
from headwater.stream.stream import Stream

log = logging.getLogger("headwater")

#: bytes fed to hiredis at a time (see the module docstring)
READ_CHUNK = 64 * 1024
#: queued XADDs are appended at least every this many (the argv lists stay small in memory)
RUN_MAX: Final = 1024
#: (Final: compiled, a constant rather than a module dictionary lookup per XADD)


def _is_xadd(name: bytes) -> bool:
    """The command name XADD, in any case (what a primary sends is tested by one comparison:
    a set lookup would hash the fresh bytes object hiredis made)."""
    return len(name) == 4 and (name == b"XADD" or name.upper() == b"XADD")


def _words_size(words: list[bytes]) -> int:
    """The total length of words, or -1 if one is not bytes (a file's nested array or
    integer where a bulk goes: left to the handler, which answers it)."""
    size = 0
    for word in words:
        if type(word) is not bytes:
            return -1
        size += len(word)
    return size


class FailedCommand(Exception):
    """A command of the file answered an error while it was replayed."""

    def __init__(self, path: Path, offset: int, argv: list[bytes], error: ReplyError) -> None:
        shown = b" ".join(arg[:64] for arg in argv[:6]).decode("utf-8", "replace")
        super().__init__(
            f"{path}: the command at offset {offset} failed while loading ({shown!r}): "
            f"-{error.line().decode('utf-8', 'replace')}"
        )
        self.path = path
        self.offset = offset
        self.error = error


class StreamGarbage(Exception):
    """A replication stream that holds something other than commands; ``applied``: the
    bytes of the commands applied before it."""

    def __init__(self, message: str, applied: int) -> None:
        super().__init__(message)
        self.applied = applied


@dataclass
class ReplayResult:
    commands: int = 0
    truncated_at: int | None = None  # offset the file was cut at (a torn tail)
    #: commands applied by the fast path (statistics only: no part of the comparison)
    fast: int = field(default=0, compare=False)


class Replayer:
    """Feeds AOF files to an engine, as one client. ``fast=False`` sends every command
    through ``Engine.apply`` (the reference the fast path is tested against)."""

    def __init__(self, engine: Engine, fast: bool = True) -> None:
        self.engine = engine
        self.client = engine.new_client("aof", "")
        self.client.replaying = True
        # The file holds what the server accepted: ``requirepass`` does not apply to it (it
        # refused XGROUP and MULTI, which go through ``execute``, with NOAUTH before).
        self.client.authenticated = True
        self.client.user = None
        self.fast = fast
        self._direct_rows = _direct_rows(engine) if fast else {}
        self._streamed = _XaddBatch(engine, self.client, emit=True) if fast else None

    def replay(
        self, path: Path, truncate_torn: bool, progress: Callable[[int], None] | None = None
    ) -> ReplayResult:
        """Apply the commands of the file at ``path``; ``progress`` is told the bytes read
        so far, a chunk at a time."""
        keyspace = self.engine.keyspace
        keyspace.loading = True
        try:
            return self._replay(path, truncate_torn, progress)
        finally:
            keyspace.loading = False

    def _replay(
        self, path: Path, truncate_torn: bool, progress: Callable[[int], None] | None
    ) -> ReplayResult:
        result = ReplayResult()
        engine, c = self.engine, self.client
        batch = _XaddBatch(engine, c)
        multi_at: int | None = None  # commands before an unfinished MULTI
        reader = hiredis.Reader()
        gets = reader.gets
        fast = self._fast_now()
        take = batch.take
        read = 0
        try:
            with open(path, "rb") as f:
                while chunk := f.read(READ_CHUNK):
                    if progress is not None:
                        progress(read)
                    read += len(chunk)
                    reader.feed(chunk)
                    while True:
                        try:
                            argv = gets()
                        except (hiredis.ProtocolError, TypeError) as exc:
                            batch.flush()
                            raise self._corrupt(path, batch, result, str(exc)) from None
                        if argv is False:
                            break
                        if type(argv) is not list or not argv or type(argv[0]) is not bytes:
                            batch.flush()
                            raise self._corrupt(path, batch, result, _NOT_A_COMMAND)
                        if fast and _is_xadd(argv[0]) and take(argv):
                            continue  # (take checks the types of what it uses)
                        batch.flush()
                        if not all(type(arg) is bytes for arg in argv):  # as Redis: only bulks
                            raise self._corrupt(path, batch, result, _NOT_A_COMMAND)
                        name = argv[0].upper()
                        if name not in engine.table:
                            unknown = f"unknown command {argv[0][:64]!r}"
                            raise self._corrupt(path, batch, result, unknown)
                        if name == b"MULTI":
                            multi_at = batch.commands + result.commands
                        elif name in (b"EXEC", b"DISCARD"):
                            multi_at = None
                        if fast and name == b"XCLAIM" and self._claim(argv):
                            result.fast += 1
                        else:
                            error = self._apply(name, argv)
                            if error is not None:
                                done = batch.commands + result.commands
                                offset = _offset_after(path, done)
                                raise FailedCommand(path, offset, argv, error)
                            fast = self._fast_now()
                        result.commands += 1
        finally:
            batch.flush()
            result.commands += batch.commands
            result.fast += batch.commands
        if not _ends_cleanly(reader):  # the file ends inside a command
            offset = _offset_after(path, result.commands)
            if not truncate_torn:
                raise TornTail(path, offset, path.stat().st_size)
            if multi_at is not None:
                offset = _offset_after(path, multi_at)
            self._truncate(path, offset, result)
            multi_at = None
        if multi_at is not None:  # complete commands, but no EXEC: the transaction is lost
            self._truncate(path, _offset_after(path, multi_at), result)
        if c.in_multi:
            engine.execute(c, [b"DISCARD"])
            c.out.clear()
        engine.pending.discard(c)
        return result

    @staticmethod
    def _corrupt(path: Path, batch: _XaddBatch, result: ReplayResult, reason: str) -> CorruptAof:
        """The command after the ones applied so far is bad: where it starts, and why."""
        return CorruptAof(path, _offset_after(path, batch.commands + result.commands), reason)

    def _fast_now(self) -> bool:
        """Whether the fast paths may run: nothing observes single commands."""
        return self.fast and not self.client.in_multi and not self.engine.propagating

    def apply_streamed(self, argv: object) -> ReplyError | None:
        """``apply_command`` for a replica's link, with runs of plain ``XADD key <ms>-<seq>
        …`` to one stream appended at once (the file replay's batch path, each effect sent
        to the sinks as its handler would); ``end_of_chunk`` appends the run queued."""
        batch = self._streamed
        if (
            batch is not None
            and type(argv) is list
            and argv
            and type(argv[0]) is bytes
            and _is_xadd(argv[0])
            and not self.client.in_multi
            and batch.take(argv)
        ):
            return None
        self.end_of_chunk()
        return self.apply_command(argv)

    def apply_link_run(
        self, parser: CommandSplitter, failures: list[tuple[list[bytes], ReplyError]]
    ) -> tuple[int, bool]:
        """Apply the whole commands a replica's link has read, up to a ``REPLCONF GETACK``
        (the link's own, not applied): the bytes of the stream they took, and whether a
        GETACK ended the run. PINGs are skipped; a command that fails is added to
        ``failures`` (the link logs it). Raises ``StreamGarbage`` on anything that is not
        a command. (Here, compiled, rather than in the link: one loop turn per command.)"""
        start = parser.taken
        gets = parser.gets  # (bound once: a method lookup per command costs ~0.2k instructions)
        while True:
            try:
                argv = gets()
            except ValueError as exc:
                raise StreamGarbage(
                    f"Protocol error from master ({exc}): garbage on the replication link",
                    parser.taken - start,
                ) from None
            if argv is False:
                return parser.taken - start, False
            words: list[bytes] = argv
            head = words[0]
            if len(head) in (4, 8):  # (PING, REPLCONF: no upper() for the others)
                name = head.upper()
                if name == b"PING":
                    continue
                if name == b"REPLCONF" and len(words) > 1 and words[1].upper() == b"GETACK":
                    return parser.taken - start, True
            error = self.apply_streamed(words)
            if error is not None:
                failures.append((words, error))

    @property
    def batched(self) -> int:
        """Commands ``apply_streamed`` appended in runs (statistics, tests)."""
        return self._streamed.commands if self._streamed is not None else 0

    def end_of_chunk(self) -> None:
        """Append the XADDs ``apply_streamed`` queued (before the link reports its offset,
        serves blocked readers or applies anything else)."""
        if self._streamed is not None:
            self._streamed.flush()

    def apply_command(self, argv: object) -> ReplyError | None:
        """Apply one command of a replication stream (a replica's link: the same path as a
        file's commands, without the XADD and XCLAIM fast paths, which effect sinks would not
        see). ``argv`` is what hiredis read: anything but an array of bulk strings naming a
        known command is refused with an error, not applied."""
        if type(argv) is not list or not argv or not all(type(a) is bytes for a in argv):
            return err(_NOT_A_COMMAND)
        name = argv[0].upper()
        if name not in self.engine.table:
            return err(f"unknown command {argv[0][:64]!r}")
        return self._apply(name, argv)

    def _apply(self, name: bytes, argv: list[bytes]) -> ReplyError | None:
        """Run one command; its error, if it failed (in a transaction: at EXEC, which fails
        as a whole or reports the failed commands)."""
        c = self.client
        row = self._direct_rows.get(name)
        if row is not None and row.subcommands:
            row = row.subcommands.get(argv[1].lower()) if len(argv) > 1 else None
        if row is not None and not c.in_multi and not self.engine.propagating:
            error = self.engine.apply_row(c, row, argv)  # (XGROUP's subcommand row, directly)
        else:
            error = self.engine.apply(c, argv)
        return None if c.in_multi else error

    def _claim(self, argv: list[bytes]) -> bool:
        """``XCLAIM key group consumer 0 <id> TIME <ms> RETRYCOUNT <n> FORCE JUSTID LASTID
        <id>``, the effect of each entry XREADGROUP delivers or XCLAIM claims
        (``commands/groups._claim_effect``), applied with ``cmd_xclaim``'s operations,
        without its option parsing. False for any other shape or an unusual state (the handler then
        decides, errors included)."""
        if len(argv) != 14 or argv[4] != b"0" or tuple(argv[6:13:2]) != _CLAIM_WORDS:
            return False
        if argv[11] != b"JUSTID":
            return False
        c, engine = self.client, self.engine
        db = c.db
        key = argv[1]
        stream = db.data.get(key)
        if (
            type(stream) is not Stream
            or key in db.expires
            or db.watched
            or engine.config["stream-consumer-idle-reclaim-ms"]
        ):
            return False
        group = stream.groups.get(argv[2])
        time_ms, count = strict_int(argv[7]), strict_int(argv[9])
        if group is None or time_ms is None or count is None or time_ms < 0 or count < 0:
            return False  # (the handler reads negative ones its own way)
        try:
            sid, last_id = parse_id(argv[5]), parse_id(argv[13])
        except ReplyError:
            return False
        now = engine.keyspace.now_ms = engine.clock.now_ms()
        moved = move_last_id(group, last_id)
        consumer, dirty = touch_consumer(group, argv[3], now)
        pel_key = id_key(sid)
        found = stream.find(sid)
        # the effect's shape (min-idle 0, FORCE, RETRYCOUNT, JUSTID) always claims, with its
        # RETRYCOUNT whatever the entry's count: no PEL lookup for it
        claimed = claimed_count(None, None, 0, True, count, True)
        if found is not None and found[0].is_live(found[1]) and claimed is not None:
            delivery_ms = claim_time(time_ms, now)
            dirty += claim_entry(group, pel_key, consumer, delivery_ms, claimed, now)
        else:  # the entry is gone: so is its NACK; else the group's position moved alone
            dirty += forget_entry(group, pel_key) or int(moved)
        if dirty:
            db.signal_modified(key)
        engine.apply_change(db.index, argv, as_given(dirty))
        return True

    @staticmethod
    def _truncate(path: Path, offset: int, result: ReplayResult) -> None:
        size = path.stat().st_size
        log.warning(
            "!!! Warning: short read while loading the AOF file %s!!! Truncating the AOF at "
            "offset %d (of %d bytes): the last command was not complete",
            path,
            offset,
            size,
        )
        os.truncate(path, offset)
        result.truncated_at = offset

    def close(self) -> None:
        self.engine.client_closed(self.client)


_CLAIM_WORDS = (b"TIME", b"RETRYCOUNT", b"FORCE", b"LASTID")
_NOT_A_COMMAND = "not a command (array of bulk strings)"


#: fed after the last byte of a file: read back alone, it shows nothing was left unfinished
_SENTINEL = b"\x00headwater: end of file\x00"
_SENTINEL_RESP = b"*1\r\n$%d\r\n%s\r\n" % (len(_SENTINEL), _SENTINEL)


def _ends_cleanly(reader: hiredis.Reader) -> bool:
    """Whether the bytes fed to reader, whose complete replies were all taken, end with a
    complete command. (An unfinished command would absorb the sentinel, or choke on it.)"""
    reader.feed(_SENTINEL_RESP)
    try:
        return bool(reader.gets() == [_SENTINEL] and not reader.has_data())
    except (hiredis.ProtocolError, TypeError):  # (TypeError: a map whose key is an array)
        return False


def _offset_after(path: Path, commands: int) -> int:
    """Where the file's command number ``commands`` (from 0) starts: the sum of the sizes of
    those before it. Read again from the start: only errors, torn tails and unfinished
    transactions need an offset, so the replay does not count bytes as it goes."""
    offset = 0
    reader = hiredis.Reader()
    with open(path, "rb") as f:
        while commands and (chunk := f.read(READ_CHUNK)):
            reader.feed(chunk)
            while commands:
                try:
                    argv = reader.gets()
                except (hiredis.ProtocolError, TypeError):
                    return offset
                if argv is False:
                    break
                offset += wire_size(argv)
                commands -= 1
    return offset


def _direct_rows(engine: Engine) -> dict[bytes, CommandSpec]:
    """The command rows whose replayed effects skip ``Engine.apply``: XCLAIM and XGROUP
    (SETID, CREATECONSUMER, …; its other subcommands are as simple)."""
    return {name: engine.table[name] for name in (b"XCLAIM", b"XGROUP") if name in engine.table}


class _XaddBatch:
    """Runs of replayed XADDs to one stream, appended in one loop (module docstring)."""

    def __init__(self, engine: Engine, c: Client, emit: bool = False) -> None:
        self.engine = engine
        self.c = c
        #: a replica's link: each appended XADD's effect goes to the engine's sinks, as its
        #: handler's would (plain XADDs only; IDMP ones and streams with notifications on
        #: take the handler)
        self.emit = emit
        self.lines: list[list[bytes]] = []  # the queued commands, when emitting
        self.queued: list[Entry] = []
        #: (index in queued, (pid, iid)) of the queued XADDs with IDMP or IDMPAUTO
        self.idmp: list[tuple[int, IdmpKey]] = []
        self.key: bytes | None = None
        self.stream: Stream | None = None
        self.last: StreamID = (0, 0)  # the last ID queued (or the stream's, at the start)
        self.commands = 0  # commands appended so far

    def take(self, argv: list[bytes]) -> bool:
        """Queue ``XADD key [IDMP pid iid | IDMPAUTO pid] <ms>-<seq> field value …`` if the
        handler would certainly append it; False leaves it to the caller (after ``flush``)."""
        try:
            n = len(argv)
            if n & 1:
                at = 2
                raw = argv[2]
                if not raw or not 48 <= raw[0] <= 57:  # (not a digit: IDMPAUTO, or the handler's)
                    if self.emit or n < 7 or not argv[3] or raw.upper() != b"IDMPAUTO":
                        return False
                    at = 4
                    raw = argv[4]
            elif self.emit:
                return False
            elif n >= 8 and argv[3] and argv[4] and argv[2].upper() == b"IDMP":
                at = 5
                raw = argv[5]
            else:
                return False
            if at != 2 and not all(type(arg) is bytes for arg in argv[:at]):
                return False
            sid = parse_id(raw)  # (an invalid one is left to the handler, which answers it)
            pairs = argv[at + 1 :]
            size = _words_size(pairs)
            key = argv[1]  # (compiled: raises TypeError unless bytes)
        except (TypeError, AttributeError, ReplyError):  # a nested array, an integer… where
            return False  # bytes go, or not an ID
        if not entry_fits(size) or (key != self.key and not self._open(key)):
            return False
        if not follows(sid, self.last):
            return False  # (the handler answers it: ID_TOO_SMALL)
        if at != 2:
            iid = argv[4] if at == 5 else auto_iid(pairs)
            self.idmp.append((len(self.queued), (argv[3], iid)))
        self.queued.append((sid, pairs, size))
        if self.emit:
            self.lines.append(argv)
        self.last = sid
        if len(self.queued) >= RUN_MAX:
            self._append_queued()
        return True

    def _open(self, key: bytes) -> bool:
        """Start a run for key (ending the current one), where a run does what each
        handler call would: not when something watches the key, waits on it, may expire it,
        tracks it or hears its events (the handler tells them per XADD). These say when the
        batch may stand in for the handler; the rules it applies are the store's (the ID
        rule in ``Stream.extend``, ``entry_fits``, IDMP in ``ops.streams``)."""
        if self.queued:
            self._append_queued()
        if type(key) is not bytes:
            return False
        db = self.c.db
        stream = db.data.get(key)
        if type(stream) is not Stream or db.watched or db.blocking or key in db.expires:
            return False
        if self.engine.keyspace.tracking_on:
            return False  # (each XADD then tells tracking clients, through the handler)
        if self.emit and self.engine.keyspace.notify_flags & STREAM:
            return False  # (the handler fires the xadd event)
        self.key, self.stream, self.last = key, stream, stream.last_id
        return True

    def flush(self) -> None:
        """End the run: append what is queued."""
        if self.queued:
            self._append_queued()
        self.key = self.stream = None

    def _append_queued(self) -> None:
        """Append the queued XADDs with the handler's operations (``ops.streams``), the
        run at once; the changes go to the engine's count as the handler's would."""
        queued, stream, key = self.queued, self.stream, self.key
        assert stream is not None
        assert key is not None
        self.commands += len(queued)
        engine, db = self.engine, self.c.db
        dirty = 0
        if self.idmp:
            queued, dirty = self._drop_duplicates(stream, key)
        config = engine.config
        max_bytes, max_entries = config["stream-node-max-bytes"], config["stream-node-max-entries"]
        if queued:
            dirty += append_entries(db, key, stream, queued, max_bytes, max_entries)
        if self.emit:  # one change and one effect per XADD, the command as given
            for line in self.lines:
                engine.apply_change(db.index, line, ONE)
            self.lines = []
        else:
            engine.apply_change(db.index, [], Change(dirty, []))  # (applied: nothing to log)
        self.queued = []

    def _drop_duplicates(self, stream: Stream, key: bytes) -> tuple[list[Entry], int]:
        """The queued entries without the IDMP retries, decided in order as the handler
        decides them (``ops.streams.idmp_original``: a retry's effect carries the ID its
        iid maps to; any other ID was appended, replacing an iid that had expired on the
        primary), and the changes the retries count. The appended ones' iids are
        recorded."""
        queued, db, stats = self.queued, self.c.db, self.engine.stats
        dropped: set[int] = set()
        dirty = 0
        for index, idmp_key in self.idmp:
            sid = queued[index][0]
            if idmp_original(stream, idmp_key, sid, replaying=True) is not None:
                dirty += idmp_retry(db, key, stream, stats)
                dropped.add(index)
            else:
                record_idmp(db, key, stream, idmp_key, sid, stats)
        self.idmp = []
        if not dropped:
            return queued, dirty
        return [entry for index, entry in enumerate(queued) if index not in dropped], dirty
