"""Keyspace notification classes (``notify-keyspace-events``): Redis's flag letters, parsed
and printed as Redis does (notify.c). Pure: the commands that fire events are in
``commands/notify.py``."""

from __future__ import annotations

KEYSPACE = 1 << 0  # K: __keyspace@<db>__:<key> <event>
KEYEVENT = 1 << 1  # E: __keyevent@<db>__:<event> <key>
GENERIC = 1 << 2  # g
STRING = 1 << 3  # $
LIST = 1 << 4  # l
SET = 1 << 5  # s
HASH = 1 << 6  # h
ZSET = 1 << 7  # z
EXPIRED = 1 << 8  # x
EVICTED = 1 << 9  # e
STREAM = 1 << 10  # t
KEY_MISS = 1 << 11  # m (not part of A)
MODULE = 1 << 12  # d
NEW = 1 << 13  # n (not part of A)
ALL = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE

#: the classes A stands for, in the order Redis prints them when not all are set
_CLASSES = (
    ("g", GENERIC),
    ("$", STRING),
    ("l", LIST),
    ("s", SET),
    ("h", HASH),
    ("z", ZSET),
    ("x", EXPIRED),
    ("e", EVICTED),
    ("t", STREAM),
    ("d", MODULE),
)
_LETTERS = {
    **dict(_CLASSES),
    "A": ALL,
    "K": KEYSPACE,
    "E": KEYEVENT,
    "m": KEY_MISS,
    "n": NEW,
}
INVALID = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."


def parse_flags(text: str) -> int:
    """The flags of a ``notify-keyspace-events`` value; ValueError(INVALID) on a bad letter."""
    flags = 0
    for letter in text:
        bit = _LETTERS.get(letter)
        if bit is None:
            raise ValueError(INVALID)
        flags |= bit
    return flags


def flags_string(flags: int) -> str:
    """CONFIG GET's normalised form (A when every class of A is set; n is then not shown,
    as in Redis)."""
    if flags & ALL == ALL:
        text = "A"
    else:
        text = "".join(letter for letter, bit in _CLASSES if flags & bit)
        if flags & NEW:
            text += "n"
    if flags & KEYSPACE:
        text += "K"
    if flags & KEYEVENT:
        text += "E"
    if flags & KEY_MISS:
        text += "m"
    return text
