"""Full sync in each of its forms, and kill -9 in the middle of one (issue 17).

The primary sends the snapshot while its child writes it (``$EOF:<mark>``, the default) or
once it is written (``$<size>``: ``repl-diskless-sync no``); the replica loads it as it arrives
beside its data (``repl-diskless-load swapdb``, the default) or from a temporary file
(``disabled``). Every pairing gives the primary's data, with the writes made during the
transfer after it.

Crash safety: a primary killed with kill -9 while the snapshot is on its way leaves the replica
with its data as it was (none of the snapshot), and what either server acknowledged (WAITAOF)
is there after it restarts from its own disk; a replica killed the same way restarts from its
own AOF, whole, and syncs again. The link goes through ``SlowLink`` so that the kill lands in
the middle of the transfer.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import redis

from tests.e2e.test_replication_e2e import log_of
from tests.helpers import ServerProcess, encode_command, start_headwater
from tests.support.replicas import connect, in_step, info, wait_until
from tests.support.slow_link import SlowLink

pytestmark = pytest.mark.e2e

ENTRIES = 40_000
DURABLE = ("--appendonly", "yes", "--appendfsync", "always")


def fill(r: redis.Redis, key: str, entries: int) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(entries):
        pipe.xadd(key, {"v": f"{i:0200d}"}, id=f"{i + 1}-0")
    pipe.execute()


def kill_9(server: ServerProcess) -> None:
    os.kill(server.proc.pid, 9)
    server.proc.wait()


def restart(server: ServerProcess, *args: str) -> ServerProcess:
    """The same port and data directory, as after a crash."""
    return start_headwater("--dir", server.workdir, *args, port=server.port)


def transfer_under_way(replica: redis.Redis) -> bool:
    fields = info(replica)
    return bool(fields.get("master_sync_in_progress") and fields.get("master_sync_read_bytes"))


@pytest.mark.parametrize("load", ["swapdb", "disabled"])
@pytest.mark.parametrize("sync", ["yes", "no"])
def test_every_form_of_full_sync_gives_the_primary_data(sync: str, load: str) -> None:
    primary_p = start_headwater("--repl-diskless-sync", sync)
    replica_p = start_headwater("--repl-diskless-load", load)
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        fill(primary, "big", ENTRIES)
        replica.set("mine", "gone after the sync")
        replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
        for i in range(200):  # during the fork and the transfer: they follow the snapshot
            primary.xadd("big", {"v": "late"}, id=f"{50_000 + i}-0")
        wait_until(lambda: in_step(primary, replica), timeout=60, what="full sync")
        assert replica.xlen("big") == ENTRIES + 200
        assert replica.xrevrange("big", count=3) == primary.xrevrange("big", count=3)
        assert replica.get("mine") is None
        form = "streamed while it is written" if sync == "yes" else ""
        assert form in log_of(primary_p)
        where = "loaded as it arrives" if load == "swapdb" else "to disk"
        assert where in log_of(replica_p)
        assert not list(Path(primary_p.workdir).glob("temp-*"))
        assert not list(Path(replica_p.workdir).glob("temp-*"))
    finally:
        replica_p.stop()
        primary_p.stop()


def test_kill_9_of_the_primary_mid_sync() -> None:
    primary_p = start_headwater(*DURABLE)
    replica_p = start_headwater(*DURABLE)
    link = SlowLink(primary_p.port)
    again: list[ServerProcess] = []
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        fill(primary, "big", ENTRIES)
        assert primary.execute_command("WAITAOF", 1, 0, 0) == [1, 0]
        replica.set("mine", "kept")
        replica.xadd("own", {"n": "1"}, id="1-0")
        assert replica.execute_command("WAITAOF", 1, 0, 0) == [1, 0]
        replica.execute_command("REPLICAOF", "127.0.0.1", link.port)
        wait_until(lambda: transfer_under_way(replica), what="the transfer under way")
        kill_9(primary_p)
        wait_until(lambda: "nothing of it is applied" in log_of(replica_p), what="the cut")
        # the replica serves its data as it was: none of the snapshot is there
        assert replica.get("mine") == b"kept"
        assert replica.xrange("own") == [(b"1-0", {b"n": b"1"})]
        assert replica.exists("big") == 0
        assert info(replica)["master_link_status"] == "down"
        # both restart from their own disks with what they acknowledged
        kill_9(replica_p)
        again.append(restart(replica_p))
        assert connect(again[0]).get("mine") == b"kept"
        assert connect(again[0]).exists("big") == 0
        # (a crash while the child writes leaves its file; a replica's, its temporary file)
        stale = [Path(primary_p.workdir) / n for n in ("temp-repl-9-1.hwsnap", "temp-9.9.hwsnap")]
        for path in stale:
            path.write_bytes(b"HWSNAP")
        again.append(restart(primary_p, *DURABLE))
        assert connect(again[1]).xlen("big") == ENTRIES
        assert not any(path.exists() for path in stale)  # removed at the start
    finally:
        link.close()
        for server in (*again, replica_p, primary_p):
            server.stop()


def test_kill_9_of_the_replica_mid_sync() -> None:
    primary_p = start_headwater("--repl-timeout", "3")
    replica_p = start_headwater(*DURABLE)
    link = SlowLink(primary_p.port)
    again: ServerProcess | None = None
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        fill(primary, "big", ENTRIES)
        replica.set("mine", "kept")
        assert replica.execute_command("WAITAOF", 1, 0, 0) == [1, 0]
        replica.execute_command("REPLICAOF", "127.0.0.1", link.port)
        wait_until(lambda: transfer_under_way(replica), what="the transfer under way")
        kill_9(replica_p)
        # restarted on its own disk: its data whole, none of the snapshot
        again = restart(replica_p)
        r = connect(again)
        assert r.get("mine") == b"kept"
        assert r.exists("big") == 0
        # the primary saw its replica go: the snapshot's file does not stay behind
        # (at once when the link's reset reaches it; at worst after repl-timeout, 3 s here)
        wait_until(lambda: info(primary)["connected_slaves"] == 0, 15, "the replica dropped")
        wait_until(
            lambda: not list(Path(primary_p.workdir).glob("temp-*")), what="the file removed"
        )
        # and a sync now gives the whole data set
        r.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
        wait_until(lambda: in_step(primary, r), timeout=60, what="the sync again")
        assert r.xlen("big") == ENTRIES
        assert r.get("mine") is None
    finally:
        link.close()
        for server in (again, replica_p, primary_p):
            if server is not None:
                server.stop()


def test_a_replica_that_stops_reading_its_snapshot_is_disconnected() -> None:
    """A replica whose transfer does not move for repl-timeout seconds is dropped, as Redis
    drops one ("Disconnecting timedout replica (full sync)"): else it would hold the transfer
    and the snapshot's file for good."""
    primary_p = start_headwater("--repl-timeout", "2")
    try:
        primary = connect(primary_p)
        fill(primary, "big", 60_000)  # more than the socket buffers and the high-water mark
        with socket.create_connection(("127.0.0.1", primary_p.port)) as stuck:
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            # (a Headwater replica: a snapshot larger than the buffers; an RDB is more compact)
            handshake = (
                ("PING",),
                ("REPLCONF", "capa", "eof", "capa", "hwsnap"),
                ("PSYNC", "?", "-1"),
            )
            for argv in handshake:
                stuck.sendall(encode_command(*argv))
            wait_until(lambda: info(primary)["connected_slaves"] == 1, what="the replica")
            wait_until(
                lambda: "Disconnecting timedout replica (full sync)" in log_of(primary_p),
                timeout=15,
                what="the timeout",
            )
            wait_until(lambda: info(primary)["connected_slaves"] == 0, what="dropped")
        assert not list(Path(primary_p.workdir).glob("temp-*"))
    finally:
        primary_p.stop()
