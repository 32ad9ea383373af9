"""Inline commands and pipelining over a raw socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import RawClient, ServerProcess, encode_command, raw_client, redis_available

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["headwater", "redis_server"])
def server(request: pytest.FixtureRequest) -> ServerProcess:
    """Every expectation here is checked against redis-server too (when installed)."""
    if request.param == "redis_server" and not redis_available():
        pytest.skip("redis-server not installed")
    server: ServerProcess = request.getfixturevalue(request.param)
    return server


@pytest.fixture
def raw(server: ServerProcess) -> Iterator[RawClient]:
    client = RawClient(server.port)
    client.call("FLUSHALL")
    yield client
    client.close()


def read_replies(client: RawClient, n: int) -> list[bytes]:
    return [client.read_reply() for _ in range(n)]


def test_inline_ping(raw: RawClient) -> None:
    raw.send_raw(b"PING\r\n")
    assert raw.read_reply() == b"+PONG\r\n"
    raw.send_raw(b"ping hello\n")  # a bare \n ends a line too
    assert raw.read_reply() == b"$5\r\nhello\r\n"


def test_inline_quoting(raw: RawClient) -> None:
    raw.send_raw(b'SET a "hello world"\r\n')
    assert raw.read_reply() == b"+OK\r\n"
    raw.send_raw(b"GET a\r\n")
    assert raw.read_reply() == b"$11\r\nhello world\r\n"
    raw.send_raw(b"SET b 'it\\'s'\r\nGET b\r\n")
    assert read_replies(raw, 2) == [b"+OK\r\n", b"$4\r\nit's\r\n"]
    raw.send_raw(b'SET c "\\x41\\n\\t"\r\nGET c\r\n')
    assert read_replies(raw, 2) == [b"+OK\r\n", b"$3\r\nA\n\t\r\n"]
    raw.send_raw(b'SET d ""\r\nSTRLEN d\r\n')
    assert read_replies(raw, 2) == [b"+OK\r\n", b":0\r\n"]


def test_empty_lines_are_ignored(raw: RawClient) -> None:
    raw.send_raw(b"\r\n\r\n\n   \r\nPING\r\n\r\n")
    assert raw.read_reply() == b"+PONG\r\n"
    raw.send_raw(b"ECHO x\r\n")
    assert raw.read_reply() == b"$1\r\nx\r\n"  # nothing was queued for the blank lines


@pytest.mark.parametrize(
    "line",
    [b'SET a "hello\r\n', b"SET a 'x\r\n", b'SET a "x"y\r\n', b"GET 'a'b\r\n"],
    ids=["open-double", "open-single", "double-then-char", "single-then-char"],
)
def test_unbalanced_quotes_close(server: ServerProcess, line: bytes) -> None:
    client = RawClient(server.port)
    try:
        client.send_raw(b"PING\r\n" + line + b"PING\r\n")
        got = client.read_until_closed()
        assert got == b"+PONG\r\n-ERR Protocol error: unbalanced quotes in request\r\n"
    finally:
        client.close()
    with raw_client(server.port) as after:
        assert after.call("PING") == b"+PONG\r\n"


def test_mixing_resp_and_inline_in_one_packet(raw: RawClient) -> None:
    packet = (
        encode_command("SET", "m", "1")
        + b"INCR m\r\n"
        + encode_command("INCRBY", "m", "10")
        + b"\r\n"
        + b"GET m\r\n"
        + encode_command("ECHO", "a b")
        + b'ECHO "a b"\n'
    )
    raw.send_raw(packet)
    assert read_replies(raw, 6) == [
        b"+OK\r\n",
        b":2\r\n",
        b":12\r\n",
        b"$2\r\n12\r\n",
        b"$3\r\na b\r\n",
        b"$3\r\na b\r\n",
    ]


def test_inline_split_across_packets(raw: RawClient) -> None:
    for piece in (b"SE", b"T spl", b"it ", b'"va', b'lue"\r', b"\nGET split\r\n"):
        raw.send_raw(piece)
    assert read_replies(raw, 2) == [b"+OK\r\n", b"$5\r\nvalue\r\n"]


def test_resp_split_byte_by_byte(raw: RawClient) -> None:
    data = encode_command("SET", "bytewise", "x" * 20) + encode_command("GET", "bytewise")
    for i in range(len(data)):
        raw.send_raw(data[i : i + 1])
    assert read_replies(raw, 2) == [b"+OK\r\n", b"$20\r\n" + b"x" * 20 + b"\r\n"]


def test_pipeline_10000_in_order(raw: RawClient) -> None:
    n = 10_000
    packet = b"".join(encode_command("INCR", "pipe:counter") for _ in range(n))
    raw.send_raw(packet)
    replies = read_replies(raw, n)
    assert replies == [b":%d\r\n" % i for i in range(1, n + 1)]


def test_pipeline_mixed_commands_in_order(raw: RawClient) -> None:
    n = 10_000
    parts = []
    for i in range(n):
        if i % 3 == 0:
            parts.append(encode_command("SET", f"k{i}", f"v{i}"))
        elif i % 3 == 1:
            parts.append(encode_command("GET", f"k{i - 1}"))
        else:
            parts.append(b"ECHO e%d\r\n" % i)
    raw.send_raw(b"".join(parts))
    replies = read_replies(raw, n)
    for i, reply in enumerate(replies):
        if i % 3 == 0:
            assert reply == b"+OK\r\n", i
        elif i % 3 == 1:
            value = b"v%d" % (i - 1)
            assert reply == b"$%d\r\n%s\r\n" % (len(value), value), i
        else:
            value = b"e%d" % i
            assert reply == b"$%d\r\n%s\r\n" % (len(value), value), i
    assert raw.call("PING") == b"+PONG\r\n"
