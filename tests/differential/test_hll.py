"""HyperLogLog commands, byte for byte against Debian's redis-server 7.0, in RESP2 and RESP3
(issue #19): the same PFADDs leave the same bytes (GET), sparse and dense, across the
promotion, after PFCOUNT stores its cached count and after PFMERGE of sparse and dense
inputs; the counts are the same numbers; the errors the same text. And a value made by one
server, moved with GET/SET or DUMP/RESTORE, counts the same on the other."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.differential.harness import Command, assert_same
from tests.helpers import RawClient, ServerProcess, start_redis


def _elements(tag: str, n: int, start: int = 0) -> list[str]:
    return [f"{tag}:{i}" for i in range(start, start + n)]


def _grow(key: str, tag: str, total: int, batch: int) -> list[Command]:
    """PFADD ``total`` elements in batches, reading the bytes and the count after each."""
    commands: list[Command] = []
    for start in range(0, total, batch):
        commands.append(["PFADD", key, *_elements(tag, batch, start)])
        commands += [f"GET {key}", f"PFCOUNT {key}", f"GET {key}", f"PFDEBUG ENCODING {key}"]
    return commands


def _binary_elements(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(n)]


def _b(text: str) -> bytes:
    """Binary test data written as text, one character per byte."""
    return text.encode("latin-1")


SPARSE_HEADER = "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"

SCENARIOS: dict[str, list[Command]] = {
    "basics": [
        "PFADD h",
        "GET h",
        "TYPE h",
        "OBJECT ENCODING h",
        "PFCOUNT h",
        "GET h",
        "PFADD h a b c",
        "PFADD h a b c",
        "PFADD h a",
        "GET h",
        "PFCOUNT h",
        "PFCOUNT h",
        "GET h",
        "PFCOUNT nokey",
        "PFCOUNT h nokey",
        "PFADD h2 c d e",
        "PFCOUNT h h2",
        "PFCOUNT h2 h h2",
        "GET h2",
        "PFDEBUG DECODE h",
        "PFDEBUG ENCODING h",
        "PFADD e ''",
        "GET e",
        ["PFADD", "bin", *_binary_elements(1, 200)],
        "GET bin",
        "PFCOUNT bin",
    ],
    "sparse_to_dense": [*_grow("g", "x", 3000, 150), "STRLEN g", "OBJECT ENCODING g"],
    "dense_adds": [
        ["PFADD", "d", *_elements("y", 5000)],
        "PFDEBUG ENCODING d",
        "GET d",
        "PFCOUNT d",
        ["PFADD", "d", *_elements("y", 100)],  # nothing raised: 0, no change
        "GET d",
        ["PFADD", "d", *_elements("z", 100000)],
        "GET d",
        "PFCOUNT d",
        "PFCOUNT d",
        "GET d",
    ],
    "promotion_threshold": [
        "CONFIG SET hll-sparse-max-bytes 200",
        *_grow("t", "w", 200, 20),
        "CONFIG SET hll-sparse-max-bytes 0",
        "PFADD z a",
        "PFDEBUG ENCODING z",
        "GET z",
        "CONFIG SET hll-sparse-max-bytes 10kb",
        *_grow("u", "v", 4000, 500),
        "CONFIG SET hll-sparse-max-bytes 3000",
        "CONFIG GET hll-sparse-max-bytes",
        "CONFIG SET hll-sparse-max-bytes -1",
    ],
    "merge": [
        ["PFADD", "s1", *_elements("a", 300)],
        ["PFADD", "s2", *_elements("b", 300)],
        ["PFADD", "s3", *_elements("a", 150, 150)],
        "PFMERGE m1 s1 s2",
        "GET m1",
        "PFCOUNT m1",
        "GET m1",
        "PFMERGE m1 s3",
        "GET m1",
        "PFMERGE s1 s2 nokey",
        "GET s1",
        "PFMERGE empty",
        "GET empty",
        "PFMERGE empty2 nokey1 nokey2",
        "GET empty2",
        ["PFADD", "big1", *_elements("c", 900)],
        ["PFADD", "big2", *_elements("d", 900)],
        "PFDEBUG ENCODING big1",
        "PFMERGE m2 big1 big2",  # the union promotes the destination on the way
        "PFDEBUG ENCODING m2",
        "GET m2",
        ["PFADD", "dn", *_elements("e", 5000)],
        "PFMERGE m3 s1 dn",  # a dense input: the destination is written dense
        "GET m3",
        "PFMERGE s2 dn",  # an existing sparse destination made dense
        "GET s2",
        "PFCOUNT s1 s2 s3 dn big1",
        "PFMERGE dn s3",
        "GET dn",
        "PFCOUNT m3",
        "GET m3",
    ],
    "pfdebug": [
        ["PFADD", "h", *_elements("f", 50)],
        "PFDEBUG DECODE h",
        "PFDEBUG GETREG h",
        "PFDEBUG ENCODING h",
        "GET h",
        "PFDEBUG DECODE h",
        "PFDEBUG TODENSE h",
        "PFADD h2 a",
        "PFDEBUG TODENSE h2",
        "GET h2",
        "PFDEBUG whatever h",
        "PFDEBUG ENCODING nokey",
        "PFDEBUG ENCODING",
        "SET s x",
        "PFDEBUG ENCODING s",
        "LPUSH l a",
        "PFDEBUG GETREG l",
        "PFSELFTEST",
        "PFSELFTEST x",
    ],
    "errors": [
        "PFADD",
        "PFCOUNT",
        "PFMERGE",
        "SET str hello",
        "PFADD str a",
        "PFCOUNT str",
        "PFCOUNT h str",
        "PFMERGE str",
        "PFMERGE h str",
        "LPUSH l a",
        "PFADD l a",
        "PFCOUNT l",
        "PFCOUNT nokey l",
        "PFMERGE l",
        "PFMERGE nokey l",
        "SET n 12345",
        "PFADD n a",
        "SET short HYLL",
        "PFCOUNT short",
        ["SET", "badenc", _b("HYLL\x02" + "\x00" * 20)],
        "PFCOUNT badenc",
        ["SET", "baddense", _b("HYLL\x00" + "\x00" * 11 + "\x00" * 100)],
        "PFADD baddense a",
        ["SET", "hylx", _b("HYLX\x01" + "\x00" * 11 + "\x7f\xff")],
        "PFCOUNT hylx",
        # a sparse value whose opcodes cover too few registers: INVALIDOBJ
        ["SET", "short_ops", _b(SPARSE_HEADER + "\x7f\xfe")],
        "PFCOUNT short_ops",
        "PFCOUNT short_ops nokey",
        "PFMERGE dest short_ops",
        "EXISTS dest",
        "PFDEBUG TODENSE short_ops",
        "PFADD short_ops a b c d e f",
        "GET short_ops",
        # too many registers
        ["SET", "long_ops", _b(SPARSE_HEADER + "\x7f\xff\x00")],
        "PFCOUNT long_ops",
        "PFMERGE dest long_ops",
        "PFADD long_ops a",
        # a value that counts from its valid cache even though its opcodes are bad
        ["SET", "cached", _b("HYLL\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x7f\xfe")],
        "PFCOUNT cached",
        "OBJECT ENCODING cached",
        # a truncated XZERO (the last byte alone)
        ["SET", "cut", _b(SPARSE_HEADER + "\x7f")],
        "PFCOUNT cut",
        # an empty sparse body
        ["SET", "nobody", _b(SPARSE_HEADER)],
        "PFCOUNT nobody",
        "PFADD nobody a",
        # a dense value with registers above 51 (not produced by hashing, still counted)
        ["SET", "high", _b("HYLL\x00" + "\x00" * 3 + "\x00" * 7 + "\x80" + "\xff" * 12288)],
        "PFCOUNT high",
        "GET high",
    ],
    "embstr_unshared": [  # a short HLL SET by a client is embstr; PFCOUNT makes it raw
        ["SET", "h", _b("HYLL\x01" + "\x00" * 11 + "\x7f\xff")],
        "OBJECT ENCODING h",
        "PFCOUNT h",
        "OBJECT ENCODING h",
        ["SET", "h", _b("HYLL\x01" + "\x00" * 11 + "\x7f\xff")],
        "PFADD h",
        "OBJECT ENCODING h",
        "GET h",
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_bytes_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    assert_same(headwater, redis_server, SCENARIOS[name], resp)


def test_same_bytes_for_random_binary_elements(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    """Random binary elements in batches of random sizes, bytes compared after each."""
    rng = random.Random(19)
    commands: list[Command] = []
    for step in range(60):
        batch = _binary_elements(step, rng.choice([1, 3, 30, 200]))
        commands += [["PFADD", "r", *batch], "GET r"]
        if step % 7 == 0:
            commands += ["PFCOUNT r", "GET r"]
    assert_same(headwater, redis_server, commands, 2)


@pytest.fixture
def other_redis() -> Iterator[ServerProcess]:
    server = start_redis()
    yield server
    server.stop()


def _clients(*servers: ServerProcess) -> list[RawClient]:
    clients = [RawClient(s.port) for s in servers]
    for c in clients:
        c.call("FLUSHALL")
    return clients


@pytest.mark.parametrize("size", [3, 400, 5000])
def test_a_value_moved_with_get_set_counts_the_same_both_ways(
    headwater: ServerProcess, redis_server: ServerProcess, size: int
) -> None:
    hw, rd = _clients(headwater, redis_server)
    try:
        for maker, taker in ((rd, hw), (hw, rd)):
            maker.call("DEL", "k")
            maker.call("PFADD", "k", *_elements("m", size))
            value = maker.call("GET", "k")
            taker.call("SET", "k", value[value.index(b"\r\n") + 2 : -2])
            assert taker.call("GET", "k") == value
            assert taker.call("PFCOUNT", "k") == maker.call("PFCOUNT", "k")
            assert taker.call("GET", "k") == maker.call("GET", "k")  # the stored count too
            more = _elements("n", size)
            assert taker.call("PFADD", "k", *more) == maker.call("PFADD", "k", *more)
            assert taker.call("GET", "k") == maker.call("GET", "k")
            assert taker.call("PFCOUNT", "k") == maker.call("PFCOUNT", "k")
    finally:
        hw.close()
        rd.close()


@pytest.mark.parametrize("size", [3, 5000])
def test_a_redis_dump_restores_into_headwater_and_counts_the_same(
    headwater: ServerProcess, redis_server: ServerProcess, size: int
) -> None:
    hw, rd = _clients(headwater, redis_server)
    try:
        rd.call("PFADD", "k", *_elements("q", size))
        payload = rd.call("DUMP", "k")
        body = payload[payload.index(b"\r\n") + 2 : -2]
        assert hw.call("RESTORE", "k", "0", body) == b"+OK\r\n"
        assert hw.call("GET", "k") == rd.call("GET", "k")
        assert hw.call("PFCOUNT", "k") == rd.call("PFCOUNT", "k")
        ours = hw.call("DUMP", "k")
        assert hw.call("RESTORE", "k2", "0", ours[ours.index(b"\r\n") + 2 : -2]) == b"+OK\r\n"
        assert hw.call("GET", "k2") == rd.call("GET", "k")
    finally:
        hw.close()
        rd.close()
