"""Headwater's replication stream as a Redis 7.0 replica gets it (replication/dialect.py):
each extension rewritten or left out, everything else untouched."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from headwater.rdb import payload
from headwater.replication.dialect import _ADD_UNLESS_THERE as ADD_UNLESS_THERE
from headwater.replication.dialect import DROPPED, for_redis_70
from tests.unit.conftest import Harness


def words(*parts: str) -> list[bytes]:
    return [part.encode() for part in parts]


def test_xadd_loses_its_idmp_and_strategy_options_and_keeps_the_rest() -> None:
    sent = words(
        "XADD", "s", "NOMKSTREAM", "IDMP", "p", "i", "DELREF", "MAXLEN", "=", "10", "LIMIT", "0",
        "1-1", "f", "IDMP",
    )  # fmt: skip
    kept = words("s", "NOMKSTREAM", "MAXLEN", "=", "10", "LIMIT", "0", "1-1", "f", "IDMP")
    # (in an EVAL that ignores the error of a duplicate, whose ID the replica holds)
    assert for_redis_70(sent) == [[b"EVAL", ADD_UNLESS_THERE, b"1", *kept]]
    assert for_redis_70(words("XADD", "s", "IDMPAUTO", "p", "2-0", "a", "b")) == [
        [b"EVAL", ADD_UNLESS_THERE, b"1", *words("s", "2-0", "a", "b")]
    ]
    assert for_redis_70(words("XADD", "s", "DELREF", "3-0", "a", "b")) == [
        words("XADD", "s", "3-0", "a", "b")
    ]


def test_the_delete_and_ack_extensions_become_7_0_commands() -> None:
    assert for_redis_70(words("XDELEX", "s", "ACKED", "IDS", "2", "1-1", "1-2")) == [
        words("XDEL", "s", "1-1", "1-2")
    ]
    assert for_redis_70(words("XACKDEL", "s", "g", "IDS", "1", "1-1")) == [
        words("XACK", "s", "g", "1-1"),
        words("XDEL", "s", "1-1"),
    ]
    assert for_redis_70(words("XTRIM", "s", "MINID", "=", "5-0", "KEEPREF")) == [
        words("XTRIM", "s", "MINID", "=", "5-0")
    ]


def test_what_7_0_has_no_place_for_is_left_out() -> None:
    for name in DROPPED:
        assert for_redis_70([name.upper(), b"k", b"x"]) == []


@given(st.lists(st.binary(max_size=8), min_size=1, max_size=6))
def test_a_7_0_command_is_sent_as_it_is(args: list[bytes]) -> None:
    for name in (b"SET", b"HSET", b"XACK", b"EXPIRE", b"XGROUP"):
        argv = [name, *args]
        assert for_redis_70(argv) == [argv]


def test_a_newer_restore_payload_is_written_again_as_redis_7_0s() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    h.call(c, "HSET", "h", "a", "1", "b", "2")
    h.call(c, "HPEXPIRE", "h", 100_000, "FIELDS", 1, "a")
    for key in ("s", "h"):
        newer = h.call(c, "DUMP", key)
        assert payload.verify(newer) > payload.VERSION_7_0
        [sent] = for_redis_70([b"RESTORE", b"k", b"0", newer, b"REPLACE"])
        assert sent[:3] == [b"RESTORE", b"k", b"0"] and sent[4:] == [b"REPLACE"]
        assert payload.verify(sent[3]) == payload.VERSION_7_0
        assert h.call(c, "RESTORE", key + "70", 0, sent[3]) == b"OK"
    assert h.call(c, "XRANGE", "s70", "-", "+") == h.call(c, "XRANGE", "s", "-", "+")
    info = h.call(c, "XINFO", "STREAM", "s70")
    assert dict(zip(info[0::2], info[1::2], strict=True))[b"pids-tracked"] == 0  # no history
    assert h.call(c, "HGETALL", "h70") == [b"a", b"1", b"b", b"2"]
    assert h.call(c, "HPTTL", "h70", "FIELDS", 1, "a") == [-1]
    plain = h.call(c, "DUMP", "s70")
    for untouched in (plain, b"not a payload"):
        assert for_redis_70([b"RESTORE", b"k", b"0", untouched]) == [
            [b"RESTORE", b"k", b"0", untouched]
        ]
