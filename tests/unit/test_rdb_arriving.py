"""An RDB file read while it arrives (``rdbfile.Arriving``, a full sync from a Redis primary
converted as it is received, issue 35): whatever the chunks, the same keys as the whole
file gives, and the same refusals: a file cut short, a wrong checksum, bytes that are no
RDB at all. What follows the file's end (the stream after an EOF mark) is not read."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.config import Config
from headwater.keyspace import Keyspace
from headwater.ops.dump import Limits, dump_payload
from headwater.persistence.rdb_load import RdbImportError, load_arriving, load_rdb
from headwater.persistence.rdb_write import write_rdb
from headwater.rdb.encoding import RdbError
from headwater.rdb.rdbfile import Arriving, read_rdb
from tests.unit.conftest import Harness

NOW_MS = 1_700_000_000_000


def rdb_file() -> bytes:
    """Every type, two databases, a TTL, records of a few bytes to tens of kilobytes."""
    h = Harness()
    c = h.client()
    for db in (0, 5):
        h.call(c, "SELECT", db)
        for i in range(30):
            h.call(c, "SET", f"s{i}", f"v{i}")
            h.call(c, "HSET", f"h{i}", "a", i, "b", "x" * i)
            h.call(c, "RPUSH", f"l{i}", *range(i + 1))
            h.call(c, "SADD", f"set{i}", *range(i + 1))
            h.call(c, "ZADD", f"z{i}", i, "m", i + 0.5, "n")
            h.call(c, "XADD", f"x{i}", f"{i + 1}-1", "f", i)
        h.call(c, "PEXPIREAT", "s3", NOW_MS + 5000)
        h.call(c, "SET", "big", bytes(random.Random(db).randbytes(40_000)))
        h.call(c, "HSET", "bighash", *[w for k in range(3000) for w in (f"f{k}", k)])
    parts: list[bytes] = []
    write_rdb(parts.append, h.engine.keyspace.dbs, [], NOW_MS)
    return b"".join(parts)


FILE = rdb_file()


def chunked(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    at = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}):
        yield data[at:cut]
        at = cut
    yield data[at:]


def contents(load: object) -> dict[tuple[int, bytes], tuple[bytes, int]]:
    keyspace = Keyspace(16)
    load(keyspace)  # type: ignore[operator]
    return {
        (db.index, key): (dump_payload(value), db.expires.get(key, -1))
        for db in keyspace.dbs
        for key, value in db.data.items()
    }


WHOLE = contents(lambda ks: load_rdb(FILE, ks, Limits.of(Config()), NOW_MS))


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.integers(0, 1 << 24), max_size=30),
    st.binary(max_size=60),
    st.sampled_from([16, 4096, 1 << 20]),
)
def test_any_chunks_give_what_the_whole_file_gives(
    cuts: list[int], after: bytes, min_more: int
) -> None:
    """Any cuts, any bytes after the file, records read again after a few bytes more or
    after a megabyte more."""
    file = Arriving(chunked(FILE + after, cuts), min_more)
    got = contents(lambda ks: load_arriving(file, ks, Limits.of(Config()), NOW_MS))
    assert got == WHOLE
    assert file.end == len(FILE)


def test_byte_by_byte_at_the_edges() -> None:
    """Chunks of one byte around the header and the checksum, the rest in one piece."""
    pieces = [FILE[i : i + 1] for i in range(12)] + [FILE[12:-10]]
    pieces += [FILE[i : i + 1] for i in range(len(FILE) - 10, len(FILE))]
    records = list(Arriving(iter(pieces), 1).records())
    assert [type(r) for r in records] == [type(r) for r in read_rdb(FILE)]


@pytest.mark.parametrize("cut", [5, 9, 200, len(FILE) // 2, len(FILE) - 9, len(FILE) - 1])
def test_a_file_cut_short_is_refused(cut: int) -> None:
    file = Arriving(chunked(FILE[:cut], [cut // 3]))
    with pytest.raises(RdbImportError, match="truncated or corrupt"):
        load_arriving(file, Keyspace(16), Limits.of(Config()), NOW_MS)


def test_a_wrong_checksum_is_refused() -> None:
    damaged = FILE[:-1] + bytes([FILE[-1] ^ 1])
    with pytest.raises(RdbError, match="checksum mismatch"):
        list(Arriving(chunked(damaged, [1000, 5000])).records())


def test_bytes_that_are_no_rdb_are_refused() -> None:
    with pytest.raises(RdbError, match="not an RDB file"):
        list(Arriving(iter([b"+OK\r\n", b"hello world"])).records())


def test_a_failed_transfer_reaches_the_reader() -> None:
    def failing() -> Iterator[bytes]:
        yield FILE[:100_000]
        raise ConnectionError("the transfer stopped")

    with pytest.raises(ConnectionError, match="transfer stopped"):
        list(Arriving(failing()).records())
