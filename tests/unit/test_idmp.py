"""Idempotent producers in process: the IDMPAUTO hash, duplicates, effects and their replay,
XCFGSET and XIDMPRECORD."""

from __future__ import annotations

import itertools
import shlex

import pytest
import xxhash

from headwater.stream.idmp import IdmpState, auto_iid
from tests.unit.conftest import Harness, error_text

M64 = 2**64 - 1


def reference_iid(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """STREAMS-REFERENCE §2.1, written independently of the server's code: the canonical
    (big-endian) XXH3-128 digest split into its halves, combined with wrapping sums and XORs."""
    sums = [0, 0]
    xors = [0, 0]
    for name, value in pairs:
        digest = xxhash.xxh3_128(name + len(name).to_bytes(8, "little") + value).digest()
        high, low = int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big")
        sums = [(sums[0] + low) & M64, (sums[1] + high) & M64]
        xors = [xors[0] ^ low, xors[1] ^ high]

    def rotl1(x: int) -> int:
        return ((x << 1) & M64) | (x >> 63)

    low = sums[0] ^ rotl1(xors[1])
    high = sums[1] ^ rotl1(xors[0])
    return low.to_bytes(8, "little") + high.to_bytes(8, "little")


@pytest.mark.parametrize(
    "pairs",
    [
        [(b"f", b"v")],
        [(b"name", b"alice"), (b"age", b"42"), (b"", b"")],
        [(b"k" * 300, b"\x00\xff" * 1000), (b"x", b"")],
        [(bytes([i]), bytes([255 - i]) * i) for i in range(40)],
    ],
)
def test_auto_iid_matches_an_independent_implementation(pairs: list[tuple[bytes, bytes]]) -> None:
    flat = [x for pair in pairs for x in pair]
    assert auto_iid(flat) == reference_iid(pairs)
    assert len(auto_iid(flat)) == 16


def test_auto_iid_ignores_pair_order_but_not_names() -> None:
    pairs = [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    iids = {auto_iid([x for p in perm for x in p]) for perm in itertools.permutations(pairs)}
    assert len(iids) == 1
    assert auto_iid([b"a", b"1"]) != auto_iid([b"b", b"1"])
    # the length is hashed between name and value, so moving bytes across the boundary counts
    assert auto_iid([b"ab", b"c"]) != auto_iid([b"a", b"bc"])


def test_state_evicts_the_oldest_and_expires_from_the_front() -> None:
    state = IdmpState()
    for n in range(5):
        state.record(b"p", b"i%d" % n, (1000 * n, 0), maxsize=3)
    assert list(state.producers[b"p"].iids) == [b"i2", b"i3", b"i4"]
    assert (state.tracked, state.added) == (3, 5)
    assert state.expire(cutoff_ms=3000) == 2
    assert list(state.producers[b"p"].iids) == [b"i4"]
    assert state.expire(cutoff_ms=9000) == 1
    assert state.producers == {}
    state.check_invariants(3)


def test_many_pops_from_the_front_stay_cheap_and_correct() -> None:
    state = IdmpState()
    for n in range(10_000):
        state.record(b"p", b"%d" % n, (n, 0), maxsize=10)
    assert list(state.producers[b"p"].iids) == [b"%d" % n for n in range(9990, 10_000)]
    state.check_invariants(10)


def test_duplicate_adds_nothing_trims_nothing_wakes_nobody() -> None:
    h = Harness()
    c, reader = h.client(), h.client()
    first = h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    h.call(c, "XADD", "s", "*", "f", "w")
    h.call(reader, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    h.effects.clear()
    again = h.call(c, "XADD", "s", "IDMP", "p", "i", "MAXLEN", "0", "*", "f", "other")
    assert again == first
    assert h.call(c, "XLEN", "s") == 2  # not trimmed either
    assert reader.gate.blocked is not None
    # propagated with the original ID, so that replays count the retry too (Redis 8.6.2+)
    retry = [b"XADD", b"s", b"IDMP", b"p", b"i", b"MAXLEN", b"0", first, b"f", b"other"]
    assert h.effects == [(0, retry)]
    info = h.call(c, "XINFO", "STREAM", "s")
    counters = dict(zip(info[0::2], info[1::2], strict=True))
    assert [counters[k] for k in (b"pids-tracked", b"iids-tracked", b"iids-added")] == [1, 1, 1]
    assert counters[b"iids-duplicates"] == 1


def test_producers_and_streams_are_isolated() -> None:
    h = Harness()
    c = h.client()
    a = h.call(c, "XADD", "s", "IDMP", "p1", "i", "*", "f", "v")
    b = h.call(c, "XADD", "s", "IDMP", "p2", "i", "*", "f", "v")
    t = h.call(c, "XADD", "t", "IDMP", "p1", "i", "*", "f", "v")
    assert len({a, b}) == 2
    assert h.call(c, "XLEN", "t") == 1
    assert h.call(c, "XADD", "t", "IDMP", "p1", "i", "*", "f", "v") == t


def test_effects_keep_idmp_and_replay_rebuilds_the_maps() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "IDMP", "p", "i1", "*", "f", "v")
    h.call(c, "XADD", "s", "IDMPAUTO", "p", "MAXLEN", "~", "10", "*", "f", "w")
    h.call(c, "XCFGSET", "s", "IDMP-MAXSIZE", "100")  # unchanged: not propagated
    h.call(c, "XADD", "s", "IDMP", "p", "i1", "*", "f", "dup")  # a retry: its original ID
    now = h.clock.now_ms()
    assert [argv for _, argv in h.effects] == [
        [b"XADD", b"s", b"IDMP", b"p", b"i1", b"%d-0" % now, b"f", b"v"],
        [b"XADD", b"s", b"IDMPAUTO", b"p", b"MAXLEN", b"=", b"2", b"%d-1" % now, b"f", b"w"],
        [b"XADD", b"s", b"IDMP", b"p", b"i1", b"%d-0" % now, b"f", b"dup"],
    ]
    replica = Harness()
    r = replica.client()
    r.replaying = True
    for _, argv in h.effects:
        replica.engine.execute(r, list(argv))
    assert not replica.raw(r).startswith(b"-")
    plain = replica.client()
    assert replica.call(plain, "XADD", "s", "IDMPAUTO", "p", "*", "f", "w") == b"%d-1" % now
    assert replica.call(plain, "XADD", "s", "IDMP", "p", "i1", "*", "f", "x") == b"%d-0" % now


def test_a_replayed_retry_of_an_entry_whose_iid_this_side_forgot_is_a_retry() -> None:
    """The primary's retry carries the original ID; a side that no longer tracks the iid
    (but has the entry) learns it again instead of refusing the XADD; a later ID is the
    primary's new entry, appended."""
    replica = Harness()
    r = replica.client()
    r.replaying = True
    for argv in (
        ["XADD", "s", "5-0", "f", "v"],
        ["XADD", "s", "IDMP", "p", "i1", "5-0", "f", "v"],  # i1's entry, iid unknown here
        ["XADD", "s", "IDMP", "p", "i2", "6-0", "f", "w"],
    ):
        replica.engine.execute(r, [a.encode() for a in argv])
        assert not replica.raw(r).startswith(b"-")
    plain = replica.client()
    assert replica.call(plain, "XLEN", "s") == 2
    assert replica.call(plain, "XADD", "s", "IDMP", "p", "i1", "*", "f", "v") == b"5-0"
    assert replica.call(plain, "XADD", "s", "IDMP", "p", "i2", "*", "f", "w") == b"6-0"


def test_xcfgset_clears_history_only_when_a_value_changes() -> None:
    h = Harness()
    c = h.client()
    first = h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    h.effects.clear()
    assert h.call(c, "XCFGSET", "s", "IDMP-DURATION", "100", "IDMP-MAXSIZE", "100") == b"OK"
    assert h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "f", "v") == first
    assert [argv[0] for _, argv in h.effects] == [b"XADD"]  # the retry only: no XCFGSET
    h.effects.clear()
    assert h.call(c, "XCFGSET", "s", "IDMP-MAXSIZE", "7") == b"OK"
    assert [argv for _, argv in h.effects] == [[b"XCFGSET", b"s", b"IDMP-MAXSIZE", b"7"]]
    assert h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "f", "v") != first


ERROR_CASES = [
    ('XCFGSET nokey IDMP-MAXSIZE 5',
     "ERR no such key"),
    ('XCFGSET s',
     "ERR At least one parameter must be specified"),
    ('XCFGSET s IDMP-MAXSIZE',
     "ERR syntax error"),
    ('XCFGSET s BOGUS 1',
     "ERR syntax error"),
    ('XCFGSET s IDMP-MAXSIZE x',
     "ERR value is not an integer or out of range"),
    ('XCFGSET s IDMP-MAXSIZE 0',
     "ERR IDMP-MAXSIZE must be between 1 and 10000 entries"),
    ('XCFGSET s IDMP-DURATION 86401',
     "ERR IDMP-DURATION must be between 1 and 86400 seconds"),
    ('XCFGSET s IDMP-DURATION 5 IDMP-DURATION 5',
     "ERR IDMP-DURATION specified multiple times"),
    ('XCFGSET str IDMP-MAXSIZE 5',
     "WRONGTYPE Operation against a key holding the wrong kind of value"),
    ('XIDMPRECORD s p i bad',
     "ERR Invalid stream ID specified as stream command argument"),
    ("XIDMPRECORD s '' i 1-1",
     "ERR producer ID must be non-empty"),
    ("XIDMPRECORD s p '' 1-1",
     "ERR idempotent ID must be non-empty"),
    ('XIDMPRECORD nokey p i 1-1',
     "ERR no such key"),
    ('XIDMPRECORD s p i 9-9',
     "ERR No such message in stream"),
    ('XIDMPRECORD s p i 2-1',
     "ERR IID already exists for this producer with a different stream ID"),
    ('XIDMP CFGSET s MAXSIZE 10001',
     "ERR MAXSIZE must be between 1 and 10000 entries"),
    ('XIDMP CFGGET s BOGUS',
     "ERR syntax error"),
    ('XIDMP NOPE s',
     "ERR unknown subcommand 'NOPE'. Try XIDMP HELP."),
]  # fmt: skip


@pytest.mark.parametrize(("command", "error"), ERROR_CASES)
def test_config_and_record_errors(command: str, error: str) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "str", "x")
    h.call(c, "XADD", "s", "1-1", "f", "v")
    h.call(c, "XADD", "s", "2-1", "f", "v")
    h.call(c, "XIDMPRECORD", "s", "p", "i", "1-1")
    assert error_text(h.call(c, *shlex.split(command))) == error


def test_xidmprecord_records_and_is_idempotent() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "1-1", "f", "v")
    assert h.call(c, "XIDMPRECORD", "s", "p", "i", "1-1") == b"OK"
    assert h.call(c, "XIDMPRECORD", "s", "p", "i", "1-1") == b"OK"
    assert h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "f", "v") == b"1-1"


def test_seed_syntax_reads_and_sets_the_settings() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "stream-idmp-duration", "30")
    h.call(c, "XADD", "s", "*", "f", "v")
    h.call(c, "CONFIG", "SET", "stream-idmp-duration", "60")  # existing streams keep theirs
    assert h.call(c, "XIDMP", "CFGGET", "s") == [b"duration", 30, b"maxsize", 100]
    assert h.call(c, "XIDMP", "CFGSET", "s", "DURATION", "5", "MAXSIZE", "9") == b"OK"
    assert h.call(c, "XIDMP", "CFGGET", "s", "MAXSIZE") == [b"maxsize", 9]
    h.call(c, "HELLO", "3")
    h.engine.execute(c, [b"XIDMP", b"CFGGET", b"s", b"DURATION"])
    assert h.raw(c) == b"%1\r\n$8\r\nduration\r\n:5\r\n"


def test_cron_expires_iids_by_entry_time() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "*", "f", "v")
    h.call(c, "XCFGSET", "s", "IDMP-DURATION", "2")
    first = h.call(c, "XADD", "s", "IDMP", "p", "old", "*", "f", "v")
    h.clock.advance(1500)
    h.call(c, "XADD", "s", "IDMP", "p", "new", "*", "f", "v")
    h.clock.advance(600)  # "old" is 2.1 s old, "new" 0.6 s
    h.engine.cron()
    assert h.call(c, "XADD", "s", "IDMP", "p", "old", "*", "f", "v") != first
    info = h.call(c, "XINFO", "STREAM", "s")
    counters = dict(zip(info[0::2], info[1::2], strict=True))
    assert counters[b"iids-tracked"] == 2  # "new" and the re-added "old"
