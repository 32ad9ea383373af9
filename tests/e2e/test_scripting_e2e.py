"""Scripts over TCP: a busy script (-BUSY, SCRIPT KILL, -UNKILLABLE, SHUTDOWN NOSAVE), and
redis-py's Lock and register_script (EVALSHA with an EVAL fallback) in RESP2 and RESP3."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from tests.helpers import RawClient, ServerProcess, start_headwater

pytestmark = pytest.mark.e2e

BUSY_EVAL = (
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
)


@pytest.fixture
def busy_server() -> Iterator[ServerProcess]:
    server = start_headwater("--busy-reply-threshold", "100", "--appendonly", "yes")
    yield server
    server.stop()


def _start_script(port: int, body: str) -> RawClient:
    runner = RawClient(port)
    runner.send_raw(b"*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(body), body.encode()))
    time.sleep(0.4)  # past the threshold
    return runner


def test_busy_script_is_killed_and_the_server_answers_again(busy_server: ServerProcess) -> None:
    early = RawClient(busy_server.port)  # connected before the script started
    runner = _start_script(busy_server.port, "local i = 0 while true do i = i + 1 end")
    late = RawClient(busy_server.port)  # accepted while the script is busy
    assert early.call("PING") == BUSY_EVAL
    assert late.call("GET", "k") == BUSY_EVAL
    assert late.call("FUNCTION", "KILL") == BUSY_EVAL  # (an EVAL: SCRIPT KILL's)
    assert late.call("FUNCTION", "STATS").startswith(b"*4\r\n$14\r\nrunning_script\r\n$-1\r\n")
    assert late.call("SCRIPT", "KILL") == b"+OK\r\n"
    reply = runner.read_reply()
    assert reply.startswith(b"-ERR Script killed by user with SCRIPT KILL... script: ")
    assert reply.endswith(b", on @user_script:1.\r\n")
    assert early.call("PING") == b"+PONG\r\n"
    assert late.call("PING") == b"+PONG\r\n"  # the loop took the late connection over
    assert late.call("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    assert runner.call("EVAL", "return 7", "0") == b":7\r\n"


def test_a_busy_function_is_killed_by_function_kill(busy_server: ServerProcess) -> None:
    client = RawClient(busy_server.port)
    code = "#!lua name=spin\nredis.register_function('spin', function() while true do end end)"
    assert client.call("FUNCTION", "LOAD", code) == b"$4\r\nspin\r\n"
    client.send_raw(b"FCALL spin 0\r\n")
    time.sleep(0.4)
    other = RawClient(busy_server.port)
    assert other.call("PING") == (
        b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or "
        b"SHUTDOWN NOSAVE.\r\n"
    )
    assert other.call("SCRIPT", "KILL") == other.call("PING")  # (that one is FUNCTION KILL's)
    stats = other.call("FUNCTION", "STATS")
    assert b"$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n" in stats
    assert other.call("FUNCTION", "KILL") == b"+OK\r\n"
    reply = client.read_reply()
    assert reply.startswith(b"-ERR Script killed by user with FUNCTION KILL... script: spin, ")
    assert client.call("PING") == b"+PONG\r\n"


@pytest.mark.parametrize("how", ["aof", "rewrite", "snapshot"])
def test_libraries_survive_a_restart(how: str) -> None:
    args = ("--appendonly", "no") if how == "snapshot" else ("--appendonly", "yes")
    server = start_headwater(*args)
    try:
        client = RawClient(server.port)
        code = "#!lua name=keep\nredis.register_function('kept', function(k, a) return a[1] end)"
        assert client.call("FUNCTION", "LOAD", code) == b"$4\r\nkeep\r\n"
        client.call("FUNCTION", "LOAD", code.replace("keep", "gone").replace("kept", "g"))
        assert client.call("FUNCTION", "DELETE", "gone") == b"+OK\r\n"
        if how == "rewrite":
            client.call("BGREWRITEAOF")
            _wait_for_info(client, b"aof_rewrite_in_progress:0")
        elif how == "snapshot":
            assert client.call("SAVE") == b"+OK\r\n"
        listing = client.call("FUNCTION", "LIST", "WITHCODE")
        client.close()
        server.proc.terminate()
        server.proc.wait(10)
        restarted = start_headwater("--dir", server.workdir, *args)
        try:
            again = RawClient(restarted.port)
            assert again.call("FUNCTION", "LIST", "WITHCODE") == listing
            assert again.call("FCALL", "kept", "0", "x") == b"$1\r\nx\r\n"
        finally:
            restarted.proc.terminate()
            restarted.proc.wait(10)
    finally:
        server.stop()


def _wait_for_info(client: RawClient, line: bytes) -> None:
    for _ in range(100):
        if line in client.call("INFO", "persistence"):
            return
        time.sleep(0.05)
    raise AssertionError(f"INFO never showed {line!r}")


def test_a_script_that_wrote_can_only_be_stopped_by_shutdown_nosave(
    busy_server: ServerProcess,
) -> None:
    RawClient(busy_server.port).call("SET", "before", "1")
    _start_script(busy_server.port, "redis.call('set', 'during', '1') while true do end")
    other = RawClient(busy_server.port)
    assert other.call("SCRIPT", "KILL").startswith(b"-UNKILLABLE Sorry the script already")
    assert other.call("SHUTDOWN") == BUSY_EVAL
    other.send_raw(b"SHUTDOWN NOSAVE\r\n")
    assert other.read_until_closed() == b""
    assert busy_server.proc.wait(10) == 0
    restarted = start_headwater("--dir", busy_server.workdir, "--appendonly", "yes")
    try:
        client = RawClient(restarted.port)
        assert client.call("GET", "before") == b"$1\r\n1\r\n"
        assert client.call("EXISTS", "during") == b":0\r\n"  # the script's write was not kept
    finally:
        restarted.proc.terminate()
        restarted.proc.wait(10)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(request: pytest.FixtureRequest, headwater: ServerProcess) -> Iterator[redis.Redis]:
    r = redis.Redis(port=headwater.port, protocol=request.param, socket_timeout=10)
    r.flushall()
    r.script_flush()
    yield r
    r.close()


def test_redis_py_lock(client: redis.Redis) -> None:
    lock = client.lock("resource", timeout=10)
    assert lock.acquire(blocking=False)
    assert not client.lock("resource", timeout=10).acquire(blocking=False)
    assert lock.extend(5)
    assert lock.reacquire()
    assert 0 < client.pttl("resource") <= 10_000
    assert lock.owned()
    lock.release()
    assert client.get("resource") is None
    assert lock.acquire(blocking=False)
    client.set("resource", "someone else")
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.release()  # the release script saw another token: it deleted nothing
    assert client.get("resource") == b"someone else"
    client.delete("resource")
    with client.lock("resource", timeout=5, blocking_timeout=1):
        assert client.exists("resource") == 1
    assert client.exists("resource") == 0


def test_redis_py_register_script(client: redis.Redis) -> None:
    incr_by = client.register_script(
        "local v = redis.call('incrby', KEYS[1], ARGV[1]) return {v, redis.call('get', KEYS[1])}"
    )
    assert incr_by(keys=["counter"], args=[5]) == [5, b"5"]  # NOSCRIPT, then EVAL
    assert incr_by(keys=["counter"], args=[2]) == [7, b"7"]  # EVALSHA
    client.script_flush()
    assert incr_by(keys=["counter"], args=[1]) == [8, b"8"]
    with client.pipeline() as pipe:
        incr_by(keys=["counter"], args=[1], client=pipe)
        incr_by(keys=["counter"], args=[1], client=pipe)
        assert pipe.execute() == [[9, b"9"], [10, b"10"]]
    assert client.script_exists(incr_by.sha) == [True]
