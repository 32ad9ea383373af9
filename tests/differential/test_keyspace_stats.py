"""Keyspace hits and misses (INFO stats) and ``keymiss`` events, against redis-server 7.0.

Redis counts a hit or a miss, and fires ``keymiss`` on a miss, in its read lookups only
(``lookupKeyRead``): XRANGE counts one, XREAD and XREADGROUP two per stream (one to resolve
the IDs, one to serve), while XADD, APPEND or INCR, which look their key up for writing, count
nothing. Each command below runs after the same set-up and a CONFIG RESETSTAT on both servers,
and the two counters must agree, as must the keymiss events a subscriber receives.
"""

from __future__ import annotations

import pytest

from tests.differential.harness import argv_of
from tests.helpers import RawClient, ServerProcess

SETUP = [
    "XADD s 1-0 f v",
    "XADD s 2-0 f v",
    "XGROUP CREATE s g 0",
    "XREADGROUP GROUP g c COUNT 1 STREAMS s >",
    "SET str x",
    "HSET h a 1",
]

COMMANDS = [
    "XRANGE s - +", "XRANGE nos - +", "XREVRANGE s + -", "XREVRANGE nos + -",
    "XLEN s", "XLEN nos",
    "XREAD STREAMS s 0", "XREAD STREAMS nos 0", "XREAD STREAMS s $", "XREAD STREAMS s nos 0 0",
    "XREAD COUNT 1 STREAMS s str 0 0",
    "XREADGROUP GROUP g c STREAMS s >", "XREADGROUP GROUP g c STREAMS s 0",
    "XREADGROUP GROUP g c STREAMS nos >", "XREADGROUP GROUP nog c STREAMS s >",
    "XADD s * f v", "XADD nos * f v", "XDEL s 1-0", "XTRIM s MAXLEN 5", "XSETID s 99-0",
    "XACK s g 1-0", "XACK nos g 1-0", "XCLAIM s g c2 0 1-0", "XCLAIM nos g c2 0 1-0",
    "XAUTOCLAIM s g c2 0 0", "XAUTOCLAIM nos g c2 0 0",
    "XPENDING s g", "XPENDING nos g", "XPENDING s g - + 10",
    "XINFO STREAM s", "XINFO STREAM nos", "XINFO GROUPS s", "XINFO CONSUMERS s g",
    "XGROUP CREATE s g2 0", "XGROUP SETID s g 0", "XGROUP DESTROY s g",
    "GET str", "GET nostr", "GET s", "MGET str nostr s", "STRLEN str", "STRLEN nostr",
    "GETEX str", "GETDEL nostr", "GETDEL str", "SET str z GET", "SET nostr z GET",
    "APPEND str y", "INCR n", "INCRBY n 2", "DECR n", "SETNX str y",
    "HGET h a", "HGET noh a", "HMGET h a b", "HGETALL h", "HGETALL noh", "HLEN h", "HLEN noh",
    "HEXISTS h a", "HSTRLEN h a", "HKEYS h", "HVALS h", "HSET h b 2", "HDEL h a", "HINCRBY h a 1",
    "EXISTS s", "EXISTS nos", "EXISTS s str nos", "TYPE s", "TYPE nos", "TTL s", "TTL nos",
    "PTTL s", "EXPIRETIME s", "PEXPIRETIME nos", "OBJECT ENCODING s", "OBJECT ENCODING nos",
    "DEL s", "UNLINK nos", "EXPIRE s 100", "PERSIST s", "RENAME s s2", "TOUCH s nos",
]  # fmt: skip


def _info_counters(client: RawClient) -> tuple[int, int]:
    text = client.call("INFO", "stats").decode()
    fields = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
    return int(fields["keyspace_hits"]), int(fields["keyspace_misses"])


def counters_after(server: ServerProcess, command: str) -> tuple[int, int]:
    client = RawClient(server.port)
    try:
        client.call("FLUSHALL")
        for line in SETUP:
            client.call(*argv_of(line))
        client.call("CONFIG", "RESETSTAT")
        client.call(*argv_of(command))
        return _info_counters(client)
    finally:
        client.close()


@pytest.mark.parametrize("command", COMMANDS)
def test_keyspace_hits_and_misses(
    headwater: ServerProcess, redis_server: ServerProcess, command: str
) -> None:
    assert counters_after(headwater, command) == counters_after(redis_server, command), command


def keymiss_events(server: ServerProcess, commands: list[str]) -> list[bytes]:
    """The keymiss events a subscriber gets while ``commands`` run (then a PUBLISH marks the
    end of the stream of messages)."""
    client, subscriber = RawClient(server.port), RawClient(server.port)
    try:
        client.call("FLUSHALL")
        for line in SETUP:
            client.call(*argv_of(line))
        client.call("CONFIG", "SET", "notify-keyspace-events", "Em")
        subscriber.call("SUBSCRIBE", "__keyevent@0__:keymiss", "end")
        subscriber.read_reply()  # (the second channel's confirmation)
        for command in commands:
            client.call(*argv_of(command))
        client.call("PUBLISH", "end", "x")
        messages = []
        while True:
            message = subscriber.read_reply()
            if b"end" in message and message.endswith(b"x\r\n"):
                return messages
            messages.append(message)
    finally:
        client.call("CONFIG", "SET", "notify-keyspace-events", "")
        client.close()
        subscriber.close()


def test_keymiss_events(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    ours = keymiss_events(headwater, COMMANDS)
    theirs = keymiss_events(redis_server, COMMANDS)
    assert ours == theirs
