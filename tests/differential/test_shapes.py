"""Replies that legitimately differ in content (versions, ids, clocks) but must match Redis in
shape: the same types, the same keys, in the same order."""

from __future__ import annotations

import re

import pytest

from tests.helpers import RawClient, ServerProcess


def _mask(reply: bytes) -> bytes:
    """Replace digits and the version string so only the structure is compared."""
    reply = re.sub(rb"\$\d+\r\n\d+\.\d+\.\d+\r\n", b"$V\r\nVERSION\r\n", reply)
    return re.sub(rb"\d+", b"N", reply)


def _both(
    headwater: ServerProcess, redis: ServerProcess, resp: int, *args: str
) -> tuple[bytes, bytes]:
    replies = []
    for server in (headwater, redis):
        client = RawClient(server.port)
        try:
            if resp == 3:
                client.call("HELLO", "3")
            replies.append(client.call(*args))
        finally:
            client.close()
    return replies[0], replies[1]


@pytest.mark.parametrize("resp", [2, 3])
def test_hello_has_redis_shape(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    ours, theirs = _both(headwater, redis_server, resp, "HELLO")
    assert _mask(ours) == _mask(theirs)


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("args", [("TIME",), ("CLIENT", "ID"), ("LASTSAVE",), ("DBSIZE",)])
def test_scalar_shapes(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int, args: tuple[str, ...]
) -> None:
    ours, theirs = _both(headwater, redis_server, resp, *args)
    assert _mask(ours) == _mask(theirs)


@pytest.mark.parametrize("resp", [2, 3])
def test_client_info_is_verbatim_text_with_redis_fields(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    ours, theirs = _both(headwater, redis_server, resp, "CLIENT", "INFO")
    assert ours[:1] == theirs[:1]  # bulk in RESP2, verbatim in RESP3
    fields = [f.split(b"=")[0] for f in theirs.split(b"\r\n", 1)[1].split()]
    our_fields = [f.split(b"=")[0] for f in ours.split(b"\r\n", 1)[1].split()]
    assert [f for f in fields if f in our_fields] == fields


@pytest.mark.parametrize("resp", [2, 3])
def test_info_is_text_with_crlf_sections(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    ours, theirs = _both(headwater, redis_server, resp, "INFO")
    assert ours[:1] == theirs[:1]
    body = ours.split(b"\r\n", 1)[1]
    assert b"# Server\r\nredis_version:8.10.0\r\n" in body
    for field in (
        b"server_name:headwater",
        b"arch_bits:",
        b"cluster_enabled:0",
        b"blocked_clients:",
        b"total_error_replies:",
        b"headwater_version:",
    ):
        assert field in body
    sections = re.findall(rb"# (\w+)\r\n", body)
    theirs_sections = re.findall(rb"# (\w+)\r\n", theirs)
    assert [s for s in sections if s in theirs_sections] == [
        s for s in theirs_sections if s in sections
    ]


def test_info_stats_counts_no_cached_migrate_sockets_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    """Redis's dump unit reads ``migrate_cached_sockets:0`` from INFO (a fresh server has
    cached no MIGRATE connection yet)."""
    ours, theirs = _both(headwater, redis_server, 2, "INFO", "stats")
    field = re.compile(rb"^migrate_cached_sockets:(\d+)\r$", re.MULTILINE)
    ours_match, theirs_match = field.search(ours), field.search(theirs)
    assert theirs_match is not None and theirs_match.group(1) == b"0"
    assert ours_match is not None and ours_match.group(1) == theirs_match.group(1)


def test_quit_replies_ok_then_closes(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        client.send_raw(b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
        assert client.read_until_closed() == b"+OK\r\n"
        client.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_reset_reply(headwater: ServerProcess, redis_server: ServerProcess, resp: int) -> None:
    ours, theirs = _both(headwater, redis_server, resp, "RESET")
    assert ours == theirs == b"+RESET\r\n"
