"""SLOWLOG against redis-server 7.0, RESP2 and RESP3: which commands are logged, how their
arguments are kept (cut at 32 arguments and 128 bytes, secrets redacted), GET's counts,
LEN, RESET, HELP and the errors. An entry's id, time, duration and client address differ
between two servers: they are masked; everything else is compared as parsed values (the
reply shapes are checked as bytes on an entry-free log and by the errors)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from tests.differential.harness import argv_of, parse
from tests.helpers import RawClient, ServerProcess

#: each scenario: its commands (``slowlog-log-slower-than 0``, so every one is logged)
SCENARIOS: dict[str, list[str]] = {
    "plain": ["SET k v", "GET k", "INCR n", "LPUSH l a b", "PING"],
    "many_arguments": ["SADD s " + " ".join(str(i) for i in range(3, 34))],
    "exactly_32_arguments": ["SADD s " + " ".join(str(i) for i in range(30))],
    "long_arguments": ["SADD s foo " + "A" * 129, "SET k " + "B" * 128, "SET k " + "C" * 500],
    "secrets": [
        "CONFIG SET requirepass ''",
        "CONFIG SET masterauth '' masteruser ''",
        "CONFIG SET maxmemory-samples 5 requirepass ''",
        "AUTH nobody nothing",
        "HELLO 2 AUTH default nothing",
    ],
    "transaction": ["MULTI", "SET k 1", "INCR k", "EXEC"],
    "errors_are_logged": ["INCR", "LPUSH", "GET a b", "SET k v NX XX"],
    "rewritten": ["SADD s a b c", "SPOP s 10", "SET a 5", "GETSET a 6", "INCRBYFLOAT a 1.5"],
    "script": ["EVAL \"return redis.call('set', KEYS[1], ARGV[1])\" 1 k v"],
}


@pytest.fixture
def clients(headwater: ServerProcess, redis_server: ServerProcess) -> Iterator[list[RawClient]]:
    pair = [RawClient(headwater.port), RawClient(redis_server.port)]
    yield pair
    for client in pair:
        client.call("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128")
        client.call("CONFIG", "SET", "requirepass", "")
        client.call("SLOWLOG", "RESET")
        client.close()


def _masked(raw: bytes) -> object:
    """An entry list with each entry's id, time, duration and address masked (their types
    checked: integers and an ip:port)."""
    value = parse(raw)
    if not isinstance(value, list):
        return value
    masked = []
    for entry in value:
        entry_id, unix_time, duration, args, addr, name = entry
        assert all(isinstance(n, int) and n >= 0 for n in (entry_id, unix_time, duration))
        assert addr.startswith(b"127.0.0.1:") or addr == b"?:0", addr  # (?:0: a script's)
        if addr == b"?:0":
            args.append(b"<the script's client>")
        masked.append([args, name])
    return masked


def _session(client: RawClient, resp: int, commands: Sequence[str]) -> list[object]:
    client.call("FLUSHALL")
    client.call("HELLO", str(resp))
    client.call("CLIENT", "SETNAME", "slow")
    client.call("CONFIG", "SET", "slowlog-max-len", "128", "slowlog-log-slower-than", "0")
    client.call("SLOWLOG", "RESET")
    for command in commands:
        client.call(*argv_of(command))
    client.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    return [_masked(client.call("SLOWLOG", "GET", "-1")), parse(client.call("SLOWLOG", "LEN"))]


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_entries_match_redis(clients: list[RawClient], scenario: str, resp: int) -> None:
    ours, theirs = (_session(client, resp, SCENARIOS[scenario]) for client in clients)
    assert ours == theirs


REPLIES = [
    "SLOWLOG RESET",
    "SLOWLOG LEN",
    "SLOWLOG GET",
    "SLOWLOG GET 0",
    "SLOWLOG GET -1",
    "SLOWLOG GET -2",
    "SLOWLOG GET -222",
    "SLOWLOG GET x",
    "SLOWLOG GET 99999999999999999999",
    "SLOWLOG GET 1 2",
    "SLOWLOG LEN 1",
    "SLOWLOG RESET 1",
    "SLOWLOG HELP",
    "SLOWLOG HELP 1",
    "SLOWLOG NOPE",
    "SLOWLOG",
]


@pytest.mark.parametrize("resp", [2, 3])
def test_replies_and_errors_are_redis_bytes(clients: list[RawClient], resp: int) -> None:
    outputs = []
    for client in clients:
        client.call("HELLO", str(resp))
        client.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        outputs.append([client.call(*argv_of(command)) for command in REPLIES])
    for command, ours, theirs in zip(REPLIES, *outputs, strict=True):
        assert ours == theirs, f"RESP{resp} {command}: headwater {ours!r} != redis {theirs!r}"


@pytest.mark.parametrize("max_len", [0, 1, 3])
def test_max_len_keeps_the_newest(clients: list[RawClient], max_len: int) -> None:
    results = []
    for client in clients:
        client.call("CONFIG", "SET", "slowlog-max-len", str(max_len))
        client.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        client.call("SLOWLOG", "RESET")
        for i in range(5):
            client.call("SET", f"k{i}", "v")
        client.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        results.append([_masked(client.call("SLOWLOG", "GET", n)) for n in ("-1", "1", "0")])
    assert results[0] == results[1]


def test_a_lower_max_len_trims_when_redis_does(clients: list[RawClient]) -> None:
    # (at once while the log is on; while it is off, not until it is on again)
    steps = [
        ("CONFIG", "SET", "slowlog-max-len", "128", "slowlog-log-slower-than", "0"),
        ("SLOWLOG", "RESET"),
        ("PING",),
        ("PING",),
        ("PING",),
        ("CONFIG", "SET", "slowlog-max-len", "2"),
        ("SLOWLOG", "LEN"),
        ("CONFIG", "SET", "slowlog-log-slower-than", "-1"),
        ("CONFIG", "SET", "slowlog-max-len", "1"),
        ("SLOWLOG", "LEN"),
        ("CONFIG", "SET", "slowlog-log-slower-than", "100000"),
        ("SLOWLOG", "LEN"),
        ("CONFIG", "SET", "slowlog-max-len", "0"),
        ("SLOWLOG", "LEN"),
    ]
    ours, theirs = ([client.call(*step) for step in steps] for client in clients)
    assert ours == theirs
