"""The keyspace's value types and what Redis reports about them.

``bytes`` is a string (``RawString`` marks one made by APPEND, which Redis always stores raw),
``Hash`` is a hash; streams arrive with their own module. Not compiled by mypyc: these classes
subclass builtins, which mypyc's native classes cannot.
"""

from __future__ import annotations

from headwater.errors import require
from headwater.structures.fieldttl import FieldTtls

#: Redis's OBJ_ENCODING_EMBSTR_SIZE_LIMIT.
EMBSTR_MAX = 44


class RawString(bytes):
    """A string Redis would keep in ``raw`` encoding (the result of APPEND)."""

    __slots__ = ()


class Hash(dict[bytes, bytes]):
    """A hash; ``listpack`` turns false for good once it outgrows the listpack limits.
    ``ttls`` holds its fields' deadlines (Redis 7.4 field expiration): None until a field
    first gets one, so a hash that never had one pays one slot; once made it stays (as Redis
    keeps such a hash ``listpackex``), maybe empty."""

    __slots__ = ("listpack", "ttls")

    def __init__(self) -> None:
        super().__init__()
        self.listpack = True
        self.ttls: FieldTtls | None = None

    def field_ttls(self) -> FieldTtls:
        """The deadlines, made on first use."""
        if self.ttls is None:
            self.ttls = FieldTtls()
        return self.ttls

    def has_field_ttls(self) -> bool:
        return self.ttls is not None and len(self.ttls) > 0

    def encoding_name(self) -> bytes:
        if not self.listpack:
            return b"hashtable"
        return b"listpack" if self.ttls is None else b"listpackex"

    def check_invariants(self) -> None:
        require(len(self) > 0, "an empty hash is kept in the keyspace")
        if self.ttls is not None:
            self.ttls.check_invariants(self)

    def copy(self) -> Hash:
        """A twin with the same fields and encoding (a ``Hash``, not a plain dict)."""
        twin = Hash()
        twin.update(self)
        twin.listpack = self.listpack
        if self.ttls is not None:  # (COPY keeps the fields' deadlines, as Redis 7.4)
            ttls = twin.field_ttls()
            for field in self:
                when = self.ttls.get(field)
                if when is not None:
                    ttls.set(field, when)
        return twin


def type_name(value: object) -> bytes:
    if type(value) is bytes or isinstance(value, bytes):
        return b"string"
    if isinstance(value, Hash):
        return b"hash"
    return getattr(value, "TYPE_NAME", b"none")


def string_encoding(value: bytes) -> bytes:
    """OBJECT ENCODING of a string value, as Redis's tryObjectEncoding decides it."""
    if isinstance(value, RawString):
        return b"raw"
    if len(value) <= 20 and _is_long(value):
        return b"int"
    return b"embstr" if len(value) <= EMBSTR_MAX else b"raw"


def _is_long(value: bytes) -> bool:
    if not value:
        return False
    digits = value[1:] if value[0] == 45 else value
    if not digits.isdigit() or (digits[0] == 48 and len(value) > 1):
        return False
    return -(2**63) <= int(value) < 2**63
