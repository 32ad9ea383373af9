"""LZF, the compression of RDB strings (liblzf 3.6 as built into Redis: ``lzf_c.c``/``lzf_d.c``).

Format: a sequence of runs, each starting with a control byte::

    000LLLLL  <L+1 literal bytes>             L+1 in 1..32
    LLLooooo  oooooooo                        back-reference: length L+2 (L in 1..6)
    111ooooo  LLLLLLLL  oooooooo              back-reference: length L+9
                                              offset: o+1 bytes back from the output's end

``compress`` reproduces Redis's encoder decision for decision (hash of the next three bytes,
HLOG 16, the VERY_FAST re-hashing after a match, literal runs of at most 32, back-references
of at most 264 bytes within 8 KiB), so it gives the bytes Redis gives, starting from an
empty hash table. (Redis's table lives on the stack uninitialised; a stale slot that happens
to point into the current input at three equal bytes would make Redis pick a different,
equally valid, back-reference. Any such output decompresses the same.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, cast

from headwater.rdb.native import loop

HLOG = 16
_HSIZE = 1 << HLOG
_MAX_LIT = 1 << 5
_MAX_OFF = 1 << 13
_MAX_REF = (1 << 8) + (1 << 3)


class LzfError(ValueError):
    """Compressed data that does not decode to the expected length."""


def _idx(h: int) -> int:
    return ((h >> (24 - HLOG)) - h * 5) & (_HSIZE - 1)


def _match_length(data: bytes, ref: int, ip: int, maxlen: int) -> int:
    """How many bytes the match at ref covers, as liblzf counts them: its first three bytes
    are known equal; when ``maxlen > 16`` the next sixteen are compared without the cap
    (so a match may run to the very end of the input), then one by one up to ``maxlen``."""
    length = 2
    if maxlen > 16:
        for _ in range(16):
            length += 1
            if data[ref + length] != data[ip + length]:
                return length
    length += 1
    while length < maxlen and data[ref + length] == data[ip + length]:
        length += 1
    return length


#: ``compress_pure`` in one C call (None: not built)
_NATIVE_COMPRESS: Final = cast("Callable[[bytes, int], bytes | None] | None", loop("lzf_compress"))


def compress(data: bytes, out_limit: int) -> bytes | None:
    """The LZF form of data, or None if it would take more than ``out_limit - 1`` bytes
    (liblzf's ``lzf_compress`` returns 0 then; Redis passes ``len - 4``); in one C call when
    that is built."""
    if _NATIVE_COMPRESS is not None:
        return _NATIVE_COMPRESS(data, out_limit)
    return compress_pure(data, out_limit)


def compress_pure(data: bytes, out_limit: int) -> bytes | None:
    """``compress`` in Python."""
    n = len(data)
    if not n or not out_limit:
        return None
    htab: dict[int, int] = {}
    out = bytearray()
    # out[run] is the pending literal run's control byte; lit counts its bytes
    out.append(0)
    run = 0
    lit = 0
    ip = 0
    end2 = n - 2
    hval = (data[0] << 8) | data[1] if n >= 2 else 0
    while ip < end2:
        hval = ((hval << 8) | data[ip + 2]) & 0xFFFFFF
        slot = _idx(hval)
        ref = htab.get(slot, -1)
        htab[slot] = ip
        if (
            0 < ref < ip
            and ip - ref - 1 < _MAX_OFF
            and data[ref] == data[ip]
            and data[ref + 1] == data[ip + 1]
            and data[ref + 2] == data[ip + 2]
        ):
            off = ip - ref - 1
            maxlen = min(n - ip - 2, _MAX_REF)
            if lit:
                out[run] = lit - 1
            else:
                del out[run]  # undo the empty run
            if len(out) + 3 + 1 >= out_limit:
                return None
            length = _match_length(data, ref, ip, maxlen)
            length -= 2  # stored as octets - 2
            ip += 1
            if length < 7:
                out.append((off >> 8) + (length << 5))
            else:
                out.append((off >> 8) + (7 << 5))
                out.append(length - 7)
            out.append(off & 0xFF)
            run = len(out)
            out.append(0)
            lit = 0
            ip += length + 1
            if ip >= end2:
                break
            ip -= 2
            hval = (data[ip] << 8) | data[ip + 1]
            hval = ((hval << 8) | data[ip + 2]) & 0xFFFFFF
            htab[_idx(hval)] = ip
            ip += 1
            hval = ((hval << 8) | data[ip + 2]) & 0xFFFFFF
            htab[_idx(hval)] = ip
            ip += 1
        else:
            if len(out) >= out_limit:
                return None
            lit += 1
            out.append(data[ip])
            ip += 1
            if lit == _MAX_LIT:
                out[run] = lit - 1
                lit = 0
                run = len(out)
                out.append(0)
    if len(out) + 3 > out_limit:
        return None
    while ip < n:
        lit += 1
        out.append(data[ip])
        ip += 1
        if lit == _MAX_LIT:
            out[run] = lit - 1
            lit = 0
            run = len(out)
            out.append(0)
    if lit:
        out[run] = lit - 1
    else:
        del out[run]
    return bytes(out)


#: ``decompress_pure`` in one C call (None: not built); no answer for data Python refuses
_NATIVE: Final = cast(
    "Callable[[bytes | memoryview, int], bytes | None] | None", loop("lzf_decompress")
)


def decompress(data: bytes | memoryview, length: int) -> bytes:
    """Decode data, which must produce exactly ``length`` bytes (RDB stores it); in one C
    call when that is built."""
    if _NATIVE is not None:
        out = _NATIVE(data, length)
        if out is not None:
            return out
    return decompress_pure(data, length)


def decompress_pure(data: bytes | memoryview, length: int) -> bytes:
    """``decompress`` in Python."""
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            run = ctrl + 1
            if i + run > n or len(out) + run > length:
                raise LzfError("literal run past the end")
            out += data[i : i + run]
            i += run
            continue
        size = ctrl >> 5
        if size == 7:
            if i >= n:
                raise LzfError("truncated back-reference")
            size += data[i]
            i += 1
        if i >= n:
            raise LzfError("truncated back-reference")
        ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
        i += 1
        size += 2
        if ref < 0:
            raise LzfError("back-reference before the start")
        if len(out) + size > length:
            raise LzfError("back-reference past the end")
        if ref + size <= len(out):
            out += out[ref : ref + size]
        else:  # overlapping: byte by byte
            for k in range(size):
                out.append(out[ref + k])
    if len(out) != length:
        raise LzfError(f"decompressed {len(out)} bytes, expected {length}")
    return bytes(out)
