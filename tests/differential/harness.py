"""Send the same commands to Headwater and to a real redis-server; compare the reply bytes."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import hiredis

from tests.helpers import RawClient, ServerProcess

Command = str | Sequence[bytes | str]


UNORDERED = "~ "  # prefix: the reply is an array whose order is hash order in Redis


def argv_of(command: Command) -> list[bytes]:
    if isinstance(command, str):
        return [w.encode() for w in shlex.split(command.removeprefix(UNORDERED))]
    return [w if isinstance(w, bytes) else w.encode() for w in command]


def parse(reply: bytes) -> object:
    """One raw reply as hiredis reads it."""
    reader = hiredis.Reader()
    reader.feed(reply)
    return reader.gets()


def _sorted_array(reply: bytes) -> object:
    """Parse a reply and sort its (possibly nested, as in SCAN) arrays of bulk strings."""
    value = parse(reply)

    def norm(v: object) -> object:
        if isinstance(v, list):
            items = [norm(x) for x in v]
            return sorted(items, key=repr)
        return v

    return norm(value)


def run(server: ServerProcess, commands: Sequence[Command], resp: int) -> list[bytes]:
    client = RawClient(server.port)
    try:
        client.call("FLUSHALL")
        if resp == 3:
            client.call("HELLO", "3")
        return [client.call(*argv_of(cmd)) for cmd in commands]
    finally:
        client.close()


def assert_same(
    headwater: ServerProcess, redis: ServerProcess, commands: Sequence[Command], resp: int
) -> None:
    ours = run(headwater, commands, resp)
    theirs = run(redis, commands, resp)
    for command, got, want in zip(commands, ours, theirs, strict=True):
        if isinstance(command, str) and command.startswith(UNORDERED):
            got, want = _sorted_array(got), _sorted_array(want)
        assert got == want, f"RESP{resp} {command!r}: headwater {got!r} != redis {want!r}"
