"""Lists through the engine: Redis 7.2's encodings (which Debian's 7.0 cannot show), the
blocking pops and moves (served first come first served, propagated as Redis rewrites them,
never waiting in MULTI or a script), keyspace events, memory shape."""

from __future__ import annotations

import gc

import pytest

from headwater.rdb import listpack
from headwater.structures.lists import EMPTY_SIZE, ListValue, Node, entry_size
from tests.unit.conftest import Harness, error_text

HUNDRED = "x" * 100  # a listpack entry of 103 bytes (2-byte encoding, 1-byte backlen)


def _list(h: Harness, key: str = "k") -> ListValue:
    value = h.engine.keyspace.dbs[0].data[key.encode()]
    assert isinstance(value, ListValue)
    value.check_invariants()
    return value


def _encoding(h: Harness, c: object, key: str = "k") -> bytes:
    return h.call(c, "OBJECT", "ENCODING", key)  # type: ignore[arg-type,no-any-return]


# -- sizes as Redis counts them -------------------------------------------------------------


@pytest.mark.parametrize(
    "member",
    [b"", b"a", b"0", b"127", b"128", b"-4096", b"4096", b"-32769", b"8388608", b"2147483648",
     b"-9223372036854775808", b"9223372036854775808", b"01", b"-0", b"+1", b"x" * 63,
     b"x" * 64, b"x" * 4095, b"x" * 4096, b"x" * 20000],
)  # fmt: skip
def test_entry_sizes_are_the_listpack_codecs(member: bytes) -> None:
    assert entry_size(member) == len(listpack.encode([member])) - EMPTY_SIZE


def test_node_size_is_lpbytes_through_every_change() -> None:
    node = Node.of([b"a", b"12", b"x" * 70])
    node.prepend(b"-5", entry_size(b"-5"))
    node.append(b"y" * 5000, entry_size(b"y" * 5000))
    node.insert(2, b"mid", entry_size(b"mid"))
    node.replace(0, b"z" * 300)
    assert node.pop_front() == b"z" * 300
    assert node.pop_back() == b"y" * 5000
    assert node.delete(1, 2) == [b"mid"]
    node.check()
    assert node.items() == [b"a", b"12", b"x" * 70]
    assert node.size == len(listpack.encode(node.items()))


# -- encodings (Redis 7.2's t_list.c) -------------------------------------------------------


def test_listpack_until_the_bytes_would_pass_8kb_then_back_below_half(h: Harness) -> None:
    c = h.client()
    for _ in range(79):  # 7 + 79 * 103 = 8144 bytes; one more would be 8144 + 100 > 8192
        h.call(c, "RPUSH", "k", HUNDRED)
    assert _encoding(h, c) == b"listpack"
    assert _list(h).nodes[0].size == 8144
    h.call(c, "RPUSH", "k", HUNDRED)
    assert _encoding(h, c) == b"quicklist"
    assert [len(n.starts) for n in _list(h).nodes] == [79, 1]  # the listpack is node one
    h.call(c, "RPOP", "k")  # one node again, but 8144 bytes > 4096 (half the limit)
    assert _encoding(h, c) == b"quicklist"
    h.call(c, "RPOP", "k", 39)  # 40 left: 4127 bytes
    assert _encoding(h, c) == b"quicklist"
    h.call(c, "RPOP", "k")  # 39 left: 4024 bytes
    assert _encoding(h, c) == b"listpack"


def test_a_push_past_the_limit_makes_a_quicklist_at_once(h: Harness) -> None:
    c = h.client()
    h.call(c, "RPUSH", "k", *(f"member-{i:05d}" for i in range(3000)))
    lst = _list(h)
    assert not lst.listpack
    # every node as full as _quicklistNodeAllowInsert lets it be (size + len + 8 <= 8192)
    assert all(n.size + 12 + 8 > 8192 for n in lst.nodes[:-1])
    assert all(n.size <= 8192 for n in lst.nodes)


def test_count_limited_fill(h: Harness) -> None:
    c = h.client()
    h.call(c, "CONFIG", "SET", "list-max-ziplist-size", "3")  # (the old name)
    assert h.call(c, "CONFIG", "GET", "list-max-listpack-size") == [
        b"list-max-listpack-size",
        b"3",
    ]
    h.call(c, "RPUSH", "k", "a", "b", "c")
    assert _encoding(h, c) == b"listpack"
    h.call(c, "RPUSH", "k", "d")
    assert _encoding(h, c) == b"quicklist"
    assert [n.items() for n in _list(h).nodes] == [[b"a", b"b", b"c"], [b"d"]]
    h.call(c, "RPOP", "k")
    assert _encoding(h, c) == b"quicklist"  # (3 > 3 // 2)
    h.call(c, "RPOP", "k", 2)
    assert _encoding(h, c) == b"listpack"


def test_linsert_converts_even_when_the_pivot_is_missing(h: Harness) -> None:
    c = h.client()
    h.call(c, "RPUSH", "k", *[HUNDRED] * 79)
    assert h.call(c, "LINSERT", "k", "BEFORE", "nope", "y" * 200) == -1
    assert _encoding(h, c) == b"quicklist"  # (as Redis converts before it looks)


def test_lset_converts_before_replacing(h: Harness) -> None:
    c = h.client()
    h.call(c, "RPUSH", "k", *[HUNDRED] * 70)
    assert h.call(c, "LSET", "k", 3, "y" * 2000) == b"OK"
    assert _encoding(h, c) == b"quicklist"
    assert h.call(c, "LINDEX", "k", 3) == b"y" * 2000
    h.call(c, "LSET", "k", 3, "small")
    assert _encoding(h, c) == b"quicklist"  # (7 + 69 * 103 + 7 > 4096)


def test_linsert_splits_a_full_node_and_merges_around_it(h: Harness) -> None:
    c = h.client()
    members = [f"m{i:04d}" for i in range(2000)]
    h.call(c, "RPUSH", "k", *members)
    before = [len(n.starts) for n in _list(h).nodes]
    h.call(c, "LINSERT", "k", "AFTER", "m0500", "new")
    h.call(c, "LINSERT", "k", "BEFORE", "m1500", "new2")
    lst = _list(h)
    assert len(lst.nodes) >= len(before)
    expected = [*members]
    expected.insert(501, "new")
    expected.insert(expected.index("m1500"), "new2")
    assert h.call(c, "LRANGE", "k", 0, -1) == [m.encode() for m in expected]


def test_lpos_rank_of_the_smallest_long_is_refused_as_in_7_2(h: Harness) -> None:
    c = h.client()
    h.call(c, "RPUSH", "k", "a")
    assert error_text(h.call(c, "LPOS", "k", "a", "RANK", "-9223372036854775808")) == (
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    )


# -- blocking -------------------------------------------------------------------------------


def test_blpop_waits_is_served_in_order_and_propagates_as_lpop(h: Harness) -> None:
    a, b, writer = h.client(), h.client(), h.client()
    h.engine.execute(a, [b"BLPOP", b"q1", b"q2", b"0"])
    h.engine.execute(b, [b"BRPOP", b"q2", b"0"])
    assert h.raw(a) == b"" and h.raw(b) == b""
    assert h.call(writer, "RPUSH", "q2", "one", "two", "three") == 3
    assert h.raw(a) == b"*2\r\n$2\r\nq2\r\n$3\r\none\r\n"
    assert h.raw(b) == b"*2\r\n$2\r\nq2\r\n$5\r\nthree\r\n"
    assert h.effect_lines()[-2:] == [[b"LPOP", b"q2"], [b"RPOP", b"q2"]]
    assert h.call(writer, "LRANGE", "q2", 0, -1) == [b"two"]


def test_blocked_moves_propagate_as_their_plain_forms(h: Harness) -> None:
    a, b, c, writer = h.client(), h.client(), h.client(), h.client()
    h.engine.execute(a, [b"BLMOVE", b"src", b"dst", b"right", b"LEFT", b"0"])
    h.engine.execute(b, [b"BRPOPLPUSH", b"src", b"dst", b"0"])
    h.engine.execute(c, [b"BLMPOP", b"0", b"2", b"x", b"dst", b"RIGHT", b"COUNT", b"5"])
    h.call(writer, "RPUSH", "src", "j1", "j2")
    assert h.raw(a) == b"$2\r\nj2\r\n"
    assert h.raw(b) == b"$2\r\nj1\r\n"
    # the moves pushed onto dst: the BLMPOP client waiting on it is served after them
    assert h.raw(c) == b"*2\r\n$3\r\ndst\r\n*2\r\n$2\r\nj2\r\n$2\r\nj1\r\n"
    assert h.effect_lines()[-3:] == [
        [b"LMOVE", b"src", b"dst", b"right", b"LEFT"],
        [b"RPOPLPUSH", b"src", b"dst"],
        [b"RPOP", b"dst", b"2"],
    ]
    assert h.call(writer, "EXISTS", "src", "dst") == 0


def test_timeouts_and_client_unblock(h: Harness) -> None:
    c = h.client()
    h.engine.execute(c, [b"BLPOP", b"q", b"0.5"])
    h.scheduler.advance(600)
    assert h.raw(c) == b"*-1\r\n"
    h.engine.execute(c, [b"BLMOVE", b"q", b"d", b"LEFT", b"LEFT", b"0.1"])
    h.scheduler.advance(200)
    assert h.raw(c) == b"*-1\r\n"  # (a null array on timeout, a null bulk in MULTI)
    h.call(c, "HELLO", 3)
    h.engine.execute(c, [b"BRPOPLPUSH", b"q", b"d", b"0.1"])
    h.scheduler.advance(200)
    assert h.raw(c) == b"_\r\n"
    other = h.client()
    h.engine.execute(c, [b"BLMPOP", b"0", b"1", b"q", b"LEFT"])
    assert h.call(other, "CLIENT", "UNBLOCK", c.id, "ERROR") == 1
    assert h.raw(c) == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    for timeout, text in (
        ("x", "ERR timeout is not a float or out of range"),
        ("-1", "ERR timeout is negative"),
        # past 2**63 ms once in milliseconds (Redis 7.2+; 7.0 said "negative")
        ("0x7FFFFFFFFFFFFF", "ERR timeout is out of range"),
        ("9223372036854776", "ERR timeout is out of range"),
        ("-9223372036854776", "ERR timeout is negative"),
    ):
        assert error_text(h.call(other, "BLPOP", "q", timeout)) == text


def test_no_wait_in_multi_and_scripts(h: Harness) -> None:
    c = h.client()
    h.call(c, "MULTI")
    h.call(c, "BLPOP", "q", 0)
    h.call(c, "BLMOVE", "q", "d", "LEFT", "LEFT", 0)
    h.call(c, "RPUSH", "q", "v")
    h.call(c, "BRPOP", "q", 0)
    assert h.call(c, "EXEC") == [None, None, 1, [b"q", b"v"]]
    # Redis 7.2: blocking list commands run in scripts, without waiting
    assert h.call(c, "EVAL", "return redis.call('blpop', KEYS[1], 0)", 1, "q") is None
    blmove = "return redis.call('blmove', KEYS[1], 'd', 'LEFT', 'LEFT', 0)"
    assert h.call(c, "EVAL", blmove, 1, "q") is None
    h.call(c, "RPUSH", "q", "w")
    assert h.call(c, "EVAL", "return redis.call('brpop', KEYS[1], 0)", 1, "q") == [b"q", b"w"]
    assert h.effect_lines()[-1] == [b"RPOP", b"q"]


def test_a_waiter_is_not_woken_by_another_type(h: Harness) -> None:
    c, writer = h.client(), h.client()
    h.engine.execute(c, [b"BLPOP", b"q", b"0"])
    h.call(writer, "SET", "q", "str")
    assert h.raw(c) == b""
    h.call(writer, "DEL", "q")
    h.call(writer, "LPUSH", "q", "v")
    assert h.raw(c) == b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n"


# -- keyspace events ------------------------------------------------------------------------


def test_keyspace_events_as_redis_sends_them(h: Harness) -> None:
    c, sub = h.client(), h.client()
    h.call(c, "CONFIG", "SET", "notify-keyspace-events", "KElg")
    h.call(sub, "PSUBSCRIBE", "__keyevent@0__:*")
    steps = [
        ("RPUSH", "l", "a", "b", "c"),
        ("LPUSH", "l", "z"),
        ("LINSERT", "l", "BEFORE", "a", "y"),
        ("LSET", "l", 0, "w"),
        ("LREM", "l", 1, "y"),
        ("LTRIM", "l", 0, 2),
        ("LMOVE", "l", "m", "LEFT", "RIGHT"),
        ("RPOPLPUSH", "l", "m"),
        ("LPOP", "l", 5),
    ]
    for step in steps:
        h.call(c, *step)
    events = [msg[2] + b" " + msg[3] for msg in _messages(h.raw(sub))]
    assert events == [
        b"__keyevent@0__:rpush l",
        b"__keyevent@0__:lpush l",
        b"__keyevent@0__:linsert l",
        b"__keyevent@0__:lset l",
        b"__keyevent@0__:lrem l",
        b"__keyevent@0__:ltrim l",
        b"__keyevent@0__:rpush m",
        b"__keyevent@0__:lpop l",
        b"__keyevent@0__:lpush m",
        b"__keyevent@0__:rpop l",
        b"__keyevent@0__:lpop l",
        b"__keyevent@0__:del l",
    ]


def _messages(raw: bytes) -> list[list[bytes]]:
    from tests.unit.conftest import decode_all

    replies = decode_all(raw)
    return [r for r in replies if isinstance(r, list) and r and r[0] == b"pmessage"]


# -- memory shape ---------------------------------------------------------------------------


def test_a_big_list_is_a_few_objects_the_gc_does_not_track(h: Harness) -> None:
    c = h.client()
    for i in range(0, 100_000, 1000):
        h.call(c, "RPUSH", "big", *(f"{n:016d}" for n in range(i, i + 1000)))
    lst = _list(h, "big")
    assert lst.count == 100_000
    assert len(lst.nodes) < 100_000 // 400  # (8 KB nodes of 18-byte entries: ~454 each)
    # what the cyclic GC walks: two objects a node (the node, its array), not one a member
    assert all(not gc.is_tracked(node.buf) for node in lst.nodes)
    raw = h.engine.execute(c, [b"LRANGE", b"big", b"0", b"-1"]) or h.raw(c)
    assert raw.startswith(b"*100000\r\n$16\r\n0000000000000000\r\n")
    assert raw.endswith(b"$16\r\n0000000000099999\r\n")
