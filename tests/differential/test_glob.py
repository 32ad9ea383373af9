"""Glob patterns (KEYS, SCAN/HSCAN/SSCAN/ZSCAN MATCH, PSUBSCRIBE, PUBSUB CHANNELS/NUMPAT) byte
for byte against redis-server 7.0, whose matcher is the one Headwater follows: its corner cases
(unterminated classes, "[a-]" as a range up to "]", escapes, bytes above 127, the empty key),
the bound on nested "*"s, and patterns that used to backtrack for ever (issue #31 item 2)."""

from __future__ import annotations

import time

import hiredis
import pytest

from tests.differential.harness import assert_same
from tests.differential.pubsub_session import transcript
from tests.helpers import RawClient, ServerProcess

KEYS = [
    b"",
    b"a",
    b"A",
    b"abc",
    b"aBc",
    b"]",
    b"^",
    b"-",
    b"\\",
    b"*",
    b"?",
    b"[",
    b"a-b",
    b"a]c",
    b"h*llo",
    b"hello",
    b"hallo",
    b"\x80",
    b"\xff",
    b"a\xffc",
    b"a" * 40,
    b"user:1:name",
    b"user:22:name",
]

PATTERNS = [
    b"*",
    b"**",
    b"?",
    b"??",
    b"a*",
    b"*c",
    b"*b*",
    b"*B*",
    b"a?c",
    b"[",
    b"[^",
    b"[]",
    b"[]]",
    b"[^]",
    b"[a-]",
    b"[a-]bc",
    b"[c-a]*",
    b"[^a-c]",
    b"[\\]]",
    b"[\\",
    b"\\",
    b"\\*",
    b"h\\*llo",
    b"h[^e]llo",
    b"h[ae]llo",
    b"[a-\xff]",
    b"[\x80-\xff]",
    b"a[\xff]c",
    b"[-a]",
    b"[a-c-e]*",
    b"user:*:name",
    b"user:??:*",
    b"*a*a*a*a*a*a*a*a*a*a*",
    b"a*a*a*a*a*a*a*a*a*a*b",
]


def _fill(client: RawClient) -> None:
    client.call("FLUSHALL")
    for key in KEYS:
        client.call(b"SET", key, b"v")
    members = [key or b"e" for key in KEYS]
    client.call(b"HSET", b"h", *[x for member in members for x in (member, b"v")])
    client.call(b"SADD", b"s", *members)
    client.call(b"ZADD", b"z", *[x for member in members for x in (b"1", member)])


def _sorted(reply: bytes) -> object:
    """A reply with its arrays sorted (KEYS and SCAN answer in hash order)."""
    reader = hiredis.Reader()
    reader.feed(reply)

    def norm(value: object) -> object:
        return sorted((norm(x) for x in value), key=repr) if isinstance(value, list) else value

    return norm(reader.gets())


def _matches(server: ServerProcess, pattern: bytes) -> list[object]:
    client = RawClient(server.port)
    try:
        _fill(client)
        return [
            _sorted(client.call(*argv))
            for argv in (
                [b"KEYS", pattern],
                [b"SCAN", b"0", b"MATCH", pattern, b"COUNT", b"1000"],
                [b"HSCAN", b"h", b"0", b"MATCH", pattern, b"COUNT", b"1000"],
                [b"SSCAN", b"s", b"0", b"MATCH", pattern, b"COUNT", b"1000"],
                [b"ZSCAN", b"z", b"0", b"MATCH", pattern, b"COUNT", b"1000"],
            )
        ]
    finally:
        client.close()


@pytest.mark.parametrize("pattern", PATTERNS, ids=repr)
def test_keys_and_scans_match_like_redis(
    headwater: ServerProcess, redis_server: ServerProcess, pattern: bytes
) -> None:
    assert _matches(headwater, pattern) == _matches(redis_server, pattern)


DEPTH = 1000  # Redis's bound on nested "*"s
NESTING = [
    (b"a*" * DEPTH + b"b", b"a" * DEPTH + b"b"),
    (b"a*" * (DEPTH + 1) + b"b", b"a" * (DEPTH + 1) + b"b"),
    (b"a*" * (DEPTH + 1), b"a" * (DEPTH + 1)),
    (b"*a" * (DEPTH + 1), b"a" * (DEPTH + 1)),
]


@pytest.mark.parametrize(("pattern", "key"), NESTING, ids=["1000", "1001", "final", "leading"])
def test_nesting_bound_like_redis(
    headwater: ServerProcess, redis_server: ServerProcess, pattern: bytes, key: bytes
) -> None:
    assert_same(headwater, redis_server, [["SET", key, "v"], ["KEYS", pattern]], 2)


def test_pattern_channels_like_redis(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    patterns = ["*", "[a-]", "ch?", "[^", "\\*"]
    steps = [
        # one subscriber a pattern: Redis delivers to patterns in its dict's order
        *[(f"sub{i}", ["PSUBSCRIBE", pattern]) for i, pattern in enumerate(patterns)],
        ("other", ["SUBSCRIBE", "ch1", "]", "*", ""]),
        *[("pub", ["PUBLISH", channel, "m"]) for channel in ["ch1", "]", "*", "", "x"]],
        *[("pub", ["PUBSUB", "CHANNELS", pattern]) for pattern in patterns],
        ("pub", ["PUBSUB", "NUMPAT"]),
    ]
    names = [f"sub{i}" for i in range(len(patterns))] + ["other", "pub"]

    def heard(server: ServerProcess) -> list[object]:
        # PUBSUB CHANNELS answers in hash order: compare its channels sorted
        return [
            (argv, _sorted(got[0][1]) if argv[:2] == ["PUBSUB", "CHANNELS"] else got)
            for _, argv, got in transcript(server, names, steps)  # type: ignore[misc]
        ]

    assert heard(headwater) == heard(redis_server)


def test_pathological_patterns_leave_the_server_answering(headwater: ServerProcess) -> None:
    """Issue #31 item 2: a* ten times then b, against a 40-byte key, backtracked for ever."""
    pattern = b"a*a*a*a*a*a*a*a*a*a*b"
    client, sub = RawClient(headwater.port), RawClient(headwater.port)
    try:
        client.call("FLUSHALL")
        client.call(b"SET", b"a" * 40, b"v")
        client.call(b"HSET", b"h", b"a" * 40, b"v")
        sub.call(b"PSUBSCRIBE", pattern)
        started = time.monotonic()
        assert client.call(b"KEYS", pattern) == b"*0\r\n"
        assert client.call(b"SCAN", b"0", b"MATCH", pattern) == b"*2\r\n$1\r\n0\r\n*0\r\n"
        assert client.call(b"HSCAN", b"h", b"0", b"MATCH", pattern).endswith(b"*0\r\n")
        assert client.call(b"PUBLISH", b"a" * 40, b"m") == b":0\r\n"
        assert client.call(b"PING") == b"+PONG\r\n"
        assert time.monotonic() - started < 1
    finally:
        client.close()
        sub.close()
