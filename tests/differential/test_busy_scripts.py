"""A busy script, against Debian's redis-server (7.0): the same client sessions on both servers
give the same replies, and the same shutdown signals the same exit.

- a killed script leaves nothing behind: the next long script is busy in its turn;
- MULTI, WATCH and DISCARD pass while busy; EXEC is refused with EXECABORT … BUSY and ends
  the transaction; a command refused while queuing dooms it (Redis's multi.tcl "… and
  script timeout" tests);
- SIGTERM or SIGINT only schedules the shutdown, which comes once the script is killed; a
  second SIGINT exits at once with status 1.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from tests.helpers import RawClient, ServerProcess, start_headwater, start_redis

THRESHOLD = ("--busy-reply-threshold", "100")
SPIN = b"*3\r\n$4\r\nEVAL\r\n$17\r\nwhile true do end\r\n$1\r\n0\r\n"

Session = Callable[[ServerProcess], list[bytes]]


@pytest.fixture
def servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    ours, theirs = start_headwater(*THRESHOLD, "--appendonly", "no"), start_redis(*THRESHOLD)
    yield ours, theirs
    ours.stop()
    theirs.stop()


def same_replies(servers: tuple[ServerProcess, ServerProcess], session: Session) -> None:
    ours, theirs = (session(server) for server in servers)
    assert ours == theirs


def wait_busy(client: RawClient) -> bytes:
    """PING until the server is busy (or 10 s have passed): the last reply."""
    deadline = time.monotonic() + 10
    reply = client.call("PING")
    while not reply.startswith(b"-BUSY") and time.monotonic() < deadline:
        time.sleep(0.02)
        reply = client.call("PING")
    return reply


def start_spinning(server: ServerProcess) -> RawClient:
    runner = RawClient(server.port)
    runner.call("PING")  # (accepted before the script takes the server)
    runner.send_raw(SPIN)
    return runner


def kill_script(server: ServerProcess, runner: RawClient) -> list[bytes]:
    killer = RawClient(server.port)
    replies = [killer.call("SCRIPT", "KILL"), runner.read_reply()[:44]]
    killer.close()
    return replies


def test_a_killed_script_leaves_the_next_one_busy(
    servers: tuple[ServerProcess, ServerProcess],
) -> None:
    def session(server: ServerProcess) -> list[bytes]:
        other = RawClient(server.port)
        runner = start_spinning(server)
        replies = [wait_busy(other), *kill_script(server, runner)]
        runner.send_raw(SPIN)
        time.sleep(0.3)  # (a script killed by a stale request ends well before this)
        replies += [other.call("SCRIPT", "KILL"), runner.read_reply()[:44]]
        replies.append(other.call("PING"))
        return replies

    same_replies(servers, session)


@pytest.mark.parametrize("when", ["multi-while-busy", "exec-while-busy", "queued-while-busy"])
def test_a_transaction_meeting_a_busy_script_is_discarded(
    servers: tuple[ServerProcess, ServerProcess], when: str
) -> None:
    def session(server: ServerProcess) -> list[bytes]:
        client = RawClient(server.port)
        replies = [client.call("SET", "xx", "1")]
        if when != "multi-while-busy":
            replies += [client.call("MULTI"), client.call("INCR", "xx")]
        runner = start_spinning(server)
        replies.append(wait_busy(RawClient(server.port)))
        if when == "multi-while-busy":
            replies += [client.call("MULTI"), client.call("WATCH", "xx")]
        replies.append(client.call("INCR", "xx"))  # refused: dooms the transaction
        if when == "exec-while-busy":
            replies.append(client.call("EXEC"))  # refused, and the transaction ends
        replies += kill_script(server, runner)
        replies += [client.call("EXEC"), client.call("GET", "xx"), client.call("PING", "asdf")]
        return replies

    same_replies(servers, session)


def test_exec_refused_for_its_arity_ends_the_transaction(
    servers: tuple[ServerProcess, ServerProcess],
) -> None:
    def session(server: ServerProcess) -> list[bytes]:
        client = RawClient(server.port)
        return [client.call("MULTI"), client.call("EXEC", "x"), client.call("PING", "asdf")]

    same_replies(servers, session)


def exit_after(server: ServerProcess, signals: list[signal.Signals], kill: bool) -> object:
    """Signal a server busy in a script: whether it outlived the signals, and its exit status
    (after a SCRIPT KILL when ``kill``)."""
    runner = start_spinning(server)
    wait_busy(RawClient(server.port))
    for signum in signals:
        server.proc.send_signal(signum)
        time.sleep(0.3)
    try:
        status: int | None = server.proc.wait(1.5)
    except subprocess.TimeoutExpired:
        status = None
    outlived = status is None
    if outlived and kill:
        assert RawClient(server.port).call("SCRIPT", "KILL") == b"+OK\r\n"
        status = server.proc.wait(10)
    runner.close()
    return outlived, status


@pytest.mark.parametrize(
    ("signals", "kill"),
    [([signal.SIGTERM], True), ([signal.SIGINT], True), ([signal.SIGINT, signal.SIGINT], False)],
    ids=["sigterm", "sigint", "sigint-twice"],
)
def test_a_busy_server_and_shutdown_signals(
    servers: tuple[ServerProcess, ServerProcess], signals: list[signal.Signals], kill: bool
) -> None:
    ours, theirs = (exit_after(server, signals, kill) for server in servers)
    assert ours == theirs
