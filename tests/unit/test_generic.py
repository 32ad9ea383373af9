"""COPY, MOVE, SWAPDB, SORT, OBJECT FREQ/IDLETIME/ENCODING and MEMORY USAGE (issue #19): what
the differential tests against Redis 7.0 cannot show (7.2-only behaviour, time, blocking,
WATCH, effects, scripts), on the engine directly."""

from __future__ import annotations

import pytest

from headwater import keyspace as keyspace_module
from headwater.commands.sort import c_strtod
from headwater.ops.memory import malloc_size, sds_size
from headwater.stream.stream import Stream
from headwater.structures.sets import SetValue
from headwater.structures.zsets import ZSetValue
from tests.unit.conftest import Harness, error_text

# ---------------------------------------------------------------------------------------------
# OBJECT IDLETIME and FREQ


def test_idletime_counts_from_the_last_access(h: Harness) -> None:
    c = h.client()
    h.call(c, "SET", "k", "v")
    h.clock.advance(5_000)
    assert h.call(c, "OBJECT", "IDLETIME", "k") == 5
    for untouching in (
        ["EXISTS", "k"],
        ["TYPE", "k"],
        ["TTL", "k"],
        ["PTTL", "k"],
        ["OBJECT", "ENCODING", "k"],
        ["MEMORY", "USAGE", "k"],
        ["SCAN", "0"],
        ["KEYS", "*"],
    ):
        h.call(c, *untouching)
        assert h.call(c, "OBJECT", "IDLETIME", "k") == 5, untouching
    h.call(c, "GET", "k")
    assert h.call(c, "OBJECT", "IDLETIME", "k") == 0
    h.clock.advance(2_000)
    h.call(c, "TOUCH", "k", "nokey")
    assert h.call(c, "OBJECT", "IDLETIME", "k") == 0
    h.clock.advance(3_000)
    h.call(c, "APPEND", "k", "w")  # a write's lookup is an access too
    assert h.call(c, "OBJECT", "IDLETIME", "k") == 0


def test_renamed_and_moved_values_keep_their_lfu_counter(h: Harness) -> None:
    """RENAME and MOVE move the value with its access word (their lookup of the source is
    one access, as in Redis); COPY's new value starts afresh."""
    c = h.client()
    h.call(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    h.call(c, "CONFIG", "SET", "lfu-log-factor", "0")  # (every access counts: deterministic)
    h.call(c, "SET", "a", "v")
    for _ in range(10):
        h.call(c, "GET", "a")
    assert h.call(c, "OBJECT", "FREQ", "a") == 15
    h.call(c, "COPY", "a", "b")
    assert h.call(c, "OBJECT", "FREQ", "b") == 5
    h.call(c, "RENAME", "a", "c")
    assert h.call(c, "OBJECT", "FREQ", "c") == 17  # COPY's and RENAME's lookups of it
    h.call(c, "MOVE", "c", "1")
    h.call(c, "SELECT", "1")
    assert h.call(c, "OBJECT", "FREQ", "c") == 18


def test_no_touch_clients_leave_access_times_alone_except_touch(h: Harness) -> None:
    c, other = h.client(), h.client()
    h.call(c, "SET", "k", "v")
    h.clock.advance(7_000)
    assert h.call(c, "CLIENT", "NO-TOUCH", "ON") == b"OK"
    h.call(c, "GET", "k")
    h.call(c, "MULTI")
    h.call(c, "GET", "k")
    h.call(c, "EXEC")
    assert h.call(other, "OBJECT", "IDLETIME", "k") == 7
    h.call(c, "TOUCH", "k")
    assert h.call(other, "OBJECT", "IDLETIME", "k") == 0
    h.clock.advance(2_000)
    h.call(c, "CLIENT", "NO-TOUCH", "OFF")
    h.call(c, "GET", "k")
    assert h.call(other, "OBJECT", "IDLETIME", "k") == 0


def test_idletime_wraps_as_redis_24_bit_clock(h: Harness) -> None:
    ks = h.engine.keyspace
    ks.now_ms = 5_000  # just past a wrap of the clock of seconds
    then = ((1 << 24) - 3) * 1000  # three seconds before the wrap
    assert ks.idle_ms(then) == (5 + (keyspace_module.LRU_CLOCK_MAX - ((1 << 24) - 3))) * 1000


def test_lfu_counter_grows_logarithmically_and_decays(h: Harness) -> None:
    keyspace_module.lfu_rng.seed(7)
    c = h.client()
    assert h.call(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == b"OK"
    h.call(c, "SET", "k", "v")
    assert h.call(c, "OBJECT", "FREQ", "k") == 5  # LFU_INIT_VAL
    h.call(c, "GET", "k")
    assert h.call(c, "OBJECT", "FREQ", "k") == 6  # the first increment is certain
    for _ in range(2000):
        h.call(c, "GET", "k")
    counter = h.call(c, "OBJECT", "FREQ", "k")
    assert 12 <= counter <= 40  # log-factor 10: about 10 * ln(2000) / 10 + 5 hits far apart
    assert h.call(c, "OBJECT", "FREQ", "k") == counter  # FREQ itself is no access
    h.clock.advance(3 * 60_000)
    assert h.call(c, "OBJECT", "FREQ", "k") == counter - 3  # one per lfu-decay-time minute
    h.call(c, "CONFIG", "SET", "lfu-decay-time", "0")
    h.clock.advance(10 * 60_000)
    assert h.call(c, "OBJECT", "FREQ", "k") == counter  # (its word is from before the wait)
    text = error_text(h.call(c, "OBJECT", "IDLETIME", "k"))
    assert text.startswith("ERR An LFU maxmemory policy is selected, idle time not tracked.")
    h.call(c, "CONFIG", "SET", "lfu-log-factor", "0")
    before = h.call(c, "OBJECT", "FREQ", "k")
    h.call(c, "GET", "k")
    assert h.call(c, "OBJECT", "FREQ", "k") == before + 1  # factor 0: every access counts
    h.call(c, "SET", "k", "w")  # an overwrite keeps the counter (dbOverwrite)
    assert h.call(c, "OBJECT", "FREQ", "k") >= before + 1
    h.call(c, "CONFIG", "SET", "maxmemory-policy", "noeviction")
    text = error_text(h.call(c, "OBJECT", "FREQ", "k"))
    assert text.startswith("ERR An LFU maxmemory policy is not selected")


def test_keys_loaded_without_access_word_start_idle(h: Harness) -> None:
    c = h.client()
    db = h.engine.keyspace.dbs[0]
    db.data[b"loaded"] = b"v"  # as a snapshot load leaves it
    h.clock.advance(9_000)
    assert h.call(c, "OBJECT", "IDLETIME", "loaded") == 0
    h.clock.advance(2_000)
    assert h.call(c, "OBJECT", "IDLETIME", "loaded") == 2


def test_access_words_go_with_their_keys(h: Harness) -> None:
    c = h.client()
    for i in range(20):
        h.call(c, "SET", f"k{i}", "v")
    h.call(c, "DEL", "k0", "k1")
    h.call(c, "PEXPIRE", "k2", "1")
    h.clock.advance(10)
    h.call(c, "GET", "k2")
    db = h.engine.keyspace.dbs[0]
    assert set(db.lru) == set(db.data)
    h.call(c, "FLUSHDB")
    assert not db.lru


# ---------------------------------------------------------------------------------------------
# COPY


def _copy_and_check(h: Harness, setup: list[list[str]], key: str) -> tuple[object, object]:
    c = h.client()
    for argv in setup:
        h.call(c, *argv)
    assert h.call(c, "COPY", key, key + "2") == 1
    db = h.engine.keyspace.dbs[0]
    original, twin = db.data[key.encode()], db.data[key.encode() + b"2"]
    assert type(original) is type(twin) and original is not twin
    for value in (original, twin):
        check = getattr(value, "check_invariants", None)
        if check is not None:
            check()
    return original, twin


def test_copy_keeps_7_2_encodings_and_is_independent(h: Harness) -> None:
    c = h.client()
    big = [str(i) for i in range(600)]
    cases = {
        "ls": ([["SADD", "ls", "a", "b"]], b"listpack"),
        "is": ([["SADD", "is", "1", "2"]], b"intset"),
        "hs": ([["SADD", "hs", *[f"m{i}" for i in range(200)]]], b"hashtable"),
        "bs": ([["SADD", "bs", *big]], b"hashtable"),
        "lz": ([["ZADD", "lz", "1", "a"]], b"listpack"),
        "sz": ([["ZADD", "sz", "1", "x" * 70]], b"skiplist"),
        "lh": ([["HSET", "lh", "f", "v"]], b"listpack"),
        "hh": ([["HSET", "hh", "f", "v" * 70]], b"hashtable"),
    }
    for key, (setup, encoding) in cases.items():
        original, twin = _copy_and_check(h, setup, key)
        assert h.call(c, "OBJECT", "ENCODING", key + "2") == encoding, key
        if isinstance(original, SetValue) and isinstance(twin, SetValue):
            assert twin.ordered() == original.ordered()
            twin.add(b"zzz", keyspace_module_limits())
            assert b"zzz" not in original
        if isinstance(original, ZSetValue) and isinstance(twin, ZSetValue):
            assert list(twin) == list(original)
    h.call(c, "HSET", "lh2", "new", "1")
    assert h.call(c, "HEXISTS", "lh", "new") == 0


def keyspace_module_limits():  # type: ignore[no-untyped-def]
    from headwater.structures.sets import SetLimits

    return SetLimits()


def test_copy_of_a_stream_takes_groups_pels_consumers_and_idmp(h: Harness) -> None:
    c = h.client()
    setup = [
        ["XADD", "st", "1-1", "a", "1"],
        ["XADD", "st", "2-1", "b", "2"],
        ["XADD", "st", "IDMP", "p", "i1", "*", "c", "3"],
        ["XADD", "st", "IDMP", "p", "i2", "*", "d", "4"],
        ["XDEL", "st", "2-1"],
        ["XGROUP", "CREATE", "st", "g", "0"],
        ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "st", ">"],
        ["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "st", ">"],
        ["XNACK", "st", "g", "FAIL", "IDS", "1", "1-1"],
    ]
    original, twin = _copy_and_check(h, setup, "st")
    assert isinstance(original, Stream) and isinstance(twin, Stream)
    assert h.call(c, "XINFO", "STREAM", "st2", "FULL") == h.call(c, "XINFO", "STREAM", "st", "FULL")
    again = ["IDMP", "p", "i1", "*", "c", "3"]
    assert h.call(c, "XADD", "st2", *again) == h.call(c, "XADD", "st", *again)  # iids copied
    assert h.call(c, "XLEN", "st2") == 3
    h.call(c, "XACK", "st2", "g", "1-1")
    h.call(c, "XADD", "st2", "*", "z", "9")
    h.call(c, "XGROUP", "DELCONSUMER", "st2", "g", "bob")
    assert h.call(c, "XPENDING", "st", "g")[0] == 3
    assert h.call(c, "XLEN", "st") == 3
    original.check_invariants()
    twin.check_invariants()


def test_copy_refuses_types_without_copy_and_changes_nothing(h: Harness) -> None:
    c = h.client()
    db = h.engine.keyspace.dbs[0]
    db.data[b"odd"] = object()  # a value type without copy()
    h.call(c, "SET", "dst", "keep")
    assert "not supported" in error_text(h.call(c, "COPY", "odd", "dst", "REPLACE"))
    assert h.call(c, "GET", "dst") == b"keep"


def test_copy_move_swapdb_propagate_as_given(h: Harness) -> None:
    c = h.client()
    h.call(c, "SET", "a", "1")
    h.effects.clear()
    h.call(c, "COPY", "a", "b")
    h.call(c, "COPY", "a", "b")  # nothing copied: nothing propagated
    h.call(c, "COPY", "nokey", "b")
    h.call(c, "COPY", "a", "b", "DB", "2", "REPLACE")
    h.call(c, "MOVE", "b", "3")
    h.call(c, "MOVE", "b", "3")
    h.call(c, "SWAPDB", "0", "3")
    h.call(c, "SWAPDB", "1", "1")  # (counted and propagated, as Redis does)
    assert h.effect_lines() == [
        [b"COPY", b"a", b"b"],
        [b"COPY", b"a", b"b", b"DB", b"2", b"REPLACE"],
        [b"MOVE", b"b", b"3"],
        [b"SWAPDB", b"0", b"3"],
        [b"SWAPDB", b"1", b"1"],
    ]


# ---------------------------------------------------------------------------------------------
# SWAPDB and MOVE: WATCH and blocked clients


def test_swapdb_touches_watchers_of_keys_in_either_database(h: Harness) -> None:
    watcher, other, writer = h.client(), h.client(), h.client()
    h.call(writer, "SELECT", "1")
    h.call(writer, "SET", "k", "in-db1")
    h.call(watcher, "WATCH", "k")  # k missing in db 0 now, present in db 1
    h.call(other, "WATCH", "absent")
    h.call(writer, "SWAPDB", "0", "1")
    h.call(watcher, "MULTI")
    h.call(watcher, "GET", "k")
    assert h.call(watcher, "EXEC") is None
    h.call(other, "MULTI")
    h.call(other, "PING")
    assert h.call(other, "EXEC") == [b"PONG"]  # in neither database: untouched


def test_swapdb_serves_clients_blocked_on_a_key_that_appears(h: Harness) -> None:
    waiter, writer = h.client(), h.client()
    h.engine.execute(waiter, [b"BZPOPMIN", b"z", b"0"])
    assert h.raw(waiter) == b""
    h.call(writer, "SELECT", "1")
    h.call(writer, "ZADD", "z", "1", "m")
    assert h.raw(waiter) == b""  # another database
    h.call(writer, "SWAPDB", "0", "1")
    assert h.raw(waiter) == b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n1\r\n"
    assert [b"ZPOPMIN", b"z"] in h.effect_lines()


def test_move_and_copy_serve_clients_blocked_in_the_target_database(h: Harness) -> None:
    waiter, waiter2, writer = h.client(), h.client(), h.client()
    h.call(waiter, "SELECT", "2")
    h.engine.execute(waiter, [b"BZPOPMAX", b"z", b"0"])
    h.call(waiter2, "SELECT", "3")
    h.engine.execute(waiter2, [b"BZPOPMAX", b"z", b"0"])
    h.call(writer, "ZADD", "z", "1", "a", "2", "b")
    h.call(writer, "COPY", "z", "z", "DB", "3")
    assert h.raw(waiter2) == b"*3\r\n$1\r\nz\r\n$1\r\nb\r\n$1\r\n2\r\n"
    h.call(writer, "MOVE", "z", "2")
    assert h.raw(waiter) == b"*3\r\n$1\r\nz\r\n$1\r\nb\r\n$1\r\n2\r\n"


def test_swapdb_moves_ttls_with_the_keys(h: Harness) -> None:
    c = h.client()
    h.call(c, "SET", "k", "v", "PX", "1000")
    h.call(c, "SWAPDB", "0", "5")
    h.call(c, "SELECT", "5")
    assert h.call(c, "PTTL", "k") == 1000
    h.clock.advance(1001)
    h.engine.cron()
    assert h.call(c, "EXISTS", "k") == 0
    assert [b"DEL", b"k"] in h.effect_lines()


# ---------------------------------------------------------------------------------------------
# SORT: 7.2 orders, scripts, strtod


def test_sort_nosort_of_a_listpack_set_keeps_insertion_order(h: Harness) -> None:
    c = h.client()
    h.call(c, "SADD", "s", "c", "a", "b")
    assert h.call(c, "SORT", "s", "BY", "nosort") == [b"c", b"a", b"b"]
    assert h.call(c, "SORT", "s", "BY", "nosort", "DESC", "LIMIT", "1", "1") == [b"a"]


def test_sort_nosort_of_a_set_in_a_script_is_sorted(h: Harness) -> None:
    c = h.client()
    h.call(c, "SADD", "s", "c", "a", "b")
    script = "return redis.call('SORT', KEYS[1], 'BY', 'nosort')"
    assert h.call(c, "EVAL", script, "1", "s") == [b"a", b"b", b"c"]
    script = "return redis.call('SORT', KEYS[1], 'BY', 'nosort', 'DESC')"
    assert h.call(c, "EVAL", script, "1", "s") == [b"c", b"b", b"a"]


def test_sort_store_writes_a_list_converted_as_redis_7_2_does(h: Harness) -> None:
    """A quicklist pushed at the tail, then listTypeTryConversion AUTO: a listpack when the
    result fits one, a quicklist of full nodes otherwise; COPY keeps the twin's layout."""
    c = h.client()
    h.call(c, "SADD", "s", *[str(i) for i in range(300)])
    assert h.call(c, "SORT", "s", "LIMIT", "0", "3", "STORE", "small") == 3
    assert h.call(c, "LRANGE", "small", "0", "-1") == [b"0", b"1", b"2"]
    assert h.call(c, "OBJECT", "ENCODING", "small") == b"listpack"
    h.call(c, "CONFIG", "SET", "list-max-listpack-size", "128")
    assert h.call(c, "SORT", "s", "STORE", "big") == 300
    assert h.call(c, "OBJECT", "ENCODING", "big") == b"quicklist"
    assert h.call(c, "LRANGE", "big", "0", "-1") == [str(i).encode() for i in range(300)]
    big = h.engine.keyspace.dbs[0].data[b"big"]
    assert [node.count for node in big.nodes] == [128, 128, 44]
    big.check_invariants()
    assert h.call(c, "COPY", "big", "twin") == 1
    twin = h.engine.keyspace.dbs[0].data[b"twin"]
    twin.check_invariants()
    assert [node.count for node in twin.nodes] == [128, 128, 44]
    h.call(c, "RPUSH", "twin", "x")
    assert h.call(c, "LLEN", "big") == 300  # (independent)
    assert h.effect_lines()[-1] == [b"RPUSH", b"twin", b"x"]


def test_sort_counts_its_lookups_as_reads(h: Harness) -> None:
    c = h.client()
    h.call(c, "SADD", "s", "1", "2")
    h.call(c, "SET", "w_1", "5")
    h.call(c, "CONFIG", "RESETSTAT")
    h.call(c, "SORT", "s", "BY", "w_*", "GET", "#", "GET", "w_*")
    info = h.call(c, "INFO", "stats").decode()
    assert "keyspace_hits:3\r\n" in info  # s, w_1 (BY), w_1 (GET)
    assert "keyspace_misses:2\r\n" in info  # w_2 twice


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b"", 0.0),
        (b" 5", 5.0),
        (b"\t-2.5e1", -25.0),
        (b"0x10", 16.0),
        (b"0X1P3", 8.0),
        (b"+.5e1", 5.0),
        (b"inf", float("inf")),
        (b"-Infinity", float("-inf")),
        (b"2.2250738585072014e-308", 2.2250738585072014e-308),
        (b"0x1p-1074", 5e-324),
        (b"7\x00junk", 7.0),  # (C sees the string up to its NUL)
    ],
)
def test_c_strtod_accepts_what_glibc_takes_whole(text: bytes, value: float) -> None:
    assert c_strtod(text) == value


@pytest.mark.parametrize(
    "text",
    [
        b"5 ",
        b"nan",
        b"-nan(12)",
        b"1e400",
        b"1e-400",
        b"4.9e-324",
        b"1e-310",
        b"1_0",
        b" ",
        b"0x",
        b"1e",
        b"abc",
    ],
)
def test_c_strtod_refuses_what_redis_reports_unconvertible(text: bytes) -> None:
    assert c_strtod(text) is None


# ---------------------------------------------------------------------------------------------
# OBJECT ENCODING at Redis 7.2's thresholds, MEMORY USAGE of 7.2-only encodings


def test_object_encoding_labels_follow_7_2_thresholds(h: Harness) -> None:
    c = h.client()
    setups: list[tuple[list[str], bytes]] = [
        (["SET", "k", "123"], b"int"),
        (["SET", "k", "x" * 44], b"embstr"),
        (["SET", "k", "x" * 45], b"raw"),
        (["SADD", "k", *[str(i) for i in range(512)]], b"intset"),
        (["SADD", "k", *[str(i) for i in range(513)]], b"hashtable"),
        (["SADD", "k", "a", *[str(i) for i in range(127)]], b"listpack"),
        (["SADD", "k", "a", *[str(i) for i in range(128)]], b"hashtable"),
        (["SADD", "k", "x" * 65], b"hashtable"),
        (["HSET", "k", "f", "v" * 64], b"listpack"),
        (["HSET", "k", "f", "v" * 65], b"hashtable"),
        (["ZADD", "k", *[x for i in range(128) for x in (str(i), f"m{i}")]], b"listpack"),
        (["ZADD", "k", *[x for i in range(129) for x in (str(i), f"m{i}")]], b"skiplist"),
        (["XADD", "k", "1-1", "f", "v"], b"stream"),
    ]
    for argv, encoding in setups:
        h.call(c, "DEL", "k")
        h.call(c, *argv)
        assert h.call(c, "OBJECT", "ENCODING", "k") == encoding, argv[:3]


def test_memory_usage_of_7_2_listpack_sets(h: Harness) -> None:
    c = h.client()
    h.call(c, "SADD", "s", "a", "b", "c")
    # robj 16 + listpack (6 + 3 x 3 + 1 = 16 bytes: a 16-byte class) + key sds 8 + dictEntry 24
    assert h.call(c, "MEMORY", "USAGE", "s") == 16 + 16 + 8 + 24
    h.call(c, "SADD", "t", *[f"member-{i}" for i in range(100)])
    lp = 6 + 100 * (1 + len("member-00") + 1) - 10 + 1  # (ten members are a byte shorter)
    assert h.call(c, "MEMORY", "USAGE", "t") == 16 + malloc_size(lp) + sds_size(1) + 24


def test_jemalloc_classes_and_sds_sizes() -> None:
    assert [malloc_size(n) for n in (1, 8, 9, 23, 128, 129, 161, 1006, 4096, 4097)] == [
        8,
        8,
        16,
        32,
        128,
        160,
        192,
        1024,
        4096,
        5120,
    ]
    assert [sds_size(n) for n in (0, 1, 3, 30, 31, 45, 300)] == [8, 8, 8, 32, 48, 64, 320]


def test_restore_idletime_and_freq_set_the_access_word(h: Harness) -> None:
    c = h.client()
    h.call(c, "SET", "k", "v")
    payload = h.call(c, "DUMP", "k")
    h.call(c, "RESTORE", "r", "0", payload, "IDLETIME", "1000")
    assert h.call(c, "OBJECT", "IDLETIME", "r") == 1000
    h.call(c, "RESTORE", "f", "0", payload, "FREQ", "100")  # (no LFU policy: ignored)
    assert h.call(c, "OBJECT", "IDLETIME", "f") == 0
    h.call(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    h.call(c, "RESTORE", "f", "0", payload, "FREQ", "100", "REPLACE")
    assert h.call(c, "OBJECT", "FREQ", "f") == 100
    h.call(c, "RESTORE", "i", "0", payload, "IDLETIME", "5")  # (LFU: ignored)
    assert h.call(c, "OBJECT", "FREQ", "i") == 5
