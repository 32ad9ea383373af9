"""Sorted-set commands (Redis ``t_zset.c``), on ``structures.zsets.ZSetValue``.

Writes propagate as given (every sorted-set write is deterministic) except ZMPOP, which Redis
rewrites as the ZPOPMIN or ZPOPMAX of the key it popped from. A sorted set left empty is
deleted. Scores are doubles; replies give them as RESP3 doubles, or in RESP2 as bulk strings
in Redis 7.2's shortest round-trip form.
"""

from __future__ import annotations

import math
import random
from typing import Final

from headwater.commands.args import INT64_MAX, index_range, parse_double, parse_int, strtod
from headwater.commands.context import Block, Client, spec
from headwater.commands.keys import matching, parse_cursor, parse_scan_options
from headwater.commands.notify import emptied, lookup_read, notify, read_as, write_as
from headwater.commands.pops import blocking_mpop, blocking_pop, mpop
from headwater.commands.sets import scan_step
from headwater.errors import NOT_FLOAT, SYNTAX, WRONGTYPE, err
from headwater.keyevents import GENERIC, ZSET
from headwater.ops.change import ONE, Change, Written, as_given
from headwater.resp.encoder import format_double
from headwater.resp.types import NULL_ARRAY, Reply
from headwater.structures.sets import SetValue
from headwater.structures.zsets import LexRange, Pair, ScoreRange, ZSetLimits, ZSetValue

NOT_A_FLOAT_RANGE = err("min or max is not a float")
NOT_A_LEX_RANGE = err("min or max not valid string range item")
NAN_SCORE = err("resulting score is not a number (NaN)")
OUT_OF_RANGE_POSITIVE = err("value is out of range, must be positive")
LIMIT_NEGATIVE = err("LIMIT can't be negative")
#: ZRANDMEMBER's picks (a test may seed it)
rng = random.Random()


def limits_of(c: Client) -> ZSetLimits:
    settings = c.server.config.values  # (the dict itself: no method call per lookup)
    return ZSetLimits(settings["zset-max-listpack-entries"], settings["zset-max-listpack-value"])


def _with_scores(pairs: list[Pair], resp: int, flat: bool = False) -> list[Reply]:
    """Members and scores: a flat array in RESP2, pairs in RESP3 (unless ``flat``)."""
    if resp == 3 and not flat:
        return [[member, score] for score, member in pairs]
    out: list[Reply] = []
    for score, member in pairs:
        out.append(member)
        out.append(format_double(score) if resp == 2 else score)
    return out


# -- ZADD, ZINCRBY, ZREM -------------------------------------------------------------------


class _AddFlags:
    __slots__ = ("ch", "gt", "incr", "lt", "nx", "xx")

    def __init__(self) -> None:
        self.nx = self.xx = self.gt = self.lt = self.ch = self.incr = False


_ADD_FLAGS = (b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR")


def _parse_zadd(argv: list[bytes]) -> tuple[_AddFlags, list[float], list[bytes]]:
    flags = _AddFlags()
    if len(argv) == 4 and argv[2][:1].isdigit():  # (the usual ZADD key score member)
        return flags, [parse_double(argv[2])], [argv[3]]
    i = 2
    while i < len(argv):
        token = argv[i].upper()
        if token not in _ADD_FLAGS:
            break
        setattr(flags, token.decode().lower(), True)
        i += 1
    rest = argv[i:]
    if not rest or len(rest) % 2:
        raise SYNTAX
    if flags.nx and flags.xx:
        raise err("XX and NX options at the same time are not compatible")
    if (flags.gt and flags.nx) or (flags.lt and flags.nx) or (flags.gt and flags.lt):
        raise err("GT, LT, and/or NX options at the same time are not compatible")
    if flags.incr and len(rest) > 2:
        raise err("INCR option supports a single increment-element pair")
    scores = [parse_double(raw) for raw in rest[0::2]]
    return flags, scores, rest[1::2]


NOP, ADDED, UPDATED, SAME = 0, 1, 2, 3


def _add_one(
    z: ZSetValue, member: bytes, score: float, flags: _AddFlags, limits: ZSetLimits
) -> tuple[int, float]:
    """zsetAdd: what happened (NOP, ADDED, UPDATED, SAME) and the member's score after."""
    current = z.scores.get(member)
    if current is None:
        if flags.xx:
            return NOP, score
        z.put(member, score, None, limits)
        return ADDED, score
    if flags.nx:
        return NOP, current
    if flags.incr:
        score = current + score
        if score != score:
            raise NAN_SCORE
    if (flags.gt and score <= current) or (flags.lt and score >= current):
        return NOP, current
    if score == current:
        return SAME, score
    z.put(member, score, current, limits)
    return UPDATED, score


def cmd_zadd(c: Client, argv: list[bytes]) -> Reply | Written:
    if len(argv) == 4:
        raw = argv[2]
        if raw and 48 <= raw[0] <= 57:  # (the usual ZADD key score member: no flags)
            return _zadd_pair(c, argv[1], parse_double(raw), argv[3])
    flags, scores, members = _parse_zadd(argv)
    return _zadd(c, argv[1], flags, scores, members)


#: what ``put`` is given for a skiplist set, which never reads them (it converts no more)
_UNREAD_LIMITS: Final = ZSetLimits()


def _zadd_pair(c: Client, key: bytes, score: float, member: bytes) -> Reply | Written:
    """``_zadd`` of one pair without flags, with no list, flags or limits made for it."""
    z = write_as(c, key, ZSetValue)
    if z is None:
        limits = limits_of(c)
        z = ZSetValue.for_size(1, len(member), limits)
        c.db.set(key, z)
    elif z.listpack:
        limits = limits_of(c)
        z.prepare(1, len(member), limits)
    else:
        limits = _UNREAD_LIMITS
    previous = z.scores.get(member)
    if previous is not None and previous == score:  # (-0.0 and 0.0 too, as Redis)
        return 0
    z.put(member, score, previous, limits)
    c.db.signal_modified(key)
    if previous is None:
        c.db.signal_ready(key)  # (clients blocked in BZPOPMIN & co. on an empty key)
    notify(c, ZSET, b"zadd", key)
    return Written(1 if previous is None else 0, ONE)


def _zadd(
    c: Client, key: bytes, flags: _AddFlags, scores: list[float], members: list[bytes]
) -> Reply | Written:
    z = write_as(c, key, ZSetValue)
    limits = limits_of(c)
    longest = 0
    for member in members:
        longest = max(longest, len(member))
    if z is None:
        if flags.xx:
            return None if flags.incr else 0
        z = ZSetValue.for_size(len(members), longest, limits)
        c.db.set(key, z)
    else:
        z.prepare(len(members), longest, limits)
    added = updated = processed = 0
    score_after = 0.0
    for i in range(len(members)):
        outcome, score_after = _add_one(z, members[i], scores[i], flags, limits)
        added += outcome == ADDED
        updated += outcome == UPDATED
        processed += outcome != NOP
    changed = added + updated
    if changed:
        c.db.signal_modified(key)
        if added:
            c.db.signal_ready(key)  # (clients blocked in BZPOPMIN & co. on an empty key)
        notify(c, ZSET, b"zincr" if flags.incr else b"zadd", key)
    if flags.incr:
        reply: Reply = score_after if processed else None
    else:
        reply = changed if flags.ch else added
    return Written(reply, as_given(changed)) if changed else reply


#: the sorted sets' write path for GEOADD: ZADD's flags, and ZADD of parsed scores
AddFlags = _AddFlags


def add_scores(
    c: Client, key: bytes, flags: _AddFlags, scores: list[float], members: list[bytes]
) -> Reply | Written:
    """ZADD key [flags] score member … with the scores parsed (GEOADD computes them)."""
    return _zadd(c, key, flags, scores, members)


def cmd_zincrby(c: Client, argv: list[bytes]) -> Reply | Written:
    flags = _AddFlags()
    flags.incr = True
    return _zadd(c, argv[1], flags, [parse_double(argv[2])], [argv[3]])


def cmd_zrem(c: Client, argv: list[bytes]) -> Reply | Written:
    key = argv[1]
    z = write_as(c, key, ZSetValue)
    if z is None:
        return 0
    removed = 0
    for member in argv[2:]:
        if z.remove(member):
            removed += 1
            if not z.scores:
                break
    if not removed:
        return 0
    notify(c, ZSET, b"zrem", key)
    emptied(c, key, not z.scores)
    return Written(removed, as_given(removed))


# -- lookups -------------------------------------------------------------------------------


def cmd_zcard(c: Client, argv: list[bytes]) -> Reply:
    z = read_as(c, argv[1], ZSetValue)
    return 0 if z is None else len(z)


def cmd_zscore(c: Client, argv: list[bytes]) -> Reply:
    z = read_as(c, argv[1], ZSetValue)
    return None if z is None else z.scores.get(argv[2])


def cmd_zmscore(c: Client, argv: list[bytes]) -> Reply:
    z = read_as(c, argv[1], ZSetValue)
    if z is None:
        return [None] * (len(argv) - 2)
    return [z.scores.get(member) for member in argv[2:]]


def _rank(c: Client, argv: list[bytes], reverse: bool) -> Reply:
    if len(argv) > 4 or (len(argv) == 4 and argv[3].upper() != b"WITHSCORE"):
        raise SYNTAX
    with_score = len(argv) == 4
    z = read_as(c, argv[1], ZSetValue)
    rank = None if z is None else z.rank(argv[2])
    if z is None or rank is None:
        return NULL_ARRAY if with_score else None
    if reverse:
        rank = len(z) - 1 - rank
    if with_score:
        return [rank, z.scores[argv[2]]]
    return rank


def cmd_zrank(c: Client, argv: list[bytes]) -> Reply:
    return _rank(c, argv, False)


def cmd_zrevrank(c: Client, argv: list[bytes]) -> Reply:
    return _rank(c, argv, True)


def parse_score_range(low: bytes, high: bytes) -> ScoreRange:
    """zslParseRange: ``(`` makes an end exclusive; ``-inf``/``+inf``; NaN refused."""
    low_open, high_open = low.startswith(b"("), high.startswith(b"(")
    lo = _strtod(low[1:] if low_open else low)
    hi = _strtod(high[1:] if high_open else high)
    return ScoreRange(lo, hi, low_open, high_open)


def _strtod(raw: bytes) -> float:
    """A range end as zslParseRange reads it with plain ``strtod``: leading spaces are
    skipped and nothing at all reads as 0; anything after the number, or NaN, is refused."""
    if raw.isdigit():  # (the usual ends first: digits, ``+inf``, ``-inf``)
        return float(raw)
    if raw == b"+inf":
        return math.inf
    if raw == b"-inf":
        return -math.inf
    text = raw.lstrip(b" \t\n\v\f\r")
    if not text:
        return 0.0
    return strtod(text, NOT_A_FLOAT_RANGE)  # (out of range is fine here: no ERANGE check)


def _lex_end(raw: bytes) -> tuple[bytes | None, bool, int]:
    """One end of a lex range: (bound, exclusive, -1 for '-' / 1 for '+' / 0)."""
    if raw == b"-":
        return None, False, -1
    if raw == b"+":
        return None, False, 1
    if raw[:1] == b"(":
        return raw[1:], True, 0
    if raw[:1] == b"[":
        return raw[1:], False, 0
    raise NOT_A_LEX_RANGE


def parse_lex_range(low: bytes, high: bytes) -> LexRange | None:
    """zslParseLexRange; None for a range that holds nothing by its ends alone (``+`` as
    the minimum, ``-`` as the maximum)."""
    lo, lo_open, lo_inf = _lex_end(low)
    hi, hi_open, hi_inf = _lex_end(high)
    if lo_inf == 1 or hi_inf == -1:
        return None
    return LexRange(lo, hi, lo_open, hi_open)


def cmd_zcount(c: Client, argv: list[bytes]) -> Reply:
    r = parse_score_range(argv[2], argv[3])
    z = read_as(c, argv[1], ZSetValue)
    if z is None or r.empty():
        return 0
    first, end = z.score_span(r)
    return end - first


def cmd_zlexcount(c: Client, argv: list[bytes]) -> Reply:
    r = parse_lex_range(argv[2], argv[3])
    z = read_as(c, argv[1], ZSetValue)
    if z is None or r is None:
        return 0
    first, end = z.lex_span(r)
    return end - first


# -- ZRANGE and its family -----------------------------------------------------------------

RANK, SCORE, LEX = 0, 1, 2


class _RangeQuery:
    __slots__ = (
        "by", "count", "high", "lex_range", "low", "offset", "reverse", "score_range",
        "start", "stop", "with_scores",
    )  # fmt: skip

    def __init__(self, by: int, reverse: bool) -> None:
        self.by = by
        self.reverse = reverse
        self.with_scores = False
        self.offset = 0
        self.count = -1  # -1: no LIMIT
        self.low = self.high = b""
        #: the parsed range (``_check_range_args``): ranks, scores, or members (None: empty)
        self.start = self.stop = 0
        self.score_range: ScoreRange | None = None
        self.lex_range: LexRange | None = None


def _parse_range(
    argv: list[bytes], at: int, by: int | None, reverse: bool | None, store: bool
) -> _RangeQuery:
    """zrangeGenericCommand's parsing: the options after ``<min> <max>`` (at ``at``); ``by``
    and ``reverse`` are preset by the legacy commands (None: given by an option)."""
    chosen_by, chosen_reverse = by, reverse
    with_scores = False
    offset, count = 0, -1
    j = at + 2
    while j < len(argv):
        token = argv[j].upper()
        left = len(argv) - j - 1
        if token == b"WITHSCORES" and not store:
            with_scores = True
        elif token == b"LIMIT" and left >= 2:
            offset = parse_int(argv[j + 1])
            count = parse_int(argv[j + 2])
            j += 2
        elif token == b"REV" and chosen_reverse is None:
            chosen_reverse = True
        elif token == b"BYLEX" and chosen_by is None:
            chosen_by = LEX
        elif token == b"BYSCORE" and chosen_by is None:
            chosen_by = SCORE
        else:
            raise SYNTAX
        j += 1
    q = _RangeQuery(RANK if chosen_by is None else chosen_by, bool(chosen_reverse))
    if count != -1 and q.by == RANK:
        raise err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
        )
    if with_scores and q.by == LEX:
        raise err("syntax error, WITHSCORES not supported in combination with BYLEX")
    q.with_scores, q.offset, q.count = with_scores, offset, count
    low, high = argv[at], argv[at + 1]
    if q.reverse and q.by != RANK:  # (given as max, min)
        low, high = high, low
    q.low, q.high = low, high
    return q


def _select(z: ZSetValue, q: _RangeQuery) -> list[Pair]:
    """The pairs a parsed query selects (``_check_range_args`` done), in reply order."""
    first, end = _span(z, q)
    if q.reverse:
        pairs = z.by_rank(first, end - 1)
        pairs.reverse()
        return pairs
    return z.by_rank(first, end - 1)


def _select_members(z: ZSetValue, q: _RangeQuery) -> list[bytes]:
    """The members of ``_select`` (no pairs made)."""
    r = q.score_range
    if q.by == SCORE and not q.reverse and r is not None:  # (ZRANGEBYSCORE: one walk)
        if r.empty() or q.offset < 0 or q.count == 0:
            return []
        return z.score_members(r, q.offset, q.count)
    first, end = _span(z, q)
    members = z.members_by_rank(first, end - 1)
    if q.reverse:
        members.reverse()
    return members


def _span(z: ZSetValue, q: _RangeQuery) -> tuple[int, int]:
    """[first, end) positions of what a parsed query selects (LIMIT applied)."""
    n = len(z)
    if q.by == RANK:
        start, stop = index_range(q.start, q.stop, n)
        if start > stop:
            return 0, 0
        if q.reverse:
            return n - 1 - stop, n - start
        return start, stop + 1
    if q.by == SCORE:
        r = q.score_range
        first, end = (0, 0) if r is None or r.empty() else z.score_span(r)
    else:
        lr = q.lex_range
        first, end = (0, 0) if lr is None else z.lex_span(lr)
    return _limited(first, end, q)


def _limited(first: int, end: int, q: _RangeQuery) -> tuple[int, int]:
    """Positions [first, end) after LIMIT offset count, from the top when reversed."""
    if q.offset < 0 or q.count == 0 or first >= end:
        return 0, 0
    size = end - first - q.offset
    if size <= 0:
        return 0, 0
    if q.count > 0:
        size = min(size, q.count)
    if q.reverse:
        top = end - 1 - q.offset
        return top - size + 1, top + 1
    start = first + q.offset
    return start, start + size


def _check_range_args(q: _RangeQuery) -> None:
    """Parses the range into q: Redis parses it before it looks the key up (errors first)."""
    if q.by == RANK:
        q.start = parse_int(q.low)
        q.stop = parse_int(q.high)
    elif q.by == SCORE:
        q.score_range = parse_score_range(q.low, q.high)
    else:
        q.lex_range = parse_lex_range(q.low, q.high)


def _range_reply(c: Client, argv: list[bytes], by: int | None, reverse: bool | None) -> Reply:
    q = _parse_range(argv, 2, by, reverse, store=False)
    _check_range_args(q)
    z = read_as(c, argv[1], ZSetValue)
    if z is None:
        return []
    if q.with_scores:
        return _with_scores(_select(z, q), c.resp)
    members: list[Reply] = []
    members.extend(_select_members(z, q))
    return members


def cmd_zrange(c: Client, argv: list[bytes]) -> Reply:
    return _range_reply(c, argv, None, None)


def cmd_zrevrange(c: Client, argv: list[bytes]) -> Reply:
    return _range_reply(c, argv, RANK, True)


def cmd_zrangebyscore(c: Client, argv: list[bytes]) -> Reply:
    return _range_reply(c, argv, SCORE, False)


def cmd_zrevrangebyscore(c: Client, argv: list[bytes]) -> Reply:
    return _range_reply(c, argv, SCORE, True)


def cmd_zrangebylex(c: Client, argv: list[bytes]) -> Reply:
    return _range_reply(c, argv, LEX, False)


def cmd_zrevrangebylex(c: Client, argv: list[bytes]) -> Reply:
    return _range_reply(c, argv, LEX, True)


def cmd_zrangestore(c: Client, argv: list[bytes]) -> Reply | Written:
    """ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]"""
    q = _parse_range(argv, 3, None, None, store=True)
    _check_range_args(q)
    z = read_as(c, argv[2], ZSetValue)
    pairs = [] if z is None else _select(z, q)
    return store_result(c, argv[1], pairs, b"zrangestore")


def store_result(c: Client, destination: bytes, pairs: list[Pair], event: bytes) -> Written:
    """The *STORE commands: destination replaced by a sorted set of pairs (deleted when
    there are none), its encoding chosen by its size (zsetConvertToListpackIfNeeded)."""
    if not pairs:
        if c.db.delete(destination):
            notify(c, GENERIC, b"del", destination)
            return Written(0, ONE)
        return Written(0, as_given(0))
    limits = limits_of(c)
    longest = max(len(member) for _, member in pairs)
    result = ZSetValue.for_size(len(pairs), longest, limits)
    for score, member in pairs:
        result.set(member, score, limits)
    c.db.set(destination, result)
    notify(c, ZSET, event, destination)
    return Written(len(result), ONE)


# -- removals by range ---------------------------------------------------------------------


def _remove_pairs(
    c: Client, key: bytes, z: ZSetValue, pairs: list[Pair], event: bytes
) -> Reply | Written:
    if not pairs:
        return 0
    for _, member in pairs:
        z.remove(member)
    notify(c, ZSET, event, key)
    emptied(c, key, not z.scores)
    return Written(len(pairs), as_given(len(pairs)))


def cmd_zremrangebyrank(c: Client, argv: list[bytes]) -> Reply | Written:
    start, stop = parse_int(argv[2]), parse_int(argv[3])
    z = write_as(c, argv[1], ZSetValue)
    if z is None:
        return 0
    q = _RangeQuery(RANK, False)
    q.start, q.stop = start, stop
    return _remove_pairs(c, argv[1], z, _select(z, q), b"zremrangebyrank")


def cmd_zremrangebyscore(c: Client, argv: list[bytes]) -> Reply | Written:
    r = parse_score_range(argv[2], argv[3])
    z = write_as(c, argv[1], ZSetValue)
    if z is None or r.empty():
        return 0
    first, end = z.score_span(r)
    pairs = z.by_rank(first, end - 1)
    return _remove_pairs(c, argv[1], z, pairs, b"zremrangebyscore")


def cmd_zremrangebylex(c: Client, argv: list[bytes]) -> Reply | Written:
    r = parse_lex_range(argv[2], argv[3])
    z = write_as(c, argv[1], ZSetValue)
    if z is None or r is None:
        return 0
    first, end = z.lex_span(r)
    pairs = z.by_rank(first, end - 1)
    return _remove_pairs(c, argv[1], z, pairs, b"zremrangebylex")


# -- pops ----------------------------------------------------------------------------------


def _pop(c: Client, key: bytes, z: ZSetValue, count: int, highest: bool) -> list[Pair]:
    """Pop up to count members from the low or high end (in pop order): ``zpopmin`` or
    ``zpopmax`` fired, the key deleted if it is left empty."""
    n = len(z)
    take = min(count, n)
    pairs = z.by_rank(n - take, n - 1) if highest else z.by_rank(0, take - 1)
    if highest:
        pairs.reverse()
    for _, member in pairs:
        z.remove(member)
    notify(c, ZSET, b"zpopmax" if highest else b"zpopmin", key)
    emptied(c, key, not z.scores)
    return pairs


def _zpop(c: Client, argv: list[bytes], highest: bool) -> Reply | Written:
    if len(argv) > 3:
        raise SYNTAX
    count = 1
    if len(argv) == 3:
        count = parse_int(argv[2], OUT_OF_RANGE_POSITIVE)
        if count < 0:
            raise OUT_OF_RANGE_POSITIVE
    key = argv[1]
    z = write_as(c, key, ZSetValue)
    if z is None or count == 0:
        return []
    pairs = _pop(c, key, z, count, highest)
    reply = _with_scores(pairs, c.resp, flat=len(argv) == 2)
    return Written(reply, as_given(len(pairs)))


def cmd_zpopmin(c: Client, argv: list[bytes]) -> Reply | Written:
    return _zpop(c, argv, False)


def cmd_zpopmax(c: Client, argv: list[bytes]) -> Reply | Written:
    return _zpop(c, argv, True)


def _pop_from(c: Client, key: bytes, highest: bool, count: int) -> Written | None:
    """The pop of ZMPOP and the blocking pops from one key (``pops.PopFrom``), None when it
    is missing: propagated as the ZPOPMIN/ZPOPMAX Redis rewrites them to (with the number
    popped for the M forms)."""
    z = write_as(c, key, ZSetValue)
    if z is None:
        return None
    pairs = _pop(c, key, z, count or 1, highest)
    line = [b"ZPOPMAX" if highest else b"ZPOPMIN", key]
    if not count:  # (BZPOPMIN/BZPOPMAX)
        score, member = pairs[0]
        one: Reply = [key, member, format_double(score) if c.resp == 2 else score]
        return Written(one, Change(1, [line]))
    line.append(b"%d" % len(pairs))
    reply = [key, _with_scores(pairs, c.resp, flat=False) if c.resp == 3
             else [[m, format_double(s)] for s, m in pairs]]  # fmt: skip
    return Written(reply, Change(len(pairs), [line]))


def cmd_zmpop(c: Client, argv: list[bytes]) -> Reply | Written:
    """ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]"""
    return mpop(c, argv, b"MAX", b"MIN", _pop_from)


# -- blocking pops -------------------------------------------------------------------------


def cmd_bzpopmin(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    return blocking_pop(c, argv, False, _pop_from, ZSetValue)


def cmd_bzpopmax(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    return blocking_pop(c, argv, True, _pop_from, ZSetValue)


def cmd_bzmpop(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    """BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]"""
    return blocking_mpop(c, argv, b"MAX", b"MIN", _pop_from, ZSetValue)


# -- ZUNION, ZINTER, ZDIFF and their STORE forms, ZINTERCARD -------------------------------

UNION, INTER, DIFF = 0, 1, 2
_AGGREGATES = {b"SUM": 0, b"MIN": 1, b"MAX": 2}
WEIGHT_NOT_FLOAT = err("weight value is not a float")


def _operand(c: Client, key: bytes, write: bool) -> dict[bytes, float] | None:
    """An input of the algebra: a sorted set's scores, or a set's members at score 1."""
    value = c.db.get(key) if write else lookup_read(c, key)
    if value is None:
        return None
    if type(value) is ZSetValue:
        return value.scores
    if type(value) is SetValue:
        return dict.fromkeys(value.members, 1.0)
    raise WRONGTYPE


def _combine(total: float, value: float, aggregate: int) -> float:
    """zunionInterAggregate: +inf plus -inf is 0, as in Redis."""
    if aggregate == 0:
        total += value
        return 0.0 if total != total else total
    return min(total, value) if aggregate == 1 else max(total, value)


def _weighted(score: float, weight: float) -> float:
    value = score * weight
    return 0.0 if value != value else value  # (0 * inf)


def _algebra(
    sources: list[dict[bytes, float] | None], weights: list[float], op: int, aggregate: int
) -> dict[bytes, float]:
    """The result's scores, computed as Redis does (inputs by size for the intersection and
    the union, so that sums add up in Redis's order)."""
    if op == DIFF:
        first = sources[0]
        if not first:
            return {}
        others = [s for s in sources[1:] if s]
        return {m: sc for m, sc in first.items() if not any(m in o for o in others)}
    order = sorted(range(len(sources)), key=lambda i: len(sources[i] or ()))
    if op == INTER:
        if any(not sources[i] for i in order):
            return {}
        smallest, rest = order[0], order[1:]
        out: dict[bytes, float] = {}
        for member, score in sources[smallest].items():  # type: ignore[union-attr]
            total = _weighted(score, weights[smallest])
            for i in rest:
                other = sources[i].get(member)  # type: ignore[union-attr]
                if other is None:
                    break
                total = _combine(total, _weighted(other, weights[i]), aggregate)
            else:
                out[member] = total
        return out
    union: dict[bytes, float] = {}
    for i in order:
        for member, score in (sources[i] or {}).items():
            value = _weighted(score, weights[i])
            current = union.get(member)
            union[member] = value if current is None else _combine(current, value, aggregate)
    return union


def _parse_algebra(
    c: Client, argv: list[bytes], at: int, op: int, store: bool, count_only: bool
) -> tuple[list[dict[bytes, float] | None], list[float], int, bool, int]:
    """numkeys at ``at``, the keys (looked up first, as Redis does), then WEIGHTS,
    AGGREGATE, WITHSCORES or LIMIT: (sources, weights, aggregate, with_scores, limit)."""
    numkeys = parse_int(argv[at])
    if numkeys < 1:
        name = argv[0].decode("utf-8", "replace").lower()
        raise err(f"at least 1 input key is needed for '{name}' command")
    if numkeys > len(argv) - at - 1:
        raise SYNTAX
    keys = argv[at + 1 : at + 1 + numkeys]
    sources = [_operand(c, key, store) for key in keys]
    weights = [1.0] * numkeys
    aggregate, with_scores, limit = 0, False, 0
    j = at + 1 + numkeys
    while j < len(argv):
        token = argv[j].upper()
        left = len(argv) - j
        if op != DIFF and not count_only and left >= numkeys + 1 and token == b"WEIGHTS":
            weights = [parse_double(raw, WEIGHT_NOT_FLOAT) for raw in argv[j + 1 : j + 1 + numkeys]]
            j += 1 + numkeys
        elif op != DIFF and not count_only and left >= 2 and token == b"AGGREGATE":
            chosen = _AGGREGATES.get(argv[j + 1].upper())
            if chosen is None:
                raise SYNTAX
            aggregate = chosen
            j += 2
        elif not store and not count_only and token == b"WITHSCORES":
            with_scores = True
            j += 1
        elif count_only and left >= 2 and token == b"LIMIT":
            limit = parse_int(argv[j + 1], LIMIT_NEGATIVE)
            if limit < 0:
                raise LIMIT_NEGATIVE
            j += 2
        else:
            raise SYNTAX
    return sources, weights, aggregate, with_scores, limit


def _ordered(scores: dict[bytes, float]) -> list[Pair]:
    return sorted((score, member) for member, score in scores.items())


def _algebra_reply(c: Client, argv: list[bytes], op: int) -> Reply:
    sources, weights, aggregate, with_scores, _ = _parse_algebra(c, argv, 1, op, False, False)
    pairs = _ordered(_algebra(sources, weights, op, aggregate))
    if with_scores:
        return _with_scores(pairs, c.resp)
    return [member for _, member in pairs]


def _algebra_store(c: Client, argv: list[bytes], op: int, event: bytes) -> Reply | Written:
    sources, weights, aggregate, _, _ = _parse_algebra(c, argv, 2, op, True, False)
    return store_result(c, argv[1], _ordered(_algebra(sources, weights, op, aggregate)), event)


def cmd_zunion(c: Client, argv: list[bytes]) -> Reply:
    return _algebra_reply(c, argv, UNION)


def cmd_zinter(c: Client, argv: list[bytes]) -> Reply:
    return _algebra_reply(c, argv, INTER)


def cmd_zdiff(c: Client, argv: list[bytes]) -> Reply:
    return _algebra_reply(c, argv, DIFF)


def cmd_zunionstore(c: Client, argv: list[bytes]) -> Reply | Written:
    return _algebra_store(c, argv, UNION, b"zunionstore")


def cmd_zinterstore(c: Client, argv: list[bytes]) -> Reply | Written:
    return _algebra_store(c, argv, INTER, b"zinterstore")


def cmd_zdiffstore(c: Client, argv: list[bytes]) -> Reply | Written:
    return _algebra_store(c, argv, DIFF, b"zdiffstore")


def cmd_zintercard(c: Client, argv: list[bytes]) -> Reply:
    """ZINTERCARD numkeys key [key ...] [LIMIT limit]"""
    sources, weights, aggregate, _, limit = _parse_algebra(c, argv, 1, INTER, False, True)
    found = len(_algebra(sources, weights, INTER, aggregate))
    return min(found, limit) if limit else found


# -- random members and ZSCAN --------------------------------------------------------------


def cmd_zrandmember(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) > 4 or (len(argv) == 4 and argv[3].upper() != b"WITHSCORES"):
        raise SYNTAX
    if len(argv) == 2:
        z = read_as(c, argv[1], ZSetValue)
        return None if z is None else rng.choice(list(z.scores))
    count = parse_int(argv[2])
    with_scores = len(argv) == 4
    if count == -(2**63):
        raise err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
        )
    if with_scores and count < -(INT64_MAX // 2):  # (count * 2 would overflow)
        raise err("value is out of range")
    z = read_as(c, argv[1], ZSetValue)
    if z is None or count == 0:
        return []
    members = list(z.scores)
    if count < 0:
        picked = [rng.choice(members) for _ in range(-count)]
    elif count >= len(members):
        picked = z.members()
    else:
        picked = rng.sample(members, count)
    if not with_scores:
        return list(picked)
    return _with_scores([(z.scores[m], m) for m in picked], c.resp)


def cmd_zscan(c: Client, argv: list[bytes]) -> Reply:
    """ZSCAN key cursor [MATCH pattern] [COUNT count]"""
    cursor = parse_cursor(argv[2])
    z = read_as(c, argv[1], ZSetValue)  # (before the options, as in Redis)
    if z is None:
        return [b"0", []]
    count, pattern, _ = parse_scan_options(argv, 3)
    if z.listpack:  # a listpack: everything at once, in order (as Redis)
        cursor, members = 0, z.members()
    else:
        cursor, members = scan_step(list(z.scores), cursor, count)
    members = matching(members, pattern)
    flat: list[Reply] = []
    for member in members:
        flat.append(member)
        flat.append(format_double(z.scores[member]))
    return [b"%d" % cursor, flat]


_ = NOT_FLOAT  # (re-exported for the family's tests)

SPECS = (
    spec("zadd", -4, "write denyoom fast", (1, 1, 1), cmd_zadd),
    spec("zincrby", 4, "write denyoom fast", (1, 1, 1), cmd_zincrby),
    spec("zrem", -3, "write fast", (1, 1, 1), cmd_zrem),
    spec("zcard", 2, "readonly fast", (1, 1, 1), cmd_zcard),
    spec("zscore", 3, "readonly fast", (1, 1, 1), cmd_zscore),
    spec("zmscore", -3, "readonly fast", (1, 1, 1), cmd_zmscore),
    spec("zrank", -3, "readonly fast", (1, 1, 1), cmd_zrank),
    spec("zrevrank", -3, "readonly fast", (1, 1, 1), cmd_zrevrank),
    spec("zcount", 4, "readonly fast", (1, 1, 1), cmd_zcount),
    spec("zlexcount", 4, "readonly fast", (1, 1, 1), cmd_zlexcount),
    spec("zrange", -4, "readonly", (1, 1, 1), cmd_zrange),
    spec("zrevrange", -4, "readonly", (1, 1, 1), cmd_zrevrange),
    spec("zrangebyscore", -4, "readonly", (1, 1, 1), cmd_zrangebyscore),
    spec("zrevrangebyscore", -4, "readonly", (1, 1, 1), cmd_zrevrangebyscore),
    spec("zrangebylex", -4, "readonly", (1, 1, 1), cmd_zrangebylex),
    spec("zrevrangebylex", -4, "readonly", (1, 1, 1), cmd_zrevrangebylex),
    spec("zrangestore", -5, "write denyoom", (1, 2, 1), cmd_zrangestore),
    spec("zremrangebyrank", 4, "write", (1, 1, 1), cmd_zremrangebyrank),
    spec("zremrangebyscore", 4, "write", (1, 1, 1), cmd_zremrangebyscore),
    spec("zremrangebylex", 4, "write", (1, 1, 1), cmd_zremrangebylex),
    spec("zpopmin", -2, "write fast", (1, 1, 1), cmd_zpopmin),
    spec("zpopmax", -2, "write fast", (1, 1, 1), cmd_zpopmax),
    spec("zmpop", -4, "write movablekeys", (0, 0, 0), cmd_zmpop),
    spec("zunion", -3, "readonly movablekeys", (0, 0, 0), cmd_zunion),
    spec("zinter", -3, "readonly movablekeys", (0, 0, 0), cmd_zinter),
    spec("zdiff", -3, "readonly movablekeys", (0, 0, 0), cmd_zdiff),
    spec("zunionstore", -4, "write denyoom movablekeys", (1, 1, 1), cmd_zunionstore),
    spec("zinterstore", -4, "write denyoom movablekeys", (1, 1, 1), cmd_zinterstore),
    spec("zdiffstore", -4, "write denyoom movablekeys", (1, 1, 1), cmd_zdiffstore),
    spec("zintercard", -3, "readonly movablekeys", (0, 0, 0), cmd_zintercard),
    spec("bzpopmin", -3, "write blocking fast", (1, -2, 1), cmd_bzpopmin),
    spec("bzpopmax", -3, "write blocking fast", (1, -2, 1), cmd_bzpopmax),
    spec("bzmpop", -5, "write blocking movablekeys", (0, 0, 0), cmd_bzmpop),
    spec("zrandmember", -2, "readonly", (1, 1, 1), cmd_zrandmember),
    spec("zscan", -3, "readonly", (1, 1, 1), cmd_zscan),
)
