"""A set, with the encoding Redis 7.2 would give it (``t_set.c``).

Members live in one insertion-ordered dict, whatever the encoding; the encoding is a label
that decides what Redis would show (OBJECT ENCODING) and in which order it iterates:

- ``intset``: every member a canonical 64-bit integer, at most ``set-max-intset-entries``
  of them; iterated in numeric order (an intset is a sorted array);
- ``listpack``: at most ``set-max-listpack-entries`` members of at most
  ``set-max-listpack-value`` bytes; iterated in insertion order (SREM removes in place);
- ``hashtable``: anything else; Redis iterates it in hash order, which no client can rely
  on, so this keeps insertion order.

A set only ever moves to a bigger encoding (intset → listpack → hashtable; intset →
hashtable), as in Redis, which never converts back on removals. Memory: the dict costs about
30 to 40 bytes a member plus the member's ``bytes`` (no cyclic-GC tracking: bytes are atomic).
"""

from __future__ import annotations

from typing import NamedTuple

INTSET, LISTPACK, HASHTABLE = 0, 1, 2
ENCODING_NAMES = (b"intset", b"listpack", b"hashtable")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class SetLimits(NamedTuple):
    """``set-max-intset-entries``, ``set-max-listpack-entries``, ``set-max-listpack-value``."""

    intset_entries: int = 512
    listpack_entries: int = 128
    listpack_value: int = 64


class SetInvariantError(Exception):
    """A set broke one of its invariants (a bug, never bad input)."""


def int64_of(member: bytes) -> int | None:
    """The integer an intset would hold for member (Redis's string2ll: strict decimal, no
    '+', no leading zeros, no '-0', within 64 bits), or None."""
    if not member or len(member) > 20:
        return None
    digits = member[1:] if member[0] == 45 else member
    if not digits.isdigit() or not digits.isascii():
        return None
    if digits[0] == 48 and len(member) > 1:  # leading zero, or "-0"
        return None
    value = int(member)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _digits(value: int) -> int:
    """sdigits10: the length of value written in decimal, sign included."""
    return len(b"%d" % value)


class SetValue:
    """One set's members and its encoding (module docstring)."""

    TYPE_NAME = b"set"
    __slots__ = ("encoding", "members")

    def __init__(self, encoding: int = HASHTABLE) -> None:
        self.members: dict[bytes, None] = {}
        self.encoding = encoding

    @classmethod
    def for_first(cls, first: bytes, size_hint: int, limits: SetLimits) -> SetValue:
        """A new set made to hold ``first`` and about ``size_hint`` members (setTypeCreate)."""
        if int64_of(first) is not None and size_hint <= limits.intset_entries:
            return cls(INTSET)
        if size_hint <= limits.listpack_entries:
            return cls(LISTPACK)
        return cls(HASHTABLE)

    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, member: bytes) -> bool:
        return member in self.members

    def prepare(self, size_hint: int, limits: SetLimits) -> None:
        """Before adding about ``size_hint`` members (setTypeMaybeConvert)."""
        if (self.encoding == LISTPACK and size_hint > limits.listpack_entries) or (
            self.encoding == INTSET and size_hint > limits.intset_entries
        ):
            self.encoding = HASHTABLE

    def add(self, member: bytes, limits: SetLimits) -> bool:
        """Add member; False if it was there (setTypeAddAux's conversions on the way)."""
        members = self.members
        if member in members:
            return False
        encoding = self.encoding
        if encoding == LISTPACK:
            if len(members) >= limits.listpack_entries or len(member) > limits.listpack_value:
                self.encoding = HASHTABLE
        elif encoding == INTSET:
            if int64_of(member) is not None:
                if len(members) + 1 > limits.intset_entries:
                    self.encoding = HASHTABLE
            else:
                self._leave_intset(member, limits)
        self.members[member] = None  # (not ``members``: leaving an intset may rebuild it)
        return True

    def _leave_intset(self, member: bytes, limits: SetLimits) -> None:
        """A non-integer joins an intset: listpack when everything would fit (the intset's
        members in its numeric order come first), else hashtable."""
        widest = 0
        if self.members:
            values = [int(m) for m in self.members]
            widest = max(_digits(max(values)), _digits(min(values)))
        if (
            len(self.members) < limits.listpack_entries
            and len(member) <= limits.listpack_value
            and widest <= limits.listpack_value
        ):
            self.members = dict.fromkeys(self.ordered())
            self.encoding = LISTPACK
        else:
            self.encoding = HASHTABLE

    def remove(self, member: bytes) -> bool:
        if member in self.members:
            del self.members[member]
            return True
        return False

    def ordered(self) -> list[bytes]:
        """The members in the order Redis would iterate them (module docstring)."""
        if self.encoding == INTSET:
            return sorted(self.members, key=int)
        return list(self.members)

    #: SORT … BY nosort keeps no order of a set (DESC and LIMIT apply to its iteration order)
    SORT_ORDERED = False

    def sort_elements(self) -> list[bytes]:
        """What SORT sorts: the members in iteration order."""
        return self.ordered()

    def copy(self) -> SetValue:
        twin = SetValue(self.encoding)
        twin.members = dict(self.members)
        return twin

    def encoding_name(self) -> bytes:
        return ENCODING_NAMES[self.encoding]

    def check_invariants(self) -> None:
        if self.encoding not in (INTSET, LISTPACK, HASHTABLE):
            raise SetInvariantError(f"unknown encoding {self.encoding!r}")
        for member in self.members:
            if type(member) is not bytes:
                raise SetInvariantError(f"member {member!r} is not bytes")
            if self.encoding == INTSET and int64_of(member) is None:
                raise SetInvariantError(f"intset member {member!r} is not a 64-bit integer")
