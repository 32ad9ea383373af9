"""Hash field expiration (Redis 7.4, #19), which Debian's 7.0 lacks: checked against the 7.4
source (``t_hash.c``: hexpireGenericCommand, httlGenericCommand, hpersistCommand,
parseExpireTime, hashTypeGetValue) and the HEXPIRE docs. Also HSCAN NOVALUES (7.4) and the
string commands where Redis 7.2 answers otherwise than 7.0 (BITCOUNT/BITPOS parse their
arguments before looking the key up)."""

from __future__ import annotations

from pathlib import Path

from headwater.persistence.rewrite import rewrite_commands
from headwater.persistence.snapshot import load_snapshot, write_snapshot
from tests.unit.conftest import Harness, error_text

NOW = 1_700_000_000_000


def test_hexpire_replies_and_conditions(h: Harness) -> None:
    c = h.client()
    assert h.call(c, "HEXPIRE", "nokey", 10, "FIELDS", 2, "a", "b") == [-2, -2]
    h.call(c, "HSET", "h", "a", 1, "b", 2, "c", 3)
    assert h.call(c, "OBJECT", "ENCODING", "h") == b"listpack"
    assert h.call(c, "HEXPIRE", "h", 100, "XX", "FIELDS", 1, "a") == [0]  # no TTL: XX fails
    assert h.call(c, "HEXPIRE", "h", 100, "GT", "FIELDS", 1, "a") == [0]  # no TTL is infinite
    assert h.call(c, "HEXPIRE", "h", 100, "LT", "FIELDS", 1, "a") == [1]  # (7.4 docs)
    assert h.call(c, "HEXPIRE", "h", 50, "NX", "FIELDS", 2, "a", "b") == [0, 1]
    assert h.call(c, "HEXPIRE", "h", 200, "GT", "FIELDS", 2, "a", "b") == [1, 1]
    assert h.call(c, "HEXPIRE", "h", 200, "GT", "FIELDS", 1, "a") == [0]
    assert h.call(c, "HEXPIRE", "h", 150, "LT", "FIELDS", 1, "a") == [1]
    assert h.call(c, "HEXPIRE", "h", 300, "XX", "FIELDS", 3, "a", "c", "zz") == [1, 0, -2]
    assert h.call(c, "OBJECT", "ENCODING", "h") == b"listpackex"
    assert h.call(c, "HTTL", "h", "FIELDS", 4, "a", "b", "c", "zz") == [300, 200, -1, -2]
    assert h.call(c, "HPTTL", "h", "FIELDS", 1, "a") == [300_000]
    assert h.call(c, "HEXPIRETIME", "h", "FIELDS", 1, "a") == [(NOW + 300_000) // 1000]
    assert h.call(c, "HPEXPIRETIME", "h", "FIELDS", 1, "b") == [NOW + 200_000]
    h.clock.advance(1)
    assert h.call(c, "HTTL", "h", "FIELDS", 1, "a") == [300]  # (rounded up, as Redis)
    assert h.call(c, "HPERSIST", "h", "FIELDS", 3, "a", "c", "zz") == [1, -1, -2]
    assert h.call(c, "HTTL", "h", "FIELDS", 1, "a") == [-1]
    assert h.call(c, "HPERSIST", "nokey", "FIELDS", 1, "a") == [-2]
    assert h.call(c, "HTTL", "nokey", "FIELDS", 1, "a") == [-2]


def test_hexpire_errors_as_in_redis(h: Harness) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1)
    h.call(c, "SET", "s", "x")

    def error(*args: object) -> str:
        return error_text(h.call(c, *args))

    assert error("HEXPIRE", "s", "x", "FIELDS", 1, "a").startswith("WRONGTYPE")  # type first
    assert error("HEXPIRE", "h", "x", "FIELDS", 1, "a") == (
        "ERR value is not an integer or out of range"
    )
    assert error("HEXPIRE", "h", -1, "FIELDS", 1, "a") == "ERR invalid expire time, must be >= 0"
    assert error("HEXPIRE", "h", 70368744177, "FIELDS", 1, "a") == (
        "ERR invalid expire time in 'hexpire' command"
    )
    assert error("HPEXPIREAT", "h", 70368744177664, "FIELDS", 1, "a") == (
        "ERR invalid expire time in 'hpexpireat' command"
    )
    assert h.call(c, "HPEXPIREAT", "h", 70368744177663, "FIELDS", 1, "a") == [1]
    assert error("HEXPIRE", "h", 10, "FIELDS", 0, "a") == (
        "ERR Parameter `numFields` should be greater than 0"
    )
    assert error("HEXPIRE", "h", 10, "FIELDS", 2, "a") == (
        "ERR The `numfields` parameter must match the number of arguments"
    )
    assert error("HEXPIRE", "h", 10, "NX", "XX", "FIELDS", 1, "a") == (
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    )
    assert error("HTTL", "h", "FIELDS", 0, "a") == "ERR Number of fields must be a positive integer"
    assert error("HTTL", "h", "FOO", 1, "a") == (
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    )
    assert error("HPERSIST", "h", "FIELDS", "x", "a") == (
        "ERR Number of fields must be a positive integer"
    )
    assert error("HEXPIRE", "h", 10, "FIELDS", 1) == (
        "ERR wrong number of arguments for 'hexpire' command"
    )


def test_past_deadline_deletes_and_propagates_hdel(h: Harness) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1, "b", 2, "c", 3)
    assert h.call(c, "HPEXPIRE", "h", 500, "FIELDS", 1, "b") == [1]
    assert h.effect_lines()[-1] == [
        b"HPEXPIREAT", b"h", b"%d" % (NOW + 500), b"FIELDS", b"1", b"b"
    ]  # fmt: skip
    assert h.call(c, "HEXPIRE", "h", 0, "FIELDS", 3, "a", "zz", "c") == [2, -2, 2]
    assert h.effect_lines()[-2:] == [[b"HDEL", b"h", b"a"], [b"HDEL", b"h", b"c"]]
    assert h.call(c, "HPEXPIREAT", "h", 1, "FIELDS", 1, "b") == [2]
    assert h.call(c, "EXISTS", "h") == 0  # (gone with its last field)


def test_expired_fields_are_never_shown_and_go_as_hdel(h: Harness) -> None:
    c, sub = h.client(), h.client()
    h.call(c, "CONFIG", "SET", "notify-keyspace-events", "KEA")
    h.call(sub, "PSUBSCRIBE", "__keyevent@0__:*")
    h.raw(sub)
    h.call(c, "HSET", "h", "a", 1, "b", 2, "c", 3)
    h.call(c, "HPEXPIRE", "h", 100, "FIELDS", 2, "a", "b")
    h.clock.advance(101)
    assert h.call(c, "HLEN", "h") == 1
    assert h.call(c, "HGETALL", "h") == [b"c", b"3"]
    assert h.effect_lines()[-2:] == [[b"HDEL", b"h", b"a"], [b"HDEL", b"h", b"b"]]
    assert b"hexpired" in h.raw(sub)
    h.call(c, "HSET", "h", "d", 4)
    h.call(c, "HPEXPIRE", "h", 100, "FIELDS", 2, "c", "d")
    h.clock.advance(101)
    h.engine.cron()  # the cron expires them, and the hash with its last field
    assert h.effect_lines()[-2:] == [[b"HDEL", b"h", b"c"], [b"HDEL", b"h", b"d"]]
    assert h.call(c, "EXISTS", "h") == 0
    events = h.raw(sub)
    assert b"hexpired" in events and b"del" in events
    info = h.call(c, "INFO", "stats").decode()
    assert "expired_subkeys:4" in info


def test_hset_drops_a_ttl_hincrby_keeps_it(h: Harness) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1, "b", 2)
    h.call(c, "HEXPIRE", "h", 100, "FIELDS", 2, "a", "b")
    h.call(c, "HSET", "h", "a", 5)
    h.call(c, "HINCRBY", "h", "b", 5)
    assert h.call(c, "HTTL", "h", "FIELDS", 2, "a", "b") == [-1, 100]
    assert h.call(c, "HINCRBYFLOAT", "h", "b", "0.5") == b"7.5"
    # (an HSET alone would drop the TTL on replay)
    assert h.effect_lines()[-2:] == [
        [b"HSET", b"h", b"b", b"7.5"],
        [b"HPEXPIREAT", b"h", b"%d" % (NOW + 100_000), b"FIELDS", b"1", b"b"],
    ]
    h.call(c, "HDEL", "h", "b")
    h.call(c, "HSET", "h", "b", 1)
    assert h.call(c, "HTTL", "h", "FIELDS", 1, "b") == [-1]


def test_a_renamed_hash_keeps_expiring(h: Harness) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1, "b", 2)
    h.call(c, "HPEXPIRE", "h", 100, "FIELDS", 1, "a")
    h.call(c, "RENAME", "h", "h2")
    h.clock.advance(101)
    h.engine.cron()
    assert h.effect_lines()[-1] == [b"HDEL", b"h2", b"a"]
    assert h.engine.keyspace.dbs[0].data[b"h2"] == {b"b": b"2"}


def test_copied_moved_and_swapped_hashes_keep_their_field_ttls(h: Harness) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1, "b", 2)
    h.call(c, "HPEXPIRE", "h", 100, "FIELDS", 1, "a")
    h.call(c, "COPY", "h", "twin")
    assert h.call(c, "HPTTL", "twin", "FIELDS", 1, "a") == [100]
    h.call(c, "MOVE", "h", "1")
    h.call(c, "SWAPDB", "1", "2")
    h.clock.advance(101)
    h.engine.cron()
    dbs = h.engine.keyspace.dbs
    assert dbs[0].data[b"twin"] == {b"b": b"2"}
    assert dbs[2].data[b"h"] == {b"b": b"2"}
    assert [b"HDEL", b"twin", b"a"] in h.effect_lines()
    assert [b"HDEL", b"h", b"a"] in h.effect_lines()


def test_a_replica_hides_due_fields_without_deleting_them(h: Harness) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1, "b", 2)
    h.call(c, "HPEXPIRE", "h", 100, "FIELDS", 1, "a")
    h.engine.keyspace.replica = True
    h.clock.advance(101)
    h.engine.cron()
    assert h.call(c, "HGETALL", "h") == [b"b", b"2"]
    assert h.call(c, "HTTL", "h", "FIELDS", 1, "a") == [-2]
    assert b"a" in h.engine.keyspace.dbs[0].data[b"h"]  # (its primary's HDEL deletes it)


def test_snapshot_and_rewrite_carry_field_ttls(h: Harness, tmp_path: Path) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1, "b", 2, "c", 3)
    h.call(c, "HPEXPIRE", "h", 5000, "FIELDS", 2, "a", "b")
    h.call(c, "HSET", "plain", "x", 1)
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    assert path.read_bytes().count(b"\x0b\x01\x00\x00\x00\x00\x00\x00\x00h") == 1
    fresh = Harness()
    fresh.clock.now = h.clock.now
    load_snapshot(path, fresh.engine.keyspace.dbs)
    f = fresh.client()
    assert fresh.call(f, "HPTTL", "h", "FIELDS", 3, "a", "b", "c") == [5000, 5000, -1]
    assert fresh.call(f, "OBJECT", "ENCODING", "h") == b"listpackex"
    assert fresh.call(f, "OBJECT", "ENCODING", "plain") == b"listpack"
    fresh.clock.advance(5001)
    fresh.engine.cron()  # (the loaded hash is scheduled)
    assert fresh.engine.keyspace.dbs[0].data[b"h"] == {b"c": b"3"}
    commands = list(rewrite_commands(h.engine.keyspace.dbs))
    assert [b"HPEXPIREAT", b"h", b"%d" % (NOW + 5000), b"FIELDS", b"2", b"a", b"b"] in commands


def test_hscan_novalues(h: Harness) -> None:
    c = h.client()
    h.call(c, "HSET", "h", "a", 1, "b", 2)
    assert h.call(c, "HSCAN", "h", 0, "NOVALUES") == [b"0", [b"a", b"b"]]
    assert h.call(c, "HSCAN", "h", 0, "MATCH", "a", "NOVALUES") == [b"0", [b"a"]]
    assert h.call(c, "HSCAN", "h", 0, "MATCH", "novalues") == [b"0", []]


def test_bitcount_and_bitpos_parse_before_the_lookup(h: Harness) -> None:
    """Redis 7.2's bitops.c parses start/end and the unit first (7.0 answered 0 for a
    missing key whatever followed)."""
    c = h.client()
    assert error_text(h.call(c, "BITCOUNT", "nokey", 0, "x")).startswith("ERR value is not")
    assert error_text(h.call(c, "BITCOUNT", "nokey", 0, 1, "FOO")) == "ERR syntax error"
    assert error_text(h.call(c, "BITPOS", "nokey", 1, "x")).startswith("ERR value is not")
    assert error_text(h.call(c, "BITPOS", "nokey", 1, 0, 1, "FOO")) == "ERR syntax error"
    assert h.call(c, "BITCOUNT", "nokey", 0, 1, "BIT") == 0
    assert h.call(c, "BITPOS", "nokey", 0, 0, 1, "BIT") == 0
