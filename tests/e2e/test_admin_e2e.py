"""The admin HTTP port over real sockets (issue 34): /metrics parsed by Prometheus's parser
with a live client counted; with users, no credentials or wrong ones get 401 and a Basic
challenge, a user without INFO 403, an allowed one the page; with TLS the port speaks TLS;
admin-port is fixed for the life of the process and a bad value stops the start."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import HEADWATER, ROOT, ServerProcess, free_port, start_headwater
from tests.support.certs import make_certs
from tests.support.region_mesh import TcpMesh
from tests.support.replicas import wait_until

pytestmark = pytest.mark.e2e


def fetch(url: str, auth: tuple[str, str] | None = None, **kw: object) -> tuple[int, str, dict]:
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, **kw) as response:  # type: ignore[arg-type]
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def samples(body: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if not sample.labels
    }


@pytest.fixture
def server() -> Iterator[tuple[ServerProcess, int]]:
    admin = free_port()
    server = start_headwater("--admin-port", str(admin))
    yield server, admin
    server.stop()


def test_metrics_describe_the_running_server(server: tuple[ServerProcess, int]) -> None:
    process, admin = server
    clients = [redis.Redis(port=process.port) for _ in range(3)]
    for client in clients:
        client.xadd("orders", {"f": "v"})
    status, body, headers = fetch(f"http://127.0.0.1:{admin}/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    figures = samples(body)
    assert figures["redis_connected_clients"] == 3
    assert figures["redis_up"] == 1
    assert 'redis_stream_length{db="db0",stream="orders"} 3' in body
    assert fetch(f"http://127.0.0.1:{admin}/nothing")[0] == 404
    for client in clients:
        client.close()


def test_users_are_asked_and_checked(tmp_path: Path) -> None:
    acl = tmp_path / "users.acl"
    acl.write_text(
        "user default on >adminpw ~* &* +@all\n"
        "user scraper on >scrapepw -@all +info\n"
        "user app on >apppw ~app:* -@all +xadd\n"
    )
    admin = free_port()
    process = start_headwater("--admin-port", str(admin), "--aclfile", str(acl))
    try:
        url = f"http://127.0.0.1:{admin}/metrics"
        status, _, headers = fetch(url)
        assert status == 401
        assert headers["WWW-Authenticate"].startswith("Basic ")
        assert fetch(url, ("scraper", "wrong"))[0] == 401
        assert fetch(url, ("nobody", "x"))[0] == 401
        for header in ("Basic !!notbase64", "Basic " + base64.b64encode(b"nocolon").decode(),
                       "Bearer abc", "Basic"):  # fmt: skip
            request = urllib.request.Request(url, headers={"Authorization": header})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 401
            assert refused.value.read() == b"authentication required\n"
        status, body, _ = fetch(url, ("app", "apppw"))
        assert (status, body) == (403, "this user may not run INFO\n")
        assert fetch(url, ("app", "apppw"))[0] == 403
        assert fetch(url, ("scraper", "scrapepw"))[0] == 200
        assert fetch(url, ("default", "adminpw"))[0] == 200
        admin_client = redis.Redis(port=process.port, password="adminpw")
        admin_client.acl_setuser("scraper", enabled=False)
        assert fetch(url, ("scraper", "scrapepw"))[0] == 401  # (off: as AUTH refuses it)
    finally:
        process.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_with_tls_the_admin_port_speaks_tls(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    admin = free_port()
    process = start_headwater(
        "--tls-port", str(free_port()), *certs.server_args(auth_clients="no"),
        "--admin-port", str(admin),
    )  # fmt: skip
    try:
        context = ssl.create_default_context(cafile=certs.path("ca.crt"))
        context.check_hostname = False
        status, body, _ = fetch(f"https://127.0.0.1:{admin}/metrics", context=context)
        assert status == 200
        assert samples(body)["redis_up"] == 1
        with pytest.raises(ConnectionResetError):  # (plain HTTP to it: dropped)
            fetch(f"http://127.0.0.1:{admin}/metrics")
    finally:
        process.stop()


def test_admin_port_is_fixed_and_checked(server: tuple[ServerProcess, int], tmp_path: Path) -> None:
    process, admin = server
    client = redis.Redis(port=process.port)
    assert client.config_get("admin-port") == {"admin-port": str(admin)}
    with pytest.raises(redis.ResponseError, match="can't set immutable config"):
        client.config_set("admin-port", admin + 1)
    done = subprocess.run(
        [*HEADWATER, "server", "--port", str(free_port()), "--dir", str(tmp_path), "--admin-port",
         "70000"],
        capture_output=True, text=True, timeout=30, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "admin-port" in done.stdout + done.stderr
    assert "'--admin-port 70000'\nargument must be between 0 and 65535 inclusive" in (
        done.stdout + done.stderr
    )
    for value, reason in (
        ("-1", "argument must be between 0 and 1000000 inclusive"),
        ("abc", "argument couldn't be parsed into an integer"),
    ):
        with pytest.raises(redis.ResponseError) as refused:
            client.config_set("metrics-max-streams", value)
        assert str(refused.value) == (
            "CONFIG SET failed (possibly related to argument 'metrics-max-streams') - " + reason
        )
    taken = subprocess.run(  # (the port the running server's admin port holds)
        [*HEADWATER, "server", "--port", str(free_port()), "--dir", str(tmp_path), "--admin-port",
         str(admin)],
        capture_output=True, text=True, timeout=30, cwd=ROOT, check=False,
    )  # fmt: skip
    assert taken.returncode != 0
    assert f"admin port 127.0.0.1:{admin}" in taken.stdout + taken.stderr


def test_aof_and_script_histograms_count_what_happened() -> None:
    admin = free_port()
    process = start_headwater("--admin-port", str(admin), "--appendfsync", "always")
    try:
        client = redis.Redis(port=process.port)
        for i in range(20):
            client.xadd("orders", {"n": i})
        for _ in range(3):
            client.eval("return 1", 0)
        body = fetch(f"http://127.0.0.1:{admin}/metrics")[1]
        families = {f.name: f for f in text_string_to_metric_families(body)}

        def count(name: str) -> float:
            return next(s.value for s in families[name].samples if s.name == name + "_count")

        assert count("headwater_aof_write_seconds") >= 20  # (one write a loop turn at least)
        assert count("headwater_aof_fsync_seconds") >= 20  # (always: each write synced)
        assert count("headwater_aof_write_bytes") == count("headwater_aof_write_seconds")
        assert count("headwater_script_run_seconds") == 3
        buckets = [s for s in families["headwater_aof_write_bytes"].samples if "le" in s.labels]
        assert buckets[-1].labels["le"] == "+Inf"
        assert buckets[-1].value == count("headwater_aof_write_bytes")
    finally:
        process.stop()


def test_a_region_shows_its_links_and_queues() -> None:
    admin = free_port()
    mesh = TcpMesh(3, own_options={1: ("--admin-port", str(admin))})
    try:
        for r in (1, 2, 3):
            mesh[r].xadd("rides", {"from": r})
        mesh.converge()
        url = f"http://127.0.0.1:{admin}/metrics"

        def links() -> dict[str, dict[str, float]]:
            found: dict[str, dict[str, float]] = {}
            for family in text_string_to_metric_families(fetch(url)[1]):
                for sample in family.samples:
                    if sample.name.startswith("headwater_region_link_"):
                        peer = sample.labels["peer_region"]
                        found.setdefault(peer, {})[sample.name] = sample.value
            return found

        wait_until(
            lambda: (
                all(
                    link.get("headwater_region_link_up") == 1
                    and link.get("headwater_region_link_lag_effects") == 0
                    and link.get("headwater_region_link_unacked_effects") == 0
                    for link in links().values()
                )
                and set(links()) == {"2", "3"}
            ),
            timeout=20,
            what="both links up and caught up",
        )
        mesh.regions[3].kill9()
        wait_until(lambda: links()["3"]["headwater_region_link_up"] == 0, what="region 3 down")
        mesh[1].xadd("rides", {"from": 1})
        wait_until(
            lambda: links()["3"]["headwater_region_link_unacked_effects"] >= 1,
            what="region 3 owes an acknowledgement",
        )
        figures = samples(fetch(url)[1])
        assert figures["headwater_region_own_effects_kept"] >= 1  # (kept for region 3)
    finally:
        mesh.close()


def post(url: str, body: bytes, content_type: str) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_console_api_answers_bad_requests_with_their_error(
    server: tuple[ServerProcess, int],
) -> None:
    process, admin = server
    redis.Redis(port=process.port).xadd("s", {"f": "v"})
    api = f"http://127.0.0.1:{admin}/api"
    bad_reads = {
        "streams?sort=bogus": (
            400, "sort must be one of name, length, bytes, entries_added, groups, last_id"
        ),
        "streams?size=0": (400, "size must be from 1 to 1000"),
        "streams?page=x": (400, "page must be an integer"),
        "stream": (400, "key is required"),
        "stream?key=s&at=-1": (400, "at must be from 0 to 9223372036854775807"),
        "pending?key=s": (400, "group is required"),
        "groups?key=nokey": (400, "ERR no such key"),
    }  # fmt: skip
    for path, (status, error) in bad_reads.items():
        got, body, _ = fetch(f"{api}/{path}")
        assert (got, json.loads(body)) == (status, {"error": error}), path
    assert fetch(f"{api}/nothing")[0] == 404
    assert post(f"{api}/ack", b"{}", "text/plain") == (
        415,
        '{"error": "an action\'s body is JSON"}',
    )
    assert post(f"{api}/ack", b"{", "application/json") == (
        400, '{"error": "the body is not valid JSON"}'
    )  # fmt: skip
    assert post(f"{api}/ack", b"[]", "application/json") == (
        400, '{"error": "the body is a JSON object"}'
    )  # fmt: skip
    body = json.dumps({"key": "s", "group": "g", "ids": "1-1"}).encode()
    assert post(f"{api}/ack", body, "application/json") == (
        400, '{"error": "ids must be a list of entry IDs"}'
    )  # fmt: skip
    body = json.dumps({"key": "s", "ids": ["1-1"]}).encode()
    assert post(f"{api}/ack", body, "application/json") == (400, '{"error": "group is required"}')
    body = json.dumps({"key": "s", "group": "nogroup", "consumer": "c", "ids": ["1-1"]}).encode()
    status, text_ = post(f"{api}/claim", body, "application/json")
    assert status == 400 and json.loads(text_)["error"].startswith("NOGROUP")
    assert post(f"{api}/nothing", b"{}", "application/json")[0] == 404
    status, text_, _ = fetch(f"{api}/live/tail")
    assert (status, json.loads(text_)) == (400, {"error": "key is required"})
