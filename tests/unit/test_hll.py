"""HyperLogLog (issue #19): the structure's pieces against independent references, the
commands' effects and change counts, and a replayed log that rebuilds the same bytes."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.replay import Replayer
from headwater.persistence.rewrite import write_base
from headwater.persistence.snapshot import load_snapshot, write_snapshot
from headwater.structures import hll
from headwater.values import RawString
from tests.unit.conftest import Harness, error_text
from tests.unit.test_rewrite import exact_state

# -- the structure ---------------------------------------------------------------------------


def test_patterns_of_a_b_c_are_redis_registers() -> None:
    """Redis 7.0 decodes ``PFADD h a b c`` as ``Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603``."""
    assert sorted(hll.pattern(e) for e in (b"a", b"b", b"c")) == [
        (8436, 1),
        (12711, 2),
        (15780, 1),
    ]


def _murmur_reference(data: bytes, seed: int = hll.SEED) -> int:
    """MurmurHash64A written out from its C text, byte by byte (no int.from_bytes)."""
    m, r, mask = 0xC6A4A7935BD1E995, 47, (1 << 64) - 1
    h = (seed ^ (len(data) * m)) & mask
    nblocks = len(data) // 8
    for b in range(nblocks):
        k = 0
        for i in range(8):
            k |= data[b * 8 + i] << (8 * i)
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h ^= k
        h = (h * m) & mask
    tail = data[nblocks * 8 :]
    for i in range(len(tail) - 1, -1, -1):
        h ^= tail[i] << (8 * i)
    if tail:
        h = (h * m) & mask
    h ^= h >> r
    h = (h * m) & mask
    h ^= h >> r
    return h


@given(st.binary(max_size=40))
def test_murmur_matches_the_reference(data: bytes) -> None:
    assert hll.murmur64a(data) == _murmur_reference(data)


def _registers_slowly(registers: bytes) -> bytes:
    """The dense 6-bit registers one at a time, as HLL_DENSE_GET_REGISTER reads them."""
    value = b"\x00" * hll.HDR_SIZE + registers
    return bytes(hll.dense_get(value, i) for i in range(hll.REGISTERS))


def test_pack_and_unpack_agree_with_register_reads() -> None:
    rng = random.Random(7)
    for _ in range(5):
        regs = bytes(rng.randrange(64) for _ in range(hll.REGISTERS))
        packed = hll.pack_dense(regs)
        assert len(packed) == hll.DENSE_SIZE - hll.HDR_SIZE
        assert hll.unpack_dense(packed) == regs
        assert _registers_slowly(packed) == regs


def test_dense_set_raises_only_and_leaves_neighbours() -> None:
    rng = random.Random(3)
    buf = bytearray(hll.MAGIC + bytes(hll.DENSE_SIZE - 4))
    expected = [0] * hll.REGISTERS
    for _ in range(3000):
        i, v = rng.randrange(hll.REGISTERS), rng.randrange(1, 64)
        assert hll.dense_set(buf, i, v) == (v > expected[i])
        expected[i] = max(expected[i], v)
    assert hll.registers_of(bytes(buf)) == bytes(expected)


def test_max_registers_is_the_registerwise_maximum() -> None:
    rng = random.Random(5)
    a = bytes(rng.randrange(64) for _ in range(hll.REGISTERS))
    b = bytes(rng.randrange(64) for _ in range(hll.REGISTERS))
    assert hll.max_registers(a, b) == bytes(map(max, a, b))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, hll.REGISTERS - 1), st.integers(1, 40)), max_size=600))
def test_sparse_writes_in_order_with_a_cursor_equal_writes_without(
    writes: list[tuple[int, int]],
) -> None:
    """PFMERGE's cursor walk writes the very bytes of a walk from the start each time."""
    writes.sort()
    plain, fast = bytearray(hll.EMPTY), bytearray(hll.EMPTY)
    cursor = hll.SparseCursor()
    expected = [0] * hll.REGISTERS
    for index, count in writes:
        for buf, cur in ((plain, None), (fast, cursor)):
            if buf[4] == hll.DENSE:
                hll.dense_set(buf, index, count)
            else:
                hll.sparse_set(buf, index, count, 3000, cur)
        expected[index] = max(expected[index], count)
    assert plain == fast
    hll.check_invariants(bytes(plain))
    assert hll.registers_of(bytes(plain)) == bytes(expected)


def _one_walk_per_write(
    buf: bytearray, writes: list[tuple[int, int]], max_bytes: int
) -> list[object]:
    """hllSparseSet one write at a time (a walk from the start each): each write's outcome
    (1, 0, "dense" when it promoted, "corrupt") and the bytes after it, up to a promotion."""
    trace: list[object] = []
    for index, count in writes:
        try:
            changed = hll.sparse_set(buf, index, count, max_bytes)
        except hll.CorruptHll:
            return [*trace, "corrupt", bytes(buf)]
        if buf[4] == hll.DENSE:
            return [*trace, "dense"]
        trace += [changed, bytes(buf)]
    return trace


def _editor_writes(buf: bytearray, writes: list[tuple[int, int]], max_bytes: int) -> list[object]:
    """The same trace through a SparseEditor, as PFADD uses it (hllSparseSet's walk only for
    the write that promotes)."""
    editor = hll.SparseEditor.of(buf)
    assert editor is not None
    trace: list[object] = []
    for index, count in writes:
        try:
            outcome = editor.set(index, count, max_bytes)
        except hll.CorruptHll:
            return [*trace, "corrupt", bytes(editor.value())]
        if outcome < 0:  # PFADD goes on with hllSparseSet on the value so far
            return trace + _one_walk_per_write(editor.value(), [(index, count)], max_bytes)
        trace += [outcome, bytes(editor.value())]
    return trace


# (counts mostly small: above 32 promotes to dense, where the sparse paths end)
_WRITES = st.lists(st.tuples(st.integers(0, hll.REGISTERS - 1), st.integers(1, 33)), max_size=400)


@settings(max_examples=60, deadline=None)
@given(
    _WRITES,
    _WRITES,
    st.sampled_from([40, 300, 3000]),
    st.none() | st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
)
def test_the_sparse_editor_writes_what_one_walk_per_write_writes(
    grown_by: list[tuple[int, int]],
    writes: list[tuple[int, int]],
    max_bytes: int,
    corruption: tuple[int, int] | None,
) -> None:
    """PFADD's editor (a bisection over the opcodes) makes, write after write, the bytes,
    the changes, the promotion point and the corruption errors of hllSparseSet's walk,
    writes in any order, also on a value corrupted in one byte."""
    start = bytearray(hll.EMPTY)
    for index, count in grown_by:
        if start[4] == hll.DENSE:
            return
        hll.sparse_set(start, index, count, 3000)
    if corruption is not None:
        position, byte = corruption
        start[hll.HDR_SIZE + position % (len(start) - hll.HDR_SIZE)] = byte
    if start[4] != hll.SPARSE or hll.SparseEditor.of(start) is None:
        return
    expected = _one_walk_per_write(bytearray(start), writes, max_bytes)
    assert _editor_writes(bytearray(start), writes, max_bytes) == expected


def test_pfadd_of_thousands_of_elements_to_a_sparse_value_takes_no_walk_per_element() -> None:
    """PFADD of 3000 elements, sparse up to 3000 bytes (Redis's hyperloglog fuzz test does
    a thousand of these) takes a fraction of the time of one walk from the start per element
    (which took seconds under load), and writes the same bytes."""
    rng = random.Random(7)
    elements = [repr(rng.random()).encode() for _ in range(3000)]
    patterns = [hll.pattern(element) for element in elements]

    def walk_per_element() -> bytes:
        buf = bytearray(hll.EMPTY)
        for index, count in patterns:
            if buf[4] == hll.DENSE:
                hll.dense_set(buf, index, count)
            else:
                hll.sparse_set(buf, index, count, 3000)
        return bytes(buf)

    h = Harness()
    c = h.client()

    def pfadd() -> bytes:
        h.call(c, "DEL", "h")
        assert h.call(c, "PFADD", "h", *elements) == 1
        return _bytes(h, c, "h")

    walked, walk_time = _fastest(walk_per_element)
    added, pfadd_time = _fastest(pfadd)
    assert added[hll.HDR_SIZE :] == walked[hll.HDR_SIZE :]
    assert pfadd_time < walk_time / 2


def _fastest(fn: Callable[[], bytes]) -> tuple[bytes, float]:
    """fn's result and its best time of three (the machine may be loaded)."""
    times = []
    for _ in range(3):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return result, min(times)


def test_the_empty_count_and_the_overflowing_count() -> None:
    assert hll.count_value(hll.EMPTY) == 0
    high = hll.MAGIC + bytes(12) + b"\xff" * (hll.DENSE_SIZE - hll.HDR_SIZE)
    assert hll.count_value(high) == 1 << 63  # llroundl(inf): LLONG_MIN as uint64
    assert hll.signed(1 << 63) == -(1 << 63)


def test_corrupt_sparse_values_raise() -> None:
    short = hll.EMPTY[:-2] + b"\x7f\xfe"
    with pytest.raises(hll.CorruptHll):
        hll.count_value(short)
    with pytest.raises(hll.CorruptHll):
        hll.sparse_set(bytearray(short), hll.REGISTERS - 1, 3, 3000)


# -- the commands ----------------------------------------------------------------------------


def _bytes(h: Harness, c: object, key: str) -> bytes:
    value = h.call(c, "GET", key)  # type: ignore[arg-type]
    assert isinstance(value, bytes)
    return value


def test_pfcount_propagates_itself_only_when_it_stores_the_count() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "PFADD", "h", "a", "b")
    h.call(c, "PFCOUNT", "h")
    h.call(c, "PFCOUNT", "h")  # the cached count: nothing changes
    h.call(c, "PFCOUNT", "h", "h")  # a union: nothing changes
    h.call(c, "PFADD", "h", "a")  # nothing raised: no effect
    assert h.effect_lines() == [[b"PFADD", b"h", b"a", b"b"], [b"PFCOUNT", b"h"]]
    assert h.engine.dirty == 1 + 2 + 1  # created, two registers, the stored count
    assert hll.card_valid(_bytes(h, c, "h"))


def test_pfadd_on_an_embstr_hll_makes_it_raw_without_a_change() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "h", hll.EMPTY)
    assert h.call(c, "OBJECT", "ENCODING", "h") == b"embstr"
    h.effects.clear()
    dirty = h.engine.dirty
    assert h.call(c, "PFCOUNT", "h") == 0
    assert h.call(c, "OBJECT", "ENCODING", "h") == b"raw"
    assert isinstance(h.engine.keyspace.dbs[0].data[b"h"], RawString)
    assert h.effects == [] and h.engine.dirty == dirty


def test_pfcount_is_refused_in_read_only_scripts_as_in_redis() -> None:
    """Redis flags PFCOUNT may-replicate (it may store the count): EVAL_RO refuses it."""
    h = Harness()
    c = h.client()
    reply = h.call(c, "EVAL_RO", "return redis.call('pfcount', 'x')", "0")
    assert "Write commands are not allowed from read-only scripts" in error_text(reply)
    assert h.call(c, "EVAL", "return redis.call('pfcount', 'x')", "0") == 0


def test_pfadd_keeps_the_ttl_and_notifies_pfadd() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "PFADD", "h", "a")
    h.call(c, "EXPIRE", "h", "100")
    h.call(c, "PFADD", "h", "b", "c")
    h.call(c, "PFMERGE", "h", "h")
    h.call(c, "PFCOUNT", "h")
    assert 0 < h.call(c, "TTL", "h") <= 100


def test_a_replayed_log_rebuilds_the_same_bytes(tmp_path: Path) -> None:
    """PFADD (sparse, promoted, dense), PFCOUNT storing counts, PFMERGE into sparse and dense
    destinations, PFDEBUG TODENSE: the AOF of their effects replays to the same keyspace."""
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "hll-sparse-max-bytes", "400")
    for i in range(12):
        h.call(c, "PFADD", f"k{i % 3}", *[f"e{i}:{j}" for j in range(i * 40)])
        h.call(c, "PFCOUNT", f"k{i % 3}")
    h.call(c, "PFMERGE", "m1", "k0", "nokey")
    h.call(c, "PFMERGE", "m2", "k0", "k1", "k2")
    h.call(c, "PFADD", "small", "x", "y")
    h.call(c, "PFMERGE", "small2", "small")
    h.call(c, "PFDEBUG", "TODENSE", "small")
    h.call(c, "PFCOUNT", "m2")
    path = tmp_path / "hll.aof"
    h.write_aof(path)
    replayed = Harness()
    replayed.call(replayed.client(), "CONFIG", "SET", "hll-sparse-max-bytes", "400")
    replayer = Replayer(replayed.engine)
    replayer.replay(path, truncate_torn=False)
    replayer.close()
    assert exact_state(replayed.engine.keyspace.dbs) == exact_state(h.engine.keyspace.dbs)
    for key in (b"k0", b"k1", b"k2", b"m1", b"m2", b"small", b"small2"):
        value = h.engine.keyspace.dbs[0].data[key]
        assert replayed.engine.keyspace.dbs[0].data[key] == value
        hll.check_invariants(value)


def test_rewrite_and_snapshot_keep_the_bytes_and_the_raw_encoding(tmp_path: Path) -> None:
    """An HLL is a raw string: the AOF rewrite (SET + APPEND) and the snapshot (its raw flag)
    bring back the same bytes, which count the same."""
    h = Harness()
    c = h.client()
    h.call(c, "PFADD", "sparse", *[f"a{i}" for i in range(100)])
    h.call(c, "PFADD", "dense", *[f"b{i}" for i in range(5000)])
    h.call(c, "PFCOUNT", "dense")
    write_base(tmp_path / "base.aof", h.engine.keyspace.dbs)
    write_snapshot(tmp_path / "dump.hwsnap", h.engine.keyspace.dbs)
    rewritten, loaded = Harness(), Harness()
    replayer = Replayer(rewritten.engine)
    replayer.replay(tmp_path / "base.aof", truncate_torn=False)
    replayer.close()
    load_snapshot(tmp_path / "dump.hwsnap", loaded.engine.keyspace.dbs)
    state = exact_state(h.engine.keyspace.dbs)
    counts = {key: h.call(c, "PFCOUNT", key) for key in ("sparse", "dense")}
    for other in (rewritten, loaded):
        assert exact_state(other.engine.keyspace.dbs) == state
        oc = other.client()
        for key, count in counts.items():
            assert other.call(oc, "OBJECT", "ENCODING", key) == b"raw"
            assert other.call(oc, "PFCOUNT", key) == count
