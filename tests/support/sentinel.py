"""Three Headwater servers (a primary and two replicas) watched by three Sentinels (Debian's
``redis-sentinel``) on loopback: the set-up of issue 17's Sentinel tests.

``sentinel_cluster()`` starts them, waits until the replicas are in step and every Sentinel
knows the replicas and the other Sentinels, and stops everything on the way out. Each server
has its own data directory, kept across a restart on it (``start_on``).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.helpers import HEADWATER, ROOT, ServerProcess, free_port, wait_for_port
from tests.support.replicas import in_step, wait_until

#: the name the Sentinels monitor the primary under
MASTER_NAME = "mymaster"


def start_on(workdir: str, port: int, *args: str) -> ServerProcess:
    """A Headwater server on ``workdir``'s data (kept across restarts), logging to
    ``server.log`` there (appended to by each start: ``Cluster.logs`` shows it)."""
    cmd = [*HEADWATER, "server", "--port", str(port), "--dir", workdir, *args]
    log = open(Path(workdir) / "server.log", "ab")  # noqa: SIM115 - the process keeps it
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=ROOT)
    wait_for_port(port, proc)
    return ServerProcess(proc, port, workdir)


#: with ``acl=True``: every server's users (the default user locked, one user for Sentinel
#: with the commands Redis's documentation gives it, one for replication) and the replicas'
#: and Sentinels' logins
ACL_USERS = (
    "--requirepass", "adminpw",
    "--user", "sentinel-user", "on", ">sentpw", "allchannels", "+multi", "+slaveof",
    "+replicaof", "+ping", "+exec", "+subscribe", "+config|rewrite", "+role", "+publish",
    "+info", "+client|setname", "+client|kill", "+script|kill",
    "--user", "repl", "on", ">replpw", "+psync", "+replconf", "+ping",
    "--masteruser", "repl", "--masterauth", "replpw",
)  # fmt: skip


def start_sentinel(
    workdir: Path, primary_port: int, acl: bool = False
) -> tuple[subprocess.Popen[bytes], int]:
    # Debian's redis-sentinel (make test installs it); the same binary as redis-server
    sentinel = shutil.which("redis-sentinel")
    server = shutil.which("redis-server")
    if sentinel is None and server is None:
        pytest.skip("neither redis-sentinel nor redis-server is installed")
    port = free_port()
    conf = workdir / f"sentinel-{port}.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
        f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n"
        f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
        f"sentinel failover-timeout {MASTER_NAME} 10000\n"
        + (
            f"sentinel auth-user {MASTER_NAME} sentinel-user\n"
            f"sentinel auth-pass {MASTER_NAME} sentpw\n"
            if acl
            else ""
        )
    )
    argv = [sentinel, str(conf)] if sentinel is not None else [str(server), str(conf), "--sentinel"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, proc)
    return proc, port


@dataclass
class Cluster:
    #: the primary first, as started (a test that restarts one replaces it in place)
    servers: list[ServerProcess]
    sentinel_ports: list[int]
    sentinels: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def sentinel(self) -> redis.Redis:
        return redis.Redis(port=self.sentinel_ports[0], decode_responses=True)

    def primary_port(self) -> int:
        """The port of the primary the first Sentinel names now."""
        return int(self.sentinel().sentinel_get_master_addr_by_name(MASTER_NAME)[1])

    def by_port(self, port: int) -> ServerProcess:
        return next(s for s in self.servers if s.port == port)

    def logs(self, lines: int = 40) -> str:
        """The last lines of each server's log: what a failed assertion shows."""
        parts = []
        for server in self.servers:
            path = Path(server.workdir) / "server.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"--- server on port {server.port}\n{tail}")
        return "\n".join(parts)


def admin(server: ServerProcess, acl: bool) -> redis.Redis:
    """A client of the default user (its password with ``acl``)."""
    password = "adminpw" if acl else None
    return redis.Redis(port=server.port, password=password, socket_timeout=10)


@contextmanager
def sentinel_cluster(acl: bool = False) -> Iterator[Cluster]:
    """``acl``: servers with ACL users, Sentinel and the replicas logging in as theirs."""
    workdir = Path(tempfile.mkdtemp(prefix="hw-sentinel-"))
    servers: list[ServerProcess] = []
    sentinels: list[subprocess.Popen[bytes]] = []
    users = ACL_USERS if acl else ()
    try:
        primary = start_on(tempfile.mkdtemp(prefix="hw-"), free_port(), *users)
        servers.append(primary)
        follow = ("--replicaof", "127.0.0.1", str(primary.port), *users)
        for _ in range(2):
            servers.append(start_on(tempfile.mkdtemp(prefix="hw-"), free_port(), *follow))
        p = admin(primary, acl)
        wait_until(lambda: all(in_step(p, admin(s, acl)) for s in servers[1:]), what="replicas")
        ports = []
        for _ in range(3):
            proc, port = start_sentinel(workdir, primary.port, acl)
            sentinels.append(proc)
            ports.append(port)
        cluster = Cluster(servers, ports, sentinels)
        sentinel = cluster.sentinel()
        wait_until(
            lambda: (
                len(sentinel.sentinel_slaves(MASTER_NAME)) == 2
                and len(sentinel.sentinel_sentinels(MASTER_NAME)) == 2
            ),
            timeout=30,
            what="Sentinel discovers the replicas and the other Sentinels",
        )
        yield cluster
    finally:
        for proc in sentinels:
            proc.kill()
            proc.wait()
        for server in servers:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
