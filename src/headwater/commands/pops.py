"""What the pops of lists and sorted sets share (Redis's ``t_list.c`` and ``t_zset.c`` use
the same helpers): a blocking command's timeout, the wait on its keys, and the grammar of
``numkeys key [key ...] <side> [COUNT count]`` of LMPOP/ZMPOP and their blocking forms.
"""

from __future__ import annotations

import math

from headwater.commands.args import INT64_MAX, parse_double, parse_int
from headwater.commands.context import Block, Client
from headwater.errors import SYNTAX, err
from headwater.resp.types import NULL_ARRAY

NUMKEYS_NOT_POSITIVE = err("numkeys should be greater than 0")
COUNT_NOT_POSITIVE = err("count should be greater than 0")
TIMEOUT_NOT_FLOAT = err("timeout is not a float or out of range")
TIMEOUT_OUT_OF_RANGE = err("timeout is out of range")


def parse_seconds_timeout(c: Client, raw: bytes) -> int:
    """A blocking command's timeout in seconds (getTimeoutFromObjectOrReply, UNIT_SECONDS):
    milliseconds, rounded up; 0 waits for ever."""
    seconds = parse_double(raw, TIMEOUT_NOT_FLOAT)
    ms = seconds * 1000.0
    # (past 64 bits, Redis's cast to long long gives LLONG_MIN on x86: "negative")
    whole = math.ceil(ms) if -(2.0**63) <= ms < 2.0**63 else -(2**63)
    if whole < 0:
        raise err("timeout is negative")
    if whole > 0 and whole > INT64_MAX - c.server.keyspace.now_ms:
        raise TIMEOUT_OUT_OF_RANGE
    return whole


def block_on(
    c: Client, keys: list[bytes], timeout_ms: int, wakes_on: type, null_if_denied: bool = False
) -> Block:
    """Wait on keys until one holds a ``wakes_on`` value; a null array on timeout, and where
    the client may not wait (a null bulk string there with ``null_if_denied``)."""
    deadline = c.server.clock.monotonic_ms() + timeout_ms if timeout_ms else 0
    return Block(list(keys), deadline, NULL_ARRAY, wakes_on=wakes_on, null_if_denied=null_if_denied)


def parse_mpop(
    argv: list[bytes], at: int, first: bytes, second: bytes
) -> tuple[list[bytes], bool, int]:
    """``numkeys key [key ...] <first>|<second> [COUNT count]`` from ``at`` (LEFT|RIGHT for
    lists, MIN|MAX for sorted sets): (keys, whether the side is ``first``, count)."""
    numkeys = parse_int(argv[at], NUMKEYS_NOT_POSITIVE)
    if numkeys <= 0:
        raise NUMKEYS_NOT_POSITIVE
    where = at + 1 + numkeys
    if where >= len(argv):
        raise SYNTAX
    side = argv[where].upper()
    if side != first and side != second:
        raise SYNTAX
    count = -1
    j = where + 1
    while j < len(argv):
        if count == -1 and argv[j].upper() == b"COUNT" and j + 1 < len(argv):
            count = parse_int(argv[j + 1], COUNT_NOT_POSITIVE)
            if count <= 0:
                raise COUNT_NOT_POSITIVE
            j += 2
        else:
            raise SYNTAX
    return argv[at + 1 : where], side == first, max(count, 1)
