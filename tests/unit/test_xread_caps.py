"""XREAD / XREADGROUP MAXCOUNT and MAXSIZE (Redis 8.10): cumulative caps over all the streams of
one call.

The reference model below computes the expected reply from plain lists: streams are served in
argument order, COUNT bounds each stream, MAXCOUNT the whole reply, and MAXSIZE is checked
before each entry against the RESP bytes of the entries already in the reply (at least one
entry is always returned). For XREADGROUP the model also keeps the group position and the PEL,
so entries the caps leave out must be neither delivered nor pending.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.stream.groups import key_id
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness, decode_all, error_text

KEYS = ["s1", "s2", "s3"]
Entry = tuple[tuple[int, int], list[bytes]]


def encode_entry(entry: Entry, resp: int = 2) -> bytes:
    """``[id, [f1, v1, ...]]``, or ``[id, nil]`` when the pairs are gone (history reads)."""
    sid = b"%d-%d" % entry[0]
    head = b"*2\r\n$%d\r\n%s\r\n" % (len(sid), sid)
    if not entry[1]:
        return head + (b"_\r\n" if resp == 3 else b"*-1\r\n")
    body = b"*%d\r\n" % len(entry[1])
    return head + body + b"".join(b"$%d\r\n%s\r\n" % (len(item), item) for item in entry[1])


def resp_size(entry: Entry, resp: int = 2) -> int:
    return len(encode_entry(entry, resp))


def key_size(key: str, resp: int = 2) -> int:
    """What precedes a stream's entries array in the reply: RESP2 ``*2`` and the key bulk."""
    return (4 if resp == 2 else 0) + len(b"$%d\r\n%s\r\n" % (len(key), key.encode()))


def encode_reply(served: list[tuple[str, list[Entry]]], resp: int) -> bytes:
    if not served:
        return b"_\r\n" if resp == 3 else b"*-1\r\n"
    out = [b"%%%d\r\n" % len(served) if resp == 3 else b"*%d\r\n" % len(served)]
    for key, entries in served:
        out.append(b"" if resp == 3 else b"*2\r\n")
        out.append(b"$%d\r\n%s\r\n*%d\r\n" % (len(key), key.encode(), len(entries)))
        out += [encode_entry(e, resp) for e in entries]
    return b"".join(out)


class Caps:
    """The model's budget: plain counters, no shared code with the server's ReplyCaps. A
    stream's key is charged with its first entry (or after the stream when none is sent)."""

    def __init__(self, maxcount: int, maxsize: int) -> None:
        self.maxcount, self.maxsize = maxcount, maxsize
        self.sent = self.size = 0

    def full(self) -> bool:
        if self.maxcount and self.sent >= self.maxcount:
            return True
        return bool(self.maxsize) and self.sent > 0 and self.size >= self.maxsize

    def take(self, key: str, entries: list[Entry], count: int, resp: int = 2) -> list[Entry]:
        taken: list[Entry] = []
        for entry in entries:
            if (count and len(taken) >= count) or self.full():
                break
            taken.append(entry)
            self.sent += 1
            self.size += resp_size(entry, resp)
            if len(taken) == 1:
                self.size += key_size(key, resp)
        if not taken:
            self.size += key_size(key, resp)
        return taken


def options(count: int, maxcount: int, maxsize: int) -> list[Any]:
    out: list[Any] = []
    if count:
        out += ["COUNT", count]
    if maxcount:
        out += ["MAXCOUNT", maxcount]
    if maxsize:
        out += ["MAXSIZE", maxsize]
    return out


# ---------------------------------------------------------------------------------------------
# Errors and parsing


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["MAXCOUNT", 0], "ERR MAXCOUNT must be a positive integer"),
        (["MAXCOUNT", -3], "ERR MAXCOUNT must be a positive integer"),
        (["MAXSIZE", 0], "ERR MAXSIZE must be a positive integer"),
        (["MAXSIZE", -1], "ERR MAXSIZE must be a positive integer"),
        (["MAXCOUNT", "x"], "ERR value is not an integer or out of range"),
        (["MAXSIZE", "1.5"], "ERR value is not an integer or out of range"),
        (["MAXCOUNT", "01"], "ERR value is not an integer or out of range"),
        (["COUNT", 3, "MAXCOUNT", 2], "ERR MAXCOUNT must be greater than or equal to COUNT"),
        (["MAXCOUNT", 2, "COUNT", 3], "ERR MAXCOUNT must be greater than or equal to COUNT"),
    ],
)
@pytest.mark.parametrize("group", [False, True])
def test_errors(h: Harness, args: list[Any], text: str, group: bool) -> None:
    c = h.client()
    h.call(c, "XADD", "s1", "1-0", "f", "v")
    h.call(c, "XGROUP", "CREATE", "s1", "g", "0")
    head = ["XREADGROUP", "GROUP", "g", "c"] if group else ["XREAD"]
    assert error_text(h.call(c, *head, *args, "STREAMS", "s1", ">" if group else "0")) == text
    if group:
        assert h.call(c, "XINFO", "CONSUMERS", "s1", "g") == []  # rejected before any work


def test_error_order_follows_the_arguments(h: Harness) -> None:
    c = h.client()
    # each option is checked where it stands; MAXCOUNT < COUNT only after all of them
    reply = h.call(c, "XREAD", "MAXCOUNT", 0, "COUNT", "x", "STREAMS", "s", "0")
    assert error_text(reply) == "ERR MAXCOUNT must be a positive integer"
    reply = h.call(c, "XREAD", "COUNT", "x", "MAXCOUNT", 0, "STREAMS", "s", "0")
    assert error_text(reply) == "ERR value is not an integer or out of range"
    reply = h.call(c, "XREAD", "COUNT", 3, "MAXCOUNT", 2, "STREAMS", "s")
    assert error_text(reply).startswith("ERR Unbalanced 'xread' list of streams")
    reply = h.call(c, "XREADGROUP", "COUNT", 3, "MAXCOUNT", 2, "STREAMS", "s", ">")
    assert error_text(reply) == "ERR Missing GROUP option for XREADGROUP"
    reply = h.call(c, "XREAD", "COUNT", 3, "MAXCOUNT", 2, "GROUP", "g", "c", "STREAMS", "s", "0")
    assert error_text(reply).startswith("ERR The GROUP option is only supported by XREADGROUP")


def test_raw_error_bytes_in_both_protocols(h: Harness) -> None:
    c = h.client()
    for resp in (2, 3):
        h.call(c, "HELLO", resp)
        h.engine.execute(c, [b"XREAD", b"MAXSIZE", b"0", b"STREAMS", b"s", b"0"])
        assert h.raw(c) == b"-ERR MAXSIZE must be a positive integer\r\n"


def test_repeated_options_last_wins_and_case_is_ignored(h: Harness) -> None:
    c = h.client()
    for n in range(1, 6):
        h.call(c, "XADD", "s1", f"{n}-0", "f", "v")
    reply = h.call(c, "XREAD", "MAXCOUNT", 1, "maxcount", 3, "STREAMS", "s1", "0")
    assert [e[0] for e in reply[0][1]] == [b"1-0", b"2-0", b"3-0"]
    reply = h.call(c, "XREAD", "MaxSize", 1, "MAXSIZE", 100_000, "STREAMS", "s1", "0")
    assert len(reply[0][1]) == 5
    # MAXCOUNT >= COUNT is checked on the final values
    reply = h.call(c, "XREAD", "COUNT", 4, "MAXCOUNT", 2, "COUNT", 1, "STREAMS", "s1", "0")
    assert [e[0] for e in reply[0][1]] == [b"1-0"]


def test_count_zero_or_negative_is_no_count_for_the_check(h: Harness) -> None:
    c = h.client()
    for n in range(1, 4):
        h.call(c, "XADD", "s1", f"{n}-0", "f", "v")
    for count in (0, -5):
        reply = h.call(c, "XREAD", "COUNT", count, "MAXCOUNT", 2, "STREAMS", "s1", "0")
        assert len(reply[0][1]) == 2


# ---------------------------------------------------------------------------------------------
# Semantics, by example


def fill(h: Harness, c: Any, sizes: dict[str, list[int]]) -> None:
    for key, values in sizes.items():
        for n, size in enumerate(values, 1):
            h.call(c, "XADD", key, f"{n}-0", "f", "x" * size)


def test_maxcount_fills_from_the_first_stream(h: Harness) -> None:
    c = h.client()
    fill(h, c, {k: [1, 1, 1] for k in KEYS})
    reply = h.call(c, "XREAD", "COUNT", 2, "MAXCOUNT", 3, "STREAMS", *KEYS, 0, 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 2), (b"s2", 1)]
    reply = h.call(c, "XREAD", "MAXCOUNT", 4, "STREAMS", *KEYS, 0, 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 3), (b"s2", 1)]
    # a stream with nothing to serve does not use the budget
    reply = h.call(c, "XREAD", "MAXCOUNT", 2, "STREAMS", "nosuch", "s3", 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s3", 2)]


def test_maxsize_returns_at_least_one_entry_and_stops_once_reached(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [1000, 1, 1], "s2": [1]})
    reply = h.call(c, "XREAD", "MAXSIZE", 1, "STREAMS", "s1", "s2", 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 1)]  # oversized, still sent
    small = resp_size(((2, 0), [b"f", b"x"]))
    # the key "s1" (RESP2: "*2\r\n$2\r\ns1\r\n", 12 bytes) and the first entry
    first = key_size("s1") + resp_size(((1, 0), [b"f", b"x" * 1000]))
    assert key_size("s1") == 12 and key_size("s1", 3) == 8
    # the check is "already reached?", before each entry: the budget may be passed by one
    reply = h.call(c, "XREAD", "MAXSIZE", first + 1, "STREAMS", "s1", "s2", 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 2)]
    reply = h.call(c, "XREAD", "MAXSIZE", first + 2 * small + 1, "STREAMS", "s1", "s2", 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 3), (b"s2", 1)]
    reply = h.call(c, "XREAD", "MAXSIZE", first + 2 * small, "STREAMS", "s1", "s2", 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 3)]
    # RESP3 has no "*2" before each key: 4 bytes less, so one more entry fits
    h.call(c, "HELLO", 3)
    reply = h.call(c, "XREAD", "MAXSIZE", first - 3, "STREAMS", "s1", "s2", 0, 0)
    assert [(k, len(e)) for k, e in reply.items()] == [(b"s1", 2)]
    h.call(c, "HELLO", 2)
    reply = h.call(c, "XREAD", "MAXSIZE", first - 3, "STREAMS", "s1", "s2", 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 1)]


def test_whichever_bound_hits_first_wins(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [10] * 5})
    size = resp_size(((1, 0), [b"f", b"x" * 10]))
    reply = h.call(c, "XREAD", "MAXCOUNT", 2, "MAXSIZE", 10 * size, "STREAMS", "s1", 0)
    assert len(reply[0][1]) == 2
    reply = h.call(c, "XREAD", "MAXCOUNT", 4, "MAXSIZE", size, "STREAMS", "s1", 0)
    assert len(reply[0][1]) == 1


def test_plus_id_counts_against_the_caps(h: Harness) -> None:
    c = h.client()
    fill(h, c, {k: [1, 1] for k in KEYS})
    reply = h.call(c, "XREAD", "MAXCOUNT", 2, "STREAMS", *KEYS, "+", "+", "+")
    assert [(k, [e[0] for e in v]) for k, v in reply] == [(b"s1", [b"2-0"]), (b"s2", [b"2-0"])]


def test_a_key_named_twice_shares_the_budget(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [1] * 3})
    reply = h.call(c, "XREAD", "MAXCOUNT", 4, "STREAMS", "s1", "s1", 0, 0)
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 3), (b"s1", 1)]


def test_large_stream_small_maxsize_encodes_little(h: Harness) -> None:
    c = h.client()
    for n in range(1, 5001):
        h.call(c, "XADD", "big", f"{n}-0", "f", "v")
    reply = h.call(c, "XREAD", "MAXSIZE", 100, "STREAMS", "big", 0)
    assert len(reply[0][1]) == 3  # the key, 13 bytes, then 31 bytes each: the 3rd reaches 100
    reply = h.call(c, "XREAD", "MAXSIZE", 100_000, "COUNT", 4000, "STREAMS", "big", 0)
    entries: list[Entry] = [((n, 0), [b"f", b"v"]) for n in range(1, 5001)]
    expected = len(Caps(0, 100_000).take("big", entries, 4000))
    assert 2000 < expected < 4000  # over several chunks, stopped by MAXSIZE
    assert len(reply[0][1]) == expected
    reply = h.call(c, "XREAD", "MAXSIZE", 10**9, "STREAMS", "big", "4990")
    assert [e[0] for e in reply[0][1]][-1] == b"5000-0"


def test_resp3_map_with_caps(h: Harness) -> None:
    c = h.client()
    fill(h, c, {k: [1, 1] for k in KEYS})
    h.call(c, "HELLO", 3)
    h.engine.execute(c, [b"XREAD", b"MAXCOUNT", b"3", b"STREAMS", b"s1", b"s2", b"0", b"0"])
    raw = h.raw(c)
    assert raw.startswith(b"%2\r\n$2\r\ns1\r\n*2\r\n")
    assert raw.count(b"*2\r\n$3\r\n") == 3  # three entries in all
    h.call(c, "HELLO", 2)
    h.engine.execute(c, [b"XREAD", b"MAXCOUNT", b"3", b"STREAMS", b"s1", b"s2", b"0", b"0"])
    raw2 = h.raw(c)
    assert raw2.startswith(b"*2\r\n*2\r\n$2\r\ns1\r\n*2\r\n")
    assert decode_all(raw2) == [[k, v] for k, v in decode_all(raw).items()]


def test_blocked_xread_is_served_with_the_same_caps(h: Harness) -> None:
    c, w = h.client(), h.client()
    h.call(w, "XADD", "s1", "1-0", "f", "v")
    h.call(w, "XADD", "s2", "1-0", "f", "v")
    blocking = "XREAD MAXCOUNT 2 BLOCK 0 STREAMS s1 s2 $ $"
    h.engine.execute(c, [arg.encode() for arg in blocking.split()])
    assert h.raw(c) == b""
    h.call(w, "MULTI")
    for n in (2, 3, 4):
        h.call(w, "XADD", "s1", f"{n}-0", "f", "v")
    h.call(w, "XADD", "s2", "2-0", "f", "v")
    h.call(w, "EXEC")
    reply = decode_all(h.raw(c))
    assert [(k, [e[0] for e in v]) for k, v in reply] == [(b"s1", [b"2-0", b"3-0"])]


# ---------------------------------------------------------------------------------------------
# XREADGROUP


def pending(h: Harness, key: str, group: str = "g") -> dict[bytes, tuple[bytes, int]]:
    stream = h.engine.keyspace.dbs[0].get(key.encode())
    assert isinstance(stream, Stream)
    grp = stream.groups[group.encode()]
    grp.check_invariants()
    return {b"%d-%d" % key_id(k): (n[2], n[1]) for k, n in grp.pel.items()}


def group_position(h: Harness, key: str, group: str = "g") -> tuple[bytes, int]:
    stream = h.engine.keyspace.dbs[0].get(key.encode())
    assert isinstance(stream, Stream)
    grp = stream.groups[group.encode()]
    return b"%d-%d" % grp.last_id, grp.entries_read


def test_xreadgroup_skipped_entries_are_not_delivered(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [1, 1, 1], "s2": [1, 1]})
    for key in ("s1", "s2"):
        h.call(c, "XGROUP", "CREATE", key, "g", "0")
    size = resp_size(((1, 0), [b"f", b"x"]))
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "a", "MAXSIZE", 2 * size, "STREAMS", "s1", "s2", ">", ">"
    )
    assert [(k, len(e)) for k, e in reply] == [(b"s1", 2)]
    assert pending(h, "s1") == {b"1-0": (b"a", 1), b"2-0": (b"a", 1)}
    assert group_position(h, "s1") == (b"2-0", 2)
    assert pending(h, "s2") == {} and group_position(h, "s2") == (b"0-0", -1)
    # s2 was not looked at: the consumer was not even created there
    assert h.call(c, "XINFO", "CONSUMERS", "s2", "g") == []
    # the next read carries on where the capped one stopped
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "a", "MAXCOUNT", 2, "STREAMS", "s1", "s2", ">", ">"
    )
    assert [(k, [e[0] for e in v]) for k, v in reply] == [(b"s1", [b"3-0"]), (b"s2", [b"1-0"])]


def test_xreadgroup_noack_with_caps_moves_only_past_what_was_sent(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [1] * 4})
    h.call(c, "XGROUP", "CREATE", "s1", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "NOACK", "MAXCOUNT", 3, "STREAMS", "s1", ">")
    assert pending(h, "s1") == {} and group_position(h, "s1") == (b"3-0", 3)


def test_xreadgroup_history_read_is_capped_and_only_sent_entries_count(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [1] * 4, "s2": [1] * 2})
    for key in ("s1", "s2"):
        h.call(c, "XGROUP", "CREATE", key, "g", "0")
        h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", key, ">")
    h.call(c, "XDEL", "s1", "2-0")
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "a", "MAXCOUNT", 3, "STREAMS", "s1", "s2", "0", "0"
    )
    assert reply == [[b"s1", [[b"1-0", [b"f", b"x"]], [b"2-0", None], [b"3-0", [b"f", b"x"]]]]]
    assert pending(h, "s1") == {
        b"1-0": (b"a", 2),
        b"2-0": (b"a", 1),
        b"3-0": (b"a", 2),
        b"4-0": (b"a", 1),
    }
    assert pending(h, "s2") == {b"1-0": (b"a", 1), b"2-0": (b"a", 1)}
    # MAXSIZE: the deleted entry is charged as [id, nil] in the client's protocol
    for resp, nil in ((2, 5), (3, 3)):
        h.call(c, "HELLO", resp)
        first = key_size("s1", resp) + resp_size(((1, 0), [b"f", b"x"]))
        size = first + len(b"*2\r\n$3\r\n2-0\r\n") + nil
        args = ["XREADGROUP", "GROUP", "g", "a", "MAXSIZE", size, "STREAMS", "s1", "s2", 0, 0]
        reply = h.call(c, *args)
        entries = reply[b"s1"] if resp == 3 else reply[0][1]
        assert [e[0] for e in entries] == [b"1-0", b"2-0"], resp
        args[5] = size + 1
        reply = h.call(c, *args)
        entries = reply[b"s1"] if resp == 3 else reply[0][1]
        assert [e[0] for e in entries] == [b"1-0", b"2-0", b"3-0"], resp


def test_xreadgroup_claim_counts_claimed_entries(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [1] * 4})
    h.call(c, "XGROUP", "CREATE", "s1", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "COUNT", 2, "STREAMS", "s1", ">")
    h.clock.advance(100)
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "b", "CLAIM", 50, "MAXCOUNT", 3, "STREAMS", "s1", ">"
    )
    assert [(e[0], e[2], e[3]) for e in reply[0][1]] == [
        (b"1-0", 100, 1),
        (b"2-0", 100, 1),
        (b"3-0", 0, 0),
    ]
    assert pending(h, "s1") == {b"1-0": (b"b", 2), b"2-0": (b"b", 2), b"3-0": (b"b", 1)}
    # MAXSIZE: the claimed entries are charged with their idle time and count
    h.clock.advance(100)
    claimed = len(b"*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nx\r\n:100\r\n:2\r\n")
    claimed += key_size("s1")  # charged with the first entry
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "a", "CLAIM", 50, "MAXSIZE", claimed, "STREAMS", "s1", ">"
    )
    assert [e[0] for e in reply[0][1]] == [b"1-0"]
    assert pending(h, "s1")[b"2-0"] == (b"b", 2)  # not claimed: left out by MAXSIZE
    reply = h.call(
        c,
        "XREADGROUP",
        "GROUP",
        "g",
        "a",
        "CLAIM",
        50,
        "MAXSIZE",
        claimed + 1,
        "STREAMS",
        "s1",
        ">",
    )
    assert [e[0] for e in reply[0][1]] == [b"2-0", b"3-0"]  # 1-0 is not idle now


def test_blocked_xreadgroup_is_served_with_the_same_caps(h: Harness) -> None:
    c, w = h.client(), h.client()
    fill(h, w, {"s1": [1]})
    h.call(w, "XGROUP", "CREATE", "s1", "g", "$")
    blocking = "XREADGROUP GROUP g a MAXCOUNT 2 BLOCK 0 STREAMS s1 >"
    h.engine.execute(c, [arg.encode() for arg in blocking.split()])
    assert h.raw(c) == b""
    h.call(w, "MULTI")
    for n in (2, 3, 4):
        h.call(w, "XADD", "s1", f"{n}-0", "f", "v")
    h.call(w, "EXEC")
    reply = decode_all(h.raw(c))
    assert [e[0] for e in reply[0][1]] == [b"2-0", b"3-0"]
    assert set(pending(h, "s1")) == {b"2-0", b"3-0"}
    assert group_position(h, "s1")[0] == b"3-0"


# ---------------------------------------------------------------------------------------------
# Model tests


# A few value lengths, so that entry sizes repeat and MAXSIZE often lands exactly on a sum of
# them (31, 36 and 52 bytes for a one-field entry with a one-digit ID): the boundary cases.
values = st.sampled_from([0, 0, 5, 20, 40]).map(lambda n: b"x" * n)
stream_contents = st.lists(st.lists(values, min_size=1, max_size=2), max_size=8)
maxsizes = st.one_of(
    st.just(0),
    st.integers(1, 300),
    st.lists(st.sampled_from([31, 36, 52]), min_size=1, max_size=5).map(sum),
)
caps_args = st.tuples(st.integers(0, 4), st.integers(0, 12), maxsizes)


@st.composite
def read_calls(draw: st.DrawFn) -> tuple[list[str], list[int], tuple[int, int, int], int]:
    keys = draw(st.lists(st.sampled_from([*KEYS, "missing"]), min_size=1, max_size=4))
    afters = [draw(st.integers(0, 8)) for _ in keys]
    count, maxcount, maxsize = draw(caps_args)
    if maxcount and count > maxcount:
        count = maxcount
    # > 0: MAXSIZE is set to exactly the bytes of the first n entries the call would send,
    # (odd n: plus one), the boundary a strict or loose comparison gets wrong
    boundary = draw(st.sampled_from([0, 0, 1, 2, 3, 4, 5]))
    return keys, afters, (count, maxcount, maxsize), boundary


def boundary_size(
    model: dict[str, list[Entry]], keys: list[str], afters: list[int], count: int, n: int, resp: int
) -> int:
    """The reply bytes after the first (n + 1) // 2 entries, plus one for odd n."""
    sizes = []
    for key, after in zip(keys, afters, strict=True):
        newer = [e for e in model.get(key, []) if e[0] > (after, 0)]
        newer = newer[:count] if count else newer
        sizes += [resp_size(e, resp) + (key_size(key, resp) if i == 0 else 0)
                  for i, e in enumerate(newer)]  # fmt: skip
    return max(sum(sizes[: (n + 1) // 2]) + n % 2, 1)


def make_streams(h: Harness, c: Any, contents: list[list[list[bytes]]]) -> dict[str, list[Entry]]:
    model: dict[str, list[Entry]] = {}
    for key, entries in zip(KEYS, contents, strict=False):
        model[key] = []
        for n, vals in enumerate(entries, 1):
            pairs = [item for i, v in enumerate(vals) for item in (b"f%d" % i, v)]
            h.call(c, "XADD", key, f"{n}-0", *pairs)
            model[key].append(((n, 0), pairs))
    return model


@settings(max_examples=150, deadline=None)
@given(
    st.lists(stream_contents, min_size=3, max_size=3),
    st.lists(read_calls(), min_size=1, max_size=5),
    st.sampled_from([2, 3]),
)
def test_xread_matches_the_model(
    contents: list[list[list[bytes]]], calls: list[Any], resp: int
) -> None:
    h = Harness()
    c = h.client()
    model = make_streams(h, c, contents)
    h.call(c, "HELLO", resp)
    for keys, afters, (count, maxcount, maxsize), boundary in calls:
        if boundary:
            maxsize = boundary_size(model, keys, afters, count, boundary, resp)
        caps = Caps(maxcount, maxsize)
        served: list[tuple[str, list[Entry]]] = []
        for key, after in zip(keys, afters, strict=True):
            if caps.full():
                break
            newer = [e for e in model.get(key, []) if e[0] > (after, 0)]
            if newer:
                served.append((key, caps.take(key, newer, count, resp)))
        args = ["XREAD", *options(count, maxcount, maxsize), "STREAMS", *keys, *map(str, afters)]
        h.engine.execute(c, [str(a).encode() for a in args])
        assert h.raw(c) == encode_reply(served, resp), args  # byte for byte


group_ops = st.one_of(
    st.tuples(
        st.just("new"),
        st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
        caps_args,
        st.booleans(),
        st.sampled_from(["a", "b"]),
    ),
    st.tuples(
        st.just("history"),
        st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
        caps_args,
        st.integers(0, 6),
        st.sampled_from(["a", "b"]),
    ),
    st.tuples(st.just("add"), st.sampled_from(KEYS), st.lists(values, min_size=1, max_size=2)),
    st.tuples(st.just("del"), st.sampled_from(KEYS), st.integers(1, 8)),
    st.tuples(st.just("ack"), st.sampled_from(KEYS), st.integers(1, 8)),
)


class GroupModel:
    """One group "g" on every stream: position and PEL, as plain dicts."""

    def __init__(self, streams: dict[str, list[Entry]], resp: int) -> None:
        self.streams = streams
        self.resp = resp
        self.last = dict.fromkeys(streams, (0, 0))
        self.pel: dict[str, dict[tuple[int, int], list[Any]]] = {k: {} for k in streams}

    def read_new(self, keys: list[str], caps: Caps, count: int, noack: bool, who: str) -> Any:
        served: list[tuple[str, list[Entry]]] = []
        for key in keys:
            if caps.full():
                break
            newer = [e for e in self.streams[key] if e[0] > self.last[key]]
            if not newer:
                continue
            taken = caps.take(key, newer, count, self.resp)
            self.last[key] = taken[-1][0]
            for sid, _ in taken:
                if not noack:
                    self.pel[key][sid] = [who, 1]
            served.append((key, taken))
        return served

    def read_history(self, keys: list[str], caps: Caps, count: int, after: int, who: str) -> Any:
        served: list[tuple[str, list[Entry]]] = []
        live = {k: dict(v) for k, v in self.streams.items()}
        for key in keys:
            if caps.full():
                break
            mine = sorted(s for s, n in self.pel[key].items() if n[0] == who and s > (after, 0))
            entries: list[Entry] = [(s, live[key].get(s, [])) for s in mine]
            taken = caps.take(key, entries, count, self.resp)
            for sid, pairs in taken:
                if pairs:
                    self.pel[key][sid][1] += 1
            served.append((key, taken))
        return served


@settings(max_examples=150, deadline=None)
@given(
    st.lists(stream_contents, min_size=3, max_size=3),
    st.lists(group_ops, min_size=4, max_size=16),
    st.sampled_from([2, 3]),
)
def test_xreadgroup_matches_the_model(
    contents: list[list[list[bytes]]], ops: list[Any], resp: int
) -> None:
    h = Harness()
    c = h.client()
    streams = make_streams(h, c, contents)
    top = {key: len(entries) for key, entries in streams.items()}  # the last ID ever added
    for key in KEYS:
        h.call(c, "XGROUP", "CREATE", key, "g", "0", "MKSTREAM")
    model = GroupModel(streams, resp)
    h.call(c, "HELLO", resp)
    for op in ops:
        kind = op[0]
        if kind == "add":
            key, vals = op[1], op[2]
            top[key] += 1
            sid = (top[key], 0)
            pairs = [item for i, v in enumerate(vals) for item in (b"f%d" % i, v)]
            h.call(c, "XADD", key, f"{sid[0]}-{sid[1]}", *pairs)
            streams[key].append((sid, pairs))
            continue
        if kind == "del":
            key, n = op[1], op[2]
            h.call(c, "XDEL", key, f"{n}-0")
            streams[key] = [e for e in streams[key] if e[0] != (n, 0)]
            continue
        if kind == "ack":
            key, n = op[1], op[2]
            h.call(c, "XACK", key, "g", f"{n}-0")
            model.pel[key].pop((n, 0), None)
            continue
        keys, (count, maxcount, maxsize), extra, who = op[1], op[2], op[3], op[4]
        if maxcount and count > maxcount:
            count = maxcount
        caps = Caps(maxcount, maxsize)
        head = ["XREADGROUP", "GROUP", "g", who, *options(count, maxcount, maxsize)]
        if kind == "new":
            noack = extra
            served = model.read_new(keys, caps, count, noack, who)
            args = [*head, *(["NOACK"] if noack else []), "STREAMS", *keys, *([">"] * len(keys))]
        else:
            served = model.read_history(keys, caps, count, extra, who)
            args = [*head, "STREAMS", *keys, *([str(extra)] * len(keys))]
        h.engine.execute(c, [str(a).encode() for a in args])
        assert h.raw(c) == encode_reply(served, resp), args  # byte for byte
        for key in KEYS:
            ours = pending(h, key)
            theirs = {b"%d-%d" % s: (n[0].encode(), n[1]) for s, n in model.pel[key].items()}
            assert ours == theirs, (key, args)
            assert group_position(h, key)[0] == b"%d-%d" % model.last[key]


# ---------------------------------------------------------------------------------------------
# COMMAND DOCS / COMMAND INFO


def _arguments(docs: Any) -> dict[bytes, dict[bytes, Any]]:
    pairs = dict(zip(docs[0::2], docs[1::2], strict=True))
    out = {}
    for arg in pairs[b"arguments"]:
        fields = dict(zip(arg[0::2], arg[1::2], strict=True))
        out[fields[b"name"]] = fields
    return out


@pytest.mark.parametrize("command", ["xread", "xreadgroup"])
def test_command_docs_describe_the_caps(h: Harness, command: str) -> None:
    c = h.client()
    name, docs = h.call(c, "COMMAND", "DOCS", command)
    assert name == command.encode()
    args = _arguments(docs)
    order = list(args)
    for cap, token in ((b"maxcount", b"MAXCOUNT"), (b"maxsize", b"MAXSIZE")):
        assert args[cap][b"token"] == token
        assert args[cap][b"type"] == b"integer"
        assert args[cap][b"since"] == b"8.10.0"
        assert args[cap][b"flags"] == [b"optional"]
    # the documented order: COUNT, MAXCOUNT, MAXSIZE, BLOCK
    at = order.index(b"count")
    assert order[at : at + 4] == [b"count", b"maxcount", b"maxsize", b"milliseconds"]
    history = dict(zip(docs[0::2], docs[1::2], strict=True))[b"history"]
    assert [b"8.10.0", b"Added the `MAXCOUNT` and `MAXSIZE` options."] in history
    if command == "xreadgroup":
        assert args[b"min-idle-time"][b"token"] == b"CLAIM"
        assert args[b"min-idle-time"][b"since"] == b"8.4.0"
    # COMMAND INFO is unchanged: same arity, flags and key specs as before the options
    info = h.call(c, "COMMAND", "INFO", command)[0]
    assert info[1] == (-4 if command == "xread" else -7)
    assert b"movablekeys" in info[2] and b"blocking" in info[2]


def test_nacked_entries_are_claimed_first_within_the_caps(h: Harness) -> None:
    c = h.client()
    fill(h, c, {"s1": [1] * 4})
    h.call(c, "XGROUP", "CREATE", "s1", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "COUNT", 3, "STREAMS", "s1", ">")
    assert h.call(c, "XNACK", "s1", "g", "SILENT", "IDS", 1, "3-0") == 1
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "b", "CLAIM", 10_000, "MAXCOUNT", 2, "STREAMS", "s1", ">"
    )
    # the nacked entry first (claimable whatever min-idle says; 1-0 and 2-0 are not idle
    # enough), then the new 4-0: two entries, MAXCOUNT reached
    assert [e[0] for e in reply[0][1]] == [b"3-0", b"4-0"]
    h.call(c, "XNACK", "s1", "g", "SILENT", "IDS", 2, "1-0", "2-0")
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "b", "CLAIM", 10_000, "MAXCOUNT", 1, "STREAMS", "s1", ">"
    )
    assert [e[0] for e in reply[0][1]] == [b"1-0"]  # nacked first-in, first-out
    assert pending(h, "s1")[b"2-0"][0] is None  # left out by MAXCOUNT: still unowned
