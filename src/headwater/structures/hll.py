"""HyperLogLog in Redis's own representation (``hyperloglog.c``), byte for byte.

Why this shape: a HyperLogLog is a plain string value, so GET/SET, DUMP/RESTORE, snapshots
and replicas carry it unchanged, and a value made by Redis must count the same here (and the
reverse). So the bytes are Redis's, and every write reproduces Redis's exact byte sequence
(the same opcode splits, merges and promotion point), not merely the same registers.

Layout (16-byte header, then the registers)::

    +------+---+-----+----------+----------------------------------+
    | HYLL | E | N/U | card (8) | registers: dense or sparse ...   |
    +------+---+-----+----------+----------------------------------+
      0..3   4  5..7   8..15      16..

- ``E``: 0 dense, 1 sparse. ``N/U``: unused, kept as found.
- ``card``: the cached cardinality, little endian; bit 7 of byte 15 set means "stale"
  (PFADD and PFMERGE set it, PFCOUNT of one key recomputes and stores the count).
- dense: 16384 registers of 6 bits, a little-endian bit stream (register i is bits
  6i..6i+5 counted from bit 0 of byte 0): exactly 12288 bytes.
- sparse: run-length opcodes covering the 16384 registers in order::

      ZERO  00xxxxxx            (x+1) zero registers, 1..64
      XZERO 01xxxxxx yyyyyyyy   ((x<<8|y)+1) zero registers, 1..16384
      VAL   1vvvvvxx            (x+1) registers of value v+1, value 1..32, run 1..4

  A register above 32, or a write that would make the string longer than
  ``hll-sparse-max-bytes`` (the header counts), promotes the value to dense for good.

Elements are hashed with MurmurHash64A (seed 0xadc83b19, the 64-bit little-endian variant):
the low 14 bits pick the register, and the register gets 1 + the number of trailing zeros of
the remaining 50 bits (at most 51). The count is Ertl's improved estimator (``hllCount`` of
Redis 5+: the register histogram, ``tau`` and ``sigma``), in the same float operations, so
the numbers agree exactly.

Bulk work (the histogram of a dense value, merging, packing) runs on ``bytes`` methods and
big integers (C loops), with one byte per register as the working form; only the sparse
opcode walk is a Python loop, and a sparse value is at most a few thousand bytes.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from typing import Final

from headwater.errors import require

P: Final = 14
Q: Final = 64 - P
REGISTERS: Final = 1 << P
P_MASK: Final = REGISTERS - 1
REGISTER_MAX: Final = 63
HDR_SIZE: Final = 16
DENSE_SIZE: Final = HDR_SIZE + (REGISTERS * 6 + 7) // 8
DENSE: Final = 0
SPARSE: Final = 1
MAGIC: Final = b"HYLL"
ZERO_MAX_LEN: Final = 64
XZERO_MAX_LEN: Final = 16384
VAL_MAX_VALUE: Final = 32
VAL_MAX_LEN: Final = 4
SEED: Final = 0xADC83B19
ALPHA_INF: Final = 0.721347520444481703680  # 0.5 / ln(2)
M64: Final = (1 << 64) - 1
_MURMUR_M: Final = 0xC6A4A7935BD1E995

#: a new HyperLogLog: sparse, one XZERO covering every register, cached count 0 (valid)
EMPTY: Final = MAGIC + b"\x01" + bytes(11) + b"\x7f\xff"


class CorruptHll(Exception):
    """The registers of a value with a valid header do not add up (Redis: INVALIDOBJ)."""


def is_hll(value: bytes) -> bool:
    """Redis's isHLLObjectOrReply: a string long enough for the header, the magic, a known
    encoding, and a dense one of exactly the dense size."""
    if len(value) < HDR_SIZE or value[:4] != MAGIC or value[4] > SPARSE:
        return False
    return value[4] == SPARSE or len(value) == DENSE_SIZE


# ---------------------------------------------------------------------------------------------
# Hashing


def murmur64a(data: bytes, seed: int = SEED) -> int:
    """MurmurHash64A as Redis builds it on a little-endian machine."""
    m = _MURMUR_M
    n = len(data)
    h = (seed ^ (n * m)) & M64
    whole = n - (n & 7)
    for i in range(0, whole, 8):
        k = (int.from_bytes(data[i : i + 8], "little") * m) & M64
        k ^= k >> 47
        k = (k * m) & M64
        h ^= k
        h = (h * m) & M64
    if n & 7:
        h ^= int.from_bytes(data[whole:], "little")
        h = (h * m) & M64
    h ^= h >> 47
    h = (h * m) & M64
    h ^= h >> 47
    return h


def pattern(element: bytes) -> tuple[int, int]:
    """Redis's hllPatLen: (register index, run of zeros + 1) of an element."""
    h = murmur64a(element)
    index = h & P_MASK
    rest = (h >> P) | (1 << Q)
    return index, (rest & -rest).bit_length()


# ---------------------------------------------------------------------------------------------
# Header


def card_valid(value: bytes | bytearray) -> bool:
    return not value[15] & 0x80


def cached_card(value: bytes | bytearray) -> int:
    return int.from_bytes(value[8:16], "little")


def invalidate(buf: bytearray) -> None:
    buf[15] |= 0x80


def store_card(buf: bytearray, card: int) -> None:
    buf[8:16] = card.to_bytes(8, "little")


# ---------------------------------------------------------------------------------------------
# Dense registers


def dense_get(value: bytes | bytearray, index: int) -> int:
    pos = HDR_SIZE + index * 6 // 8
    fb = index * 6 & 7
    b1 = value[pos + 1] if pos + 1 < len(value) else 0
    return ((value[pos] >> fb) | (b1 << (8 - fb))) & REGISTER_MAX


def dense_set(buf: bytearray, index: int, count: int) -> int:
    """Redis's hllDenseSet: raise register ``index`` to ``count``; 1 if it changed."""
    if count <= dense_get(buf, index):
        return 0
    pos = HDR_SIZE + index * 6 // 8
    fb = index * 6 & 7
    buf[pos] = (buf[pos] & ~(REGISTER_MAX << fb) & 0xFF) | ((count << fb) & 0xFF)
    if pos + 1 < len(buf):
        fb8 = 8 - fb
        buf[pos + 1] = (buf[pos + 1] & ~(REGISTER_MAX >> fb8) & 0xFF) | (count >> fb8)
    return 1


def _table(fn: Callable[[int], int]) -> bytes:
    """A ``bytes.translate`` table: byte b becomes fn(b)."""
    return bytes(fn(b) & 0xFF for b in range(256))


def _or(a: bytes, b: bytes) -> bytes:
    """Bytewise OR of two strings of one length (disjoint bits: no carries)."""
    n = len(a)
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(n, "little")


_LOW6 = _table(lambda b: b & 63)
_HIGH2 = _table(lambda b: b >> 6)
_LOW4_UP2 = _table(lambda b: (b & 15) << 2)
_HIGH4 = _table(lambda b: b >> 4)
_LOW2_UP4 = _table(lambda b: (b & 3) << 4)
_HIGH6 = _table(lambda b: b >> 2)
_LOW2_TO_TOP = _table(lambda b: (b & 3) << 6)
_DOWN2 = _table(lambda b: (b >> 2) & 15)
_LOW4_TO_TOP = _table(lambda b: (b & 15) << 4)
_DOWN4 = _table(lambda b: (b >> 4) & 3)
_UP2 = _table(lambda b: (b & 63) << 2)
_KEEP6 = _table(lambda b: b & 63)


def unpack_dense(registers: bytes) -> bytes:
    """12288 bytes of 6-bit registers -> 16384 bytes, one register each."""
    s0, s1, s2 = registers[0::3], registers[1::3], registers[2::3]
    out = bytearray(REGISTERS)
    out[0::4] = s0.translate(_LOW6)
    out[1::4] = _or(s0.translate(_HIGH2), s1.translate(_LOW4_UP2))
    out[2::4] = _or(s1.translate(_HIGH4), s2.translate(_LOW2_UP4))
    out[3::4] = s2.translate(_HIGH6)
    return bytes(out)


def pack_dense(regs: bytes) -> bytes:
    """16384 one-byte registers (each at most 63) -> 12288 bytes of 6-bit registers."""
    r0, r1, r2, r3 = regs[0::4], regs[1::4], regs[2::4], regs[3::4]
    out = bytearray(REGISTERS * 6 // 8)
    out[0::3] = _or(r0.translate(_KEEP6), r1.translate(_LOW2_TO_TOP))
    out[1::3] = _or(r1.translate(_DOWN2), r2.translate(_LOW4_TO_TOP))
    out[2::3] = _or(r2.translate(_DOWN4), r3.translate(_UP2))
    return bytes(out)


_HIGH_BITS = int.from_bytes(b"\x80" * REGISTERS, "little")
_ALL = int.from_bytes(b"\xff" * REGISTERS, "little")  # (not 1 << n: mypyc folds it)


def max_registers(a: bytes, b: bytes) -> bytes:
    """Register-wise maximum of two one-byte-per-register strings (values below 128),
    SWAR on big integers: per byte, (a | 0x80) - b keeps bit 7 exactly when a >= b."""
    x = int.from_bytes(a, "little")
    y = int.from_bytes(b, "little")
    ge = ((x | _HIGH_BITS) - y) & _HIGH_BITS
    mask = (ge >> 7) * 0xFF
    return ((x & mask) | (y & ~mask & _ALL)).to_bytes(REGISTERS, "little")


# ---------------------------------------------------------------------------------------------
# Sparse registers


def _op_span(buf: bytes | bytearray, p: int) -> tuple[int, int]:
    """(registers covered, opcode length) of the opcode at ``p``; a cut-off XZERO reads its
    second byte as 0 (Redis reads the string's terminating NUL)."""
    op = buf[p]
    if op & 0x80:
        return (op & 3) + 1, 1
    if op & 0x40:
        low = buf[p + 1] if p + 1 < len(buf) else 0
        return ((op & 0x3F) << 8 | low) + 1, 2
    return (op & 0x3F) + 1, 1


def sparse_registers(value: bytes | bytearray, merge_rules: bool) -> bytes:
    """The registers of a sparse value, one byte each. ``merge_rules``: validate as
    hllMerge does (zero runs may overflow, caught by the total); otherwise as
    hllSparseToDense (any overflowing run stops the walk). Raises CorruptHll when the walk
    does not end at exactly 16384 registers."""
    out = bytearray(REGISTERS)
    idx, p, end = 0, HDR_SIZE, len(value)
    while p < end:
        op = value[p]
        if op & 0x80:
            run = (op & 3) + 1
            if idx + run > REGISTERS:
                break
            reg = ((op >> 2) & 31) + 1
            for _ in range(run):
                out[idx] = reg
                idx += 1
            p += 1
            continue
        run, oplen = _op_span(value, p)
        if not merge_rules and idx + run > REGISTERS:
            break
        idx += run
        p += oplen
    if idx != REGISTERS:
        raise CorruptHll
    return bytes(out)


def sparse_histogram(value: bytes | bytearray) -> list[int]:
    """Redis's hllSparseRegHisto (no overflow checks; the total must be 16384)."""
    histo = [0] * 64
    idx, p, end = 0, HDR_SIZE, len(value)
    while p < end:
        op = value[p]
        if op & 0x80:
            run = (op & 3) + 1
            histo[((op >> 2) & 31) + 1] += run
            p += 1
        else:
            run, oplen = _op_span(value, p)
            histo[0] += run
            p += oplen
        idx += run
    if idx != REGISTERS:
        raise CorruptHll
    return histo


def _zero_op(length: int) -> bytes:
    if length > ZERO_MAX_LEN:
        n = length - 1
        return bytes(((n >> 8) | 0x40, n & 0xFF))
    return bytes((length - 1,))


def _val_op(value: int, length: int) -> int:
    return 0x80 | ((value - 1) << 2) | (length - 1)


def sparse_to_dense(buf: bytearray) -> None:
    """Redis's hllSparseToDense, in place: the header is kept (cached count included), the
    encoding byte becomes dense. Raises CorruptHll (the value is then unchanged)."""
    if buf[4] == DENSE:
        return
    regs = sparse_registers(buf, merge_rules=False)
    header = bytearray(buf[:HDR_SIZE])
    header[4] = DENSE
    buf[:] = header + pack_dense(regs)


class SparseCursor:
    """Where earlier sparse writes walked, so that writes in increasing register order
    (PFMERGE into a sparse value) need not walk from the start each time. ``trail`` holds
    (position, first register) of opcode boundaries in order; a write changes bytes only
    from the opcode before its own on, and that one stays a boundary with the same first
    register, so after a write only the trail's last entry (the written opcode) is dropped."""

    __slots__ = ("trail",)

    def __init__(self) -> None:
        self.trail: list[tuple[int, int]] = [(HDR_SIZE, 0)]


def _walk(buf: bytearray, index: int) -> tuple[int, int, int, int, int]:
    """Step 1 of hllSparseSet: (opcode position, its first register, its span, its length,
    the previous opcode's position or -1) of the opcode holding ``index``."""
    end = len(buf)
    p, first, prev, span, oplen = HDR_SIZE, 0, -1, 0, 1
    while p < end:
        span, oplen = _op_span(buf, p)
        if index <= first + span - 1:
            break
        prev = p
        p += oplen
        first += span
    if span == 0 or p >= end:
        raise CorruptHll
    return p, first, span, oplen, prev


def _walk_from(
    buf: bytearray, index: int, trail: list[tuple[int, int]]
) -> tuple[int, int, int, int, int]:
    """``_walk`` starting at the cursor's last boundary, extending the trail."""
    end = len(buf)
    p, first = trail[-1]
    span, oplen = 0, 1
    while p < end:
        span, oplen = _op_span(buf, p)
        if index <= first + span - 1:
            break
        p += oplen
        first += span
        trail.append((p, first))
    if span == 0 or p >= end:
        raise CorruptHll
    prev = trail[-2][0] if len(trail) > 1 else -1
    return p, first, span, oplen, prev


def sparse_set(
    buf: bytearray, index: int, count: int, max_bytes: int, cursor: SparseCursor | None = None
) -> int:
    """Redis's hllSparseSet: raise register ``index`` to ``count``; 1 if it changed, 0 if not.
    May promote ``buf`` to dense in place. Raises CorruptHll on a malformed value. With a
    ``cursor`` the walk starts where the last one ended (writes in increasing order)."""
    if count > VAL_MAX_VALUE:
        return _promote(buf, index, count)
    if cursor is None:
        p, first, span, oplen, prev = _walk(buf, index)
    else:
        p, first, span, oplen, prev = _walk_from(buf, index, cursor.trail)
    op = buf[p]
    is_val = bool(op & 0x80)
    if is_val and ((op >> 2) & 31) + 1 >= count:
        return 0
    if cursor is not None and len(cursor.trail) > 1:
        cursor.trail.pop()
    if span == 1 and (is_val or not op & 0x40):  # cases B and C: a run of one
        buf[p] = _val_op(count, 1)
        _merge_vals(buf, prev)
        return 1
    last = first + span - 1
    seq = bytearray()
    if is_val:
        cur = ((op >> 2) & 31) + 1
        if index != first:
            seq.append(_val_op(cur, index - first))
        seq.append(_val_op(count, 1))
        if index != last:
            seq.append(_val_op(cur, last - index))
    else:
        if index != first:
            seq += _zero_op(index - first)
        seq.append(_val_op(count, 1))
        if index != last:
            seq += _zero_op(last - index)
    delta = len(seq) - oplen
    if delta > 0 and len(buf) + delta > max_bytes:
        return _promote(buf, index, count)
    buf[p : p + oplen] = seq
    _merge_vals(buf, prev)
    return 1


def _promote(buf: bytearray, index: int, count: int) -> int:
    sparse_to_dense(buf)
    if not dense_set(buf, index, count):
        raise CorruptHll  # (Redis asserts: a promotion always comes with a change)
    return 1


def _merge_vals(buf: bytearray, prev: int) -> None:
    """Step 4 of hllSparseSet: merge adjacent VAL opcodes of one value (up to 5 opcodes
    from ``prev``), then mark the cached count stale."""
    p = prev if prev >= 0 else HDR_SIZE
    end = len(buf)
    scan = 5
    while p < end and scan > 0:
        scan -= 1
        op = buf[p]
        if not op & 0x80:
            p += 2 if op & 0x40 else 1
            continue
        if p + 1 < end and buf[p + 1] & 0x80:
            nxt = buf[p + 1]
            value = ((op >> 2) & 31) + 1
            if value == ((nxt >> 2) & 31) + 1:
                length = (op & 3) + (nxt & 3) + 2
                if length <= VAL_MAX_LEN:
                    buf[p : p + 2] = bytes((_val_op(value, length),))
                    end -= 1
                    continue
        p += 1
    invalidate(buf)


class SparseEditor:
    """A sparse value taken apart for many writes (PFADD of many elements): its opcodes in a
    list (an XZERO as one int of its two bytes, above 255) beside the first register of
    each, so that finding a register's opcode is a bisection, not a walk from the start
    (a walk per element made PFADD of 3000 elements to a 3000-byte value take seconds).
    ``set`` makes exactly hllSparseSet's opcodes, splits and merges, so ``value()`` is the
    bytes ``sparse_set`` would have written one element at a time."""

    __slots__ = ("firsts", "header", "length", "ops")

    def __init__(self, header: bytearray, ops: list[int], firsts: list[int], length: int) -> None:
        self.header = header
        self.ops = ops
        self.firsts = firsts
        self.length = length  # the value's byte length, header included

    @staticmethod
    def of(value: bytes | bytearray) -> SparseEditor | None:
        """The editor of a sparse value; None when its last XZERO is cut off (the walk over
        raw bytes then reads past the end as Redis does: ``sparse_set`` handles that)."""
        ops: list[int] = []
        firsts: list[int] = []
        p, first, end = HDR_SIZE, 0, len(value)
        while p < end:
            op = value[p]
            if op & 0xC0 == 0x40:
                if p + 1 >= end:
                    return None
                op = op << 8 | value[p + 1]
            ops.append(op)
            firsts.append(first)
            first += _span(op)
            p += 2 if op > 0xFF else 1
        return SparseEditor(bytearray(value[:HDR_SIZE]), ops, firsts, end)

    def value(self) -> bytearray:
        out = bytearray(self.header)
        for op in self.ops:
            if op > 0xFF:
                out.append(op >> 8)
            out.append(op & 0xFF)
        return out

    def set(self, index: int, count: int, max_bytes: int) -> int:
        """hllSparseSet: 1 if register ``index`` rose to ``count``, 0 if not; -1 when the
        value must be promoted to dense first (nothing changed then). Raises CorruptHll."""
        if count > VAL_MAX_VALUE:
            return -1
        ops, firsts = self.ops, self.firsts
        i = bisect_right(firsts, index) - 1
        if i < 0 or index >= firsts[i] + _span(ops[i]):
            raise CorruptHll  # (past the last opcode's registers)
        op = ops[i]
        if _is_val(op) and ((op >> 2) & 31) + 1 >= count:
            return 0
        first = firsts[i]
        if _span(op) == 1 and op <= 0xFF:  # cases B and C: a run of one
            ops[i] = _val_op(count, 1)
        else:
            new_ops, new_firsts = _split(op, first, index, count)
            # (only the runs around the new VAL may be two-byte XZEROs)
            size = len(new_ops) + (new_ops[0] > 0xFF) + (new_ops[-1] > 0xFF)
            delta = size - (2 if op > 0xFF else 1)
            if delta > 0 and self.length + delta > max_bytes:
                return -1
            ops[i : i + 1] = new_ops
            firsts[i : i + 1] = new_firsts
            self.length += delta
        self._merge_vals(i - 1 if i > 0 else 0)
        return 1

    def _merge_vals(self, k: int) -> None:
        """Step 4 of hllSparseSet over the opcode list (see ``_merge_vals``)."""
        ops, firsts = self.ops, self.firsts
        end = len(ops)
        scan = 5
        while k < end and scan > 0:
            scan -= 1
            op = ops[k]
            # (a VAL is 0x80..0xFF in the list: the inline form of _is_val, per opcode)
            if 0x80 <= op <= 0xFF and k + 1 < end and 0x80 <= ops[k + 1] <= 0xFF:
                nxt = ops[k + 1]
                value = ((op >> 2) & 31) + 1
                length = (op & 3) + (nxt & 3) + 2
                if value == ((nxt >> 2) & 31) + 1 and length <= VAL_MAX_LEN:
                    ops[k : k + 2] = [_val_op(value, length)]
                    del firsts[k + 1]
                    self.length -= 1
                    end -= 1
                    continue
            k += 1
        invalidate(self.header)


def _is_val(op: int) -> bool:
    """A VAL opcode of the editor's list (an XZERO's low byte may have bit 7 set)."""
    return op <= 0xFF and bool(op & 0x80)


def _span(op: int) -> int:
    """Registers covered by an opcode of the editor's list."""
    if op > 0xFF:
        return (op & 0x3FFF) + 1
    if op & 0x80:
        return (op & 3) + 1
    return (op & 0x3F) + 1


def _split(op: int, first: int, index: int, count: int) -> tuple[list[int], list[int]]:
    """Step 3 of hllSparseSet: the opcodes (and their first registers) replacing ``op``
    (covering ``first``..) when register ``index`` becomes ``count``."""
    last = first + _span(op) - 1
    cur = ((op >> 2) & 31) + 1 if _is_val(op) else 0  # (0: a zero run)
    new_ops: list[int] = []
    new_firsts: list[int] = []
    if index != first:
        new_ops.append(_run_op(cur, index - first))
        new_firsts.append(first)
    new_ops.append(_val_op(count, 1))
    new_firsts.append(index)
    if index != last:
        new_ops.append(_run_op(cur, last - index))
        new_firsts.append(index + 1)
    return new_ops, new_firsts


def _run_op(value: int, length: int) -> int:
    """A run of ``length`` registers of ``value`` (0: ZERO or XZERO) as one list int."""
    if value:
        return _val_op(value, length)
    if length > ZERO_MAX_LEN:
        return 0x4000 | (length - 1)
    return length - 1


def decode_sparse(value: bytes) -> bytes:
    """PFDEBUG DECODE's text: ``z:n`` (ZERO), ``Z:n`` (XZERO), ``v:value,n`` (VAL)."""
    parts: list[bytes] = []
    p, end = HDR_SIZE, len(value)
    while p < end:
        op = value[p]
        run, oplen = _op_span(value, p)
        if op & 0x80:
            parts.append(b"v:%d,%d" % (((op >> 2) & 31) + 1, run))
        else:
            parts.append(b"%s:%d" % (b"Z" if op & 0x40 else b"z", run))
        p += oplen
    return b" ".join(parts)


# ---------------------------------------------------------------------------------------------
# Registers of any value, and the count


def registers_of(value: bytes | bytearray) -> bytes:
    """One byte per register, as hllMerge reads them (raises CorruptHll)."""
    if value[4] == DENSE:
        return unpack_dense(bytes(value[HDR_SIZE:DENSE_SIZE]))
    return sparse_registers(value, merge_rules=True)


def histogram(regs: bytes) -> list[int]:
    """Register histogram of one-byte-per-register registers (hllCount reads 0..Q+1)."""
    histo = [0] * 256
    for v in regs:
        histo[v] += 1
    return histo


def count_value(value: bytes | bytearray) -> int:
    """Redis's hllCount of a value (raises CorruptHll for a malformed sparse one)."""
    if value[4] == DENSE:
        return estimate(histogram(unpack_dense(bytes(value[HDR_SIZE:DENSE_SIZE]))))
    return estimate(sparse_histogram(value))


def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y = 1.0
    z = x
    while True:
        x *= x
        z_prime = z
        z += x * y
        y += y
        if z_prime == z:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y = 1.0
    z = 1 - x
    while True:
        x = math.sqrt(x)
        z_prime = z
        y *= 0.5
        z -= math.pow(1 - x, 2) * y
        if z_prime == z:
            return z / 3


def estimate(histo: list[int]) -> int:
    """Ertl's estimator over the register histogram, in hllCount's float operations; the
    result rounded half away from zero as llroundl does."""
    m = float(REGISTERS)
    z = m * _tau((m - histo[Q + 1]) / m)
    for j in range(Q, 0, -1):
        z += histo[j]
        z *= 0.5
    z += m * _sigma(histo[0] / m)
    e = ALPHA_INF * m * m / z if z else math.inf
    if e >= 2.0**63:  # llroundl overflows to LLONG_MIN (x86), cast to uint64: 2^63
        return 1 << 63  # (every register above 51: z is 0)
    whole = math.floor(e)
    return int(whole) + (1 if e - whole >= 0.5 else 0)


def signed(card: int) -> int:
    """A count as PFCOUNT replies it (addReplyLongLong of the uint64)."""
    return card - (1 << 64) if card >= 1 << 63 else card


def check_invariants(value: bytes) -> None:
    """A value this module wrote: a valid header and, when sparse, opcodes that cover
    exactly the 16384 registers (raises InvariantViolation or CorruptHll)."""
    require(is_hll(value), "not a HyperLogLog header")
    if value[4] == SPARSE:
        sparse_registers(value, merge_rules=False)
        sparse_histogram(value)
