"""Primary/replica replication over TCP between real Headwater processes (issue 17): full
sync, the live stream, partial resync after a cut, consumer-group state, WAIT, READONLY, and
bad input (garbage on the link, a bogus PSYNC offset, a primary that is not Redis, one that
vanishes mid-snapshot, REPLICAOF to itself)."""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from headwater.keyspace import Keyspace
from headwater.persistence.snapshot import write_snapshot
from tests.helpers import ServerProcess, encode_command, free_port, raw_client, start_headwater
from tests.support.replicas import connect, in_step, info, link_up, wait_until

pytestmark = pytest.mark.e2e


def log_of(server: ServerProcess) -> str:
    """What the server logged so far (its stdout, read without blocking)."""
    assert server.proc.stdout is not None
    chunks = []
    fd = server.proc.stdout.fileno()
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    text = b"".join(chunks).decode(errors="replace")
    server.__dict__.setdefault("_log", []).append(text)
    return "".join(server.__dict__["_log"])


@pytest.fixture
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    primary = start_headwater()
    replica = start_headwater("--repl-timeout", "5")
    yield primary, replica
    replica.stop()
    primary.stop()


def group_state(r: redis.Redis, key: str) -> list[Any]:
    """Consumer-group state that must replicate exactly (idle times are each server's own)."""
    state: list[Any] = [r.xrange(key)]
    for group in r.xinfo_groups(key):
        name = group["name"]
        state.append((name, group["last-delivered-id"], group["entries-read"], group["pending"]))
        pending = r.xpending_range(key, name, "-", "+", 1000)
        state.append([(p["message_id"], p["consumer"], p["times_delivered"]) for p in pending])
        consumers = r.xinfo_consumers(key, name)
        state.append(sorted((c["name"], c["pending"]) for c in consumers))
    return state


def test_full_sync_then_live_stream(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary_p, replica_p = pair
    primary, replica = connect(primary_p), connect(replica_p)
    for i in range(200):
        primary.xadd("rides", {"n": str(i)}, id=f"{i + 1}-0")
    primary.set("plain", "v")
    primary_db3 = redis.Redis(port=primary_p.port, db=3)
    primary_db3.xadd("other", {"a": "b"}, id="5-5")
    assert replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port) == b"OK"
    wait_until(lambda: in_step(primary, replica), what="full sync")
    assert replica.xlen("rides") == 200
    assert replica.get("plain") == b"v"
    assert redis.Redis(port=replica_p.port, db=3).xrange("other") == [(b"5-5", {b"a": b"b"})]
    # the live stream, across databases
    primary.xadd("rides", {"n": "live"}, id="1000-0")
    primary_db3.xadd("other", {"c": "d"}, id="6-0")
    primary.delete("plain")
    wait_until(lambda: in_step(primary, replica), what="stream")
    assert replica.xrange("rides", "1000-0", "+") == [(b"1000-0", {b"n": b"live"})]
    assert redis.Redis(port=replica_p.port, db=3).xlen("other") == 2
    assert replica.exists("plain") == 0
    # INFO and ROLE, as Sentinel and redis-py read them
    p_info, r_info = info(primary), info(replica)
    assert p_info["role"] == "master" and p_info["connected_slaves"] == 1
    assert p_info["slave0"]["state"] == "online"
    assert p_info["slave0"]["port"] == replica_p.port
    assert r_info["role"] == "slave" and r_info["master_port"] == primary_p.port
    assert r_info["slave_priority"] == 100 and r_info["slave_read_only"] == 1
    assert r_info["master_replid"] == p_info["master_replid"]
    assert info(primary, "stats")["sync_full"] == 1
    role = replica.execute_command("ROLE")
    assert role[:4] == [b"slave", b"127.0.0.1", primary_p.port, b"connected"]
    assert primary.execute_command("ROLE")[0] == b"master"


def test_consumer_groups_replicate_exactly(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary_p, replica_p = pair
    primary, replica = connect(primary_p), connect(replica_p)
    for i in range(20):
        primary.xadd("jobs", {"i": str(i)}, id=f"{i + 1}-0")
    primary.xgroup_create("jobs", "workers", id="0")
    primary.xreadgroup("workers", "alice", {"jobs": ">"}, count=5)  # before the sync
    replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
    wait_until(lambda: in_step(primary, replica), what="full sync")
    assert group_state(replica, "jobs") == group_state(primary, "jobs")
    # after the sync, through the stream: reads, acks, claims, a second delivery
    primary.xreadgroup("workers", "bob", {"jobs": ">"}, count=5)
    primary.xack("jobs", "workers", "1-0", "7-0")
    primary.xclaim("jobs", "workers", "carol", 0, ["2-0", "8-0"])
    primary.xreadgroup("workers", "alice", {"jobs": "0"})  # history: counts go up
    primary.xgroup_create("jobs", "audit", id="$")
    wait_until(lambda: in_step(primary, replica), what="stream")
    assert group_state(replica, "jobs") == group_state(primary, "jobs")
    # after a failover, a consumer resumes from its PEL on the replica's data
    replica.execute_command("REPLICAOF", "NO", "ONE")
    pending = replica.xreadgroup("workers", "carol", {"jobs": "0"})
    assert [entry[0] for entry in pending[0][1]] == [b"2-0", b"8-0"]


def test_readonly_replica(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary_p, replica_p = pair
    primary, replica = connect(primary_p), connect(replica_p)
    primary.xadd("s", {"a": "1"}, id="1-0")
    primary.xgroup_create("s", "g", id="0")
    replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
    wait_until(lambda: in_step(primary, replica), what="sync")
    with raw_client(replica_p.port) as raw:
        readonly = b"-READONLY You can't write against a read only replica.\r\n"
        assert raw.call("XADD", "s", "*", "a", "2") == readonly
        assert raw.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">") == readonly
        assert raw.call("SET", "k", "v") == readonly
        assert raw.call("XRANGE", "s", "-", "+").startswith(b"*1\r\n")
        assert raw.call("XREAD", "STREAMS", "s", "0").startswith(b"*1\r\n")
        assert raw.call("WAIT", "0", "0").startswith(b"-ERR WAIT cannot be used with replica")
    # REPLICAOF NO ONE: writable again, with the old history as replid2
    old = info(replica)["master_replid"]
    assert replica.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    promoted = info(replica)
    assert promoted["role"] == "master" and promoted["master_replid2"] == old
    assert replica.xadd("s", {"a": "3"}, id="9-0") == b"9-0"


def test_partial_resync_after_a_cut(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary_p, replica_p = pair
    primary, replica = connect(primary_p), connect(replica_p)
    for i in range(1000):  # a snapshot far bigger than what the cut misses
        primary.xadd("big", {"payload": "x" * 100}, id=f"{i + 1}-0")
    replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
    wait_until(lambda: in_step(primary, replica), what="full sync")
    before = info(primary, "stats")
    offset_before = info(primary)["master_repl_offset"]
    assert replica.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    primary.xadd("big", {"payload": "during the cut"}, id="5000-0")
    wait_until(lambda: in_step(primary, replica), what="partial resync")
    after = info(primary, "stats")
    assert after["sync_partial_ok"] == before["sync_partial_ok"] + 1
    assert after["sync_full"] == before["sync_full"]
    assert replica.xrange("big", "5000-0", "+") == [(b"5000-0", {b"payload": b"during the cut"})]
    missed = info(primary)["master_repl_offset"] - offset_before
    log = wait_until(lambda: "accepted. Sending" in log_of(primary_p) and log_of(primary_p))
    # only the backlog: the bytes written during the cut (and maybe a PING), not the data
    sent = int(log.split("accepted. Sending ")[1].split(" bytes")[0])
    assert 0 < sent <= missed < 1000


def test_wait(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary_p, replica_p = pair
    primary, replica = connect(primary_p), connect(replica_p)
    assert primary.execute_command("WAIT", 0, 0) == 0
    replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
    wait_until(lambda: in_step(primary, replica), what="sync")
    primary.xadd("s", {"a": "1"}, id="1-0")
    started = time.monotonic()
    assert primary.execute_command("WAIT", 1, 5000) == 1
    assert time.monotonic() - started < 2
    started = time.monotonic()
    primary.xadd("s", {"a": "2"}, id="2-0")
    assert primary.execute_command("WAIT", 2, 300) == 1  # only one replica: the timeout
    assert 0.25 < time.monotonic() - started < 3
    # a pipelined command after WAIT waits for it
    pipe = primary.pipeline(transaction=False)
    pipe.xadd("s", {"a": "3"}, id="3-0")
    pipe.execute_command("WAIT", 1, 5000)
    pipe.xlen("s")
    assert pipe.execute() == [b"3-0", 1, 3]


def test_min_replicas_to_write(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary_p, replica_p = pair
    primary, replica = connect(primary_p), connect(replica_p)
    primary.config_set("min-replicas-to-write", 1)
    with raw_client(primary_p.port) as raw:
        assert raw.call("SET", "k", "v") == b"-NOREPLICAS Not enough good replicas to write.\r\n"
        replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
        wait_until(lambda: in_step(primary, replica), what="sync")
        wait_until(lambda: raw.call("SET", "k", "v") == b"+OK\r\n", what="writes accepted")


def test_psync_with_a_bogus_offset_gets_a_full_resync(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    primary_p, _ = pair
    primary = connect(primary_p)
    primary.xadd("s", {"a": "1"}, id="1-0")
    replid = info(primary)["master_replid"]
    with socket.create_connection(("127.0.0.1", primary_p.port), 5) as sock:
        sock.sendall(encode_command("REPLCONF", "listening-port", "1"))
        assert sock.recv(100) == b"+OK\r\n"
        sock.sendall(encode_command("PSYNC", replid, "999999"))  # a replica that lies
        data = b""
        while b"\r\n" not in data:
            data += sock.recv(4096)
        assert data.startswith(b"+FULLRESYNC " + replid.encode() + b" ")
    assert info(primary, "stats")["sync_partial_err"] == 1
    with raw_client(primary_p.port) as raw:
        assert raw.call("PSYNC", "x", "notanumber") == (
            b"-ERR value is not an integer or out of range\r\n"
        )
        assert raw.call("REPLCONF", "nonsense", "1") == (
            b"-ERR Unrecognized REPLCONF option: nonsense\r\n"
        )


class FakePrimary:
    """A TCP server that answers the handshake, then does what the test says."""

    def __init__(self, after_psync: Callable[[socket.socket, int], None]) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.after_psync = after_psync
        self.psyncs: list[bytes] = []
        self.sessions = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self._session(conn)
                except OSError:
                    pass

    def _session(self, conn: socket.socket) -> None:
        buf = b""
        while b"PSYNC" not in buf:
            chunk = conn.recv(4096)
            if not chunk:
                return
            buf += chunk
            for word in (b"PING", b"listening-port", b"capa"):
                if word in chunk:
                    conn.sendall(b"+PONG\r\n" if word == b"PING" else b"+OK\r\n")
        while buf[buf.index(b"PSYNC") :].count(b"\r\n") < 5:  # PSYNC, $n, id, $n, offset
            buf += conn.recv(4096)
        self.psyncs.append(buf[buf.index(b"PSYNC") :])
        self.sessions += 1
        self.after_psync(conn, self.sessions)

    def close(self) -> None:
        self.sock.close()


def empty_snapshot() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.hwsnap"
        write_snapshot(path, Keyspace(16).dbs)
        return path.read_bytes()


REPLID = "a" * 40


def test_garbage_on_the_link_closes_it_and_resyncs_partially() -> None:
    snapshot = empty_snapshot()

    def session(conn: socket.socket, n: int) -> None:
        if n == 1:
            conn.sendall(b"+FULLRESYNC %s 100\r\n$%d\r\n" % (REPLID.encode(), len(snapshot)))
            conn.sendall(snapshot)
            good = encode_command("SET", "k", "v")
            conn.sendall(good + b"this is not RESP\r\n")
            time.sleep(0.5)
        else:
            conn.sendall(b"+CONTINUE\r\n")
            time.sleep(3)

    fake = FakePrimary(session)
    replica_p = start_headwater("--repl-timeout", "5")
    try:
        replica = connect(replica_p)
        replica.execute_command("REPLICAOF", "127.0.0.1", fake.port)
        wait_until(lambda: fake.sessions >= 2, what="reconnect")
        good_len = len(encode_command("SET", "k", "v"))
        # the command before the garbage was applied; the reconnect asks for what follows it
        psync = fake.psyncs[1].split(b"\r\n")
        assert psync[2] == REPLID.encode()
        assert int(psync[4]) == 100 + good_len + 1
        assert replica.get("k") == b"v"
        assert "Protocol error from master" in log_of(replica_p)
        assert replica.ping()
    finally:
        replica_p.stop()
        fake.close()


def test_primary_vanishing_mid_snapshot_applies_nothing() -> None:
    def session(conn: socket.socket, n: int) -> None:
        conn.sendall(b"+FULLRESYNC %s 0\r\n$100000\r\nHWSNAP" % REPLID.encode())
        time.sleep(0.1)  # then the connection closes, 99,994 bytes short

    fake = FakePrimary(session)
    replica_p = start_headwater("--repl-timeout", "5")
    try:
        replica = connect(replica_p)
        replica.set("mine", "kept")
        replica.execute_command("REPLICAOF", "127.0.0.1", fake.port)
        wait_until(lambda: "connection lost after 6 of 100000 bytes" in log_of(replica_p))
        assert replica.get("mine") == b"kept"
        assert info(replica)["master_link_status"] == "down"
    finally:
        replica_p.stop()
        fake.close()


def test_a_corrupt_snapshot_is_not_applied() -> None:
    snapshot = bytearray(empty_snapshot())
    snapshot[-1] ^= 0xFF  # the checksum no longer matches

    def session(conn: socket.socket, n: int) -> None:
        conn.sendall(b"+FULLRESYNC %s 0\r\n$%d\r\n" % (REPLID.encode(), len(snapshot)))
        conn.sendall(bytes(snapshot))
        time.sleep(0.5)

    fake = FakePrimary(session)
    replica_p = start_headwater("--repl-timeout", "5")
    try:
        replica = connect(replica_p)
        replica.set("mine", "kept")
        replica.execute_command("REPLICAOF", "127.0.0.1", fake.port)
        wait_until(lambda: "Failed trying to load the MASTER synchronization" in log_of(replica_p))
        assert replica.get("mine") == b"kept"
    finally:
        replica_p.stop()
        fake.close()


def test_replicaof_a_port_that_is_not_redis() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def http() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(100)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    threading.Thread(target=http, daemon=True).start()
    replica_p = start_headwater("--repl-timeout", "5")
    try:
        replica = connect(replica_p)
        assert replica.execute_command("REPLICAOF", "127.0.0.1", port) == b"OK"
        wait_until(lambda: "Error reply to PING from master: 'HTTP/1.1 400" in log_of(replica_p))
        assert info(replica)["master_link_status"] == "down"
        assert replica.ping()
        # and a port nobody listens on
        replica.execute_command("REPLICAOF", "127.0.0.1", free_port())
        wait_until(lambda: "Connection refused" in log_of(replica_p))
        assert replica.execute_command("ROLE")[3] in (b"connect", b"connecting")
    finally:
        replica_p.stop()
        listener.close()


def test_replicaof_itself() -> None:
    server = start_headwater("--repl-timeout", "5")
    try:
        r = connect(server)
        r.set("k", "v")
        assert r.execute_command("REPLICAOF", "127.0.0.1", server.port) == b"OK"
        wait_until(lambda: "NOMASTERLINK" in log_of(server), what="the loop refused")
        assert info(r)["master_link_status"] == "down"
        assert r.get("k") == b"v"
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        assert r.set("k", "w")
    finally:
        server.stop()


def test_promotion_psync2_and_the_stream_database() -> None:
    """kill -9 the primary, promote one replica (REPLICAOF NO ONE): the other partially
    resyncs to it with the old history (replid2), and a partial resync goes on in the
    database the stream was in."""
    primary_p = start_headwater()
    r1_p = start_headwater("--repl-timeout", "5", "--replicaof", "127.0.0.1", str(primary_p.port))
    r2_p = start_headwater("--repl-timeout", "5", "--replicaof", "127.0.0.1", str(primary_p.port))
    try:
        primary, r1, r2 = connect(primary_p), connect(r1_p), connect(r2_p)
        db2 = redis.Redis(port=primary_p.port, db=2)
        db2.xadd("s", {"a": "1"}, id="1-0")
        wait_until(lambda: in_step(primary, r1) and in_step(primary, r2), what="sync")
        # a cut while the stream is in database 2: the resync goes on there
        r2.execute_command("CLIENT", "KILL", "TYPE", "master")
        db2.xadd("s", {"a": "2"}, id="2-0")
        wait_until(lambda: in_step(primary, r2), what="partial resync")
        assert redis.Redis(port=r2_p.port, db=2).xlen("s") == 2
        assert redis.Redis(port=r2_p.port, db=0).exists("s") == 0
        assert info(primary, "stats")["sync_partial_ok"] == 1
        old_replid = info(primary)["master_replid"]
        primary_p.proc.kill()  # kill -9
        primary_p.proc.wait()
        assert r1.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        assert info(r1)["master_replid2"] == old_replid
        r2.execute_command("REPLICAOF", "127.0.0.1", r1_p.port)
        wait_until(lambda: in_step(r1, r2), what="r2 follows r1")
        stats = info(r1, "stats")
        assert (stats["sync_partial_ok"], stats["sync_full"]) == (1, 0)
        assert info(r2)["master_replid"] == info(r1)["master_replid"]
        assert info(r2)["master_replid2"] == old_replid
        redis.Redis(port=r1_p.port, db=2).xadd("s", {"a": "3"}, id="3-0")
        r1.xadd("zero", {"b": "1"}, id="1-1")
        wait_until(lambda: in_step(r1, r2), what="stream from the promoted replica")
        assert redis.Redis(port=r2_p.port, db=2).xlen("s") == 3
        assert r2.xlen("zero") == 1
    finally:
        for server in (r2_p, r1_p, primary_p):
            server.stop()


def test_replica_keeps_its_own_aof() -> None:
    """The effects a replica applies go to its own AOF: after kill -9 it restarts with them."""
    primary_p = start_headwater()
    replica_p = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        primary.xadd("s", {"a": "before"}, id="1-0")
        wait_until(lambda: in_step(primary, replica), what="sync")
        primary.xgroup_create("s", "g", id="0")
        primary.xreadgroup("g", "alice", {"s": ">"})
        primary.xadd("s", {"a": "after"}, id="2-0")
        wait_until(lambda: in_step(primary, replica), what="stream")
        expected = group_state(replica, "s")
        wait_until(lambda: info(replica, "persistence")["aof_rewrite_in_progress"] == 0)
        time.sleep(1.2)  # everysec
        replica_p.proc.kill()
        replica_p.proc.wait()
        restarted = start_headwater(
            "--dir", replica_p.workdir, "--appendonly", "yes", port=replica_p.port
        )
        try:
            assert group_state(connect(restarted), "s") == expected
        finally:
            restarted.stop()  # (removes its own unused directory, not the replica's)
    finally:
        replica_p.stop()
        primary_p.stop()


def test_waitaof() -> None:
    """WAITAOF (Redis 7.2): the local AOF's fsync, and replicas' FACKs."""
    primary_p = start_headwater("--appendfsync", "everysec")
    with_aof = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    without_aof = start_headwater(
        "--appendonly", "no", "--replicaof", "127.0.0.1", str(primary_p.port)
    )
    try:
        primary = connect(primary_p)
        wait_until(lambda: info(primary)["connected_slaves"] == 2, what="replicas")
        wait_until(
            lambda: in_step(primary, connect(with_aof)) and in_step(primary, connect(without_aof))
        )
        primary.xadd("s", {"a": "1"}, id="1-0")
        started = time.monotonic()
        assert primary.execute_command("WAITAOF", 1, 1, 5000) == [1, 1]
        assert time.monotonic() - started < 3  # everysec: within about a second
        # only one of the two replicas has an AOF: the timeout, then [1, 1]
        primary.xadd("s", {"a": "2"}, id="2-0")
        assert primary.execute_command("WAITAOF", 1, 2, 1500) == [1, 1]
        with raw_client(primary_p.port) as raw:
            assert raw.call("WAITAOF", "2", "0", "0") == (
                b"-ERR value is out of range, value must between 0 and 1\r\n"
            )
            assert raw.call("WAITAOF", "0", "-1", "0") == (
                b"-ERR value is out of range, must be positive\r\n"
            )
            assert raw.call("WAITAOF", "0", "0", "-1") == b"-ERR timeout is negative\r\n"
        with raw_client(without_aof.port) as raw:
            assert raw.call("WAITAOF", "0", "0", "0").startswith(
                b"-ERR WAITAOF cannot be used with replica instances."
            )
            raw.call("REPLICAOF", "NO", "ONE")
            assert raw.call("WAITAOF", "1", "0", "0") == (
                b"-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
            )
            assert raw.call("WAITAOF", "0", "0", "0") == b"*2\r\n:0\r\n:0\r\n"
    finally:
        for server in (without_aof, with_aof, primary_p):
            server.stop()


def test_waitaof_with_appendfsync_always() -> None:
    server = start_headwater("--appendfsync", "always")
    try:
        r = connect(server)
        r.xadd("s", {"a": "1"}, id="1-0")
        assert r.execute_command("WAITAOF", 1, 0, 0) == [1, 0]
    finally:
        server.stop()


def test_masterauth_blocked_readers_and_publish() -> None:
    """A primary with requirepass (the replica authenticates with masterauth); an XREAD BLOCK
    on the replica is served by the stream; PUBLISH reaches the replica's subscribers."""
    primary_p = start_headwater("--requirepass", "s3cret")
    replica_p = start_headwater(
        "--masterauth", "s3cret", "--replicaof", "127.0.0.1", str(primary_p.port)
    )
    try:
        primary = redis.Redis(port=primary_p.port, password="s3cret", socket_timeout=10)
        replica = connect(replica_p)
        primary.xadd("s", {"a": "1"}, id="1-0")
        wait_until(lambda: in_step(primary, replica), what="sync with AUTH")
        result: list[Any] = []
        reader = threading.Thread(
            target=lambda: result.append(connect(replica_p).xread({"s": "$"}, block=5000, count=10))
        )
        reader.start()
        pubsub = connect(replica_p).pubsub()
        pubsub.subscribe("news")
        assert pubsub.get_message(timeout=2)["type"] == "subscribe"
        time.sleep(0.3)  # the reader is blocked
        primary.xadd("s", {"a": "2"}, id="2-0")
        primary.publish("news", "hello")
        reader.join(5)
        assert result == [[[b"s", [(b"2-0", {b"a": b"2"})]]]]
        message = pubsub.get_message(timeout=3)
        assert message is not None and message["data"] == b"hello"
        pubsub.close()
    finally:
        replica_p.stop()
        primary_p.stop()


def test_wrong_masterauth_is_logged_and_retried() -> None:
    primary_p = start_headwater("--requirepass", "s3cret")
    replica_p = start_headwater(
        "--masterauth", "wrong", "--replicaof", "127.0.0.1", str(primary_p.port)
    )
    try:
        wait_until(lambda: "Unable to AUTH to MASTER" in log_of(replica_p))
        assert info(connect(replica_p))["master_link_status"] == "down"
    finally:
        replica_p.stop()
        primary_p.stop()


def test_backlog_overrun_falls_back_to_a_full_sync() -> None:
    """More was written during the cut than the backlog holds: PSYNC is refused (counted in
    sync_partial_err) and a full sync brings the replica up to date."""
    # (a password keeps out a stray replica of another test, still retrying a port that
    # this primary now has: its full syncs would count here; seen in parallel suite runs)
    primary_p = start_headwater("--repl-backlog-size", "16kb", "--requirepass", "pw")
    replica_p = start_headwater(
        "--replicaof", "127.0.0.1", str(primary_p.port), "--masterauth", "pw"
    )
    try:
        primary = redis.Redis(port=primary_p.port, password="pw", socket_timeout=10)
        replica = connect(replica_p)
        primary.xadd("s", {"a": "0"}, id="1-0")
        wait_until(lambda: in_step(primary, replica), what="sync")
        replica.execute_command("CLIENT", "KILL", "TYPE", "master")
        pipe = primary.pipeline(transaction=False)
        for i in range(200):  # ~40 KB, more than the 16 KB backlog
            pipe.xadd("s", {"payload": "y" * 200}, id=f"{i + 2}-0")
        pipe.execute()
        wait_until(lambda: in_step(primary, replica), what="full resync")
        stats = info(primary, "stats")
        assert (stats["sync_full"], stats["sync_partial_err"]) == (2, 1), (
            log_of(primary_p),
            log_of(replica_p),
        )
        assert replica.xlen("s") == 201
        assert info(primary)["repl_backlog_histlen"] == 16 * 1024
    finally:
        replica_p.stop()
        primary_p.stop()


def test_a_replica_that_does_not_read_is_dropped_at_its_output_limit() -> None:
    primary_p = start_headwater("--client-output-buffer-limit", "replica 1mb 256kb 1")
    try:
        primary = connect(primary_p)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", primary_p.port))
            sock.sendall(encode_command("PSYNC", "?", "-1"))
            time.sleep(0.3)  # +FULLRESYNC and the snapshot; then it reads no more
            wait_until(lambda: info(primary)["connected_slaves"] == 1)
            pipe = primary.pipeline(transaction=False)
            for i in range(400):
                pipe.xadd("s", {"payload": "z" * 10_000}, id=f"{i + 1}-0")
            pipe.execute()
            wait_until(lambda: info(primary)["connected_slaves"] == 0, what="dropped")
            assert "overcoming of output buffer limits" in log_of(primary_p)
            assert info(primary, "stats")["client_output_buffer_limit_disconnections"] == 1
        assert primary.xlen("s") == 400
    finally:
        primary_p.stop()


def test_clean_restart_keeps_the_history_for_a_partial_resync() -> None:
    """Stop the primary cleanly, promote its replica, restart the old primary as a replica of
    it: the old primary continues its history (replication.state, as Redis's RDB keeps the
    replication ID) and resyncs partially; after kill -9 it would need a full sync."""
    primary_p = start_headwater()
    replica_p = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        # (the replica first: an XADD made before its sync reaches it in the snapshot, and the
        # stream's next command then names its database anyway, so the state says 0, as
        # Redis's repl-stream-db would: seen once in CI)
        wait_until(lambda: info(primary)["connected_slaves"] == 1, what="attached")
        wait_until(lambda: in_step(primary, replica), what="sync")
        redis.Redis(port=primary_p.port, db=1).xadd("s", {"a": "1"}, id="1-0")
        wait_until(lambda: in_step(primary, replica), what="sync")
        offset = info(primary)["master_repl_offset"]
        primary_p.proc.terminate()  # a clean shutdown
        primary_p.proc.wait(10)
        state = (Path(primary_p.workdir) / "replication.state").read_text().split()
        assert int(state[1]) == offset and state[2] == "1"
        replica.execute_command("REPLICAOF", "NO", "ONE")
        redis.Redis(port=replica_p.port, db=1).xadd("s", {"a": "2"}, id="2-0")
        restarted = start_headwater(
            "--dir",
            primary_p.workdir,
            "--replicaof",
            "127.0.0.1",
            str(replica_p.port),
            port=primary_p.port,
        )
        try:
            old = connect(restarted)
            wait_until(lambda: in_step(replica, old), what="resync to the promoted replica")
            stats = info(replica, "stats")
            assert (stats["sync_partial_ok"], stats["sync_full"]) == (1, 0)
            assert redis.Redis(port=restarted.port, db=1).xlen("s") == 2
            assert not (Path(primary_p.workdir) / "replication.state").exists()
        finally:
            restarted.stop()
    finally:
        replica_p.stop()
        primary_p.stop()


def test_a_replica_restarted_cleanly_resyncs_partially() -> None:
    """A replica shut down cleanly while its primary goes on writing (well inside the backlog)
    comes back with ``+CONTINUE``: it saves its replication state as its link stops (before,
    the stopped link read as "between syncs" and nothing was saved: a full sync)."""
    primary_p = start_headwater()
    replica_p = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        wait_until(lambda: info(primary)["connected_slaves"] == 1, what="attached")
        primary.xadd("s", {"a": "1"})
        wait_until(lambda: in_step(primary, replica), what="sync")
        # (the AOF the full sync starts must be written: a shutdown before is not clean)
        wait_until(lambda: info(replica, "persistence")["aof_rewrite_in_progress"] == 0, what="aof")
        replica.shutdown()
        replica_p.proc.wait(10)
        assert (Path(replica_p.workdir) / "replication.state").exists()
        pipe = primary.pipeline(transaction=False)
        for i in range(1000):
            pipe.xadd("s", {"n": str(i), "pad": "x" * 100})
        pipe.execute()
        before = info(primary, "stats")
        restarted = start_headwater(
            "--dir",
            replica_p.workdir,
            "--replicaof",
            "127.0.0.1",
            str(primary_p.port),
            port=replica_p.port,
        )
        try:
            wait_until(lambda: in_step(primary, connect(restarted)), what="resync")
            stats = info(primary, "stats")
            assert stats["sync_partial_ok"] == before["sync_partial_ok"] + 1
            assert stats["sync_full"] == before["sync_full"]
            assert connect(restarted).xlen("s") == 1001
        finally:
            restarted.stop()
    finally:
        replica_p.stop()
        primary_p.stop()


def _iids_tracked(r: redis.Redis) -> int:
    fields = r.xinfo_stream("s")
    return int(fields.get("iids-tracked", fields.get(b"iids-tracked")))


def test_a_replica_keeps_its_idmp_history_while_its_primary_is_stopped() -> None:
    """IDMP iids expire on the primary's clock only (as keys do): a replica whose primary is
    stopped past the stream's idmp-duration keeps them, and applies the primary's retry once
    it runs again (before, it forgot them by its own clock and refused the retry the primary
    sent with the original ID: "equal or smaller than the target stream top item")."""
    primary_p = start_headwater("--repl-timeout", "60")
    replica_p = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        wait_until(lambda: info(primary)["connected_slaves"] == 1, what="attached")
        primary.xadd("s", {"f": "0"})
        primary.execute_command("XCFGSET", "s", "IDMP-DURATION", "2")
        first = primary.execute_command("XADD", "s", "IDMP", "p", "i1", "*", "f", "v")
        wait_until(lambda: in_step(primary, replica), what="sync")
        assert _iids_tracked(replica) == 1
        primary_p.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(4)
            assert _iids_tracked(replica) == 1
        finally:
            primary_p.proc.send_signal(signal.SIGCONT)
        retry = primary.execute_command("XADD", "s", "IDMP", "p", "i1", "*", "f", "v")
        primary.xadd("s", {"f": "last"})
        wait_until(lambda: in_step(primary, replica), what="sync after the retry")
        assert replica.xrange("s") == primary.xrange("s")
        assert retry in (first, primary.xrange("s")[2][0])
        assert "ERR" not in log_of(replica_p)
    finally:
        replica_p.stop()
        primary_p.stop()


def test_wait_counts_acks_of_the_clients_own_writes() -> None:
    """WAIT judges the offset of the client's last write (Redis: c->woff), not the newest:
    a replica that acknowledged A's write but not B's counts for A only."""
    primary_p = start_headwater()
    try:
        primary = connect(primary_p)
        with socket.create_connection(("127.0.0.1", primary_p.port), 5) as replica:
            replica.sendall(encode_command("PSYNC", "?", "-1"))
            wait_until(lambda: info(primary)["connected_slaves"] == 1)
            a, b = connect(primary_p), connect(primary_p)
            a.xadd("s", {"who": "a"}, id="1-0")
            after_a = info(primary)["master_repl_offset"]
            b.xadd("s", {"who": "b"}, id="2-0")
            assert info(primary)["master_repl_offset"] > after_a
            replica.sendall(encode_command("REPLCONF", "ACK", str(after_a)))
            wait_until(lambda: info(primary)["slave0"]["offset"] == after_a)
            assert a.execute_command("WAIT", 1, 100) == 1
            assert b.execute_command("WAIT", 1, 100) == 0
    finally:
        primary_p.stop()


def test_data_reloaded_from_disk_starts_a_new_history() -> None:
    """After the primary loads its data again (DEBUG LOADAOF here; a roll-back after a lasting
    AOF write error the same way), replicas may hold effects it dropped: they are
    disconnected and come back with a full sync, not a partial one."""
    primary_p = start_headwater()
    replica_p = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        primary.xadd("s", {"a": "1"}, id="1-0")
        wait_until(lambda: in_step(primary, replica), what="sync")
        old = info(primary)["master_replid"]
        assert primary.execute_command("DEBUG", "LOADAOF") == b"OK"
        assert info(primary)["master_replid"] != old
        wait_until(lambda: info(primary, "stats")["sync_full"] == 2, what="full resync")
        wait_until(lambda: in_step(primary, replica), what="in step again")
        assert info(primary, "stats")["sync_partial_ok"] == 0
        assert replica.xrange("s") == [(b"1-0", {b"a": b"1"})]
        # the same on the replica: it starts over with a full sync (once the AOF it restarted
        # after its sync has its base: DEBUG LOADAOF does nothing before)
        wait_until(lambda: info(replica, "persistence")["aof_rewrite_in_progress"] == 0)
        assert replica.execute_command("DEBUG", "LOADAOF") == b"OK"
        wait_until(lambda: info(primary, "stats")["sync_full"] == 3, what="replica starts over")
        wait_until(lambda: in_step(primary, replica), what="in step after the replica's reload")
        assert info(primary, "stats")["sync_partial_ok"] == 0
    finally:
        replica_p.stop()
        primary_p.stop()


def test_expiry_follows_the_primary() -> None:
    """A key with a TTL expires on the replica by the primary's DEL; it reads as absent there
    from its deadline on."""
    primary_p = start_headwater()
    replica_p = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        # Attached first, so that the TTL's clock starts after the full sync (slow under load).
        wait_until(lambda: info(primary)["connected_slaves"] == 1, what="attach")
        wait_until(lambda: in_step(primary, replica), what="sync")
        primary.set("k", "v", px=2000)
        primary.xadd("s", {"a": "1"}, id="1-0")
        primary.pexpire("s", 2000)
        deadlines_set = time.monotonic()
        wait_until(lambda: in_step(primary, replica), what="the writes")
        assert replica.get("k") == b"v" and replica.xlen("s") == 1
        time.sleep(max(0.0, deadlines_set + 2.1 - time.monotonic()))
        assert replica.get("k") is None and replica.xlen("s") == 0
        wait_until(lambda: info(replica, "keyspace") == {}, what="the primary's DELs")
    finally:
        replica_p.stop()
        primary_p.stop()


def test_chained_replica_full_sync_in_the_streams_database() -> None:
    """A replica of a replica: its full sync comes from the middle one, whose stream is in
    database 2 at that moment; what follows (no SELECT in it) lands in database 2."""
    primary_p = start_headwater()
    middle_p = start_headwater("--replicaof", "127.0.0.1", str(primary_p.port))
    leaf_p: ServerProcess | None = None
    try:
        primary, middle = connect(primary_p), connect(middle_p)
        db2 = redis.Redis(port=primary_p.port, db=2)
        db2.xadd("s", {"a": "1"}, id="1-0")
        wait_until(lambda: in_step(primary, middle), what="middle")
        leaf_p = start_headwater("--replicaof", "127.0.0.1", str(middle_p.port))
        leaf = connect(leaf_p)
        wait_until(lambda: in_step(primary, leaf), what="leaf")
        db2.xadd("s", {"a": "2"}, id="2-0")  # the stream stays in database 2: no SELECT
        wait_until(lambda: in_step(primary, leaf), what="leaf stream")
        assert redis.Redis(port=leaf_p.port, db=2).xlen("s") == 2
        assert leaf.exists("s") == 0
        assert info(middle)["connected_slaves"] == 1
    finally:
        for server in (leaf_p, middle_p, primary_p):
            if server is not None:
                server.stop()


def test_a_big_snapshot_is_sent_in_chunks_with_writes_meanwhile() -> None:
    """A snapshot of several chunks (sent as the replica's transport drains), and writes made
    while it is in flight, which follow it."""
    primary_p = start_headwater()
    replica_p = start_headwater()
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        pipe = primary.pipeline(transaction=False)
        for i in range(40_000):
            pipe.xadd("big", {"v": f"{i:0200d}"}, id=f"{i + 1}-0")
        pipe.execute()
        replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
        for i in range(200):  # during the fork and the transfer
            primary.xadd("big", {"v": "late"}, id=f"{50_000 + i}-0")
        wait_until(lambda: in_step(primary, replica), timeout=60, what="big sync")
        assert replica.xlen("big") == 40_200
        assert replica.xrange("big", "-", "+", count=1) == primary.xrange("big", "-", "+", count=1)
        assert replica.xrevrange("big", count=3) == primary.xrevrange("big", count=3)
        assert "bytes of snapshot" in log_of(primary_p)
        size = int(log_of(primary_p).split("succeeded (")[1].split(" bytes")[0])
        assert size > 4 * 1024 * 1024  # more than the high-water mark: chunks and retries
    finally:
        replica_p.stop()
        primary_p.stop()


def test_a_silent_primary_times_the_link_out_and_it_resumes_after() -> None:
    """A primary that stops sending (SIGSTOP: not even its PINGs) is timed out after
    repl-timeout; once it runs again the replica resyncs partially and catches up."""
    primary_p = start_headwater("--repl-ping-replica-period", "1")
    replica_p = start_headwater("--repl-timeout", "2")
    try:
        primary, replica = connect(primary_p), connect(replica_p)
        primary.xadd("s", {"f": "before"}, id="1-0")
        replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
        wait_until(lambda: in_step(primary, replica), what="full sync")
        partial_before = info(primary, "stats")["sync_partial_ok"]
        os.kill(primary_p.proc.pid, signal.SIGSTOP)
        try:
            stopped = time.monotonic()
            wait_until(lambda: not link_up(replica), timeout=10, what="the link timed out")
            assert 1.5 < time.monotonic() - stopped < 6
            assert "MASTER timeout" in log_of(replica_p)
        finally:
            os.kill(primary_p.proc.pid, signal.SIGCONT)
        primary.xadd("s", {"f": "after"}, id="2-0")
        wait_until(lambda: in_step(primary, replica), timeout=15, what="resumed")
        assert [e[0] for e in replica.xrange("s")] == [b"1-0", b"2-0"]
        assert info(primary, "stats")["sync_partial_ok"] == partial_before + 1
    finally:
        replica_p.stop()
        primary_p.stop()
