"""FAILOVER over TCP (issue 33): a primary and two replicas under write load, every write
confirmed by WAIT; FAILOVER TO one replica swaps the roles with none of the confirmed writes
lost; every writer is turned away by the old primary (-READONLY for a held XADD, -UNBLOCKED
for a WAIT in progress, as Redis's disconnectAllBlockedClients) and goes on on the new one.
Also: FAILOVER to any replica, ABORT, a timeout that aborts, FORCE, and a target that
refuses."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from tests.helpers import ServerProcess, start_headwater
from tests.support.replicas import connect, in_step, info, wait_until


@pytest.fixture
def trio() -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess]]:
    primary = start_headwater()
    replicas = [start_headwater("--replicaof", "127.0.0.1", str(primary.port)) for _ in range(2)]
    for replica in replicas:
        wait_until(lambda r=replica: info(connect(r)).get("master_link_status") == "up")
    yield primary, replicas[0], replicas[1]
    for server in (*replicas, primary):
        server.stop()


def _role(server: ServerProcess) -> str:
    return str(connect(server).execute_command("ROLE")[0], "ascii")


class Writers:
    """Threads appending to one stream on whichever server is the primary; an entry counts
    as confirmed once WAIT says a replica has it."""

    def __init__(self, servers: list[ServerProcess], n: int = 4) -> None:
        self.servers = servers
        self.confirmed: list[bytes] = []
        self.turned_away = [0] * n  # (per writer: errors from a server no longer the primary)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._write, args=(i,)) for i in range(n)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def _primary(self) -> redis.Redis:
        while not self.stop.is_set():
            for server in self.servers:
                try:
                    if _role(server) == "master":
                        return connect(server)
                except redis.exceptions.RedisError:
                    pass
            time.sleep(0.05)
        raise RuntimeError("stopped")

    def _write(self, writer: int) -> None:
        client = self._primary()
        n = 0
        while not self.stop.is_set():
            try:
                entry = client.xadd("log", {"w": writer, "n": n})
                if client.execute_command("WAIT", 1, 2000) >= 1:
                    with self.lock:
                        self.confirmed.append(entry)
                n += 1
            except redis.exceptions.ResponseError:  # (-READONLY, -UNBLOCKED, WAIT on a replica)
                self.turned_away[writer] += 1
                client = self._primary()
            except (redis.exceptions.ConnectionError, RuntimeError):
                if self.stop.is_set():
                    return
                client = self._primary()


def test_failover_under_load_loses_no_confirmed_write(
    trio: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    primary, target, other = trio
    writers = Writers([primary, target, other])
    writers.start()
    wait_until(lambda: len(writers.confirmed) > 200, timeout=20, what="writes")
    assert connect(primary).execute_command("FAILOVER", "TO", "127.0.0.1", target.port) == b"OK"
    wait_until(lambda: _role(target) == "master", timeout=20, what="the target to lead")
    wait_until(lambda: info(connect(primary))["master_failover_state"] == "no-failover", timeout=20)
    assert _role(primary) == "slave"
    count = len(writers.confirmed)
    wait_until(lambda: len(writers.confirmed) > count + 200, timeout=20, what="writes after")
    writers.finish()
    new_primary = connect(target)
    ids = {entry for entry, _ in new_primary.xrange("log")}
    missing = [e for e in writers.confirmed if e not in ids]
    assert not missing, f"{len(missing)} confirmed writes lost, first {missing[:3]}"
    assert all(writers.turned_away), writers.turned_away
    with pytest.raises(redis.exceptions.ReadOnlyError):
        connect(primary).xadd("log", {"late": 1})
    wait_until(lambda: in_step(new_primary, connect(primary)), what="old primary in step")
    assert info(new_primary)["master_failover_state"] == "no-failover"


def test_failover_to_any_replica(
    trio: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    primary, first, second = trio
    old = connect(primary)
    old.xadd("s", {"a": "1"})
    assert old.execute_command("FAILOVER") == b"OK"
    wait_until(lambda: "master" in (_role(first), _role(second)), what="a replica to lead")
    wait_until(lambda: _role(primary) == "slave")
    leader = first if _role(first) == "master" else second
    assert connect(leader).xlen("s") == 1


def test_abort_and_timeout_leave_the_primary(
    trio: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    primary, target, _ = trio
    client = connect(primary)
    target.proc.send_signal(signal.SIGSTOP)  # a target that cannot catch up (nor answer)
    try:
        client.xadd("s", {"a": "1"})
        assert client.execute_command("FAILOVER", "TO", "127.0.0.1", target.port, "TIMEOUT", 500)
        time.sleep(0.1)
        assert info(client)["master_failover_state"] == "waiting-for-sync"
        with pytest.raises(redis.exceptions.ResponseError, match="FAILOVER already in progress"):
            client.execute_command("FAILOVER")
        wait_until(lambda: info(client)["master_failover_state"] == "no-failover", timeout=5)
    finally:
        target.proc.send_signal(signal.SIGCONT)
    assert _role(primary) == "master"
    client.xadd("s", {"a": "2"})  # writes flow again
    assert client.execute_command("FAILOVER", "TIMEOUT", 60000) == b"OK"
    assert client.execute_command("FAILOVER", "ABORT") == b"OK"
    assert info(client)["master_failover_state"] == "no-failover"
    client.xadd("s", {"a": "3"})
    with pytest.raises(redis.exceptions.ResponseError, match="No failover in progress"):
        client.execute_command("FAILOVER", "ABORT")


def test_failover_errors(trio: tuple[ServerProcess, ServerProcess, ServerProcess]) -> None:
    primary, target, _ = trio
    client = connect(primary)
    for args, message in (
        (["TO", "127.0.0.1", "1"], "FAILOVER target HOST and PORT is not a replica."),
        (["TO", "127.0.0.1", str(target.port), "FORCE"], "FAILOVER with force option requires"),
    ):
        with pytest.raises(redis.exceptions.ResponseError, match=message):
            client.execute_command("FAILOVER", *args)
    with pytest.raises(redis.exceptions.ResponseError, match="not valid when server is a replica"):
        connect(target).execute_command("FAILOVER")
    with pytest.raises(redis.exceptions.ResponseError, match="must match my replid"):
        connect(target).execute_command("PSYNC", "0" * 40, "1", "FAILOVER")
