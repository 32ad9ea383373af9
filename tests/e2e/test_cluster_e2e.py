"""A one-node Headwater cluster under real cluster clients: redis-py's ``RedisCluster``
(sync and asyncio) discovers the slots, routes keys, runs pipelines and transactions of
one slot, and gets CROSSSLOT where Redis gives it; redis-cli -c follows the cluster."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from tests.cluster_helpers import (
    address,
    check,
    create,
    node_id,
    redis_cli,
    start_node,
    wait_until_ok,
)
from tests.helpers import HEADWATER, ServerProcess, free_port, start_headwater

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def node() -> Iterator[ServerProcess]:
    server = start_headwater("--cluster-enabled", "yes", "--cluster-node-timeout", "500")
    client = redis.Redis(port=server.port)
    client.execute_command("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
    deadline = time.monotonic() + 10
    while client.cluster("INFO")["cluster_state"] != "ok":
        assert time.monotonic() < deadline, "the cluster never came up"
        time.sleep(0.05)
    client.close()
    yield server
    server.stop()


def test_redis_py_cluster_client(node: ServerProcess) -> None:
    rc = RedisCluster(host="127.0.0.1", port=node.port)
    try:
        for i in range(200):
            rc.xadd(f"stream:{i}", {"n": str(i)})
        assert sum(rc.xlen(f"stream:{i}") for i in range(200)) == 200
        rc.xgroup_create("stream:1", "g", id="0")
        entries = rc.xreadgroup("g", "c", {"stream:1": ">"})
        assert entries[0][1][0][1] == {b"n": b"1"}
        assert rc.cluster_keyslot("{user1000}.following") == 3443
        plain = redis.Redis(port=node.port)
        with pytest.raises(redis.exceptions.ResponseError, match=r"^Keys in request don't hash"):
            plain.mset({"a": "1", "b": "2"})
        plain.close()
        pipe = rc.pipeline()
        pipe.set("{t}a", 1).incr("{t}a").get("{t}a")
        assert pipe.execute() == [True, 2, b"2"]
        assert rc.mget_nonatomic(["a", "{t}a", "stream:1x"]) == [None, b"2", None]
    finally:
        rc.close()


def test_asyncio_cluster_client(node: ServerProcess) -> None:
    async def main() -> list[object]:
        rc = AsyncRedisCluster(host="127.0.0.1", port=node.port)
        try:
            await rc.set("async-key", "v")
            return [await rc.get("async-key"), await rc.cluster_keyslot("async-key")]
        finally:
            await rc.aclose()

    assert asyncio.run(main()) == [b"v", rc_slot("async-key")]


def rc_slot(key: str) -> int:
    from headwater.cluster.slots import key_slot

    return key_slot(key.encode())


def test_redis_cli_in_cluster_mode(node: ServerProcess) -> None:
    def cli(*args: str) -> str:
        argv = ["redis-cli", "-c", "-p", str(node.port), *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    assert cli("SET", "cli-key", "v") == "OK"
    assert cli("GET", "cli-key") == "v"
    assert cli("CLUSTER", "KEYSLOT", "cli-key") == str(rc_slot("cli-key"))
    assert "CROSSSLOT" in cli("MSET", "a", "1", "b", "2")


def test_a_restarted_node_keeps_its_name_epochs_and_slots(tmp_path: Path) -> None:
    port = free_port()
    args = ("--cluster-enabled", "yes", "--dir", str(tmp_path))
    first = start_headwater(*args, port=port)
    client = redis.Redis(port=port)
    client.execute_command("CLUSTER", "ADDSLOTSRANGE", "0", "99", "200", "300")
    client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", "7")
    name = client.execute_command("CLUSTER", "MYID")
    before = client.execute_command("CLUSTER", "NODES")
    client.close()
    first.proc.kill()  # (kill -9: the file was written before the replies left)
    first.proc.wait()
    second = start_headwater(*args, port=port)
    client = redis.Redis(port=port)
    try:
        assert client.execute_command("CLUSTER", "MYID") == name
        assert client.execute_command("CLUSTER", "NODES") == before
        assert client.cluster("INFO")["cluster_my_epoch"] == "7"
    finally:
        client.close()
        second.stop()


@pytest.mark.parametrize(
    "content",
    ["garbage\n", "a" * 40 + " :1@2 myself,boss - 0 0 0 connected\n"],
)
def test_a_corrupt_nodes_conf_stops_the_start_with_its_line(tmp_path: Path, content: str) -> None:
    (tmp_path / "nodes.conf").write_text(content)
    argv = [*HEADWATER, "server", "--port", str(free_port()), "--dir", str(tmp_path)]
    done = subprocess.run(
        [*argv, "--cluster-enabled", "yes"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode != 0
    assert "corrupted cluster config file" in done.stdout + done.stderr
    assert "line 1" in done.stdout + done.stderr
    assert (tmp_path / "nodes.conf").read_text() == content  # (left as it was)


def test_a_second_node_on_the_same_nodes_conf_is_refused(tmp_path: Path) -> None:
    first = start_headwater("--cluster-enabled", "yes", "--dir", str(tmp_path))
    try:
        before = (tmp_path / "nodes.conf").read_text()
        argv = [*HEADWATER, "server", "--port", str(free_port()), "--dir", str(tmp_path)]
        done = subprocess.run(
            [*argv, "--cluster-enabled", "yes"], capture_output=True, text=True, timeout=30
        )
        assert done.returncode != 0
        assert "is already used by a different Redis Cluster node" in done.stdout + done.stderr
        assert (tmp_path / "nodes.conf").read_text() == before
    finally:
        first.stop()


def test_redis_cli_rebalances_drains_deletes_and_fixes() -> None:
    """The redis-cli --cluster subcommands beyond create, check and reshard (those run in
    tests/e2e/test_cluster_scenario_e2e.py): add-node, rebalance onto the empty node and off
    it again (weight 0), del-node, and fix of a slot left open."""
    nodes = [start_node("headwater") for _ in range(4)]
    try:
        create(nodes[:3])
        extra = node_id(nodes[3])
        assert "[OK] New node added" in redis_cli(
            "--cluster", "add-node", address(nodes[3]), address(nodes[0])
        )
        wait_until_ok(nodes)
        redis_cli("--cluster", "rebalance", address(nodes[0]), "--cluster-use-empty-masters")
        wait_until_ok(nodes)
        assert "(4096 slots) master" in check(nodes[0])
        redis_cli("--cluster", "rebalance", address(nodes[0]), "--cluster-weight", f"{extra}=0")
        wait_until_ok(nodes)
        assert "RESET SOFT" in redis_cli("--cluster", "del-node", address(nodes[0]), extra)
        wait_until_ok(nodes[:3])
        first = redis.Redis(port=nodes[0].port)
        slot = int(first.execute_command("CLUSTER", "SLOTS")[0][0])
        owner_port = int(first.execute_command("CLUSTER", "SLOTS")[0][2][1])
        owner = next(n for n in nodes[:3] if n.port == owner_port)
        other = next(n for n in nodes[:3] if n is not owner)
        redis.Redis(port=owner.port).execute_command(
            "CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(other)
        )
        found = subprocess.run(
            ["redis-cli", "--cluster", "check", address(owner)], capture_output=True, text=True
        )  # (an open slot: check warns and exits with 1)
        assert found.returncode == 1 and "migrating state" in found.stdout, found.stdout
        redis_cli("--cluster", "fix", address(owner))
        assert "migrating state" not in check(owner)
        first.close()
    finally:
        for node in nodes:
            node.stop()
