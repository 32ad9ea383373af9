"""Limits: maxclients, proto-max-bulk-len, unauthenticated request sizes, output buffers."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.helpers import (
    RawClient,
    ServerProcess,
    bulk_load,
    encode_command,
    raw_client,
    redis_available,
    start_headwater,
    start_redis,
)

pytestmark = pytest.mark.e2e

needs_redis = pytest.mark.skipif(not redis_available(), reason="redis-server not installed")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def info_field(client: RawClient, section: str, name: str) -> str:
    text = client.call("INFO", section).decode()
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    raise AssertionError(f"{name} not in INFO {section}")


def obl_disconnections(client: RawClient) -> int:
    return int(info_field(client, "stats", "client_output_buffer_limit_disconnections"))


def read_all(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything until the server closes (fails if it does not within timeout)."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


# -- maxclients -----------------------------------------------------------------------------


def test_maxclients() -> None:
    server = start_headwater("--maxclients", "2")
    try:
        first, second = RawClient(server.port), RawClient(server.port)
        assert first.call("PING") == b"+PONG\r\n"
        assert second.call("PING") == b"+PONG\r\n"
        with socket.create_connection(("127.0.0.1", server.port), 5) as third:
            assert read_all(third) == b"-ERR max number of clients reached\r\n"
        assert info_field(first, "stats", "rejected_connections") == "1"
        assert info_field(first, "clients", "connected_clients") == "2"
        second.close()
        deadline = time.monotonic() + 5
        while info_field(first, "clients", "connected_clients") != "1":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with raw_client(server.port) as again:
            assert again.call("PING") == b"+PONG\r\n"
        first.close()
    finally:
        server.stop()


# -- proto-max-bulk-len ---------------------------------------------------------------------

ONE_MB = 1024 * 1024


@needs_redis
@pytest.mark.parametrize("same_connection", [True, False], ids=["same-conn", "new-conn"])
def test_proto_max_bulk_len(
    private_headwater: ServerProcess, redis_server: ServerProcess, same_connection: bool
) -> None:
    results = []
    for server in (private_headwater, redis_server):
        admin = RawClient(server.port)
        try:
            assert admin.call("CONFIG", "SET", "proto-max-bulk-len", "1mb") == b"+OK\r\n"
            # Exactly the limit is fine, one byte more is a protocol error.
            assert admin.call("SET", "k", b"x" * ONE_MB) == b"+OK\r\n"
            client = admin if same_connection else RawClient(server.port)
            client.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (ONE_MB + 1))
            results.append(client.read_until_closed())
            client.close()
        finally:
            admin.close()
            with raw_client(server.port) as c:
                assert c.call("CONFIG", "SET", "proto-max-bulk-len", "512mb") == b"+OK\r\n"
    assert results[0] == results[1] == b"-ERR Protocol error: invalid bulk length\r\n"


def test_bulk_bigger_than_default_limit(private_headwater: ServerProcess) -> None:
    with raw_client(private_headwater.port) as c:
        c.send_raw(b"*2\r\n$3\r\nGET\r\n$536870913\r\n")
        assert c.read_until_closed() == b"-ERR Protocol error: invalid bulk length\r\n"


# -- unauthenticated limits -----------------------------------------------------------------


@pytest.fixture(scope="module")
def auth_pair() -> Iterator[tuple[ServerProcess, ServerProcess | None]]:
    hw = start_headwater("--requirepass", "pw")
    rd = start_redis("--requirepass", "pw") if redis_available() else None
    yield hw, rd
    hw.stop()
    if rd is not None:
        rd.stop()


UNAUTH_CASES = [
    (b"*20\r\n", b"-ERR Protocol error: unauthenticated multibulk length\r\n"),
    (b"*11\r\n$3\r\nGET\r\n", b"-ERR Protocol error: unauthenticated multibulk length\r\n"),
    (b"*2\r\n$3\r\nGET\r\n$16385\r\n", b"-ERR Protocol error: unauthenticated bulk length\r\n"),
    (
        b"*1\r\n$4\r\nPING\r\n*20\r\n",
        b"-NOAUTH Authentication required.\r\n"
        b"-ERR Protocol error: unauthenticated multibulk length\r\n",
    ),
]


@pytest.mark.parametrize(("data", "want"), UNAUTH_CASES, ids=["20", "11", "bulk", "after-cmd"])
def test_unauthenticated_limits(
    auth_pair: tuple[ServerProcess, ServerProcess | None], data: bytes, want: bytes
) -> None:
    hw, rd = auth_pair
    for server in (hw, rd):
        if server is None:
            continue
        with raw_client(server.port) as c:
            c.send_raw(data)
            assert c.read_until_closed() == want, server
    with raw_client(hw.port) as c:
        assert c.call("PING") == b"-NOAUTH Authentication required.\r\n"


def test_limits_lifted_after_auth(auth_pair: tuple[ServerProcess, ServerProcess | None]) -> None:
    hw, rd = auth_pair
    for server in (hw, rd):
        if server is None:
            continue
        with raw_client(server.port) as c:
            args = [f"f{i}" for i in range(20)]
            # AUTH and the big command in one packet: the limit applies per command.
            c.send_raw(
                encode_command("AUTH", "pw")
                + encode_command("DEL", *args)
                + encode_command("SET", "big", b"v" * 20000)
                + encode_command("STRLEN", "big")
            )
            replies = [c.read_reply() for _ in range(4)]
            assert replies == [b"+OK\r\n", b":0\r\n", b"+OK\r\n", b":20000\r\n"]


def test_limits_return_after_reset(auth_pair: tuple[ServerProcess, ServerProcess | None]) -> None:
    """RESET de-authenticates, and the unauthenticated request limits apply again, also when
    the next command comes in a packet of its own."""
    hw, rd = auth_pair
    for server in (hw, rd):
        if server is None:
            continue
        with raw_client(server.port) as c:
            assert c.call("AUTH", "pw") == b"+OK\r\n"
            assert c.call("RESET") == b"+RESET\r\n"
            c.send_raw(encode_command("DEL", *[f"k{i}" for i in range(11)]))
            want = b"-ERR Protocol error: unauthenticated multibulk length\r\n"
            assert c.read_until_closed() == want, server


# -- the unauthenticated output limit (CVE-2025-21605) ------------------------------------

NOAUTH = b"-NOAUTH Authentication required.\r\n"
PING_RESP = encode_command("PING")
SET_100 = encode_command("SET", "k", b"v" * 100)


def _send_and_read(port: int, data: bytes) -> tuple[bytes, bool]:
    """Send data at once, then read: what came back, and whether the server closed."""
    with socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(data)
        sock.settimeout(1.0)
        received = b""
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                return received, False
            except ConnectionResetError:
                return received, True
            if not chunk:
                return received, True
            received += chunk


# (what an unauthenticated client sends in one go, how many -NOAUTH it gets, closed?)
UNAUTH_OUTPUT_CASES = [
    # 481 replies of 34 bytes fit in Redis's 16 KB reply buffer, 482 do not
    (PING_RESP * 481, 481, False),
    (PING_RESP * 482, 0, True),
    (b"PING\r\n" * 481, 481, False),
    (b"PING\r\n" * 482, 0, True),
    (b"PING\r\n" * 2000, 0, True),
    # ~400 KB in, 100 KB out: the replies to each 16 KB read are written before the next
    (SET_100 * 3000, 3000, False),
]


@pytest.mark.parametrize(
    ("data", "replies", "closed"),
    UNAUTH_OUTPUT_CASES,
    ids=["resp-481", "resp-482", "inline-481", "inline-482", "inline-2000", "set-3000"],
)
def test_unauthenticated_output_is_limited(
    auth_pair: tuple[ServerProcess, ServerProcess | None],
    data: bytes,
    replies: int,
    closed: bool,
) -> None:
    hw, rd = auth_pair
    for server in (hw, rd):
        if server is None:
            continue
        got, was_closed = _send_and_read(server.port, data)
        assert (got, was_closed) == (NOAUTH * replies, closed), server


def test_authenticated_output_is_not_limited(
    auth_pair: tuple[ServerProcess, ServerProcess | None],
) -> None:
    hw, _ = auth_pair
    got, closed = _send_and_read(hw.port, encode_command("AUTH", "pw") + PING_RESP * 5000)
    assert (got, closed) == (b"+OK\r\n" + b"+PONG\r\n" * 5000, False)


def _pipeline_without_reading(
    socks: list[socket.socket], data: bytes, seconds: float, server_pid: int
) -> float:
    """Push data into every socket, never reading, until all is sent, the server closed the
    socket, or time runs out (a server that stops reading keeps the rest unsent). Returns the
    server's peak RSS meanwhile."""
    sent = dict.fromkeys(socks, 0)
    deadline = time.monotonic() + seconds
    peak = rss_mb(server_pid)
    while sent and time.monotonic() < deadline:
        peak = max(peak, rss_mb(server_pid))
        for sock in list(sent):
            try:
                sent[sock] += sock.send(data[sent[sock] : sent[sock] + (1 << 20)])
            except BlockingIOError:
                continue
            except OSError:  # reset by the server
                del sent[sock]
                continue
            if sent[sock] >= len(data):
                del sent[sock]
        time.sleep(0.001)
    return max(peak, rss_mb(server_pid))


def _all_closed_by_server(socks: list[socket.socket], seconds: float) -> bool:
    """Do all sockets see the server close them (EOF or reset) within ``seconds``? What
    reached them before is read and ignored."""
    open_socks = set(socks)
    deadline = time.monotonic() + seconds
    while open_socks and time.monotonic() < deadline:
        for sock in list(open_socks):
            try:
                while sock.recv(1 << 16):
                    pass
            except BlockingIOError:
                continue
            except ConnectionResetError:
                pass
            open_socks.discard(sock)
        time.sleep(0.01)
    return not open_socks


def test_unauthenticated_flood_is_dropped_and_memory_stays_bounded() -> None:
    """100 connections pipeline 2 MB of commands each and never read their -NOAUTH: Redis
    drops them at once. Before, their replies piled up (+700 MB RSS, PING taking seconds)."""
    server = start_headwater("--requirepass", "pw")
    hogs: list[socket.socket] = []
    try:
        with raw_client(server.port) as admin:
            assert admin.call("AUTH", "pw") == b"+OK\r\n"
            before = rss_mb(server.proc.pid)
            for _ in range(100):
                sock = socket.create_connection(("127.0.0.1", server.port), 5)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.setblocking(False)
                hogs.append(sock)
            flood = PING_RESP * (2 * ONE_MB // len(PING_RESP))
            peak = _pipeline_without_reading(hogs, flood, 10, server.proc.pid)
            assert peak - before < 50, f"RSS grew from {before:.0f} MB to {peak:.0f} MB"
            assert _all_closed_by_server(hogs, 10), "the server kept flooding clients open"
            slowest = 0.0
            for _ in range(10):
                start = time.monotonic()
                assert admin.call("PING") == b"+PONG\r\n"
                slowest = max(slowest, time.monotonic() - start)
                peak = max(peak, rss_mb(server.proc.pid))
                time.sleep(0.02)
            assert peak - before < 50, f"RSS grew from {before:.0f} MB to {peak:.0f} MB"
            assert slowest < 0.5, f"an authenticated PING took {slowest:.2f} s"
            assert obl_disconnections(admin) == 100
            assert info_field(admin, "clients", "connected_clients") == "1"
    finally:
        for sock in hogs:
            sock.close()
        server.stop()


# -- output buffers -------------------------------------------------------------------------


def _non_reading_client(port: int, commands: bytes, rcvbuf: int = 4096) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.sendall(commands)
    return sock


def test_non_reading_client_does_not_grow_memory() -> None:
    server = start_headwater()
    try:
        with raw_client(server.port) as c:
            assert c.call("SET", "big", b"x" * ONE_MB) == b"+OK\r\n"
            before = rss_mb(server.proc.pid)
            hog = _non_reading_client(server.port, encode_command("GET", "big") * 2000, 1 << 20)
            peak = before
            for _ in range(10):
                time.sleep(0.05)
                start = time.monotonic()
                assert c.call("PING") == b"+PONG\r\n"
                assert time.monotonic() - start < 1.0
                peak = max(peak, rss_mb(server.proc.pid))
            assert peak - before < 200, f"RSS grew from {before:.0f} MB to {peak:.0f} MB"
            # The hog is paused, not dropped: reading resumes the replies, in order.
            hog.settimeout(10)
            want = b"$%d\r\n" % ONE_MB + b"x" * ONE_MB + b"\r\n"
            got = b""
            while len(got) < 5 * len(want):
                chunk = hog.recv(1 << 20)
                assert chunk
                got += chunk
            assert got[: 5 * len(want)] == want * 5
            hog.close()
            assert c.call("PING") == b"+PONG\r\n"
    finally:
        server.stop()


def test_output_buffer_hard_limit_disconnects(private_headwater: ServerProcess) -> None:
    port = private_headwater.port
    with raw_client(port) as c:
        assert c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0") == b"+OK\r\n"
        try:
            assert c.call("SET", "big", b"x" * ONE_MB) == b"+OK\r\n"
            before = obl_disconnections(c)
            hog = _non_reading_client(port, encode_command("GET", "big") * 200)
            deadline = time.monotonic() + 10
            while obl_disconnections(c) == before:
                assert time.monotonic() < deadline, "the non-reading client was not disconnected"
                time.sleep(0.02)
            # The client sees the connection end (after whatever had reached its socket).
            hog.settimeout(10)
            total = 0
            while True:
                try:
                    chunk = hog.recv(1 << 20)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                total += len(chunk)
            assert total < 200 * ONE_MB
            hog.close()
            listing = c.call("CLIENT", "LIST").split(b"\r\n", 1)[1]
            assert len(listing.strip().splitlines()) == 1
        finally:
            c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0")
            c.call("DEL", "big")


def test_output_buffer_soft_limit_disconnects(private_headwater: ServerProcess) -> None:
    port = private_headwater.port
    with raw_client(port) as c:
        limit = "normal 0 512kb 1"
        assert c.call("CONFIG", "SET", "client-output-buffer-limit", limit) == b"+OK\r\n"
        try:
            assert c.call("SET", "big", b"x" * ONE_MB) == b"+OK\r\n"
            before = obl_disconnections(c)
            hog = _non_reading_client(port, encode_command("GET", "big") * 50)
            deadline = time.monotonic() + 10
            while obl_disconnections(c) == before:
                assert time.monotonic() < deadline, "soft limit never disconnected the client"
                time.sleep(0.05)
            hog.close()
        finally:
            c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0")
            c.call("DEL", "big")


def test_reading_client_is_not_disconnected(private_headwater: ServerProcess) -> None:
    """A client that reads its (large) replies stays connected under the same limit."""
    port = private_headwater.port
    with raw_client(port) as c:
        assert c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 8mb 0 0") == b"+OK\r\n"
        try:
            value = b"y" * (256 * 1024)
            assert c.call("SET", "v", value) == b"+OK\r\n"
            c.send_raw(encode_command("GET", "v") * 64)
            want = b"$%d\r\n%s\r\n" % (len(value), value)
            assert all(c.read_reply() == want for _ in range(64))
            assert c.call("PING") == b"+PONG\r\n"
        finally:
            c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0")


def test_idle_clients_are_closed_after_timeout_but_blocked_ones_are_not(
    private_headwater: ServerProcess,
) -> None:
    port = private_headwater.port
    with raw_client(port) as admin:
        assert admin.call("CONFIG", "SET", "timeout", "1") == b"+OK\r\n"
    try:
        idle, blocked = RawClient(port), RawClient(port)
        blocked.send_raw(encode_command("XREAD", "BLOCK", "0", "STREAMS", "idle", "$"))
        idle.call("PING")
        time.sleep(2.5)
        assert idle.read_until_closed(timeout=2) == b""  # the server closed it
        with raw_client(port) as writer:
            writer.call("XADD", "idle", "*", "f", "v")
        assert b"idle" in blocked.read_reply()  # still connected, and served
        idle.close()
        blocked.close()
    finally:
        with raw_client(port) as admin:
            admin.call("CONFIG", "SET", "timeout", "0")


def test_a_bulk_load_is_answered_read_by_read() -> None:
    """A client that pipelines megabytes gets the replies of each read written before the
    next reads run (libuv reads a busy socket many times a loop turn; their replies held to
    the turn's end were ~170,000 objects for ``redis-cli --pipe``), as Redis writes between
    reads: INFO's write count follows its read count."""
    server = start_headwater("--appendonly", "no", "--save", "")
    try:
        with raw_client(server.port) as c:
            before = c.call("INFO", "stats").decode()
            bulk_load(server.port, encode_command("XADD", "bulk", "*", "f", "0" * 16), 100_000)
            after = c.call("INFO", "stats").decode()
            assert c.call("XLEN", "bulk") == b":100000\r\n"

        def count(text: str, name: str) -> int:
            return int(next(x for x in text.splitlines() if x.startswith(name)).split(":")[1])

        reads = count(after, "total_reads_processed") - count(before, "total_reads_processed")
        writes = count(after, "total_writes_processed") - count(before, "total_writes_processed")
        assert reads > 10 and writes >= reads * 0.9, (reads, writes)
    finally:
        server.stop()
