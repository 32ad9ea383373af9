"""Cluster mode against a one-node redis-server 7.0 cluster: the same commands give the same
bytes, RESP2 and RESP3, once each reply's node ID and ports are masked (each node has its
own). Covers slots (ADDSLOTS and friends, their errors), the state (INFO, NODES, SLOTS,
SHARDS, the fail → ok delays), routing (CLUSTERDOWN, CROSSSLOT, ASK, TRYAGAIN; MOVED needs a
second node: tests/unit/test_cluster_routing.py), transactions, scripts and the commands
cluster mode refuses (SELECT, MOVE, SWAPDB, COPY … DB)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.differential.harness import argv_of
from tests.helpers import RawClient, ServerProcess, start_headwater, start_redis

# a short node timeout: the wait after a minority partition (0.5 s at least) stays short
CLUSTER_ARGS = ("--cluster-enabled", "yes", "--cluster-node-timeout", "500")


@pytest.fixture
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    ours = start_headwater(*CLUSTER_ARGS)
    theirs = start_redis(*CLUSTER_ARGS)
    yield ours, theirs
    ours.stop()
    theirs.stop()


class Node:
    """A connection to one node, with its ID and ports masked out of every reply."""

    def __init__(self, server: ServerProcess, resp: int) -> None:
        self.client = RawClient(server.port)
        if resp == 3:
            self.client.call("HELLO", "3")
        reply = self.client.call("CLUSTER", "MYID")
        self.myid = reply.split(b"\r\n")[1]
        self.port = str(server.port).encode()
        self.bus_port = str(server.port + 10000).encode()

    def call(self, command: str) -> bytes:
        argv = [arg.replace(b"{myid}", self.myid) for arg in argv_of(command)]
        reply = self.client.call(*argv)
        for real, mask in (
            (self.myid, b"I" * 40),
            (self.bus_port, b"C" * len(self.bus_port)),
            (self.port, b"P" * len(self.port)),
        ):
            reply = reply.replace(real, mask)
        return reply

    def wait_for_state(self, state: bytes) -> None:
        deadline = time.monotonic() + 10
        while b"cluster_state:" + state not in self.client.call("CLUSTER", "INFO"):
            if time.monotonic() > deadline:
                raise AssertionError(f"cluster_state never became {state!r}")
            time.sleep(0.05)


def same(ours: Node, theirs: Node, commands: list[str], resp: int) -> None:
    for command in commands:
        got, want = ours.call(command), theirs.call(command)
        assert got == want, f"RESP{resp} {command!r}: headwater {got!r} != redis {want!r}"


WITHOUT_SLOTS = [
    "CLUSTER NODES",
    "CLUSTER SLOTS",
    "CLUSTER SHARDS",
    "INFO cluster",
    "SET foo bar",
    "GET foo",
    "MSET a 1 b 2",
    "PING",
    "CLUSTER KEYSLOT foo",
    "CLUSTER KEYSLOT {user1000}.following",
    "CLUSTER KEYSLOT foo{}{bar}",
    "CLUSTER KEYSLOT foo{{bar}}zap",
    "CLUSTER KEYSLOT foo{bar}{zap}",
    "CLUSTER KEYSLOT",
    "CLUSTER COUNTKEYSINSLOT 16384",
    "CLUSTER COUNTKEYSINSLOT -1",
    "CLUSTER COUNTKEYSINSLOT x",
    "CLUSTER GETKEYSINSLOT 1 -1",
    "CLUSTER GETKEYSINSLOT x 1",
    "CLUSTER GETKEYSINSLOT 1 x",
    "CLUSTER ADDSLOTS 16384",
    "CLUSTER ADDSLOTS x",
    "CLUSTER ADDSLOTS 1 2 x",
    "CLUSTER ADDSLOTS 10 10",
    "CLUSTER DELSLOTS 5",
    "CLUSTER ADDSLOTSRANGE 5 4",
    "CLUSTER ADDSLOTSRANGE 5",
    "CLUSTER ADDSLOTSRANGE 1 2 3",
    "CLUSTER ADDSLOTSRANGE 0 10 5 20",
    "CLUSTER ADDSLOTSRANGE 0 100",
    "CLUSTER ADDSLOTS 5",
    "CLUSTER DELSLOTS 5 5",
    "CLUSTER DELSLOTSRANGE 10 20",
    "CLUSTER DELSLOTSRANGE 10 20",
    "CLUSTER NODES",
    "CLUSTER SLOTS",
    "CLUSTER SHARDS",
    "CLUSTER FOO",
    "CLUSTER",
    "CLUSTER HELP",
    "CLUSTER COUNT-FAILURE-REPORTS {myid}",
    "CLUSTER COUNT-FAILURE-REPORTS 0123",
    "CLUSTER REPLICAS {myid}",
    "CLUSTER SLAVES nobody",
    "CLUSTER LINKS",
    "CLUSTER SETSLOT 1 NODE nobody",
    "CLUSTER SETSLOT 1 MIGRATING nobody",
    "CLUSTER SETSLOT 200 MIGRATING {myid}",
    "CLUSTER SETSLOT 1 IMPORTING {myid}",
    "CLUSTER SETSLOT 1 FOO",
    "CLUSTER SETSLOT 1 STABLE x",
    "CLUSTER SETSLOT x STABLE",
    "CLUSTER SET-CONFIG-EPOCH -1",
    "CLUSTER SET-CONFIG-EPOCH x",
    "CLUSTER SET-CONFIG-EPOCH 5",
    "CLUSTER SET-CONFIG-EPOCH 6",
    "CLUSTER BUMPEPOCH",
    "CLUSTER BUMPEPOCH",
    "CLUSTER RESET FOO",
    "CLUSTER RESET SOFT x",
    "READONLY",
    "READWRITE",
    "ASKING",
    "READONLY x",
    "CLUSTER MEET 127.0.0.1 x",
    "CLUSTER MEET 127.0.0.1 7000 x",
    "CLUSTER MEET nohost 7000",
    "CLUSTER MEET 127.0.0.1 70000",
    "CLUSTER MEET 127.0.0.1 0",
    "CLUSTER MEET 127.0.0.1 7000 17000 1",
    "CLUSTER FORGET {myid}",
    "CLUSTER FORGET nobody",
    "CLUSTER REPLICATE {myid}",
    "CLUSTER REPLICATE nobody",
    "CLUSTER FAILOVER",
    "CLUSTER FAILOVER FORCE",
    "CLUSTER FAILOVER x",
    "CLUSTER FAILOVER FORCE x",
]

ALL_SLOTS = [
    "CLUSTER FLUSHSLOTS",
    "CLUSTER ADDSLOTSRANGE 0 16383",
]

SERVING = [
    "INFO cluster",
    "CLUSTER NODES",
    "SET foo bar",
    "GET foo",
    "MSET a 1 b 2",
    "MSET {a}1 1 {a}2 2",
    "MGET {a}1 {a}2 {a}1",
    "DEL {a}1 a",
    "CLUSTER COUNTKEYSINSLOT 12182",
    "CLUSTER GETKEYSINSLOT 12182 10",
    "CLUSTER GETKEYSINSLOT 12182 0",
    "CLUSTER COUNTKEYSINSLOT 15495",
    "SELECT 0",
    "SELECT 1",
    "SELECT 99",
    "SELECT x",
    "MOVE foo 1",
    "SWAPDB 0 1",
    "COPY foo bar DB 1",
    "COPY foo {foo}x DB 1",
    "COPY foo {foo}x DB 0",
    "COPY foo {foo}y",
    "RENAME foo bar",
    "RENAME foo {foo}z",
    "XADD s 1-1 f v",
    "XREAD STREAMS s t 0 0",
    "XREAD STREAMS s {s}t 0 0",
    "MULTI",
    "SET {x}1 1",
    "SET {y}1 1",
    "EXEC",
    "GET {x}1",
    "MULTI",
    "MSET {x}1 1 {y}1 1",
    "SET {x}1 2",
    "EXEC",
    "MULTI",
    "SET {x}1 3",
    "GET {x}2",
    "EXEC",
    "EVAL \"return redis.call('set',KEYS[1],'x')\" 1 foo",
    "EVAL \"return redis.call('get','foo')\" 0",
    "EVAL \"redis.call('get','foo') return redis.call('get','a')\" 0",
    "EVAL \"return redis.call('get','a')\" 1 foo",
    "EVAL \"#!lua\nredis.call('get','foo') return redis.call('get','a')\" 0",
    "EVAL \"#!lua flags=allow-cross-slot-keys\nredis.call('get','foo') "
    "return redis.call('get','a')\" 0",
    'EVAL "#!lua flags=no-cluster\nreturn 1" 0',
    'EVAL "return 1" 2 foo a',
    "SPUBLISH a x",
    "SSUBSCRIBE a b",
    "CLUSTER SETSLOT 12182 MIGRATING {myid}",
    "CLUSTER NODES",
    "GET foo",
    "GET {foo}absent",
    "MGET foo {foo}absent",
    "MGET {foo}absent {foo}missing",
    "CLUSTER SETSLOT 12182 STABLE",
    "CLUSTER SETSLOT 12182 NODE {myid}",
    "CLUSTER FLUSHSLOTS",
    "CLUSTER RESET",
    "FLUSHALL",
    "CLUSTER DELSLOTS 100",
    "CLUSTER SETSLOT 100 IMPORTING {myid}",
    "CLUSTER NODES",
    "CLUSTER SETSLOT 100 NODE {myid}",
    "CLUSTER NODES",
    "INFO cluster",
    "CLUSTER RESET SOFT",
    "CLUSTER NODES",
    "CLUSTER INFO",
]


@pytest.mark.parametrize("resp", [2, 3])
def test_a_one_node_cluster_answers_as_redis(
    pair: tuple[ServerProcess, ServerProcess], resp: int
) -> None:
    ours, theirs = Node(pair[0], resp), Node(pair[1], resp)
    time.sleep(2.3)  # past the 2 s a master waits before its first state change
    same(ours, theirs, WITHOUT_SLOTS, resp)
    same(ours, theirs, ALL_SLOTS, resp)
    ours.wait_for_state(b"ok")
    theirs.wait_for_state(b"ok")
    same(ours, theirs, SERVING, resp)


def test_a_plain_server_refuses_the_cluster_commands(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    for resp in (2, 3):
        ours, theirs = RawClient(headwater.port), RawClient(redis_server.port)
        for client in (ours, theirs):
            client.call("HELLO", str(resp))
        for command in (
            "CLUSTER INFO",
            "CLUSTER KEYSLOT foo",
            "CLUSTER HELP",
            "CLUSTER FOO",
            "CLUSTER",
            "CLUSTER ADDSLOTS 1",
            "READONLY",
            "READWRITE",
            "ASKING",
            "INFO cluster",
        ):
            argv = argv_of(command)
            assert ours.call(*argv) == theirs.call(*argv), command
        ours.close()
        theirs.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_losing_a_slot_unsubscribes_its_shard_channels(
    pair: tuple[ServerProcess, ServerProcess], resp: int
) -> None:
    got = []
    for server in pair:
        admin = Node(server, 3)
        admin.call("CLUSTER ADDSLOTSRANGE 0 16383")
        admin.wait_for_state(b"ok")
        listener = Node(server, resp)
        confirmations = [listener.call("SSUBSCRIBE {x}news"), listener.call("SSUBSCRIBE {y}news")]
        slot = admin.call("CLUSTER KEYSLOT {x}news").split(b":")[1].strip()
        admin.call(f"CLUSTER DELSLOTS {slot.decode()}")
        pushed = listener.client.read_reply()  # (sunsubscribe of {x}news, unasked)
        listener.client.sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        got.append((confirmations, pushed, listener.client.read_reply()))
    assert got[0] == got[1]
