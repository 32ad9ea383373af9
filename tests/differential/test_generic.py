"""COPY, MOVE, SWAPDB, SORT/SORT_RO, OBJECT FREQ/IDLETIME/ENCODING and MEMORY, byte for byte
against Debian's redis-server 7.0 in RESP2 and RESP3 (issue #19), with their keyspace events.

Where Redis 7.0 and 7.2 (which Headwater follows) differ, the scenarios keep to what they
share: small sets of strings are listpacks in 7.2 and hashtables in 7.0 (orders and MEMORY
USAGE differ), so those appear only sorted (``~``) or ALPHA-sorted. MEMORY USAGE is compared
exactly for the values whose encoding the two versions share; 7.2-only figures are in
``tests/unit/test_generic.py``.
"""

from __future__ import annotations

import time

import pytest

from tests.differential.harness import UNORDERED as U
from tests.differential.harness import argv_of, assert_same
from tests.helpers import RawClient, ServerProcess

STREAM = [
    "XADD st 1-1 a 1 b 2",
    "XADD st 1-2 a 3",
    "XADD st 2-1 c 4",
    "XDEL st 1-2",
    "XGROUP CREATE st g 0",
    "XGROUP CREATE st h $",
    "XREADGROUP GROUP g alice COUNT 1 STREAMS st >",
    "XREADGROUP GROUP g bob STREAMS st >",
]

SCENARIOS: dict[str, list[str]] = {
    "copy_strings": [
        "SET a 12",
        "SET b hello",
        "SET c " + "x" * 60,
        "APPEND d xyz",
        "COPY a a2",
        "COPY b b2",
        "COPY c c2",
        "COPY d d2",
        "MGET a2 b2 c2 d2",
        "OBJECT ENCODING a2",
        "OBJECT ENCODING b2",
        "OBJECT ENCODING c2",
        "OBJECT ENCODING d2",
        "COPY a b",
        "GET b",
        "COPY a b REPLACE",
        "GET b",
        "COPY nokey x",
        "EXISTS x",
        "COPY a a",
        "COPY a a DB 0",
        "COPY a a DB 1",
        "COPY a a replace db 1 Replace",
        "SELECT 1",
        "GET a",
        "SELECT 0",
        "PEXPIREAT a 4102444800000",
        "COPY a ttl",
        "PEXPIRETIME ttl",
        "COPY b ttl REPLACE",
        "PEXPIRETIME ttl",
        "SET b2 changed",
        "GET b",
    ],
    "copy_errors": [
        "SET a 1",
        "COPY a b DB",
        "COPY a b DB x",
        "COPY a b DB -1",
        "COPY a b DB 16",
        "COPY a b DB 2147483648",
        "COPY a b REPLACE foo",
        "COPY a b DB 1 DB 99",
        "COPY a b DB 99 bogus",
        "COPY nokey b DB 99",
        "COPY a",
        "COPY",
    ],
    "copy_collections": [
        "HSET h f1 v1 f2 v2",
        "COPY h h2",
        "HGETALL h2",
        "OBJECT ENCODING h2",
        "HSET h2 f3 v3",
        "HLEN h",
        "SADD i 5 1 3",
        "COPY i i2",
        "SMEMBERS i2",
        "OBJECT ENCODING i2",
        "SREM i2 1",
        "SMEMBERS i",
        "SADD s a b c",
        "COPY s s2",
        U + "SMEMBERS s2",
        "ZADD z 1 a 2 b 3 c",
        "COPY z z2",
        "ZRANGE z2 0 -1 WITHSCORES",
        "OBJECT ENCODING z2",
        "ZADD z2 0 d",
        "ZCARD z",
        *STREAM,
        "COPY st st2",
        "XRANGE st2 - +",
        "XLEN st2",
        "XINFO GROUPS st2",
        "XPENDING st2 g",
        "XACK st2 g 1-1",
        "XPENDING st g",
        "XADD st2 3-1 d 5",
        "XLEN st",
    ],
    "move": [
        "SET a 1",
        "MOVE a 1",
        "EXISTS a",
        "SELECT 1",
        "GET a",
        "MOVE a 1",
        "MOVE a 0",
        "SELECT 0",
        "GET a",
        "SET b 2",
        "SELECT 1",
        "SET b 3",
        "SELECT 0",
        "MOVE b 1",
        "GET b",
        "MOVE nokey 1",
        "MOVE a x",
        "MOVE a -1",
        "MOVE a 16",
        "MOVE a 1 2",
        "PEXPIREAT a 4102444800000",
        "MOVE a 2",
        "SELECT 2",
        "PEXPIRETIME a",
        "SADD s 1 2",
        "MOVE s 0",
        "SELECT 0",
        "SMEMBERS s",
    ],
    "swapdb": [
        "SET a 0",
        "SELECT 1",
        "SET b 1",
        "SADD s 1 2",
        "SELECT 0",
        "SWAPDB 0 1",
        "GET a",
        "GET b",
        "SMEMBERS s",
        "DBSIZE",
        "SWAPDB 1 0",
        "GET a",
        "SWAPDB 0 0",
        "GET a",
        "SWAPDB 0 x",
        "SWAPDB x 0",
        "SWAPDB 0 16",
        "SWAPDB -1 0",
        "SWAPDB 0 99999999999999999999",
        "SWAPDB 0",
    ],
    "sort_numbers": [
        "SADD n 5 -3 10 0 7",
        "SORT n",
        "SORT n DESC",
        "SORT n ASC LIMIT 1 2",
        "SORT n LIMIT 0 0",
        "SORT n LIMIT -5 2",
        "SORT n LIMIT 3 -1",
        "SORT n LIMIT 10 2",
        "SORT n LIMIT 4 100",
        "SORT n ALPHA",
        "SORT n ALPHA DESC LIMIT 1 3",
        "SORT n BY nosort",
        "SORT n BY nosort DESC LIMIT 1 2",
        "SORT_RO n DESC",
        "SORT nokey",
        "SORT nokey BY nosort LIMIT 0 1",
        "SORT_RO nokey ALPHA",
        "SADD f 1.5 -inf 2e3 0x10 1e-2 +7 .5",
        "SORT f",
        "SORT f DESC",
    ],
    "sort_by_and_get": [
        "SADD s 1 2 3 4",
        "MSET w_1 40 w_2 -1 w_3 7.5 w_4 inf",
        "SORT s BY w_*",
        "SORT s BY w_* DESC",
        "SORT s BY w_* LIMIT 1 2",
        "SORT s BY w_* GET #",
        "SORT s BY w_* GET # GET w_*",
        "SORT s BY w_* GET nokey_* GET #",
        "SORT s BY w_* GET w_*->f",
        "SORT s GET fixed",
        "HSET h_1 f b n 3",
        "HSET h_2 f a n 1",
        "HSET h_3 f d n 2",
        "HSET h_4 f c n 9",
        "SORT s BY h_*->n",
        "SORT s BY h_*->f ALPHA",
        "SORT s BY h_*->f ALPHA DESC GET h_*->n GET #",
        "SORT s BY h_*->missing",
        "SORT s BY h_*-> ALPHA",
        "SORT s BY nokey_* LIMIT 0 4",
        "SORT s BY w_*_x",
        "MSET a_1 x a_2 y a_3 z a_4 w",
        "SORT s BY a_* ALPHA",
        "SORT s BY a_*",
        "SET bad_1 12abc",
        "SORT s BY bad_*",
        "SORT s BY bad_* ALPHA",
        "SET e_1 ''",
        "SORT s BY e_* GET #",
        "SORT s BY h_* GET h_*",
        "ZADD z 1 c 2 a 3 b",
        "OBJECT ENCODING z",
        "SORT z BY nosort",
        "OBJECT ENCODING z",
        "SORT z BY nosort DESC",
        "SORT z BY nosort LIMIT 1 1",
        "SORT z BY nosort DESC LIMIT 1 5",
        "SORT z ALPHA",
        "SORT z ALPHA DESC",
        "MSET k_a 3 k_b 2 k_c 1",
        "SORT z BY k_* GET k_*",
        "SORT z",
        "SORT_RO z BY k_* DESC",
    ],
    "sort_errors": [
        "SET str x",
        "SORT str",
        "SORT_RO str",
        "HSET h f v",
        "SORT h",
        "XADD st 1-1 f v",
        "SORT st",
        "SADD s 1",
        "SORT s LIMIT",
        "SORT s LIMIT 1",
        "SORT s LIMIT x 1",
        "SORT s LIMIT 0 1.5",
        "SORT s BY",
        "SORT s GET",
        "SORT s bogus",
        "SORT s STORE",
        "SORT_RO s STORE d",
        "SORT str bogus",
        "SORT",
        "SORT_RO",
        "SADD t a",
        "SORT t",
        "SORT t DESC LIMIT 0 1",
        "SORT t BY nosort",
        "SORT t ALPHA",
    ],
    "sort_store_empty": [
        "SET d x",
        "SORT nokey STORE d",
        "EXISTS d",
        "SORT nokey STORE d",
        "SADD s 1 2",
        "SORT s LIMIT 5 5 STORE d2",
        "SADD bad x",
        "SET d3 keep",
        "SORT bad STORE d3",
        "GET d3",
    ],
    "sort_store_lists": [
        "SADD s 3 1 2",
        "SORT s STORE d",
        "TYPE d",
        "LRANGE d 0 -1",
        "SORT s DESC LIMIT 0 2 STORE d",
        "LRANGE d 0 -1",
        "RPUSH l 10 2 33 2",
        "SORT l",
        "SORT l BY nosort",
        "SORT l BY nosort DESC",
        "SORT l ALPHA STORE l",
        "LRANGE l 0 -1",
        "COPY l l2",
        "LRANGE l2 0 -1",
        "MOVE l2 1",
        "SELECT 1",
        "LRANGE l2 0 -1",
    ],
    "object": [
        "SET a aval",  # (not "1": Redis shares small integers, and their idle time with them)
        "OBJECT FREQ a",
        "OBJECT FREQ nokey",
        "OBJECT IDLETIME a",
        "OBJECT IDLETIME nokey",
        "OBJECT IDLETIME",
        "OBJECT IDLETIME a b",
        "OBJECT HELP",
        "OBJECT help",
        "OBJECT BOGUS a",
        "CONFIG SET maxmemory-policy allkeys-lfu",
        "SET b bval",
        "OBJECT FREQ b",
        "GET b",
        "OBJECT FREQ b",
        "OBJECT FREQ nokey",
        "OBJECT IDLETIME b",
        "OBJECT IDLETIME nokey",
        "CONFIG SET maxmemory-policy volatile-lfu",
        "OBJECT IDLETIME b",
        "CONFIG SET maxmemory-policy noeviction",
        "CONFIG GET lfu-log-factor",
        "CONFIG GET lfu-decay-time",
    ],
    "encodings": [
        "SET i 12345",
        "SET neg -9223372036854775808",
        "SET big 9223372036854775808",
        "SET e " + "y" * 44,
        "SET r " + "y" * 45,
        "SET z0 01",
        "APPEND ap 1",
        "OBJECT ENCODING i",
        "OBJECT ENCODING neg",
        "OBJECT ENCODING big",
        "OBJECT ENCODING e",
        "OBJECT ENCODING r",
        "OBJECT ENCODING z0",
        "OBJECT ENCODING ap",
        "HSET h f v",
        "OBJECT ENCODING h",
        "HSET hl f " + "v" * 65,
        "OBJECT ENCODING hl",
        "SADD si 1 2 3",
        "OBJECT ENCODING si",
        "ZADD zl 1 a",
        "OBJECT ENCODING zl",
        "ZADD zs 1 " + "m" * 65,
        "OBJECT ENCODING zs",
        "XADD st 1-1 f v",
        "OBJECT ENCODING st",
        "OBJECT ENCODING nokey",
    ],
    "memory_usage": [
        "SET foo bar",
        "SET k 123",
        "SET e " + "x" * 44,
        "SET r " + "x" * 45,
        "SET big " + "x" * 1000,
        "SET " + "k" * 40 + " v",
        "SET '' v",
        "HSET h f v f2 12345 f3 " + "w" * 30,
        "SADD si 1 2 3",
        "SADD si32 1 70000",
        "SADD si64 1 5000000000",
        "ZADD z 1 a 2.5 b -3 c 1e100 d",
        "XADD st 1-1 f v",
        "XADD st2 1-1 f v",
        "XDEL st2 1-1",
        "MEMORY USAGE foo",
        "MEMORY USAGE k",
        "MEMORY USAGE e",
        "MEMORY USAGE r",
        "MEMORY USAGE big",
        "MEMORY USAGE " + "k" * 40,
        "MEMORY USAGE ''",
        "MEMORY USAGE h",
        "MEMORY USAGE si",
        "MEMORY USAGE si32",
        "MEMORY USAGE si64",
        "MEMORY USAGE z",
        "MEMORY USAGE st",
        "MEMORY USAGE st2",
        "MEMORY USAGE h SAMPLES 0",
        "MEMORY USAGE h samples 1",
        "MEMORY USAGE nokey",
        "MEMORY USAGE h SAMPLES",
        "MEMORY USAGE h SAMPLES -1",
        "MEMORY USAGE h SAMPLES x",
        "MEMORY USAGE h BOGUS 1",
        "MEMORY USAGE",
        "MEMORY HELP",
        "MEMORY PURGE",
        "MEMORY BOGUS",
    ],
    "command_info": [
        "COMMAND INFO copy move swapdb sort sort_ro",
        "COMMAND INFO object|freq object|idletime memory|usage memory|stats",
        "COMMAND DOCS copy",
        "COMMAND DOCS sort",
        "COMMAND DOCS sort_ro swapdb move",
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_bytes_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    if name == "object":
        _clear_of_clock_ticks()
    assert_same(headwater, redis_server, SCENARIOS[name], resp)  # type: ignore[arg-type]


def _clear_of_clock_ticks() -> None:
    """OBJECT IDLETIME counts whole seconds and OBJECT FREQ's LFU counter decays by the
    minute (both servers read the wall clock; Redis's through a copy its cron refreshes up
    to 100 ms late): start the scenario in the middle of a second, and not near the end of a
    minute, so that no tick falls between a key's write and its reading on one server and
    not the other (seen under load in suite runs; started right after a tick, Redis's late
    copy ticked during the scenario)."""
    while True:
        now = time.time()
        if 0.3 <= now % 1 < 0.45 and 1 <= now % 60 < 55:
            return
        time.sleep(0.05)


def test_memory_usage_of_big_hashtables_is_close_to_redis(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    """Sampled estimates (hashtables, skiplists): within 15% of Redis's, for every sample
    count (Redis's table of a set that grew past a power of two is still being rehashed, two
    tables at once, which the estimate does not model)."""
    setup = [
        [
            "HSET",
            "h",
            *[f"field:{i}" if j == 0 else f"value-{i * 7}" for i in range(600) for j in (0, 1)],
        ],
        ["ZADD", "z", *[str(x) for i in range(300) for x in (i / 3, f"member-{i}")]],
        ["SADD", "s", *[f"m{i}" for i in range(700)]],
    ]
    figures = []
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        try:
            client.call("FLUSHALL")
            for argv in setup:
                client.call(*argv)
            time.sleep(0.5)  # (Redis's cron finishes rehashing the tables)
            row = []
            for key in ("h", "z", "s"):
                for samples in ("5", "0"):
                    reply = client.call("MEMORY", "USAGE", key, "SAMPLES", samples)
                    row.append(int(reply[1:-2]))
            figures.append(row)
        finally:
            client.close()
    ours, theirs = figures
    # (z with SAMPLES 5 is left out: Redis's estimate from five skiplist nodes of random
    # levels moves by 20% from one server to the next; seen at 39096 against 35000 for all)
    del ours[2], theirs[2]
    for got, want in zip(ours, theirs, strict=True):
        assert abs(got - want) <= want * 0.15, (ours, theirs)


def _events(server: ServerProcess, commands: list[str]) -> list[bytes]:
    """The keyspace and keyevent messages a pattern subscriber gets while commands run."""
    client, subscriber = RawClient(server.port), RawClient(server.port)
    try:
        client.call("FLUSHALL")
        client.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
        subscriber.call("PSUBSCRIBE", "__key*__:*")
        subscriber.call("SUBSCRIBE", "end")
        for command in commands:
            client.call(*argv_of(command))
        client.call("PUBLISH", "end", "x")
        messages = []
        while True:
            message = subscriber.read_reply()
            if message.endswith(b"$3\r\nend\r\n$1\r\nx\r\n"):
                return messages
            messages.append(message)
    finally:
        client.call("CONFIG", "SET", "notify-keyspace-events", "")
        client.close()
        subscriber.close()


EVENT_COMMANDS = [
    "SET a 1",
    "COPY a b",
    "COPY a b",
    "COPY a b REPLACE",
    "COPY a c DB 3",
    "MOVE a 2",
    "MOVE nokey 2",
    "SELECT 2",
    "MOVE a 0",
    "SELECT 0",
    "SWAPDB 0 1",
    "SWAPDB 0 1",
    "SET d x",
    "SORT nokey STORE d",
    "SORT nokey STORE d",
    "SADD s 1",
    "SORT s BY w_* GET w_*",
]


def test_keyspace_events(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    """copy_to, move_from/move_to (in their databases), the del of an empty SORT STORE, and
    nothing for SWAPDB (Redis has no event for it), as Redis 7.0 publishes them."""
    assert _events(headwater, EVENT_COMMANDS) == _events(redis_server, EVENT_COMMANDS)
