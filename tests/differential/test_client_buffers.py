"""CLIENT LIST / CLIENT INFO show a connection's real buffers, as redis-server 7.0 counts
them: the running command still in the query buffer (``qbuf``, with what was pipelined after
it) and as arguments (``argv-mem``), and a transaction's queued arguments (``multi-mem``)."""

from __future__ import annotations

import re
import socket
import time

from tests.helpers import ServerProcess, encode_command

_FIELDS = ("multi", "qbuf", "argv-mem", "multi-mem", "cmd")


def _fields(reply: bytes) -> dict[str, str]:
    found = dict(re.findall(rb"([a-z-]+)=(\S*)", reply))
    return {name: found[name.encode()].decode() for name in _FIELDS}


def _read(sock: socket.socket) -> bytes:
    time.sleep(0.1)
    return sock.recv(1 << 16)


def _buffers(server: ServerProcess) -> list[dict[str, str]]:
    runner = socket.create_connection(("127.0.0.1", server.port), 5)
    other = socket.create_connection(("127.0.0.1", server.port), 5)
    try:
        runner.sendall(encode_command("CLIENT", "INFO"))
        seen = [_fields(_read(runner))]
        runner.sendall(encode_command("CLIENT", "INFO") + encode_command("PING"))
        seen.append(_fields(_read(runner)))
        runner.sendall(encode_command("CLIENT", "LIST", "TYPE", "normal", "ID", "1"))
        _read(runner)
        other.sendall(encode_command("CLIENT", "ID"))
        other_id = _read(other)[1:].strip()
        other.sendall(
            encode_command("MULTI")
            + encode_command("SET", "k", "vvvv")
            + encode_command("GET", "k")
        )
        _read(other)
        runner.sendall(encode_command("CLIENT", "LIST", "ID", other_id))
        seen.append(_fields(_read(runner)))
        return seen
    finally:
        runner.close()
        other.close()


def test_client_buffers_same_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    ours = _buffers(headwater)
    assert ours == _buffers(redis_server)
    assert ours[0]["qbuf"] == "26"  # (not the 0 it always showed)
