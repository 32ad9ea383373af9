"""ACL over TCP with real clients: redis-py (sync and asyncio) and redis-cli logging in as
users of an ACL file; a replica logging in to its primary as a user that may only
replicate (``masteruser``); three regions whose links log in as their peers' user;
protected mode compared byte for byte with redis-server; and a bad ACL file stopping the
start with its reason."""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

from tests.helpers import HEADWATER, ROOT, ServerProcess, free_port, start_headwater, start_redis
from tests.support.region_mesh import TcpMesh
from tests.support.replicas import connect, in_step, wait_until

ACL_FILE = """\
user default on >adminpw ~* &* +@all
user app on >apppw ~app:* resetchannels &app.* -@all +@read +@write +@stream +@pubsub -@dangerous
user reader on >readpw %R~* -@all +@read +ping +hello +client|setinfo
"""


@pytest.fixture
def acl_server() -> Iterator[ServerProcess]:
    workdir = Path(tempfile.mkdtemp(prefix="hw-acl-"))
    (workdir / "users.acl").write_text(ACL_FILE)
    server = start_headwater("--aclfile", str(workdir / "users.acl"))
    yield server
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def test_redis_py_logs_in_as_a_user(acl_server: ServerProcess) -> None:
    app = redis.Redis(port=acl_server.port, username="app", password="apppw", socket_timeout=10)
    app.xadd("app:events", {"k": "v"}, id="1-0")
    assert app.xrange("app:events") == [(b"1-0", {b"k": b"v"})]
    with pytest.raises(redis.exceptions.NoPermissionError, match="No permissions to access a key"):
        app.set("other", "v")
    with pytest.raises(redis.exceptions.NoPermissionError, match="'flushall' command"):
        app.flushall()
    assert app.publish("app.news", "m") == 0
    with pytest.raises(redis.exceptions.NoPermissionError, match="channel"):
        app.publish("other", "m")
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=acl_server.port, username="app", password="wrong").ping()
    admin = redis.Redis(port=acl_server.port, password="adminpw", decode_responses=True)
    assert admin.acl_users() == ["app", "default", "reader"]
    assert any(c["user"] == "app" for c in admin.client_list())
    user = admin.acl_getuser("app")
    assert user["keys"] == ["~app:*"] and user["channels"] == ["&app.*"]
    assert "on" in user["flags"]
    log = admin.acl_log()
    assert {entry["reason"] for entry in log} == {"key", "command", "channel", "auth"}
    assert admin.acl_dryrun("reader", "get", "x") == "OK"
    assert "no permissions" in admin.acl_dryrun("reader", "set", "x", "v")


def test_redis_py_asyncio_logs_in_as_a_user(acl_server: ServerProcess) -> None:
    async def scenario() -> None:
        reader = redis.asyncio.Redis(port=acl_server.port, username="reader", password="readpw")
        try:
            assert await reader.get("k") is None
            with pytest.raises(redis.exceptions.NoPermissionError, match="'set' command"):
                await reader.set("k", "v")
            with pytest.raises(redis.exceptions.NoPermissionError, match=re.escape("'acl|whoami'")):
                await reader.acl_whoami()
        finally:
            await reader.aclose()

    asyncio.run(scenario())


def test_redis_cli_logs_in_as_a_user(acl_server: ServerProcess) -> None:
    exe = shutil.which("redis-cli")
    if exe is None:
        pytest.skip("redis-cli is not installed")

    def cli(*args: str) -> str:
        base = [exe, "-p", str(acl_server.port), "--no-auth-warning"]
        done = subprocess.run([*base, *args], capture_output=True, timeout=30, check=False)
        return done.stdout.decode().strip()

    assert cli("--user", "app", "--pass", "apppw", "SET", "app:k", "v") == "OK"
    assert cli("--user", "app", "--pass", "apppw", "GET", "app:k") == "v"
    assert "NOPERM" in cli("--user", "app", "--pass", "apppw", "GET", "k")
    assert "NOAUTH" in cli("--user", "app", "--pass", "nope", "PING")  # (AUTH failed first)
    assert cli("-a", "adminpw", "ACL", "WHOAMI") == "default"


def test_a_replica_logs_in_as_a_replication_user() -> None:
    user = "repl on >replpw -@all +psync +replconf +ping"
    primary_p = start_headwater("--requirepass", "adminpw", "--user", *user.split())
    replica_p = start_headwater(
        "--masteruser",
        "repl",
        "--masterauth",
        "replpw",
        "--replicaof",
        "127.0.0.1",
        str(primary_p.port),
    )
    try:
        primary = redis.Redis(port=primary_p.port, password="adminpw", socket_timeout=10)
        replica = connect(replica_p)
        for n in range(50):
            primary.xadd("s", {"n": n})
        wait_until(lambda: in_step(primary, replica), what="sync as the repl user")
        clients = primary.client_list()
        assert any(c["user"] == "repl" and "S" in c["flags"] for c in clients)
        assert primary.acl_log() == []  # (the link needs nothing the user lacks)
    finally:
        replica_p.stop()
        primary_p.stop()


def test_regions_log_in_as_their_peers_user() -> None:
    peer = "peer on >peerpw ~* &* +@all"
    mesh = TcpMesh(
        extra=("--user", *peer.split(), "--masteruser", "peer", "--masterauth", "peerpw")
    )
    try:
        for r in (1, 2, 3):
            mesh[r].xadd("x", {"r": r})
        dump = mesh.converge()
        assert dump.count(b" r1 ") == dump.count(b" r2 ") == dump.count(b" r3 ") == 1
        assert "peer" in {c["user"] for c in mesh[1].client_list()}
        assert mesh[1].acl_log() == []
    finally:
        mesh.close()


def _outside_address() -> str | None:
    """An address of this host that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # (no packet is sent: it picks the route)
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else str(address)


def _first_reply(host: str, port: int) -> bytes:
    with socket.create_connection((host, port), 5) as sock:
        sock.sendall(b"PING\r\n")
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data


def test_protected_mode_refuses_outside_connections_as_redis() -> None:
    address = _outside_address()
    if address is None:
        pytest.skip("this host has no address but loopback")
    ours = start_headwater("--bind", "0.0.0.0")
    theirs = start_redis("--bind", "0.0.0.0", "--protected-mode", "yes")
    locked = start_headwater("--bind", "0.0.0.0", "--requirepass", "pw")
    try:
        refused = _first_reply(address, theirs.port)
        assert refused.startswith(b"-DENIED Redis is running in protected mode")
        assert _first_reply(address, ours.port) == refused
        assert _first_reply("127.0.0.1", ours.port) == b"+PONG\r\n"
        assert _first_reply(address, locked.port).startswith(b"-NOAUTH")
        info = redis.Redis(port=ours.port).info("stats")
        assert info["rejected_connections"] == 1
    finally:
        for server in (ours, theirs, locked):
            server.stop()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("user alice on +nosuch\n", "Error in applying operation '+nosuch'"),
        ("bogus line\n", "should start with user keyword"),
    ],
)
def test_a_bad_acl_file_stops_the_start(content: str, reason: str) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="hw-acl-"))
    (workdir / "users.acl").write_text(content)
    cmd = [*HEADWATER, "server", "--port", str(free_port()), "--dir", str(workdir)]
    done = subprocess.run(
        [*cmd, "--aclfile", str(workdir / "users.acl")],
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1
    assert reason in (done.stdout + done.stderr).decode()
    shutil.rmtree(workdir, ignore_errors=True)


def test_the_locked_down_setup_of_the_docs_works() -> None:
    """docs/security.md's ACL file, as written there (its ``cat > users.acl`` block), does
    what the page says (the page's examples run too: test_docs_e2e.py)."""
    text = (ROOT / "docs" / "security.md").read_text()
    block = text.split("cat > users.acl <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    workdir = Path(tempfile.mkdtemp(prefix="hw-acl-"))
    (workdir / "users.acl").write_text(block.strip() + "\n")
    server = start_headwater("--aclfile", str(workdir / "users.acl"))
    try:
        port = server.port
        api = redis.Redis(port=port, username="api", password="api-secret", socket_timeout=10)
        api.xadd("rides", {"fare": "12.5"})
        with pytest.raises(redis.exceptions.NoPermissionError):
            api.xadd("payments", {"a": "1"})
        with pytest.raises(redis.exceptions.NoPermissionError):
            api.xrange("rides")
        reports = redis.Redis(port=port, username="reports", password="reports-secret")
        assert len(reports.xrange("rides", count=10)) == 1
        with pytest.raises(redis.exceptions.NoPermissionError):
            reports.xadd("rides", {"fare": "1"})
        admin = redis.Redis(port=port, password="change-me-admin", decode_responses=True)
        assert admin.acl_log(count=1)[0]["username"] == "reports"
        denied = admin.acl_dryrun("api", "XADD", "payments", "*", "a", "1")
        assert denied == "User api has no permissions to access the 'payments' key"
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
