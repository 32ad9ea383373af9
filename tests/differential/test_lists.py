"""List commands, byte for byte against Debian's redis-server 7.0, RESP2 and RESP3.

OBJECT ENCODING is left out of these scenarios: Redis 7.0 has no listpack lists (it says
``quicklist`` for all); 7.2's labels are checked in ``tests/unit/test_lists.py``. DUMP is
compared where 7.0 and 7.2 lay the nodes out alike (lists built past 8 KB in one push, or
small ones: one node either way).
"""

from __future__ import annotations

import time

import pytest

from tests.differential.harness import assert_same
from tests.helpers import RawClient, ServerProcess

BIG = " ".join(f"m{n}" for n in range(700))
NUMS = " ".join(str(n) for n in (0, 1, -1, 127, 128, -4096, 4095, 65536, 2**40, -(2**63)))

SCENARIOS: dict[str, list[str]] = {
    "push_and_read": [
        "RPUSH l a b c",
        "LPUSH l x y",
        "LRANGE l 0 -1",
        "LLEN l",
        "LLEN nokey",
        "LPUSHX l z",
        "RPUSHX l w v",
        "LPUSHX nokey a",
        "RPUSHX nokey a",
        "EXISTS nokey",
        "LRANGE l 0 -1",
        "LRANGE l -3 -1",
        "LRANGE l -100 100",
        "LRANGE l 5 2",
        "LRANGE l 100 200",
        "LRANGE l 0 x",
        "LRANGE l x 0",
        "LRANGE nokey 0 -1",
        "LRANGE nokey x 1",
        "LINDEX l 0",
        "LINDEX l -1",
        "LINDEX l 100",
        "LINDEX l -100",
        "LINDEX l x",
        "LINDEX nokey 0",
        "LINDEX nokey x",
        f"RPUSH nums {NUMS}",
        "LRANGE nums 0 -1",
        "RPUSH empty ''",
        "LRANGE empty 0 -1",
        f"RPUSH big {BIG}",
        "LLEN big",
        "LRANGE big 0 -1",
        "LRANGE big 300 420",
        "LRANGE big -5 -1",
        "LINDEX big 350",
        "LINDEX big -350",
        "LPUSH",
        "LPUSH l",
        "LLEN",
    ],
    "pops": [
        "RPUSH l a b c d e",
        "LPOP l",
        "RPOP l",
        "LPOP l 2",
        "RPOP l 5",
        "EXISTS l",
        "LPOP l",
        "LPOP l 2",
        "RPOP nokey 0",
        "RPUSH l a b c",
        "LPOP l 0",
        "RPOP l -1",
        "LPOP l x",
        "LPOP l 1 2",
        "RPOP l 9223372036854775807",
        "RPUSH l a b c d",
        "LMPOP 2 nokey l LEFT",
        "LMPOP 2 nokey l RIGHT COUNT 2",
        "LMPOP 1 l LEFT COUNT 10",
        "LMPOP 1 l LEFT",
        "LMPOP 0 l LEFT",
        "LMPOP -1 l LEFT",
        "LMPOP x l LEFT",
        "LMPOP 2 l LEFT",
        "LMPOP 1 l UP",
        "LMPOP 1 l LEFT COUNT 0",
        "LMPOP 1 l LEFT COUNT -1",
        "LMPOP 1 l LEFT COUNT",
        "LMPOP 1 l LEFT COUNT 1 COUNT 1",
        "LMPOP 1 l LEFT FOO",
        f"RPUSH big {BIG}",
        "LPOP big 300",
        "RPOP big 300",
        "LLEN big",
        "LMPOP 1 big RIGHT COUNT 1000",
        "EXISTS big",
    ],
    "insert_set_rem_trim": [
        "RPUSH l a b c b a",
        "LINSERT l BEFORE b x",
        "LINSERT l after b y",
        "LINSERT l BEFORE nope z",
        "LINSERT l MIDDLE b z",
        "LINSERT nokey BEFORE a b",
        "LINSERT nokey MIDDLE a b",
        "LRANGE l 0 -1",
        "LSET l 0 first",
        "LSET l -1 last",
        "LSET l 100 x",
        "LSET l -100 x",
        "LSET l x y",
        "LSET nokey 0 x",
        "LSET nokey x y",
        "LRANGE l 0 -1",
        "LREM l 0 b",
        "RPUSH r a b a b a b",
        "LREM r 2 a",
        "LREM r -1 b",
        "LRANGE r 0 -1",
        "LREM r 0 nope",
        "LREM r x a",
        "LREM nokey 1 a",
        "LREM r 0 a",
        "LREM r 0 b",
        "EXISTS r",
        "RPUSH t 1 2 3 4 5 6",
        "LTRIM t 1 -2",
        "LRANGE t 0 -1",
        "LTRIM t 0 100",
        "LTRIM t -2 -1",
        "LRANGE t 0 -1",
        "LTRIM t 5 1",
        "EXISTS t",
        "LTRIM nokey 0 1",
        "LTRIM t x 1",
        f"RPUSH big {BIG}",
        "LINSERT big AFTER m300 new",
        "LINSERT big BEFORE m0 head",
        "LINSERT big AFTER m699 tail",
        "LSET big 350 changed",
        "LRANGE big 298 304",
        "LREM big -2 m5",
        "LTRIM big 100 -100",
        "LLEN big",
        "LRANGE big 0 3",
        "LRANGE big -3 -1",
    ],
    "lpos": [
        "RPUSH l a b c 1 2 3 c c",
        "LPOS l c",
        "LPOS l c RANK 2",
        "LPOS l c RANK -1",
        "LPOS l c RANK -3",
        "LPOS l c RANK 4",
        "LPOS l c COUNT 0",
        "LPOS l c COUNT 2",
        "LPOS l c COUNT 2 RANK -1",
        "LPOS l c COUNT 0 RANK 2 MAXLEN 7",
        "LPOS l c MAXLEN 2",
        "LPOS l c COUNT 0 MAXLEN 3",
        "LPOS l c RANK -1 MAXLEN 1",
        "LPOS l nope",
        "LPOS l nope COUNT 0",
        "LPOS nokey a",
        "LPOS nokey a COUNT 1",
        "LPOS l c RANK 0",
        "LPOS l c RANK x",
        "LPOS l c RANK 9223372036854775807",
        "LPOS l c COUNT -1",
        "LPOS l c COUNT x",
        "LPOS l c MAXLEN -1",
        "LPOS l c MAXLEN x",
        "LPOS l c FOO",
        "LPOS l c RANK",
        "LPOS nokey a RANK 0",
        f"RPUSH big {BIG} m5",
        "LPOS big m5 COUNT 0",
        "LPOS big m5 RANK -1",
        "LPOS big m690 MAXLEN 600",
    ],
    "moves": [
        "RPUSH s a b c",
        "LMOVE s d LEFT RIGHT",
        "LMOVE s d RIGHT LEFT",
        "LMOVE s d left left",
        "LRANGE d 0 -1",
        "EXISTS s",
        "LMOVE s d LEFT LEFT",
        "RPUSH s x",
        "LMOVE s s LEFT RIGHT",
        "LRANGE s 0 -1",
        "RPOPLPUSH d d",
        "LRANGE d 0 -1",
        "RPOPLPUSH d e",
        "RPOPLPUSH nokey e",
        "LMOVE s d UP LEFT",
        "LMOVE s d LEFT DOWN",
        "SET str x",
        "LMOVE s str LEFT LEFT",
        "LMOVE str d LEFT LEFT",
        "RPOPLPUSH s str",
        "LRANGE s 0 -1",
        "RPOPLPUSH str s",
    ],
    "wrong_type": [
        "SET str x",
        "LPUSH str a",
        "RPUSHX str a",
        "LPOP str",
        "RPOP str 2",
        "LLEN str",
        "LRANGE str 0 -1",
        "LINDEX str 0",
        "LSET str 0 a",
        "LINSERT str BEFORE a b",
        "LREM str 0 a",
        "LTRIM str 0 1",
        "LPOS str a",
        "LMPOP 2 nokey str LEFT",
        "BLPOP str 0",
        "BLMPOP 0 1 str LEFT",
        "BLMOVE str d LEFT LEFT 0",
        "RPUSH l a",
        "GET l",
        "SADD l a",
        "TYPE l",
        "LRANGE str x 1",
        "LINDEX str x",
        "LSET str x y",
        "LPOS str a RANK 0",
    ],
    "blocking_no_wait": [
        "RPUSH l a b c d",
        "BLPOP nokey l 0",
        "BRPOP nokey l 0",
        "BLMPOP 0 2 nokey l LEFT COUNT 5",
        "EXISTS l",
        "RPUSH l a b",
        "BLMOVE l d RIGHT LEFT 0",
        "BRPOPLPUSH l d 0",
        "LRANGE d 0 -1",
        "BLPOP nokey 0.01",
        "BRPOPLPUSH nokey d 0.01",
        "BLMOVE nokey d LEFT LEFT 0.01",
        "BLMPOP 0.01 1 nokey RIGHT",
        "BLPOP l x",
        "BLPOP l -1",
        # (an infinite timeout: 7.0 says "negative", 7.2+ "out of range"; tests/unit)
        "BLPOP l nan",
        "BLPOP l",
        "BLMPOP x 1 l LEFT",
        "BLMPOP 0 0 l LEFT",
        "BLMPOP 0 1 l UP",
        "BLMPOP -1 1 l LEFT",
        "BLMOVE l d LEFT LEFT x",
        "BLMOVE l d UP LEFT 0",
        "BRPOPLPUSH l d -1",
        "MULTI",
        "BLPOP nokey 0",
        "BRPOP nokey 0",
        "BLMPOP 0 1 nokey LEFT",
        "BLMOVE nokey d LEFT LEFT 0",
        "BRPOPLPUSH nokey d 0",
        "RPUSH nokey v",
        "BLPOP nokey 0",
        "EXEC",
    ],
    "scripts": [
        "RPUSH l a b",
        "EVAL \"return redis.call('lrange', KEYS[1], 0, -1)\" 1 l",
        "EVAL \"return redis.call('lpop', KEYS[1])\" 1 l",
        "EVAL \"return redis.pcall('lpush', KEYS[1])\" 1 l",
        "EVAL \"return redis.call('rpush', KEYS[1], 'x', 'y')\" 1 l",
        "LRANGE l 0 -1",
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_bytes_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    assert_same(headwater, redis_server, SCENARIOS[name], resp)  # type: ignore[arg-type]


# -- blocking with several clients ---------------------------------------------------------


def _blocking_story(server: ServerProcess, steps: list[tuple[int, str]], resp: int) -> list[bytes]:
    """Run steps ``(client number, command)`` on several connections; a command that blocks
    is sent without waiting (its reply read when a later step says ``read``)."""
    clients: dict[int, RawClient] = {}
    out: list[bytes] = []
    try:
        admin = RawClient(server.port)
        admin.call("FLUSHALL")
        admin.close()
        for who, command in steps:
            if who not in clients:
                clients[who] = RawClient(server.port)
                if resp == 3:
                    clients[who].call("HELLO", "3")
            client = clients[who]
            if command == "read":
                out.append(client.read_reply())
            elif command.startswith("send "):
                client.send_raw(_encode(command[5:].split()))
                time.sleep(0.05)  # (so that it is blocked before the next step)
            else:
                out.append(client.call(*command.split()))
    finally:
        for client in clients.values():
            client.close()
    return out


def _encode(words: list[str]) -> bytes:
    out = b"*%d\r\n" % len(words)
    for word in words:
        out += b"$%d\r\n%s\r\n" % (len(word), word.encode())
    return out


STORIES: dict[str, list[tuple[int, str]]] = {
    # first come first served; each served client takes one element
    "fifo": [
        (1, "send BLPOP q 0"),
        (2, "send BLPOP q 0"),
        (3, "send BRPOP q other 0"),
        (0, "RPUSH q a b c d"),
        (1, "read"),
        (2, "read"),
        (3, "read"),
        (0, "LRANGE q 0 -1"),
    ],
    # one element for two waiters: the first gets it, the second keeps waiting
    "one_for_two": [
        (1, "send BLPOP q 0"),
        (2, "send BLPOP q 1"),
        (0, "LPUSH q only"),
        (1, "read"),
        (2, "read"),
    ],
    # BLMOVE serves a client, its push serves a client blocked on the destination
    "blmove_chain": [
        (1, "send BLMOVE src dst LEFT RIGHT 0"),
        (2, "send BLPOP dst 0"),
        (0, "RPUSH src job"),
        (1, "read"),
        (2, "read"),
        (0, "EXISTS src dst"),
    ],
    # a transaction pushes then deletes: nothing is served
    "multi_push_del": [
        (1, "send BLPOP q 0.3"),
        (0, "MULTI"),
        (0, "RPUSH q a"),
        (0, "DEL q"),
        (0, "EXEC"),
        (1, "read"),
    ],
    # a key pushed by a transaction with several elements serves waiters in order
    "multi_pushes": [
        (1, "send BRPOPLPUSH q d 0"),
        (2, "send BLMPOP 0 1 q LEFT COUNT 2"),
        (0, "MULTI"),
        (0, "RPUSH q a b"),
        (0, "RPUSH q c d"),
        (0, "EXEC"),
        (1, "read"),
        (2, "read"),
        (0, "LRANGE q 0 -1"),
        (0, "LRANGE d 0 -1"),
    ],
    # a key made of the wrong type does not wake a list waiter
    "wrong_type_wait": [
        (1, "send BLPOP q 0.3"),
        (0, "SET q x"),
        (1, "read"),
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(STORIES))
def test_blocking_like_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    ours = _blocking_story(headwater, STORIES[name], resp)
    theirs = _blocking_story(redis_server, STORIES[name], resp)
    assert ours == theirs


def test_dump_matches_redis_node_for_node(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    """Lists built alike have the same nodes as in Redis: the DUMP payloads are identical."""
    big = [f"member-{i:05d}" for i in range(3000)]
    scenarios = [
        ["RPUSH", "k", *big],
        ["RPUSH", "k", *big[:5]],
        ["RPUSH", "k", *(f"{i}" for i in range(2000))],
        ["LPUSH", "k", *big],
    ]
    for command in scenarios:
        dumps = []
        for server in (headwater, redis_server):
            c = RawClient(server.port)
            try:
                c.call("DEL", "k")
                c.call(*command)
                if len(command) > 100:
                    c.call("LINSERT", "k", "AFTER", command[500], "x" * 300)
                    c.call("LPOP", "k", "7")
                dumps.append(c.call("DUMP", "k"))
            finally:
                c.close()
        assert dumps[0] == dumps[1], command[:3]


@pytest.mark.parametrize("fill", ["5", "-1"])
def test_node_layout_follows_redis_through_random_edits(
    headwater: ServerProcess, redis_server: ServerProcess, fill: str
) -> None:
    """Random pushes, LINSERTs (into a neighbour, a new node, or a split and merges), LSETs,
    LREMs, pops and trims on both servers: the DUMP payloads, which spell out every node,
    stay identical (7.0 and 7.2 lay out quicklist nodes alike away from the 8 KB edge)."""
    import random

    rng = random.Random(int(fill) + 19)
    words = [f"w{i}" for i in range(12)] + ["x" * 300, "7", "-300"]
    clients = [RawClient(s.port) for s in (headwater, redis_server)]
    try:
        for c in clients:
            c.call("DEL", "k")
            c.call("CONFIG", "SET", "list-max-ziplist-size", fill)
        for step in range(400):
            roll = rng.random()
            if roll < 0.3:
                command = [
                    rng.choice(["LPUSH", "RPUSH"]),
                    "k",
                    *rng.choices(words, k=rng.randint(1, 8)),
                ]
            elif roll < 0.7:
                where = rng.choice(["BEFORE", "AFTER"])
                command = ["LINSERT", "k", where, rng.choice(words), rng.choice(words)]
            elif roll < 0.8:
                command = ["LSET", "k", str(rng.randint(-5, 5)), rng.choice(words)]
            elif roll < 0.87:
                command = ["LREM", "k", str(rng.randint(-2, 2)), rng.choice(words)]
            elif roll < 0.95:
                command = [rng.choice(["LPOP", "RPOP"]), "k", str(rng.randint(1, 3))]
            else:
                command = ["LTRIM", "k", str(rng.randint(0, 3)), str(rng.randint(-4, -1))]
            replies = [c.call(*command) for c in clients]
            assert replies[0] == replies[1], command
            if step % 10 == 9:
                dumps = [c.call("DUMP", "k") for c in clients]
                assert dumps[0] == dumps[1], (step, command)
    finally:
        for c in clients:
            c.call("CONFIG", "SET", "list-max-ziplist-size", "-2")
            c.close()
