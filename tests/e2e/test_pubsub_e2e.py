"""Pub/Sub over TCP: redis-py's ``pubsub()`` (sync and asyncio, RESP2 and RESP3), PUBLISH to
10,000 channels, and subscribers that never read (``client-output-buffer-limit pubsub``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

from tests.e2e.test_durability import Node
from tests.helpers import RawClient, ServerProcess, encode_command, raw_client, start_headwater

pytestmark = pytest.mark.e2e


def _messages(
    ps: redis.client.PubSub, count: int, timeout: float = 10.0
) -> list[dict[str, object]]:
    got: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} messages: {got[-3:]}"
        message = ps.get_message(timeout=0.5)
        if message is not None:
            got.append(message)
    return got


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def test_redis_py_pubsub(headwater: ServerProcess, protocol: int) -> None:
    r = redis.Redis(port=headwater.port, protocol=protocol, socket_timeout=10)
    ps = r.pubsub()
    try:
        ps.subscribe("news", "sport")
        ps.psubscribe("n*")
        confirmations = _messages(ps, 3)
        assert [(m["type"], m["channel"], m["data"]) for m in confirmations] == [
            ("subscribe", b"news", 1),
            ("subscribe", b"sport", 2),
            ("psubscribe", b"n*", 3),
        ]
        assert r.publish("news", "hello") == 2
        assert r.publish("sport", b"\x00goal\r\n") == 1
        assert r.publish("nothing", "x") == 1
        assert r.pubsub_numsub("news", "sport", "none") == [
            (b"news", 1),
            (b"sport", 1),
            (b"none", 0),
        ]
        assert r.pubsub_numpat() == 1
        got = [(m["type"], m["pattern"], m["channel"], m["data"]) for m in _messages(ps, 4)]
        assert got == [
            ("message", None, b"news", b"hello"),
            ("pmessage", b"n*", b"news", b"hello"),
            ("message", None, b"sport", b"\x00goal\r\n"),
            ("pmessage", b"n*", b"nothing", b"x"),
        ]
        ps.ping()
        pong = _messages(ps, 1)[0]
        assert pong["type"] == "pong"
        ps.unsubscribe()
        ps.punsubscribe()
        _messages(ps, 3)
        assert r.pubsub_channels() == []
    finally:
        ps.close()
        r.close()


def test_redis_py_pubsub_handlers_and_thread(headwater: ServerProcess, protocol: int) -> None:
    r = redis.Redis(port=headwater.port, protocol=protocol, socket_timeout=10)
    received: list[bytes] = []
    ps = r.pubsub(ignore_subscribe_messages=True)
    ps.subscribe(**{"jobs": lambda m: received.append(m["data"])})
    thread = ps.run_in_thread(sleep_time=0.01, daemon=True)
    try:
        deadline = time.monotonic() + 5
        while r.pubsub_numsub("jobs")[0][1] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for i in range(100):
            r.publish("jobs", str(i))
        while len(received) < 100:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert received == [str(i).encode() for i in range(100)]
    finally:
        thread.stop()
        thread.join(5)
        ps.close()
        r.close()


def test_redis_py_asyncio_pubsub(headwater: ServerProcess, protocol: int) -> None:
    async def scenario() -> list[tuple[object, object]]:
        r = redis.asyncio.Redis(port=headwater.port, protocol=protocol)
        ps = r.pubsub(ignore_subscribe_messages=True)
        try:
            await ps.subscribe("a")
            await ps.ssubscribe("s")
            await r.publish("a", "one")
            await r.spublish("s", "two")
            await r.publish("a", "three")
            got = []
            while len(got) < 3:
                message = await ps.get_message(timeout=5)
                if message is not None:
                    got.append((message["channel"], message["data"]))
            await ps.unsubscribe("a")
            return got
        finally:
            await ps.aclose()
            await r.aclose()

    assert asyncio.run(scenario()) == [(b"a", b"one"), (b"s", b"two"), (b"a", b"three")]


def test_resp3_subscriber_runs_other_commands(headwater: ServerProcess) -> None:
    r = redis.Redis(port=headwater.port, protocol=3, socket_timeout=10)
    try:
        with raw_client(headwater.port) as c:
            assert c.call("HELLO", "3")[:1] == b"%"
            assert c.call("SUBSCRIBE", "ch") == b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
            assert c.call("SET", "k", "v") == b"+OK\r\n"
            assert r.publish("ch", "m") == 1
            assert c.read_reply() == b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n"
            assert c.call("GET", "k") == b"$1\r\nv\r\n"
            listing = r.client_list(_type="pubsub")
            assert len(listing) == 1
            assert listing[0]["flags"] == "P"
            assert listing[0]["sub"] == "1"
    finally:
        r.close()


def test_publish_to_ten_thousand_channels(headwater: ServerProcess) -> None:
    channels = [b"ch:%d" % i for i in range(10_000)]
    with raw_client(headwater.port) as sub, raw_client(headwater.port) as pub:
        sub.send_raw(encode_command("SUBSCRIBE", *channels))
        for i, channel in enumerate(channels):
            assert sub.read_reply() == b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:%d\r\n" % (
                len(channel),
                channel,
                i + 1,
            )
        assert sub.call("PSUBSCRIBE", "ch:1*").endswith(b":10001\r\n")
        pub.send_raw(
            b"".join(encode_command("PUBLISH", ch, b"m%d" % i) for i, ch in enumerate(channels))
        )
        counts = [pub.read_reply() for _ in channels]
        assert counts == [b":2\r\n" if ch.startswith(b"ch:1") else b":1\r\n" for ch in channels]
        for i, channel in enumerate(channels):
            body = b"$%d\r\n%s\r\n$%d\r\nm%d\r\n" % (len(channel), channel, len(b"m%d" % i), i)
            assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n" + body
            if channel.startswith(b"ch:1"):
                assert sub.read_reply() == b"*4\r\n$8\r\npmessage\r\n$5\r\nch:1*\r\n" + body
        assert pub.call("PUBSUB", "NUMSUB", "ch:9999") == b"*2\r\n$7\r\nch:9999\r\n:1\r\n"
        sub.call("UNSUBSCRIBE")
        assert pub.call("PUBSUB", "CHANNELS") == b"*0\r\n"


# -- subscribers that never read -------------------------------------------------------------


def _stat(c: object, name: bytes) -> int:
    info: bytes = c.call("INFO", "stats")  # type: ignore[attr-defined]
    for line in info.split(b"\r\n"):
        if line.startswith(name + b":"):
            return int(line.split(b":")[1])
    raise AssertionError(f"{name!r} not in INFO")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def _silent_subscriber(port: int, channel: bytes) -> socket.socket:
    """Subscribes, then never reads again (a small receive buffer, so the server sees it)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(encode_command("SUBSCRIBE", channel))
    return sock


@pytest.fixture
def fresh_server() -> Iterator[ServerProcess]:
    server = start_headwater()
    yield server
    server.stop()


def test_silent_subscribers_are_disconnected_and_others_keep_their_latency(
    fresh_server: ServerProcess,
) -> None:
    """50 subscribers that never read, 64 KB messages: each is dropped at the hard limit, the
    server's memory stays bounded, a subscriber that reads keeps every message and a normal
    client's PING stays fast."""
    port = fresh_server.port
    with raw_client(port) as c, raw_client(port) as reader:
        assert c.call("CONFIG", "SET", "client-output-buffer-limit", "pubsub 2mb 0 0") == b"+OK\r\n"
        reader.call("SUBSCRIBE", "feed")
        silent = [_silent_subscriber(port, b"feed") for _ in range(50)]
        deadline = time.monotonic() + 10
        while c.call("PUBSUB", "NUMSUB", "feed") != b"*2\r\n$4\r\nfeed\r\n:51\r\n":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        before = _rss_mb(fresh_server.proc.pid)
        message = b"x" * 65536
        worst = 0.0
        framed = b"*3\r\n$7\r\nmessage\r\n$4\r\nfeed\r\n$65536\r\n" + message + b"\r\n"
        for _ in range(20):  # 200 messages: 12.5 MB to each subscriber
            for _ in range(10):
                assert c.call("PUBLISH", "feed", message).startswith(b":")
            start = time.monotonic()
            assert c.call("PING") == b"+PONG\r\n"
            worst = max(worst, time.monotonic() - start)
            for _ in range(10):
                assert reader.read_reply() == framed
        grown = _rss_mb(fresh_server.proc.pid) - before
        deadline = time.monotonic() + 10
        while _stat(c, b"client_output_buffer_limit_disconnections") < 50:
            assert time.monotonic() < deadline, "silent subscribers were not disconnected"
            time.sleep(0.05)
        assert c.call("PUBSUB", "NUMSUB", "feed") == b"*2\r\n$4\r\nfeed\r\n:1\r\n"
        assert worst < 0.5, f"a normal client's PING took {worst:.3f}s"
        assert grown < 50 * 4 + 100, f"RSS grew by {grown:.0f} MB"
        for sock in silent:
            sock.close()


def test_silent_subscriber_soft_limit(fresh_server: ServerProcess) -> None:
    port = fresh_server.port
    with raw_client(port) as c:
        limit = "pubsub 0 256kb 1"
        assert c.call("CONFIG", "SET", "client-output-buffer-limit", limit) == b"+OK\r\n"
        silent = _silent_subscriber(port, b"feed")
        deadline = time.monotonic() + 10
        while c.call("PUBSUB", "NUMSUB", "feed") != b"*2\r\n$4\r\nfeed\r\n:1\r\n":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for _ in range(64):  # 4 MB: past the soft limit, and it stays past it
            c.call("PUBLISH", "feed", b"y" * 65536)
        assert c.call("PUBSUB", "NUMSUB", "feed") == b"*2\r\n$4\r\nfeed\r\n:1\r\n"
        deadline = time.monotonic() + 10
        while _stat(c, b"client_output_buffer_limit_disconnections") < 1:
            assert time.monotonic() < deadline, "the soft limit never disconnected it"
            time.sleep(0.05)
        assert c.call("PUBSUB", "NUMSUB", "feed") == b"*2\r\n$4\r\nfeed\r\n:0\r\n"
        silent.close()


def test_default_pubsub_limit_disconnects_a_silent_subscriber(fresh_server: ServerProcess) -> None:
    """Redis's default (pubsub 32mb 8mb 60): 40 MB that are never read pass the hard limit."""
    port = fresh_server.port
    with raw_client(port) as c:
        silent = _silent_subscriber(port, b"feed")
        deadline = time.monotonic() + 10
        while c.call("PUBSUB", "NUMSUB", "feed") != b"*2\r\n$4\r\nfeed\r\n:1\r\n":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for _ in range(640):
            c.call("PUBLISH", "feed", b"z" * 65536)
        deadline = time.monotonic() + 10
        while _stat(c, b"client_output_buffer_limit_disconnections") < 1:
            assert time.monotonic() < deadline, "the hard limit never disconnected it"
            time.sleep(0.05)
        silent.close()


def test_redis_py_monitor_parses_our_lines(headwater: ServerProcess) -> None:
    """redis-py's Monitor parses each line with its own regular expression."""
    r = redis.Redis(port=headwater.port, socket_timeout=10)
    other = redis.Redis(port=headwater.port, socket_timeout=10, db=3)
    try:
        with r.monitor() as monitor:
            other.set("k", 'a "quoted"\nvalue')
            other.xadd("s", {"f": "v"}, id="1-1")
            commands = []
            for event in monitor.listen():  # (after the connection's own handshake)
                commands.append((event["db"], event["command"]))
                if event["command"].startswith("XADD"):
                    break
        # (redis-py undoes only the quotes' escaping: the newline stays "\\n", as with Redis)
        assert commands[-2:] == [(3, 'SET k a "quoted"\\nvalue'), (3, "XADD s 1-1 f v")]
        assert (3, "SELECT 3") in commands
    finally:
        r.close()
        other.close()


# -- appendfsync always: no message shows a write before it is durable -------------------------


def test_always_notification_waits_for_the_fsync(tmp_path: Path) -> None:
    """With appendfsync always, Redis writes every client's output after the AOF's fsync: a
    keyspace event of an XADD, or a message PUBLISHed by a client that wrote, must not reach
    a subscriber before the write is on disk (a crash could still undo it)."""
    node = Node(tmp_path, "--appendfsync", "always", "--notify-keyspace-events", "Et", faulty=True)
    node.start()
    try:
        control = RawClient(node.port, timeout=10.0)
        sub = RawClient(node.port, timeout=0.5)
        sub.call("SUBSCRIBE", "__keyevent@0__:xadd", "news")
        assert sub.read_reply().endswith(b":2\r\n")
        assert control.call("FAULT", "AOF-FSYNC-HOLD", "ON") == b"+OK\r\n"
        writer = RawClient(node.port, timeout=0.5)
        writer.send_raw(encode_command("XADD", "s", "*", "f", "v"))
        with pytest.raises(TimeoutError):
            writer.read_reply()  # applied, not durable: no reply
        with pytest.raises(TimeoutError):
            sub.read_reply()  # nor an event that shows it
        # (a later message waits behind the event, in order)
        assert control.call("PUBLISH", "news", "hello") == b":1\r\n"
        with pytest.raises(TimeoutError):
            sub.read_reply()
        assert control.call("FAULT", "AOF-FSYNC-HOLD", "OFF") == b"+OK\r\n"
        sub.sock.settimeout(5.0)
        event = b"*3\r\n$7\r\nmessage\r\n$19\r\n__keyevent@0__:xadd\r\n$1\r\ns\r\n"
        assert sub.read_reply() == event
        assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
        writer.sock.settimeout(5.0)
        assert writer.read_reply().startswith(b"$")
        # a client that wrote publishes: its message waits for its write too
        assert control.call("FAULT", "AOF-FSYNC-HOLD", "ON") == b"+OK\r\n"
        writer.sock.settimeout(0.5)
        writer.send_raw(encode_command("XADD", "s", "*", "f", "v2"))
        writer.send_raw(encode_command("PUBLISH", "news", "wrote"))
        with pytest.raises(TimeoutError):
            sub.read_reply()
        assert control.call("FAULT", "AOF-FSYNC-HOLD", "OFF") == b"+OK\r\n"
        sub.sock.settimeout(5.0)
        assert sub.read_reply() == event
        assert sub.read_reply().endswith(b"$5\r\nwrote\r\n")
    finally:
        node.kill()


def test_idle_subscribers_and_monitors_are_not_closed_by_timeout(
    fresh_server: ServerProcess,
) -> None:
    """``timeout`` closes idle clients but not subscribers nor monitors, which only listen
    (Redis: clientsCronHandleTimeout skips Pub/Sub clients and replicas/monitors)."""
    port = fresh_server.port
    with raw_client(port) as admin:
        assert admin.call("CONFIG", "SET", "timeout", "1") == b"+OK\r\n"
    idle, sub, resp3_sub, mon = (RawClient(port) for _ in range(4))
    idle.call("PING")
    sub.call("SUBSCRIBE", "news")
    assert resp3_sub.call("HELLO", "3").startswith(b"%")
    resp3_sub.call("PSUBSCRIBE", "n*")
    assert mon.call("MONITOR") == b"+OK\r\n"
    time.sleep(2.5)
    assert idle.read_until_closed(timeout=2) == b""  # the server closed it
    with raw_client(port) as publisher:
        assert publisher.call("PUBLISH", "news", "still here") == b":2\r\n"
    assert sub.read_reply().endswith(b"$10\r\nstill here\r\n")
    assert resp3_sub.read_reply().endswith(b"$10\r\nstill here\r\n")
    assert mon.read_reply().endswith(b'"PUBLISH" "news" "still here"\r\n')
    for client in (idle, sub, resp3_sub, mon):
        client.close()


def _drain(sock: socket.socket, want: bytes) -> bytes:
    """Everything received until ``want`` has arrived (then a short settle)."""
    got = b""
    sock.settimeout(5)
    while len(got) < len(want):
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    sock.settimeout(0.05)
    with contextlib.suppress(TimeoutError):
        got += sock.recv(1 << 16)
    return got


_HELLO_FOO = b">3\r\n$9\r\nsubscribe\r\n$3\r\nfoo\r\n:1\r\n"
_MESSAGE = b">3\r\n$7\r\nmessage\r\n$3\r\nfoo\r\n$%d\r\n%s\r\n"

#: (commands, what follows the subscribe confirmation) on a RESP3 client subscribed to foo
SELF_PUBLISH = {
    "plain": ([["PUBLISH", "foo", "bar"]], b":1\r\n" + _MESSAGE % (3, b"bar")),
    "multi": (
        [["MULTI"], ["PING", "abc"], ["PUBLISH", "foo", "bar"], ["PING", "def"], ["EXEC"]],
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n$3\r\nabc\r\n:1\r\n$3\r\ndef\r\n"
        + _MESSAGE % (3, b"bar"),
    ),
    "script": (
        [["EVAL", "redis.call('publish','foo','bar') return 'bla'", "0"]],
        b"$3\r\nbla\r\n" + _MESSAGE % (3, b"bar"),
    ),
    "keyspace event": (
        [
            ["CONFIG", "SET", "notify-keyspace-events", "KA"],
            ["SUBSCRIBE", "__keyspace@0__:k"],
            ["SET", "k", "v"],
            ["CONFIG", "SET", "notify-keyspace-events", ""],
        ],
        b"+OK\r\n>3\r\n$9\r\nsubscribe\r\n$16\r\n__keyspace@0__:k\r\n:2\r\n+OK\r\n"
        b">3\r\n$7\r\nmessage\r\n$16\r\n__keyspace@0__:k\r\n$3\r\nset\r\n+OK\r\n",
    ),
}


@pytest.mark.parametrize("name", list(SELF_PUBLISH))
def test_messages_to_itself_follow_the_reply(headwater: ServerProcess, name: str) -> None:
    """Redis 7.2+: a message a command sends to its own client (PUBLISH, a keyspace event,
    from EXEC or a script too) comes after that command's reply, not inside it; SUBSCRIBE's
    confirmations are its reply and stay where it runs."""
    commands, expected = SELF_PUBLISH[name]
    with socket.create_connection(("127.0.0.1", headwater.port), 5) as sock:
        sock.sendall(encode_command("HELLO", "3"))
        sock.settimeout(5)
        sock.recv(1 << 16)
        sock.sendall(encode_command("SUBSCRIBE", "foo"))
        assert _drain(sock, _HELLO_FOO) == _HELLO_FOO
        sock.sendall(b"".join(encode_command(*argv) for argv in commands))
        assert _drain(sock, expected) == expected


def test_subscribe_inside_multi_stays_in_exec_reply(headwater: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", headwater.port), 5) as sock:
        sock.sendall(encode_command("HELLO", "3"))
        sock.settimeout(5)
        sock.recv(1 << 16)
        commands = [["MULTI"], ["SUBSCRIBE", "foo"], ["PUBLISH", "foo", "x"], ["EXEC"]]
        sock.sendall(b"".join(encode_command(*argv) for argv in commands))
        expected = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n" + _HELLO_FOO + b":1\r\n"
        expected += _MESSAGE % (1, b"x")
        assert _drain(sock, expected) == expected
