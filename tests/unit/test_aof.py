"""The AOF in process: writer, reader, manifest, and replay through the engine."""

from __future__ import annotations

import errno
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.engine.replay import Replayer
from headwater.persistence.aof import AofWriter, CorruptAof, TornTail, encode_command, read_commands
from headwater.persistence.manifest import (
    Manifest,
    ManifestEntry,
    ManifestError,
    load_manifest,
    parse_manifest,
    write_manifest,
)
from headwater.server.aof_log import SLOW_SYNC_MS
from headwater.server.durability import Durability
from headwater.server.rollback import count_replies
from tests.support.file_ops import FaultyFileOps
from tests.unit.conftest import Harness, error_text


def _commands(path: Path) -> list[list[bytes]]:
    return [argv for argv, _ in read_commands(path)]


def test_writer_selects_databases_and_reader_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "a.aof"
    writer = AofWriter(path, "always")
    writer.append(0, [b"SET", b"k", b"v"])
    writer.append(0, [b"SET", b"k2", b"\r\n\x00"])
    writer.append(3, [b"DEL", b"k"])
    assert writer.flush()
    assert writer.fsyncs == 1
    writer.close()
    assert _commands(path) == [
        [b"SELECT", b"0"],
        [b"SET", b"k", b"v"],
        [b"SET", b"k2", b"\r\n\x00"],
        [b"SELECT", b"3"],
        [b"DEL", b"k"],
    ]
    ends = [end for _, end in read_commands(path)]
    assert ends[-1] == path.stat().st_size


def test_reader_reports_torn_tail_with_the_last_good_offset(tmp_path: Path) -> None:
    path = tmp_path / "a.aof"
    good = encode_command([b"SET", b"a", b"1"])
    path.write_bytes(good + encode_command([b"SET", b"b", b"2"])[:-3])
    with pytest.raises(TornTail) as torn:
        _commands(path)
    assert torn.value.offset == len(good)


def test_reader_reports_garbage_as_corruption(tmp_path: Path) -> None:
    path = tmp_path / "a.aof"
    path.write_bytes(encode_command([b"SET", b"a", b"1"]) + b"%%%%garbage\r\n")
    with pytest.raises(CorruptAof):
        _commands(path)


def test_failed_write_keeps_the_data_and_reports_the_error(tmp_path: Path) -> None:
    path = tmp_path / "a.aof"
    ops = FaultyFileOps()
    writer = AofWriter(path, "always", ops=ops)
    ops.fail_writes(errno.ENOSPC)
    writer.append(0, [b"SET", b"k", b"v"])
    assert not writer.flush()
    assert writer.pending
    assert writer.error is not None
    assert writer.error.errno == errno.ENOSPC
    ops.fail_writes(None)
    assert writer.flush()
    assert writer.error is None
    writer.close()
    assert _commands(path)[-1] == [b"SET", b"k", b"v"]


def test_everysec_postpones_writes_while_a_sync_runs(tmp_path: Path) -> None:
    notified = threading.Event()
    ops = FaultyFileOps()
    writer = AofWriter(tmp_path / "a.aof", "everysec", notified.set, ops)
    writer.append(0, [b"SET", b"k", b"v"])
    ops.hold_syncs(True)
    writer.last_fsync -= 1.0  # a second has passed: the write starts a background sync
    assert writer.flush()
    assert writer.syncing
    writer.append(0, [b"SET", b"k", b"w"])
    assert not writer.flush()  # postponed behind the sync in flight
    assert writer.pending
    ops.hold_syncs(False)
    assert notified.wait(10)
    assert writer.flush()
    assert not writer.syncing
    assert writer.fsyncs == 1
    writer.close()
    assert _commands(tmp_path / "a.aof")[-1] == [b"SET", b"k", b"w"]


def test_manifest_round_trip_and_errors(tmp_path: Path) -> None:
    manifest = Manifest(
        [ManifestEntry("a.1.base.aof", 1, "b"), ManifestEntry("a.1.incr.aof", 1, "i")]
    )
    path = tmp_path / "a.manifest"
    for entry in manifest.entries:
        (tmp_path / entry.name).touch()
    write_manifest(path, manifest)
    assert load_manifest(path) == manifest
    (tmp_path / "a.1.base.aof").unlink()
    with pytest.raises(ManifestError, match="does not exist"):
        load_manifest(path)
    for bad in ["file x seq one type i", "file ../x seq 1 type i", "file x seq 1 type z", "bogus"]:
        with pytest.raises(ManifestError):
            parse_manifest(bad)


def _replay_into_fresh(path: Path, truncate: bool = True) -> Harness:
    h = Harness()
    replayer = Replayer(h.engine)
    replayer.replay(path, truncate)
    replayer.close()
    return h


def test_replay_rebuilds_state_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    h = Harness()
    path = tmp_path / "a.aof"
    writer = AofWriter(path, "no")
    h.engine.effect_sinks.append(writer.append)
    c = h.client()
    h.call(c, "XADD", "s", "*", "f", "v")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "f", "w")
    writer.close()
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(encode_command([b"XADD", b"s", b"9-9", b"f", b"torn"])[:-4])
    replica = _replay_into_fresh(path)
    r = replica.client()
    assert replica.call(r, "XRANGE", "s", "-", "+") == h.call(c, "XRANGE", "s", "-", "+")
    assert replica.call(r, "XPENDING", "s", "g") == h.call(c, "XPENDING", "s", "g")
    assert path.stat().st_size == size
    with open(path, "ab") as f:
        f.write(encode_command([b"XADD", b"s", b"9-9", b"f", b"torn"])[:-4])
    with pytest.raises(TornTail):
        _replay_into_fresh(path, truncate=False)


def test_replay_drops_an_unfinished_transaction(tmp_path: Path) -> None:
    path = tmp_path / "a.aof"
    good = encode_command([b"SET", b"a", b"1"])
    path.write_bytes(good + encode_command([b"MULTI"]) + encode_command([b"SET", b"b", b"2"]))
    h = _replay_into_fresh(path)
    c = h.client()
    assert h.call(c, "MGET", "a", "b") == [b"1", None]
    assert path.read_bytes() == good


def test_replay_cuts_every_torn_tail_at_the_start_of_its_command(tmp_path: Path) -> None:
    """The file cut at every byte: replay keeps exactly the complete commands before the cut
    (a transaction only with its EXEC), and truncates the file where the kept part ends;
    refused with the same offset when truncation is off."""
    commands = [
        [b"XADD", b"s", b"1-1", b"f", b"v"],
        [b"XADD", b"s", b"1-2", b"f", b"w\r\n*1\r\n"],  # RESP inside a value
        [b"MULTI"],
        [b"SET", b"k", b"x"],
        [b"EXEC"],
        [b"XADD", b"s", b"IDMP", b"p", b"i", b"2-1", b"f", b"v"],
        [b"SET", b"last", b"y"],
    ]
    encoded = [encode_command(argv) for argv in commands]
    ends = [sum(map(len, encoded[: n + 1])) for n in range(len(encoded))]
    whole = b"".join(encoded)
    for cut in range(1, len(whole) + 1):
        path = tmp_path / f"cut{cut}.aof"
        path.write_bytes(whole[:cut])
        complete = max([end for end in ends if end <= cut], default=0)
        kept = complete if not ends[2] <= complete < ends[4] else ends[1]  # inside MULTI
        if complete != cut:
            with pytest.raises(TornTail) as torn:
                _replay_into_fresh(path, truncate=False)
            assert (torn.value.offset, torn.value.size) == (complete, cut)
        h = _replay_into_fresh(path)
        assert path.stat().st_size == kept, cut
        c = h.client()
        entries = h.call(c, "XRANGE", "s", "-", "+")
        assert isinstance(entries, list)
        assert len(entries) == sum(end <= kept for end in (ends[0], ends[1], ends[5]))
        assert h.call(c, "GET", "k") == (b"x" if kept >= ends[4] else None)


def test_replay_reports_the_offset_of_a_corrupt_command(tmp_path: Path) -> None:
    path = tmp_path / "a.aof"
    good = b"".join(encode_command([b"XADD", b"s", b"%d-1" % i, b"f", b"v"]) for i in (1, 2, 3))
    path.write_bytes(good + b"*1\r\n:5\r\n" + encode_command([b"SET", b"a", b"1"]))
    with pytest.raises(CorruptAof, match=f"at offset {len(good)}:"):
        _replay_into_fresh(path)
    path.write_bytes(good + b"*2\r\n$3\r\nGET\r\n%1\r\n*0\r\n$1\r\nb\r\n")
    with pytest.raises(CorruptAof, match=f"at offset {len(good)}:"):
        _replay_into_fresh(path)  # a map whose key is an array
    path.write_bytes(good + b"*2\r\n$3\r\nGET\r\n%3\r\n")
    with pytest.raises(TornTail, match=f"at offset {len(good)} "):
        _replay_into_fresh(path, truncate=False)  # an unfinished map


def test_replay_refuses_unknown_commands(tmp_path: Path) -> None:
    path = tmp_path / "a.aof"
    path.write_bytes(encode_command([b"SET", b"a", b"1"]) + encode_command([b"NOSUCH", b"x"]))
    with pytest.raises(CorruptAof, match="unknown command"):
        _replay_into_fresh(path)


def test_misconf_refuses_writes_but_serves_reads() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v")
    from headwater.errors import ReplyError

    h.engine.refuse_writes = ReplyError("MISCONF", "Errors writing to the AOF file: disk full")
    assert str(h.call(c, "SET", "k", "w")) == "MISCONF Errors writing to the AOF file: disk full"
    assert h.call(c, "GET", "k") == b"v"


def test_check_aof_reports_and_fixes(tmp_path: Path) -> None:
    from headwater.persistence.check import check_aof

    path = tmp_path / "a.aof"
    good = encode_command([b"SET", b"a", b"1"])
    path.write_bytes(good + encode_command([b"MULTI"]) + encode_command([b"SET", b"b", b"2"]))
    ok, report = check_aof(path, fix=False)
    assert not ok
    assert f"ok_up_to={len(good)}" in report
    assert "MULTI without EXEC" in report
    ok, report = check_aof(path, fix=True)
    assert ok
    assert path.read_bytes() == good
    assert check_aof(path, fix=False)[0]


def test_failed_save_refuses_writes_until_a_save_works(tmp_path: Path) -> None:
    from headwater.server.durability import BGSAVE_MISCONF, Durability

    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "appendonly", "no")
    durability = Durability(h.engine.config, h.engine, str(tmp_path / "missing"))
    durability.open()
    h.call(c, "SET", "k", "v")
    assert "Error saving DB on disk" in str(h.call(c, "SAVE"))
    assert str(h.call(c, "SET", "k", "w")) == f"MISCONF {BGSAVE_MISCONF.msg}"
    assert h.call(c, "GET", "k") == b"v"
    h.call(c, "CONFIG", "SET", "stop-writes-on-bgsave-error", "no")
    durability.persist()
    assert h.call(c, "SET", "k", "w") == b"OK"
    h.call(c, "CONFIG", "SET", "stop-writes-on-bgsave-error", "yes")
    durability.snapshots.data_dir = str(tmp_path)
    assert h.call(c, "SAVE") == b"OK"
    assert h.call(c, "SET", "k", "x") == b"OK"
    assert (tmp_path / "dump.hwsnap").exists()


def test_persistence_commands_refuse_bad_arguments(tmp_path: Path) -> None:
    from headwater.server.durability import Durability

    h = Harness()
    c = h.client()
    Durability(h.engine.config, h.engine, str(tmp_path)).open()
    assert str(h.call(c, "BGSAVE", "NOW")) == "ERR syntax error"
    assert str(h.call(c, "BGSAVE", "SCHEDULE", "X")) == "ERR syntax error"
    assert str(h.call(c, "DEBUG", "LOADAOF", "x")) == (
        "ERR wrong number of arguments for 'debug|loadaof' command"
    )
    assert str(h.call(c, "DEBUG", "NOPE")) == (
        "ERR unknown subcommand or wrong number of arguments for 'NOPE'. Try DEBUG HELP."
    )


# -- group commit with appendfsync always (issue #6) ----------------------------------------


class Wakeups:
    """Stands in for the event loop's ``call_soon_threadsafe``: the worker thread queues its
    callbacks here and the test runs them, as the loop thread would."""

    def __init__(self) -> None:
        self.callbacks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def __call__(self, callback: Callable[[], None]) -> None:
        self.callbacks.put(callback)

    def run_next(self) -> None:
        self.callbacks.get(timeout=10)()


def _always(
    tmp_path: Path, ops: FaultyFileOps | None = None
) -> tuple[Harness, Durability, Wakeups]:
    h = Harness()
    h.call(h.client(), "CONFIG", "SET", "appendfsync", "always")
    wake = Wakeups()
    durability = Durability(h.engine.config, h.engine, str(tmp_path), wake, ops or FaultyFileOps())
    # as the server does when a sync ends: persist what gathered, for many clients
    durability.on_durable = lambda: durability.persist(waiting=2)
    durability.open()
    return h, durability, wake


def test_always_sync_runs_in_the_background_and_effects_gather_meanwhile(
    tmp_path: Path,
) -> None:
    ops = FaultyFileOps()
    h, durability, wake = _always(tmp_path, ops)
    writer = durability.aof.writer
    assert writer is not None
    first, second, reader, idle = h.client(), h.client(), h.client(), h.client()
    h.call(first, "XADD", "s", "1-1", "f", "v")
    ops.hold_syncs(True)
    durability.persist(waiting=2)
    assert writer.syncing
    assert not writer.pending  # written: only the sync is in flight
    assert not durability.may_reply(first)
    h.call(reader, "XLEN", "s")  # shows 1-1, whose sync is in flight
    h.call(idle, "PING")  # shows no data
    assert not durability.may_reply(reader)
    assert durability.may_reply(idle)
    h.call(second, "XADD", "s", "2-1", "f", "v")
    durability.persist(waiting=2)  # a sync in flight: this one waits in the buffer
    assert writer.pending
    assert not durability.may_reply(first)
    time.sleep(2 * SLOW_SYNC_MS / 1000)  # a slow disk: the next sync goes to the worker too
    ops.hold_syncs(False)
    wake.run_next()  # the sync ended: the next one starts with what gathered
    assert durability.may_reply(first)
    assert durability.may_reply(reader)
    assert not durability.may_reply(second)
    assert writer.syncing
    assert not writer.pending
    wake.run_next()
    assert durability.may_reply(second)
    assert not writer.syncing
    assert writer.fsyncs == 2
    # after a fast sync (as that one was, unless the box stalled it) the next turn syncs on
    # the loop thread again
    writer.last_sync_ms = SLOW_SYNC_MS / 4
    h.call(idle, "XADD", "s", "3-1", "f", "v")
    durability.persist(waiting=2)
    assert durability.may_reply(idle)
    assert writer.fsyncs == 3
    durability.close()
    assert _commands(writer.path)[-1] == [b"XADD", b"s", b"3-1", b"f", b"v"]


def test_always_group_syncs_on_the_loop_thread_while_syncs_are_fast(tmp_path: Path) -> None:
    """Several clients' writes, a disk that syncs fast: one fdatasync on the loop thread in
    the turn (as Redis does), no worker."""
    h, durability, _ = _always(tmp_path)
    writer = durability.aof.writer
    assert writer is not None
    first, second = h.client(), h.client()
    h.call(first, "XADD", "s", "1-1", "f", "v")
    h.call(second, "XADD", "s", "2-1", "f", "v")
    durability.persist(waiting=2)
    assert durability.may_reply(first) and durability.may_reply(second)
    assert writer.fsyncs == 1
    assert writer._worker is None
    durability.close()


def test_always_lone_writer_syncs_inline(tmp_path: Path) -> None:
    h, durability, _ = _always(tmp_path)
    writer = durability.aof.writer
    assert writer is not None
    c = h.client()
    h.call(c, "XADD", "s", "1-1", "f", "v")
    durability.persist(waiting=1)
    assert durability.may_reply(c)
    assert writer.fsyncs == 1
    assert not writer.unsynced
    durability.persist(waiting=2)  # nothing new to sync
    assert not writer.syncing
    assert writer._worker is None
    durability.close()


def test_always_lone_writer_syncs_in_the_background_when_syncs_may_wait(
    tmp_path: Path,
) -> None:
    """File operations whose sync may wait on purpose (``inline_sync`` off) never sync on
    the loop thread: a lone writer's sync goes to the worker and its reply waits for it."""
    ops = FaultyFileOps()
    ops.hold_syncs(True)
    h, durability, wake = _always(tmp_path, ops)
    writer = durability.aof.writer
    assert writer is not None
    c = h.client()
    h.call(c, "XADD", "s", "1-1", "f", "v")
    durability.persist(waiting=1)
    assert writer.syncing
    assert not durability.may_reply(c)
    ops.hold_syncs(False)
    wake.run_next()
    assert durability.may_reply(c)
    assert writer.fsyncs == 1
    durability.close()


def test_always_failed_background_sync_refuses_writes_and_is_retried(tmp_path: Path) -> None:
    ops = FaultyFileOps()
    h, durability, wake = _always(tmp_path, ops)
    writer = durability.aof.writer
    assert writer is not None
    ops.fail_syncs(errno.EIO)
    c, reader = h.client(), h.client()
    h.call(c, "XADD", "s", "1-1", "f", "v")
    writer.last_sync_ms = 2 * SLOW_SYNC_MS  # a slow disk: syncs go to the worker
    durability.persist(waiting=2)
    h.call(reader, "XLEN", "s")
    assert not durability.may_reply(reader)  # the sync of what it saw is in flight
    wake.run_next()
    assert not durability.may_reply(c)
    assert h.engine.info.aof_last_write_status == "err"
    # it saw an effect that a lasting error would roll back: held too (writes are refused)
    assert not durability.may_reply(reader)
    refused = h.call(c, "XADD", "s", "2-1", "f", "v")
    assert error_text(refused) == "MISCONF Errors writing to the AOF file: Input/output error"
    assert h.call(c, "XLEN", "s") == 1
    durability.persist(waiting=2)
    assert not writer.syncing  # no retry at once after a failure
    ops.fail_syncs(None)
    writer.last_fsync -= 1.0
    writer.last_sync_ms = 2 * SLOW_SYNC_MS
    durability.persist(waiting=2)
    assert writer.syncing
    wake.run_next()
    assert durability.may_reply(c)
    assert durability.may_reply(reader)
    assert h.engine.info.aof_last_write_status == "ok"
    assert h.call(c, "XADD", "s", "2-1", "f", "v") == b"2-1"
    durability.close()


def test_close_waits_for_the_sync_in_flight_and_stops_the_worker(tmp_path: Path) -> None:
    ops = FaultyFileOps()
    writer = AofWriter(tmp_path / "a.aof", "always", lambda: None, ops)
    writer.append(0, [b"SET", b"k", b"v"])
    assert writer.write()
    ops.hold_syncs(True)
    writer.start_sync()
    worker = writer._worker
    assert worker is not None
    writer.append(0, [b"SET", b"k", b"w"])
    threading.Timer(0.2, ops.hold_syncs, (False,)).start()
    assert writer.close()  # waits for the held sync, then writes and syncs the rest
    assert not worker.is_alive()
    assert _commands(tmp_path / "a.aof")[-1] == [b"SET", b"k", b"w"]


# -- a write error that lasts: the roll-back ------------------------------------------------


def test_roll_back_cuts_a_partial_write_and_answers_each_held_reply(tmp_path: Path) -> None:
    """A write that stops half-way through a command (ENOSPC) and an error that lasts
    aof-write-error-timeout (0 here): the file is cut back to the last durable command, memory
    is reloaded from it, every held reply of the writers and of a reader that saw their
    entries becomes -MISCONF, one per reply; writes stay refused until a write works."""
    h = Harness()
    h.call(h.client(), "CONFIG", "SET", "aof-write-error-timeout", "0")
    ops = FaultyFileOps()
    durability = Durability(h.engine.config, h.engine, str(tmp_path), ops=ops)
    durability.open()
    writer = durability.aof.writer
    assert writer is not None
    first = h.client()
    assert h.call(first, "XADD", "s", "1-1", "f", "v") == b"1-1"
    durability.persist()
    durable_size = writer.size
    ops.fail_writes(errno.ENOSPC, half_first=True)
    second, reader = h.client(), h.client()
    for argv in ([b"XADD", b"s", b"2-1", b"f", b"v"], [b"XADD", b"s", b"3-1", b"f", b"v"]):
        h.engine.execute(second, argv)
    for argv in ([b"XLEN", b"s"], [b"PING"]):
        h.engine.execute(reader, argv)
    durability.persist()

    misconf = b"-MISCONF Errors writing to the AOF file: No space left on device\r\n"
    assert h.raw(second) == misconf * 2
    assert h.raw(reader) == misconf * 2
    assert durability.may_reply(second) and durability.may_reply(reader)
    assert writer.path.stat().st_size == durable_size
    assert _commands(writer.path)[-1] == [b"XADD", b"s", b"1-1", b"f", b"v"]
    assert h.call(first, "XRANGE", "s", "-", "+") == [[b"1-1", [b"f", b"v"]]]
    refused = h.call(first, "XADD", "s", "4-1", "f", "v")
    assert error_text(refused) == misconf[1:-2].decode()
    assert h.engine.info.aof_last_write_status == "err"
    rolled_back = durability.aof.writer
    assert durability.aof.error_since is not None
    durability.aof.error_since -= 60  # still failing long after, with nothing new to drop:
    durability.persist()
    assert durability.aof.writer is rolled_back  # no second roll-back (no reload)

    ops.fail_writes(None)
    durability.persist()  # the probe (SELECT 0) is written: the error is over
    assert h.engine.info.aof_last_write_status == "ok"
    assert h.call(first, "XADD", "s", "4-1", "f", "v") == b"4-1"
    durability.persist()
    durability.close()
    replayed = _replay_into_fresh(writer.path)
    assert replayed.call(replayed.client(), "XLEN", "s") == 2


def test_no_roll_back_before_the_timeout(tmp_path: Path) -> None:
    h = Harness()
    ops = FaultyFileOps()
    durability = Durability(h.engine.config, h.engine, str(tmp_path), ops=ops)
    durability.open()
    ops.fail_writes(errno.ENOSPC)
    c = h.client()
    h.engine.execute(c, [b"XADD", b"s", b"1-1", b"f", b"v"])
    durability.persist()
    assert not durability.may_reply(c)  # held, not rolled back (2000 ms by default)
    ops.fail_writes(None)
    durability.persist()
    assert durability.may_reply(c)
    assert h.raw(c) == b"$3\r\n1-1\r\n"
    durability.close()


def test_count_replies_counts_frames_of_resp2_and_resp3_but_not_pushes() -> None:
    frames = [
        b"+OK\r\n",
        b"-ERR x\r\n",
        b":5\r\n",
        b"$-1\r\n",
        b"$3\r\na\r\n\r\n",
        b"*-1\r\n",
        b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
        b"%1\r\n+k\r\n*0\r\n",
        b"~1\r\n,1.5\r\n",
        b"_\r\n",
        b"#t\r\n",
        b"(12345678901234567890\r\n",
        b"=7\r\ntxt:abc\r\n",
        b"!5\r\nERR x\r\n",
        b"|1\r\n+key\r\n+val\r\n:7\r\n",  # an attribute and the reply it leads
    ]
    push = b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n"
    assert count_replies(b"".join(frames)) == len(frames)
    assert count_replies(push + b"".join(frames) + push) == len(frames)
    assert count_replies(b"") == 0


def test_persistence_commands_answer_without_a_server_layer() -> None:
    """An engine alone (no ``Durability``): SAVE, BGSAVE and BGREWRITEAOF refuse, DEBUG
    RELOAD and LOADAOF are unknown subcommands, and DEBUG HELP names no fault injection."""
    h = Harness()
    c = h.client()
    assert h.engine.persistence is None
    no_saving = "ERR Saving is not available in this process"
    assert str(h.call(c, "SAVE")) == no_saving
    assert str(h.call(c, "BGSAVE", "NOW")) == no_saving
    assert str(h.call(c, "BGREWRITEAOF")) == "ERR Append only file is not enabled"
    for sub in ("RELOAD", "LOADAOF", "AOF-WRITE-ERROR", "AOF-FSYNC-HOLD"):
        assert str(h.call(c, "DEBUG", sub)) == (
            f"ERR unknown subcommand or wrong number of arguments for '{sub}'. Try DEBUG HELP."
        )
    assert not [line for line in h.call(c, "DEBUG", "HELP") if b"AOF-" in line]
