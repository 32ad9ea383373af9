"""Pub/Sub and MONITOR, byte for byte against redis-server 7.0: what every connection
receives after each step (confirmations, messages, push frames, errors, monitor lines with
their time and address masked)."""

from __future__ import annotations

import pytest

from tests.differential.pubsub_session import Step, transcript, words
from tests.helpers import ServerProcess

_LIBRARY = (
    "#!lua name=m\n"
    "redis.register_function('f', function(keys, args) return redis.call('GET', keys[1]) end)"
)


def _steps(*lines: str) -> list[Step]:
    """``"sub: SUBSCRIBE a b"`` → the step on connection ``sub``."""
    steps: list[Step] = []
    for line in lines:
        name, _, command = line.partition(": ")
        steps.append((name, words(command)))
    return steps


_NO_EVENTS: Step = ("pub", ["CONFIG", "SET", "notify-keyspace-events", ""])

SCENARIOS: dict[str, tuple[list[str], list[Step]]] = {
    "resp2_subscribed_mode": (
        ["sub", "pub"],
        _steps(
            "sub: SUBSCRIBE a b",
            "sub: GET x",
            "sub: PING",
            "sub: PING hi",
            "sub: PING a b",
            "sub: HELLO 3",
            "sub: CLIENT ID",
            "sub: MULTI",
            "sub: FOO",
            "sub: SUBSCRIBE",
            "sub: UNSUBSCRIBE c",
            "sub: PUNSUBSCRIBE",
            "sub: PSUBSCRIBE h*llo",
            "sub: SSUBSCRIBE x",
            "sub: SUBSCRIBE a",
            "pub: PUBLISH a m1",
            "pub: PUBLISH hello m2",
            "pub: PUBLISH nobody m",
            "pub: SPUBLISH x m3",
            "pub: SPUBLISH a m",
            "pub: PUBSUB NUMSUB a b c",
            "pub: PUBSUB NUMSUB",
            "pub: PUBSUB NUMPAT",
            "pub: PUBSUB CHANNELS a",
            "pub: PUBSUB CHANNELS [a]*",
            "pub: PUBSUB SHARDCHANNELS",
            "pub: PUBSUB SHARDCHANNELS y*",
            "pub: PUBSUB SHARDNUMSUB x y",
            "pub: PUBSUB FOO",
            "pub: PUBSUB CHANNELS a b",
            "pub: PUBSUB NUMPAT x",
            "pub: PUBSUB",
            "sub: UNSUBSCRIBE b",
            "sub: UNSUBSCRIBE",
            "sub: PUNSUBSCRIBE",
            "sub: SUNSUBSCRIBE",
            "sub: GET x",
            "sub: UNSUBSCRIBE",
            "sub: SUNSUBSCRIBE",
            "pub: PUBSUB NUMPAT",
            "pub: PUBLISH a m4",
        ),
    ),
    "resp3_push_frames": (
        ["sub", "pub"],
        _steps(
            "sub: SUBSCRIBE a",
            "sub: PSUBSCRIBE *",
            "sub: SSUBSCRIBE s",
            "pub: PUBLISH a m1",
            "pub: SPUBLISH s m2",
            "sub: GET x",
            "sub: PING",
            "sub: PING hi",
            "sub: SET x 1",
            "sub: GET x",
            "sub: PUBSUB NUMSUB a s",
            "sub: PUBSUB SHARDNUMSUB s a",
            "sub: PUBSUB CHANNELS",
            "sub: PUBSUB SHARDCHANNELS",
            "sub: PUBSUB NUMPAT",
            "sub: CLIENT KILL TYPE pubsub SKIPME yes",
            "sub: UNSUBSCRIBE a",
            "sub: UNSUBSCRIBE",
            "sub: PUNSUBSCRIBE",
            "sub: SUNSUBSCRIBE s",
            "sub: SUNSUBSCRIBE",
            "pub: PUBLISH a m3",
        ),
    ),
    "reset_and_quit_end_subscriptions": (
        ["sub", "pub", "other"],
        _steps(
            "sub: SUBSCRIBE q",
            "sub: PSUBSCRIBE q*",
            "other: SUBSCRIBE q",
            "pub: PUBLISH q m",
            "sub: RESET",
            "sub: GET x",
            "pub: PUBSUB NUMSUB q",
            "pub: PUBSUB NUMPAT",
            "pub: PUBLISH q m",
            "other: QUIT",
            "pub: PUBSUB NUMSUB q",
            "pub: PUBLISH q m",
        ),
    ),
    "inside_multi": (
        ["sub", "pub"],
        _steps(
            "sub: MULTI",
            "sub: SUBSCRIBE a b",
            "sub: PUBLISH nobody m",
            "sub: SET k v",
            "sub: EXEC",
            "pub: PUBLISH b m2",
            "sub: GET k",
            "sub: UNSUBSCRIBE b",  # (one left: Redis's order of several is its hash order)
            "sub: UNSUBSCRIBE",
            "pub: MULTI",
            "pub: PUBLISH a m",
            "pub: PUBSUB NUMSUB a",
            "pub: EXEC",
            "pub: CLIENT KILL TYPE pubsub",
            "sub: PSUBSCRIBE x*",
            "pub: CLIENT KILL TYPE pubsub",
            "pub: PUBSUB NUMPAT",
        ),
    ),
    "back_to_resp2_while_subscribed": (
        ["sub", "pub"],
        _steps(
            "sub: SUBSCRIBE a",
            "sub: PING",
            "sub: CLIENT SETNAME x",
            "pub: PUBLISH a m",
        ),
    ),
    # CLIENT REPLY OFF|SKIP silence command replies, never pushes: confirmations and
    # messages (keyspace events too) still arrive, in both protocols
    "reply_off_resp2": (
        ["sub", "pub"],
        [
            *_steps(
                "sub: CLIENT REPLY OFF",
                "sub: SUBSCRIBE a",  # (one: several unsubscribe in Redis's hash order)
                "sub: PSUBSCRIBE __key*__:*",
                "sub: PING",
                "pub: PUBLISH a m1",
                "pub: CONFIG SET notify-keyspace-events KEA",
                "pub: SET k v",
                "sub: UNSUBSCRIBE",
                "sub: PUNSUBSCRIBE",
                "sub: GET k",
                "sub: CLIENT REPLY ON",
                "sub: CLIENT REPLY SKIP",
                "sub: SUBSCRIBE c",
                "sub: PING",
                "sub: UNSUBSCRIBE c",
                "sub: GET k",
            ),
            _NO_EVENTS,
        ],
    ),
    "resp3_reply_off": (
        ["sub", "pub"],
        [
            *_steps(
                "sub: CLIENT REPLY OFF",
                "sub: SUBSCRIBE a",
                "sub: PSUBSCRIBE __key*__:*",
                "sub: SSUBSCRIBE s",
                "sub: GET x",
                "pub: PUBLISH a m1",
                "pub: SPUBLISH s m2",
                "pub: CONFIG SET notify-keyspace-events KEA",
                "pub: SET k v",
                "sub: SET k v2",
                "sub: UNSUBSCRIBE a",
                "sub: PUNSUBSCRIBE",
                "sub: SUNSUBSCRIBE",
                "sub: CLIENT REPLY ON",
                "sub: CLIENT REPLY SKIP",
                "sub: SUBSCRIBE c",
                "sub: GET k",
                "sub: CLIENT REPLY SKIP",
                "sub: UNSUBSCRIBE",
                "sub: GET k",
            ),
            _NO_EVENTS,
        ],
    ),
    "monitor": (
        ["mon", "cli"],
        _steps(
            "mon: MONITOR",
            "cli: SET k v",
            "cli: AUTH a b",
            "cli: AUTH onlypassword",
            "cli: MULTI",
            "cli: SET a b",
            "cli: GET a",
            "cli: EXEC",
            "cli: XADD s 1-1 f v",
            "cli: SELECT 3",
            "cli: XLEN s",
            "cli: CONFIG GET maxclients",
            "cli: CLIENT GETNAME",
            "cli: FOO",
            "cli: GET",
            "cli: PUBLISH ch m",
            "mon: PING",
            "mon: GET k",
            "mon: SET k v",
            "mon: XADD s * f v",
            "mon: PUBLISH ch m",
            "mon: PING x",
            "mon: MONITOR",
            "mon: SUBSCRIBE x",
            "mon: RESET",
            "cli: SET k v2",
            "mon: GET k",
        ),
    ),
    "monitor_script": (
        ["mon", "cli"],
        [
            *_steps(
                "mon: MONITOR",
                "cli: EVAL redis.call('SET',KEYS[1],ARGV[1]) 1 k v",
                "cli: EVAL return(redis.pcall('GET',KEYS[1])) 1 k",
                "cli: SELECT 2",
                "cli: EVAL return(redis.pcall('NOPE')) 0",
                "cli: EVALSHA 0000000000000000000000000000000000000000 0",
            ),
            ("cli", ["FUNCTION", "LOAD", "REPLACE", _LIBRARY]),
            *_steps("cli: FCALL f 1 k", "cli: FUNCTION DELETE m"),
        ],
    ),
}


def _hello3(steps: list[Step]) -> list[Step]:
    """The scenario with its subscriber on RESP3 (HELLO's reply differs: drop it)."""
    return [("sub", ["HELLO", "3", "SETNAME", "x"]), *steps]


def _transcript(server: ServerProcess, name: str) -> list[object]:
    names, steps = SCENARIOS[name]
    if name.startswith("resp3_"):
        got = transcript(server, names, _hello3(steps))
        return got[1:]
    if name == "back_to_resp2_while_subscribed":
        steps = [
            ("sub", ["HELLO", "3"]),
            ("sub", ["SUBSCRIBE", "a"]),
            ("sub", ["HELLO", "2"]),
            *steps,
        ]
        got = transcript(server, names, steps)
        return [got[1], *got[3:]]
    return transcript(server, names, steps)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_same_as_redis(headwater: ServerProcess, redis_server: ServerProcess, name: str) -> None:
    ours = _transcript(headwater, name)
    theirs = _transcript(redis_server, name)
    for got, want in zip(ours, theirs, strict=True):
        assert got == want


def test_pubsub_help_is_redis_text(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    steps = _steps("c: PUBSUB HELP")
    assert transcript(headwater, ["c"], steps) == transcript(redis_server, ["c"], steps)


# -- keyspace notifications --------------------------------------------------------------------

_EVENTS = ["sub: PSUBSCRIBE __key*__:*"]

NOTIFICATIONS: dict[str, list[str]] = {
    "stream": [
        "cli: CONFIG SET notify-keyspace-events KEt",
        "cli: XADD s 1-1 f v",
        "cli: XADD s MAXLEN 1 2-1 f v",
        "cli: XADD s MAXLEN 5 3-1 f v",
        "cli: XADD s NOMKSTREAM 4-1 f v",
        "cli: XADD nope NOMKSTREAM 4-1 f v",
        "cli: XADD s 1-1 f v",
        "cli: XTRIM s MAXLEN 0",
        "cli: XTRIM s MAXLEN 0",
        "cli: XADD s 5-1 f v",
        "cli: XDEL s 5-1 9-9",
        "cli: XDEL s 9-9",
        "cli: XSETID s 10-0",
        "cli: XGROUP CREATE s g $",
        "cli: XGROUP CREATE s g $",
        "cli: XGROUP CREATE s2 g $ MKSTREAM",
        "cli: XGROUP CREATECONSUMER s g c1",
        "cli: XGROUP CREATECONSUMER s g c1",
        "cli: XADD s 11-1 a b",
        "cli: XREADGROUP GROUP g c2 STREAMS s >",
        "cli: XREADGROUP GROUP g c2 STREAMS s >",
        "cli: XCLAIM s g c3 0 11-1",
        "cli: XCLAIM s g c3 0 11-1",
        "cli: XAUTOCLAIM s g c4 0 0",
        "cli: XACK s g 11-1",
        "cli: XGROUP SETID s g 0",
        "cli: XGROUP DELCONSUMER s g c1",
        "cli: XGROUP DELCONSUMER s g zz",
        "cli: XGROUP DESTROY s g",
        "cli: XGROUP DESTROY s g",
        "cli: DEL s s2 nope",
    ],
    "generic_and_string": [
        "cli: CONFIG SET notify-keyspace-events KEA",
        "cli: SET k v",
        "cli: SET k v EX 100",
        "cli: SET k v NX",
        "cli: SETNX k2 v",
        "cli: SETNX k2 v",
        "cli: SETEX k3 100 v",
        "cli: GETSET k v2",
        "cli: MSET a 1 b 2",
        "cli: MSETNX c 1 d 2",
        "cli: INCR a",
        "cli: DECRBY a 5",
        "cli: INCRBY a 5",
        "cli: APPEND b x",
        "cli: APPEND new x",
        "cli: GETEX a EX 100",
        "cli: GETEX a PERSIST",
        "cli: GETDEL a",
        "cli: EXPIRE k 100",
        "cli: PERSIST k",
        "cli: PERSIST k",
        "cli: PEXPIRE k 0",
        "cli: EXPIRE nope 100",
        "cli: RENAME b bb",
        "cli: RENAMENX bb c",
        "cli: RENAMENX bb e",
        "cli: DEL bb c d nope",
        "cli: UNLINK k2 k3",
    ],
    "set": [
        "cli: CONFIG SET notify-keyspace-events KEA",
        "cli: SADD s 1 2 3 4",
        "cli: SADD s 1",
        "cli: SREM s 9",
        "cli: SREM s 1",
        "cli: SMOVE s t 2",
        "cli: SMOVE s t 9",
        "cli: SMOVE nope t 2",
        "cli: SADD one 5",
        "cli: SMOVE one t 5",
        "cli: SINTERSTORE d s t",
        "cli: SUNIONSTORE d s t",
        "cli: SDIFFSTORE d s s",
        "cli: SDIFFSTORE d s s",
        "cli: SPOP t 0",
        "cli: SADD w z",
        "cli: SPOP w 1",
        "cli: SPOP t 10",
        "cli: SADD u 1",
        "cli: SPOP u",
        "cli: SREM s 3 4",
    ],
    "zset": [
        "cli: CONFIG SET notify-keyspace-events KEA",
        "cli: ZADD z 1 a 2 b 3 c 4 d",
        "cli: ZADD z 1 a",
        "cli: ZADD z XX 5 nope",
        "cli: ZADD z INCR 1 a",
        "cli: ZINCRBY z 1 b",
        "cli: ZREM z nope",
        "cli: ZREM z a",
        "cli: ZRANGESTORE d z 0 0",
        "cli: ZRANGESTORE d z 5 9",
        "cli: ZRANGESTORE d z 5 9",
        "cli: ZREMRANGEBYRANK z 0 0",
        "cli: ZREMRANGEBYSCORE z 100 200",
        "cli: ZADD l 0 a 0 b",
        "cli: ZREMRANGEBYLEX l - +",
        "cli: ZPOPMIN z",
        "cli: ZPOPMAX z 0",
        "cli: ZADD y 1 a",
        "cli: ZMPOP 1 y MAX",
        "cli: ZMPOP 1 y MAX",
        "cli: ZADD p 1 a 2 b",
        "cli: ZUNIONSTORE u 2 p z",
        "cli: ZINTERSTORE u 2 p z",
        "cli: ZDIFFSTORE u 2 p p",
        "cli: ZDIFFSTORE u 2 p p",
    ],
    "list": [
        "cli: CONFIG SET notify-keyspace-events KEAn",
        "cli: RPUSH l a b c",
        "cli: LPUSH l z",
        "cli: LPUSHX nope a",
        "cli: RPUSHX l d",
        "cli: LINSERT l BEFORE a y",
        "cli: LINSERT l BEFORE nope y",
        "cli: LSET l 0 w",
        "cli: LREM l 1 y",
        "cli: LREM l 1 nope",
        "cli: LTRIM l 0 3",
        "cli: LMOVE l m LEFT RIGHT",
        "cli: RPOPLPUSH l m",
        "cli: LPOP l 0",
        "cli: LMPOP 2 nope l RIGHT COUNT 5",
        "cli: BLMOVE m m LEFT RIGHT 0",
        "cli: BLPOP m 0",
        "cli: BRPOP m 0",
        "cli: LTRIM nope 0 1",
        "cli: RPUSH t 1",
        "cli: LTRIM t 1 0",
        "cli: RPUSH r x",
        "cli: LREM r 0 x",
    ],
    "hash": [
        "cli: CONFIG SET notify-keyspace-events Eh",
        "cli: HSET h f v g w",
        "cli: HMSET h f v",
        "cli: HSETNX h f v",
        "cli: HSETNX h z v",
        "cli: HINCRBY h n 3",
        "cli: HDEL h f nope",
        "cli: HDEL h nope",
        "cli: CONFIG SET notify-keyspace-events Egh",
        "cli: HDEL h g z n",
    ],
    "new_keys": [
        "cli: CONFIG SET notify-keyspace-events KEAn",
        "cli: SET k v",
        "cli: SET k v2",
        "cli: SET j v EX 100",
        "cli: SETNX n v",
        "cli: MSET a 1 b 2",
        "cli: INCR c",
        "cli: APPEND d x",
        "cli: HSET h f v",
        "cli: HSETNX h2 f v",
        "cli: HINCRBY h3 f 1",
        "cli: XADD s 1-1 f v",
        "cli: XADD s 2-1 f v",
        "cli: XGROUP CREATE s2 g $ MKSTREAM",
        "cli: RENAME k k9",
        "cli: RENAME k9 a",
        "cli: SETEX e 100 v",
        "cli: GETSET gs v",
        "cli: MSETNX m1 1 m2 2",
        "cli: PSETEX pe 100 v",
        "cli: DECRBY dd 1",
        "cli: RENAMENX a zz",
        "cli: CONFIG SET notify-keyspace-events En",
        "cli: SET only-new v",
        "cli: DEL only-new",
        "cli: SET only-new v",
    ],
    "classes_and_channels": [
        "cli: CONFIG SET notify-keyspace-events K$",
        "cli: SET k v",
        "cli: XADD s 1-1 f v",
        "cli: CONFIG SET notify-keyspace-events Et",
        "cli: SET k v",
        "cli: XADD s 2-1 f v",
        "cli: CONFIG SET notify-keyspace-events gt",
        "cli: XADD s 3-1 f v",
        "cli: SELECT 5",
        "cli: CONFIG SET notify-keyspace-events AKE",
        "cli: XADD s 1-1 f v",
        "cli: SET k v",
        "cli: CONFIG SET notify-keyspace-events A",
        "cli: SET k v",
    ],
}


@pytest.mark.parametrize("name", list(NOTIFICATIONS))
def test_keyspace_notifications_same_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str
) -> None:
    steps = [
        *_steps(*_EVENTS, *NOTIFICATIONS[name]),
        ("cli", ["CONFIG", "SET", "notify-keyspace-events", ""]),
    ]
    ours = transcript(headwater, ["sub", "cli"], steps)
    theirs = transcript(redis_server, ["sub", "cli"], steps)
    for got, want in zip(ours, theirs, strict=True):
        assert got == want


CONFIG_VALUES = ["Q", "", "g", "K", "KEA", "AKE", "Ex", "A", "Kn", "KAn", "Em", "EtgK", "$K"]
CONFIG_VALUES += ["KEg$lshzxetdmn", "KEg$lshzxetd", "KEg$lshzxet", "AKEx!"]


def test_notify_keyspace_events_config_same_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    lines: list[Step] = []
    for value in CONFIG_VALUES:
        lines.append(("cli", ["CONFIG", "SET", "notify-keyspace-events", value]))
        lines.append(("cli", ["CONFIG", "GET", "notify-keyspace-events"]))
    lines.append(("cli", ["CONFIG", "SET", "notify-keyspace-events", ""]))
    assert transcript(headwater, ["cli"], lines) == transcript(redis_server, ["cli"], lines)
