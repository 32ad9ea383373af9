"""DUMP payloads: an RDB object, the RDB version (2 bytes) and a CRC-64 (8 bytes), both
little-endian, the checksum covering everything before it (Redis's ``createDumpPayload`` and
``verifyDumpPayload``)::

    <type byte> <object> <version u16> <crc64 u64>

A payload is accepted when its version is at most ``MAX_VERSION`` and its checksum matches;
then its object must decode completely, with no bytes left over.
"""

from __future__ import annotations

import struct

from headwater.rdb.crc64 import crc64
from headwater.rdb.encoding import RdbError, Reader
from headwater.rdb.objects import MIN_VERSION, Value, read_type, read_value

#: the version Redis 7.0 writes and accepts (and so what DUMP writes when the value allows it)
VERSION_7_0 = 10
#: the version Redis 7.4 writes (hash field TTLs), for the payloads that need it
VERSION_7_4 = 12
#: the version Redis 8.6 writes (a stream's IDMP history), for the payloads that need it
VERSION_8_6 = 13
#: the newest version read here (Redis 8.6's)
MAX_VERSION = 13

_FOOTER = struct.Struct("<HQ")


class PayloadError(ValueError):
    """A payload whose version or checksum is wrong (RESTORE's first error)."""


def wrap(body: bytes | bytearray, version: int = VERSION_7_0) -> bytes:
    """A DUMP payload of an object (type byte included)."""
    head = bytes(body) + struct.pack("<H", version)
    return head + struct.pack("<Q", crc64(head))


def version_of(payload: bytes) -> int:
    """The RDB version the payload's footer names, its checksum not verified; raises
    ``PayloadError`` when it has no footer."""
    if len(payload) < 10:
        raise PayloadError("payload too short")
    version: int = _FOOTER.unpack_from(payload, len(payload) - 10)[0]
    return version


def verify(payload: bytes) -> int:
    """The payload's RDB version, if it may be loaded; raises ``PayloadError``."""
    version = version_of(payload)
    crc = _FOOTER.unpack_from(payload, len(payload) - 10)[1]
    if version > MAX_VERSION:
        raise PayloadError(f"RDB version {version} is newer than {MAX_VERSION}")
    if crc64(memoryview(payload)[:-8]) != crc:
        raise PayloadError("checksum mismatch")
    return version


def load(payload: bytes) -> tuple[int, Value]:
    """(RDB type, value) of a payload; ``PayloadError`` for the version or checksum,
    ``RdbError`` for an object that does not decode."""
    version = verify(payload)
    r = Reader(payload, 0, len(payload) - 10)
    rdb_type = read_type(r)
    if MIN_VERSION.get(rdb_type, 0) > version:
        raise RdbError(f"type {rdb_type} in an RDB version {version} payload")
    value = read_value(r, rdb_type)
    if not r.at_end():
        raise RdbError("bytes left after the object")
    return rdb_type, value
