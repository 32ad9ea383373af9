"""Clusters for the tests: nodes started (Headwater or redis-server), joined and checked with
the tool users run, ``redis-cli --cluster``."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence

import redis

from tests.helpers import ServerProcess, start_headwater, start_redis

NODE_TIMEOUT = "2000"


def start_node(kind: str, *args: str) -> ServerProcess:
    cluster_args = ("--cluster-enabled", "yes", "--cluster-node-timeout", NODE_TIMEOUT, *args)
    return start_headwater(*cluster_args) if kind == "headwater" else start_redis(*cluster_args)


def redis_cli(*args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        ["redis-cli", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise AssertionError(f"redis-cli {' '.join(args)} failed:\n{out}")
    return out


def address(node: ServerProcess) -> str:
    return f"127.0.0.1:{node.port}"


def create(nodes: Sequence[ServerProcess], replicas: int = 0) -> str:
    args = ["--cluster", "create", *(address(n) for n in nodes)]
    args += ["--cluster-replicas", str(replicas), "--cluster-yes"]
    out = redis_cli(*args)
    assert "[OK] All 16384 slots covered." in out, out
    wait_until_ok(nodes)
    return out


def check(node: ServerProcess) -> str:
    out = redis_cli("--cluster", "check", address(node))
    assert "[OK] All nodes agree about slots configuration." in out, out
    assert "[OK] All 16384 slots covered." in out, out
    return out


def wait_until_ok(nodes: Sequence[ServerProcess], timeout: float = 30) -> None:
    """Every node sees the cluster up, knows every other node, and they agree on the slots
    (redis-cli's signature: each node's view of who serves what)."""
    deadline = time.monotonic() + timeout
    while True:
        views = []
        for node in nodes:
            client = redis.Redis(port=node.port)
            try:
                info = client.cluster("INFO")
                lines = client.execute_command("CLUSTER", "NODES").decode().splitlines()
            finally:
                client.close()
            slots = sorted(
                f"{line.split()[0]}:{','.join(sorted(t for t in line.split()[8:] if '[' not in t))}"
                for line in lines
                if len(line.split()) > 8
            )
            known = int(info["cluster_known_nodes"])
            views.append((info["cluster_state"] == "ok" and known == len(nodes), "|".join(slots)))
        if all(ok for ok, _ in views) and len({sig for _, sig in views}) == 1:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the cluster did not settle: {views}")
        time.sleep(0.2)


def node_id(node: ServerProcess) -> str:
    client = redis.Redis(port=node.port)
    try:
        return client.execute_command("CLUSTER", "MYID").decode()
    finally:
        client.close()


def role(node: ServerProcess) -> str:
    client = redis.Redis(port=node.port)
    try:
        return client.execute_command("ROLE")[0].decode()
    finally:
        client.close()


def owner_of(slot: int, nodes: Sequence[ServerProcess]) -> ServerProcess:
    """The node that serves ``slot``, by the first node's CLUSTER SLOTS."""
    client = redis.Redis(port=nodes[0].port)
    try:
        ranges = client.execute_command("CLUSTER", "SLOTS")
    finally:
        client.close()
    port = next(int(r[2][1]) for r in ranges if int(r[0]) <= slot <= int(r[1]))
    return next(n for n in nodes if n.port == port)


def _command(node: ServerProcess, *args: object) -> object:
    client = redis.Redis(port=node.port)
    try:
        return client.execute_command(*args)
    finally:
        client.close()


def open_slot(slot: int, source: ServerProcess, target: ServerProcess) -> None:
    """The first half of a slot's move, as redis-cli does it: IMPORTING, then MIGRATING."""
    _command(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(source))
    _command(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(target))


def migrate_keys(slot: int, source: ServerProcess, target: ServerProcess) -> None:
    while keys := _command(source, "CLUSTER", "GETKEYSINSLOT", slot, 100):
        _command(source, "MIGRATE", "127.0.0.1", target.port, "", 0, 10_000, "KEYS", *keys)


def close_slot(slot: int, target: ServerProcess, nodes: Sequence[ServerProcess]) -> None:
    """Give the slot to ``target``: on it first, then on every other node."""
    for node in sorted(nodes, key=lambda n: n is not target):
        _command(node, "CLUSTER", "SETSLOT", slot, "NODE", node_id(target))


def move_slot(slot: int, target: ServerProcess, nodes: Sequence[ServerProcess]) -> None:
    """Move one slot with its keys to ``target`` (what ``--cluster reshard`` does per slot)."""
    source = owner_of(slot, nodes)
    open_slot(slot, source, target)
    migrate_keys(slot, source, target)
    close_slot(slot, target, nodes)
