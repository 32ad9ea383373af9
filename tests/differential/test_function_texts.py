"""FUNCTION's names and error texts against Debian's redis-server (7.0, the same as 7.4
here): function names whatever their case (Redis's function dict is case-insensitive, its
library dicts are not), the library name split as sdssplitargs splits it (``name="foo"``),
and the texts of FUNCTION RESTORE's and FLUSH's arities, of a one-argument
``register_function`` and of a library already there on RESTORE."""

from __future__ import annotations

import pytest

from tests.differential.harness import assert_same
from tests.helpers import RawClient, ServerProcess


def lib(header: str, body: str) -> list[str]:
    return ["FUNCTION", "LOAD", f"#!lua {header}\n{body}"]


def returning(name: str, value: str) -> str:
    return f"redis.register_function('{name}', function() return {value} end)"


SCENARIO = [
    "FUNCTION FLUSH",
    lib("name=test", returning("test", "'hello1'")),
    "FCALL TEST 0",
    "FCALL tEsT 0",
    "FCALL_RO TEST 0",
    "FCALL nosuch 0",
    lib("name=lib2", returning("TEST", "1")),  # (a function of another library's name)
    lib('name="foo"', returning("foo", "1")),
    "FCALL foo 0",
    lib("NAME=bar", returning("bar", "2")),
    lib("name='single quoted'", returning("sq", "1")),
    lib('name="baz"x', returning("baz", "1")),
    lib('name="unbalanced', returning("baz", "1")),
    lib("name=lib3", "redis.register_function('f1')"),
    lib("name=lib3", "redis.register_function(nil)"),
    lib("name=lib3", "redis.register_function(5)"),
    lib("name=lib3", "redis.register_function()"),
    "FUNCTION RESTORE a b c",
    "FUNCTION FLUSH bad_arg",
    "FUNCTION FLUSH sync extra_arg",
    "FUNCTION DELETE TEST",  # (library names keep their case)
    "FUNCTION DELETE test",
    "FCALL TEST 0",
]


@pytest.mark.parametrize("resp", [2, 3])
def test_function_names_and_texts(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    assert_same(headwater, redis_server, SCENARIO, resp)  # type: ignore[arg-type]


def _bulk(reply: bytes) -> bytes:
    header, _, rest = reply.partition(b"\r\n")
    return rest[: int(header[1:])]


def test_restore_of_a_library_already_there(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    """Each server restores its own dump (the payloads' bytes differ: Redis compresses)."""
    replies = []
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        try:
            client.call("FUNCTION", "FLUSH")
            client.call("FUNCTION", "LOAD", "#!lua name=lib1\n" + returning("f1", "1"))
            payload = _bulk(client.call("FUNCTION", "DUMP"))
            replies.append(client.call("FUNCTION", "RESTORE", payload))
            client.call("FUNCTION", "DELETE", "lib1")
            client.call("FUNCTION", "LOAD", "#!lua name=other\n" + returning("F1", "2"))
            replies.append(client.call("FUNCTION", "RESTORE", payload))
            replies.append(client.call("FCALL", "f1", "0"))
            client.call("FUNCTION", "FLUSH")
        finally:
            client.close()
    assert replies[:3] == replies[3:]
    assert replies[0] == b"-ERR Library lib1 already exists\r\n"
