"""Sorted sets where Redis 7.2 (Headwater's level) differs from Debian's 7.0, which the
differential tests cannot compare: ZRANK/ZREVRANK WITHSCORE, encodings by the 7.2 rules,
scores printed in their shortest form, and the effects of ZMPOP."""

from __future__ import annotations

from tests.unit.conftest import Harness, error_text


def test_zrank_withscore(h: Harness) -> None:
    c = h.client()
    h.call(c, "ZADD", "z", 1, "a", 2.5, "b", 3, "c")
    assert h.call(c, "ZRANK", "z", "b", "WITHSCORE") == [1, b"2.5"]
    assert h.call(c, "ZREVRANK", "z", "b", "withscore") == [1, b"2.5"]
    assert h.call(c, "ZRANK", "z", "nope", "WITHSCORE") is None
    assert h.raw(c) == b""
    h.engine.execute(c, [b"ZRANK", b"z", b"nope", b"WITHSCORE"])
    assert h.raw(c) == b"*-1\r\n"  # (a null array in RESP2, as Redis 7.2)
    h.call(c, "HELLO", "3")
    h.engine.execute(c, [b"ZRANK", b"z", b"c", b"WITHSCORE"])
    assert h.raw(c) == b"*2\r\n:2\r\n,3\r\n"
    assert error_text(h.call(c, "ZRANK", "z", "a", "WITHSCORES")) == "ERR syntax error"
    assert error_text(h.call(c, "ZRANK", "z", "a", "WITHSCORE", "x")) == "ERR syntax error"


def test_shortest_round_trip_scores(h: Harness) -> None:
    c = h.client()
    h.call(c, "ZADD", "z", "0.1", "a", "1e300", "b", "-0.3", "c", "100000000000000000000", "d")
    assert h.call(c, "ZRANGE", "z", 0, -1, "WITHSCORES") == [
        b"c", b"-0.3", b"a", b"0.1", b"d", b"1e+20", b"b", b"1e+300"
    ]  # fmt: skip
    assert h.call(c, "ZINCRBY", "z", "0.2", "a") == b"0.30000000000000004"


def test_encodings_follow_the_limits(h: Harness) -> None:
    c = h.client()
    h.call(c, "ZADD", "small", *[x for n in range(128) for x in (n, f"m{n}")])
    assert h.call(c, "OBJECT", "ENCODING", "small") == b"listpack"
    h.call(c, "ZADD", "small", 1, "one-more")
    assert h.call(c, "OBJECT", "ENCODING", "small") == b"skiplist"
    h.call(c, "ZREM", "small", "one-more", "m1", "m2")
    assert h.call(c, "OBJECT", "ENCODING", "small") == b"skiplist"  # never back
    h.call(c, "ZADD", "long", 1, "x" * 65)
    assert h.call(c, "OBJECT", "ENCODING", "long") == b"skiplist"
    h.call(c, "ZRANGESTORE", "copy", "small", 0, 9)
    assert h.call(c, "OBJECT", "ENCODING", "copy") == b"listpack"  # chosen afresh
    h.call(c, "CONFIG", "SET", "zset-max-listpack-entries", 0)
    h.call(c, "ZADD", "none", 1, "a")
    assert h.call(c, "OBJECT", "ENCODING", "none") == b"skiplist"


def test_zmpop_propagates_as_a_pop_of_the_key_it_took_from(h: Harness) -> None:
    c = h.client()
    h.call(c, "ZADD", "z", 1, "a", 2, "b", 3, "c")
    assert h.call(c, "ZMPOP", 2, "nope", "z", "MAX", "COUNT", 2) == [
        b"z",
        [[b"c", b"3"], [b"b", b"2"]],
    ]
    assert h.effect_lines()[-1] == [b"ZPOPMAX", b"z", b"2"]
    assert h.call(c, "ZMPOP", 1, "nope", "MIN") is None
    assert h.effect_lines()[-1] == [b"ZPOPMAX", b"z", b"2"]  # (nothing popped: no effect)


def test_resp3_shapes(h: Harness) -> None:
    c = h.client()
    h.call(c, "HELLO", "3")
    h.call(c, "ZADD", "z", 1, "a", 2, "b")
    h.engine.execute(c, [b"ZRANGE", b"z", b"0", b"-1", b"WITHSCORES"])
    assert h.raw(c) == b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
    h.engine.execute(c, [b"ZPOPMIN", b"z"])
    assert h.raw(c) == b"*2\r\n$1\r\na\r\n,1\r\n"  # (no count: flat)
    h.engine.execute(c, [b"ZPOPMIN", b"z", b"1"])
    assert h.raw(c) == b"*1\r\n*2\r\n$1\r\nb\r\n,2\r\n"


def test_bzpopmin_waits_and_is_served_in_order(h: Harness) -> None:
    a, b, writer = h.client(), h.client(), h.client()
    h.engine.execute(a, [b"BZPOPMIN", b"z1", b"z2", b"0"])
    h.engine.execute(b, [b"BZPOPMAX", b"z2", b"0"])
    assert h.raw(a) == b"" and h.raw(b) == b""  # both wait
    assert h.call(writer, "ZADD", "z2", 1, "low", 2, "high") == 2
    assert h.raw(a) == b"*3\r\n$2\r\nz2\r\n$3\r\nlow\r\n$1\r\n1\r\n"  # first come, first served
    assert h.raw(b) == b"*3\r\n$2\r\nz2\r\n$4\r\nhigh\r\n$1\r\n2\r\n"
    assert h.call(writer, "EXISTS", "z2") == 0
    assert [b"ZPOPMIN", b"z2"] in h.effect_lines()
    assert [b"ZPOPMAX", b"z2"] in h.effect_lines()


def test_blocking_pops_time_out_and_refuse_bad_timeouts(h: Harness) -> None:
    c = h.client()
    h.engine.execute(c, [b"BZPOPMIN", b"z", b"0.5"])
    assert h.raw(c) == b""
    h.scheduler.advance(600)
    assert h.raw(c) == b"*-1\r\n"
    h.engine.execute(c, [b"BZMPOP", b"0.1", b"1", b"z", b"MIN"])
    h.scheduler.advance(200)
    assert h.raw(c) == b"*-1\r\n"
    for timeout, text in (
        ("x", "ERR timeout is not a float or out of range"),
        ("-1", "ERR timeout is negative"),
        ("inf", "ERR timeout is out of range"),  # (Redis 7.2+; 7.0 cast it: "negative")
        ("1e300", "ERR timeout is out of range"),
        ("-1e300", "ERR timeout is negative"),
        ("nan", "ERR timeout is not a float or out of range"),
    ):
        assert error_text(h.call(c, "BZPOPMIN", "z", timeout)) == text
    assert error_text(h.call(c, "BZMPOP", "x", "0", "z", "MIN")) == (
        "ERR numkeys should be greater than 0"
    )
    h.call(c, "MULTI")
    h.call(c, "BZPOPMIN", "z", "0")
    assert h.call(c, "EXEC") == [None]  # (never blocks inside a transaction)


def test_bzmpop_pops_at_once_from_the_first_non_empty_key(h: Harness) -> None:
    c = h.client()
    h.call(c, "ZADD", "b", 1, "x", 2, "y", 3, "z")
    assert h.call(c, "BZMPOP", 0, 2, "a", "b", "MAX", "COUNT", 2) == [
        b"b",
        [[b"z", b"3"], [b"y", b"2"]],
    ]
    assert h.effect_lines()[-1] == [b"ZPOPMAX", b"b", b"2"]


def test_bzpopmin_and_bzpopmax_run_in_scripts_without_waiting(h: Harness) -> None:
    """Redis 7.2 dropped their ``noscript`` flag (as for the blocking list commands)."""
    c = h.client()
    assert h.call(c, "EVAL", "return redis.call('bzpopmin', KEYS[1], 0)", 1, "z") is None
    h.call(c, "ZADD", "z", 1, "a", 2, "b")
    got = h.call(c, "EVAL", "return redis.call('bzpopmax', KEYS[1], 0)", 1, "z")
    assert got == [b"z", b"b", b"2"]
    assert h.effect_lines()[-1] == [b"ZPOPMAX", b"z"]
