"""TLS over real sockets (issue 33): redis-py and redis-cli with client certificates
required, optional and refused; plain and TLS ports side by side; certificates reloaded by
CONFIG SET (a bad one refused, the old kept); an encrypted key; a replica over TLS logging in
as a replication user; three active-active regions linked over TLS; and the configuration
errors that stop the start."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import HEADWATER, ROOT, ServerProcess, free_port, start_headwater
from tests.support.certs import KEY_PASSWORD, Certs, make_certs
from tests.support.region_mesh import TcpMesh
from tests.support.replicas import connect, in_step, wait_until

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _tls_server(certs: Certs, *args: str, auth_clients: str = "yes") -> tuple[ServerProcess, int]:
    tls_port = free_port()
    server = start_headwater(
        "--tls-port", str(tls_port), *certs.server_args(auth_clients=auth_clients), *args
    )
    return server, tls_port


def _client(certs: Certs, port: int, cert: str | None = "client", **kw: object) -> redis.Redis:
    options: dict[str, object] = {"ssl": True, "ssl_ca_certs": certs.path("ca.crt")}
    options["ssl_check_hostname"] = False
    if cert is not None:
        options["ssl_certfile"] = certs.path(f"{cert}.crt")
        options["ssl_keyfile"] = certs.path(f"{cert}.key")
    return redis.Redis(port=port, socket_timeout=10, **options, **kw)  # type: ignore[arg-type]


def _peer_subject(certs: Certs, port: int) -> str:
    ctx = ssl.create_default_context(cafile=certs.path("ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(certs.path("client.crt"), certs.path("client.key"))
    with socket.create_connection(("127.0.0.1", port), 5) as raw, ctx.wrap_socket(raw) as tls:
        subject = dict(pair[0] for pair in tls.getpeercert()["subject"])  # type: ignore[index]
        return str(subject["commonName"])


@pytest.fixture
def tls_server(certs: Certs) -> Iterator[tuple[ServerProcess, int]]:
    server, tls_port = _tls_server(certs)
    yield server, tls_port
    server.stop()


def test_redis_py_with_a_client_certificate(
    certs: Certs, tls_server: tuple[ServerProcess, int]
) -> None:
    server, tls_port = tls_server
    client = _client(certs, tls_port)
    client.xadd("s", {"f": "v"}, id="1-0")
    assert client.xrange("s") == [(b"1-0", {b"f": b"v"})]
    plain = redis.Redis(port=server.port)  # the plain port serves beside it
    assert plain.xlen("s") == 1


@pytest.mark.parametrize("cert", [None, "stranger"])
def test_a_client_without_a_trusted_certificate_is_refused(
    certs: Certs, tls_server: tuple[ServerProcess, int], cert: str | None
) -> None:
    _, tls_port = tls_server
    with pytest.raises(redis.exceptions.ConnectionError):
        _client(certs, tls_port, cert=cert).ping()


def test_optional_and_no_client_certificates(certs: Certs) -> None:
    for mode, without_cert_ok in (("optional", True), ("no", True)):
        server, tls_port = _tls_server(certs, auth_clients=mode)
        try:
            assert _client(certs, tls_port, cert=None).ping() is without_cert_ok
            assert _client(certs, tls_port).ping()
            if mode == "optional":
                with pytest.raises(redis.exceptions.ConnectionError):
                    _client(certs, tls_port, cert="stranger").ping()
        finally:
            server.stop()


def test_redis_cli_over_tls(certs: Certs, tls_server: tuple[ServerProcess, int]) -> None:
    exe = shutil.which("redis-cli")
    if exe is None:
        pytest.skip("redis-cli is not installed")
    _, tls_port = tls_server
    base = [exe, "-p", str(tls_port), "--tls", "--cacert", certs.path("ca.crt")]
    with_cert = [*base, "--cert", certs.path("client.crt"), "--key", certs.path("client.key")]
    done = subprocess.run([*with_cert, "PING"], capture_output=True, timeout=30, check=False)
    assert done.stdout.strip() == b"PONG"
    refused = subprocess.run([*base, "PING"], capture_output=True, timeout=30, check=False)
    assert b"PONG" not in refused.stdout


def test_config_set_reloads_the_certificate(
    certs: Certs, tls_server: tuple[ServerProcess, int]
) -> None:
    server, tls_port = tls_server
    admin = redis.Redis(port=server.port)
    kept = _client(certs, tls_port)
    assert kept.ping()
    assert _peer_subject(certs, tls_port) == "Server"
    for name, value in (("tls-cert-file", "server2.crt"), ("tls-key-file", "missing.key")):
        with pytest.raises(redis.exceptions.ResponseError, match="Unable to update TLS"):
            admin.config_set(name, certs.path(value))  # (a key that does not fit, or none)
    assert admin.config_get("tls-*-file")["tls-cert-file"] == certs.path("server.crt")
    assert _peer_subject(certs, tls_port) == "Server"
    admin.execute_command(
        "CONFIG", "SET", "tls-cert-file", certs.path("server2.crt"),
        "tls-key-file", certs.path("server2.key"),
    )  # fmt: skip
    assert _peer_subject(certs, tls_port) == "Server2"
    assert kept.ping()  # (a connection made before keeps what it negotiated)


def test_an_encrypted_key_with_its_password(certs: Certs) -> None:
    server, tls_port = _tls_server(
        certs, "--tls-key-file", certs.path("server-encrypted.key"),
        "--tls-key-file-pass", KEY_PASSWORD,
    )  # fmt: skip
    try:
        assert _client(certs, tls_port).ping()
    finally:
        server.stop()


def test_a_replica_over_tls_as_a_replication_user(certs: Certs) -> None:
    user = "repl on >replpw -@all +psync +replconf +ping"
    primary, primary_tls = _tls_server(certs, "--requirepass", "adminpw", "--user", *user.split())
    replica = start_headwater(
        *certs.server_args(),
        "--tls-replication", "yes",
        "--masteruser", "repl", "--masterauth", "replpw",
        "--replicaof", "127.0.0.1", str(primary_tls),
    )  # fmt: skip
    try:
        writer = _client(certs, primary_tls, password="adminpw")
        for n in range(100):
            writer.xadd("s", {"n": n})
        primary_plain = redis.Redis(port=primary.port, password="adminpw", socket_timeout=10)
        wait_until(lambda: in_step(primary_plain, connect(replica)), what="sync over TLS")
        links = [c for c in primary_plain.client_list() if c["user"] == "repl"]
        assert links and "S" in links[0]["flags"]
    finally:
        replica.stop()
        primary.stop()


def test_three_regions_linked_over_tls(certs: Certs) -> None:
    mesh = TcpMesh(tls=tuple(certs.server_args()))
    try:
        for r in (1, 2, 3):
            for n in range(10):
                mesh[r].xadd("x", {"r": r, "n": n})
        dump = mesh.converge(timeout=20)
        assert dump.count(b" r1 ") == dump.count(b" r2 ") == dump.count(b" r3 ") == 10
    finally:
        mesh.close()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--tls-port", "0", "--tls-replication", "yes"], "No tls-cert-file configured!"),
        (["--tls-cert-file", "x.crt"], "No tls-key-file configured!"),
        (["--tls-cert-file", "CERT", "--tls-key-file", "KEY"], "Either tls-ca-cert-file"),
        (["--tls-cert-file", "CERT", "--tls-key-file", "CERT", "--tls-auth-clients", "no"],
         "Failed to load server certificate"),
        (["--tls-protocols", "SSLv3", "--tls-cert-file", "CERT", "--tls-key-file", "KEY",
          "--tls-auth-clients", "no"], "Invalid tls-protocols"),
    ],
)  # fmt: skip
def test_tls_settings_that_stop_the_start(certs: Certs, args: list[str], reason: str) -> None:
    args = [a.replace("CERT", certs.path("server.crt")) for a in args]
    args = [a.replace("KEY", certs.path("server.key")) for a in args]
    if "--tls-port" not in args:
        args = ["--tls-port", str(free_port()), *args]
    workdir = Path(tempfile.mkdtemp(prefix="hw-tls-"))
    cmd = [*HEADWATER, "server", "--port", str(free_port()), "--dir", str(workdir), *args]
    done = subprocess.run(cmd, capture_output=True, timeout=60, cwd=ROOT, check=False)
    output = (done.stdout + done.stderr).decode()
    assert done.returncode == 1, output
    assert reason in output and "Failed to configure TLS" in output
    shutil.rmtree(workdir, ignore_errors=True)


def test_a_tls_only_server(certs: Certs) -> None:
    """``--port 0 --tls-port P``: no plain port at all, as docs/security.md shows."""
    tls_port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="hw-tls-"))
    cmd = [*HEADWATER, "server", "--port", "0", "--tls-port", str(tls_port), "--dir", str(workdir)]
    proc = subprocess.Popen([*cmd, *certs.server_args()], cwd=ROOT)
    try:
        client = _client(certs, tls_port)
        wait_until(lambda: _pings(client), what="the TLS port")
        assert client.config_get("port") == {"port": "0"}
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False
