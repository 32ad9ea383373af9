"""HyperLogLog commands (Redis ``hyperloglog.c``): PFADD, PFCOUNT, PFMERGE, PFDEBUG and
PFSELFTEST, over string values in Redis's own HLL bytes (``structures/hll.py``).

Rules, as Redis 7 has them:

- A key holding another type answers the usual WRONGTYPE; a string that is not an HLL
  (short, wrong magic, unknown encoding, a dense one of the wrong size) answers
  ``-WRONGTYPE Key is not a valid HyperLogLog string value.``; an HLL whose sparse opcodes do
  not cover exactly 16384 registers answers ``-INVALIDOBJ Corrupted HLL object detected``.
- PFADD creates the key (a change even without elements), counts one change per register
  raised, marks the cached count stale and propagates as given.
- PFCOUNT of one key answers the cached count when valid; otherwise it computes the count,
  stores it in the value's header and, since the string changed, counts a change and
  propagates itself as given (Redis does: replaying it computes the same bytes). PFCOUNT of
  several keys counts their union and changes nothing.
- PFMERGE reads every key given (the destination too), writes the destination dense if any
  input was dense, otherwise raises its sparse registers in index order exactly as Redis's
  hllSparseSet would (so the bytes, and the promotion point, are Redis's), and propagates
  as given.
- Redis turns an ``embstr`` value into ``raw`` when PFADD/PFCOUNT/PFDEBUG look at it
  (dbUnshareStringValue) without counting a change; so do these (``_unshare``).

Strings are immutable ``bytes`` here, so a write builds the new value from a ``bytearray``
copy (12 KB for a dense value, about a microsecond); a PFADD to a dense value that raises no
register copies nothing.
"""

from __future__ import annotations

import os
import re

from headwater.commands.context import Client, spec
from headwater.commands.notify import lookup_read, notify
from headwater.errors import WRONGTYPE, ReplyError, c_text, err
from headwater.keyevents import STRING
from headwater.ops.change import ONE, Written, as_given
from headwater.resp.types import OK, Reply, Status
from headwater.structures import hll
from headwater.values import RawString

NOT_HLL = ReplyError("WRONGTYPE", "Key is not a valid HyperLogLog string value.")
INVALID = ReplyError("INVALIDOBJ", "Corrupted HLL object detected")
NO_KEY = err("The specified key does not exist")
NOT_SPARSE = err("HLL encoding is not sparse")
_NONZERO = re.compile(b"[^\x00]")


def _as_hll(value: object) -> bytes | None:
    """The value as an HLL string (None when absent); raises the WRONGTYPE errors."""
    if value is None:
        return None
    if not isinstance(value, bytes):
        raise WRONGTYPE
    if not hll.is_hll(value):
        raise NOT_HLL
    return value


def _unshare(c: Client, key: bytes, value: bytes) -> None:
    """Redis's dbUnshareStringValue: the value becomes ``raw``, not a change (no WATCH
    signal, no dirty count): the same bytes as a ``RawString`` in place."""
    if not isinstance(value, RawString):
        c.db.data[key] = RawString(value)


def _max_bytes(c: Client) -> int:
    return int(c.server.config["hll-sparse-max-bytes"])


# ---------------------------------------------------------------------------------------------
# PFADD


def cmd_pfadd(c: Client, argv: list[bytes]) -> Reply | Written:
    """PFADD key [element [element ...]]"""
    key = argv[1]
    value = _as_hll(c.db.get(key))
    patterns = [hll.pattern(element) for element in argv[2:]]
    updated = 0
    if value is None:
        buf = bytearray(hll.EMPTY)
        updated = 1
    elif value[4] == hll.DENSE and not _raises_dense(value, patterns):
        _unshare(c, key, value)
        return 0
    else:
        buf = bytearray(value)
    changed = 0
    try:
        changed = _raise_registers(buf, patterns, _max_bytes(c))
    except _Corrupt as corrupt:
        if corrupt.changed:  # Redis changed its value in place before it met the bad opcode
            c.db.data[key] = RawString(corrupt.buf)
        raise INVALID from None
    updated += changed
    if not updated:
        _unshare(c, key, value)  # type: ignore[arg-type]  # (value is not None here)
        return 0
    hll.invalidate(buf)
    c.db.set(key, RawString(buf), keep_ttl=True)
    notify(c, STRING, b"pfadd", key)
    return Written(1, as_given(updated))


class _Corrupt(Exception):
    """A malformed sparse value met midway: what had been written before it."""

    def __init__(self, buf: bytearray, changed: int) -> None:
        super().__init__()
        self.buf = buf
        self.changed = changed


def _raise_registers(buf: bytearray, patterns: list[tuple[int, int]], max_bytes: int) -> int:
    """Raise each (register, count) of ``buf`` in order, sparse through an editor until a
    promotion, then dense, in place; the number of registers changed. Raises _Corrupt."""
    changed = 0
    editor = hll.SparseEditor.of(buf) if buf[4] == hll.SPARSE else None
    try:
        for index, count in patterns:
            if editor is not None:
                outcome = editor.set(index, count, max_bytes)
                if outcome >= 0:
                    changed += outcome
                    continue
                buf[:] = editor.value()  # promotion: hllSparseSet's own path from here
                editor = None
            if buf[4] == hll.DENSE:
                changed += hll.dense_set(buf, index, count)
            else:
                changed += hll.sparse_set(buf, index, count, max_bytes)
    except hll.CorruptHll:
        raise _Corrupt(editor.value() if editor is not None else buf, changed) from None
    if editor is not None:
        buf[:] = editor.value()
    return changed


def _raises_dense(value: bytes, patterns: list[tuple[int, int]]) -> bool:
    """Whether some element raises a register of the dense ``value`` (else no copy)."""
    return any(count > hll.dense_get(value, index) for index, count in patterns)


# ---------------------------------------------------------------------------------------------
# PFCOUNT


def cmd_pfcount(c: Client, argv: list[bytes]) -> Reply | Written:
    """PFCOUNT key [key ...]"""
    if len(argv) > 2:
        registers, _dense = _union(c, argv[1:])
        return hll.signed(hll.estimate(hll.histogram(registers)))
    key = argv[1]
    value = _as_hll(lookup_read(c, key))
    if value is None:
        return 0
    if hll.card_valid(value):
        _unshare(c, key, value)
        return hll.cached_card(value)
    try:
        card = hll.count_value(value)
    except hll.CorruptHll:
        raise INVALID from None
    buf = bytearray(value)
    hll.store_card(buf, card)
    c.db.set(key, RawString(buf), keep_ttl=True)
    return Written(hll.signed(card), ONE)


def _union(c: Client, keys: list[bytes]) -> tuple[bytes, bool]:
    """The register-wise maximum of the HLLs at ``keys`` (absent ones are empty), and
    whether any of them is dense."""
    registers = bytes(hll.REGISTERS)
    dense = False
    for key in keys:
        value = _as_hll(lookup_read(c, key))
        if value is None:
            continue
        dense = dense or value[4] == hll.DENSE
        try:
            registers = hll.max_registers(registers, hll.registers_of(value))
        except hll.CorruptHll:
            raise INVALID from None
    return registers, dense


# ---------------------------------------------------------------------------------------------
# PFMERGE


def cmd_pfmerge(c: Client, argv: list[bytes]) -> Reply | Written:
    """PFMERGE destkey [sourcekey [sourcekey ...]]"""
    key = argv[1]
    registers, dense = _union(c, argv[1:])
    value = c.db.get(key)  # (checked by _union: absent or an HLL)
    buf = bytearray(hll.EMPTY if value is None else value)
    if dense:
        try:
            hll.sparse_to_dense(buf)
        except hll.CorruptHll:
            raise INVALID from None
        buf[hll.HDR_SIZE :] = hll.pack_dense(registers)
    else:
        _merge_sparse(buf, registers, _max_bytes(c))
    hll.invalidate(buf)
    c.db.set(key, RawString(buf), keep_ttl=True)
    notify(c, STRING, b"pfadd", key)
    return Written(OK, ONE)


def _merge_sparse(buf: bytearray, registers: bytes, max_bytes: int) -> None:
    """Raise the sparse ``buf``'s registers to ``registers`` one by one in index order, as
    Redis does (maybe promoting it to dense on the way)."""
    cursor = hll.SparseCursor()
    for found in _NONZERO.finditer(registers):
        index = found.start()
        count = registers[index]
        if buf[4] == hll.DENSE:
            hll.dense_set(buf, index, count)
        else:
            hll.sparse_set(buf, index, count, max_bytes, cursor)


# ---------------------------------------------------------------------------------------------
# PFDEBUG, PFSELFTEST


def cmd_pfdebug(c: Client, argv: list[bytes]) -> Reply | Written:
    """PFDEBUG GETREG|DECODE|ENCODING|TODENSE key"""
    key = argv[2]
    value = _as_hll(c.db.get(key))
    if value is None:
        raise NO_KEY
    _unshare(c, key, value)
    sub = argv[1].lower()
    if sub in (b"getreg", b"todense"):
        converted = value[4] == hll.SPARSE
        if converted:
            buf = bytearray(value)
            try:
                hll.sparse_to_dense(buf)
            except hll.CorruptHll:
                raise INVALID from None
            value = RawString(buf)
            c.db.set(key, value, keep_ttl=True)
        if sub == b"getreg":
            regs = hll.registers_of(value)
            reply: Reply = list(regs)
        else:
            reply = 1 if converted else 0
        return Written(reply, ONE) if converted else reply
    if sub == b"decode":
        if value[4] != hll.SPARSE:
            raise NOT_SPARSE
        return hll.decode_sparse(value)
    if sub == b"encoding":
        return Status(b"sparse" if value[4] == hll.SPARSE else b"dense")
    raise err(f"Unknown PFDEBUG subcommand '{c_text(argv[1])}'")


_SELFTEST_CYCLES = 2
_SELFTEST_MAX = 10_000


def cmd_pfselftest(c: Client, argv: list[bytes]) -> Reply:
    """PFSELFTEST: Redis's two self-tests, shortened (2 register cycles instead of 1000,
    checkpoints up to 10^4 elements instead of 10^7: this runs on the event loop in
    Python). Test 1 sets random registers of a dense value and reads them back; test 2 adds
    the same elements to a dense and a sparse value, which must count the same, within six
    standard errors of the truth."""
    rand = os.urandom
    dense = bytearray(hll.DENSE_SIZE)
    for _ in range(_SELFTEST_CYCLES):
        expected = bytes(b & hll.REGISTER_MAX for b in rand(hll.REGISTERS))
        dense[hll.HDR_SIZE :] = hll.pack_dense(expected)
        for i in range(hll.REGISTERS):
            got = hll.dense_get(dense, i)
            if got != expected[i]:
                raise err(f"TESTFAILED Register {i} should be {expected[i]} but is {got}")
    dense[:] = hll.MAGIC + bytes(hll.DENSE_SIZE - 4)
    sparse = bytearray(hll.EMPTY)
    max_bytes = _max_bytes(c)
    relerr = 1.04 / hll.REGISTERS**0.5
    seed = int.from_bytes(rand(8), "little")
    checkpoint = 1
    for j in range(1, _SELFTEST_MAX + 1):
        element = (j ^ seed).to_bytes(8, "little")
        index, count = hll.pattern(element)
        hll.dense_set(dense, index, count)
        if sparse[4] == hll.DENSE:
            hll.dense_set(sparse, index, count)
        else:
            hll.sparse_set(sparse, index, count, max_bytes)
        if j != checkpoint:
            continue
        if j < max_bytes // 2 and sparse[4] != hll.SPARSE:
            raise err("TESTFAILED sparse encoding not used")
        estimate = hll.count_value(dense)
        if estimate != hll.count_value(sparse):
            raise err("TESTFAILED dense/sparse disagree")
        maxerr = 1 if j == 10 else -(-relerr * 6 * checkpoint // 1)
        if abs(checkpoint - estimate) > maxerr:
            raise err(
                f"TESTFAILED Too big error. card:{checkpoint} abserr:{abs(checkpoint - estimate)}"
            )
        checkpoint *= 10
    return OK


SPECS = (
    spec("pfadd", -2, "write denyoom fast", (1, 1, 1), cmd_pfadd),
    spec("pfcount", -2, "readonly x_may_replicate", (1, -1, 1), cmd_pfcount),
    spec("pfmerge", -2, "write denyoom", (1, -1, 1), cmd_pfmerge),
    spec("pfdebug", 3, "write denyoom admin", (2, 2, 1), cmd_pfdebug),
    spec("pfselftest", 1, "admin", (0, 0, 0), cmd_pfselftest),
)
