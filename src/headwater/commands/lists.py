"""List commands (Redis 7.2 ``t_list.c``), on ``structures.lists.ListValue``.

Writes propagate as given, except the ones Redis rewrites: LMPOP, BLPOP, BRPOP and BLMPOP
become the LPOP/RPOP (with the count popped, for the M forms) of the key they popped from,
BLMOVE becomes LMOVE and BRPOPLPUSH RPOPLPUSH. A list left empty is deleted. Every write
checks the encoding as Redis 7.2 does: before adding (listpack → quicklist) and after
removing (a small quicklist back to a listpack).

Blocking pops wait through the engine's blocking machinery (``Block``): a push signals the
key, and the waiters are run again first come first served after the command that pushed.
In MULTI/EXEC and in scripts they never wait (Redis 7.2 allows them in scripts: the
``noscript`` flag Redis 7.0 had is gone).
"""

from __future__ import annotations

from headwater.commands.args import index_range, parse_int, strict_int
from headwater.commands.context import Block, Client, spec
from headwater.commands.notify import notify, read_as, write_as
from headwater.commands.pops import (
    block_on,
    blocking_mpop,
    blocking_pop,
    mpop,
    parse_seconds_timeout,
)
from headwater.errors import SYNTAX, ReplyError, err, wrong_arity
from headwater.keyevents import GENERIC, LIST
from headwater.ops.change import ONE, Change, Written, as_given
from headwater.resp.types import NULL_ARRAY, OK, Raw, Reply
from headwater.structures.lists import ListValue

OUT_OF_RANGE = err("index out of range")
NO_SUCH_KEY = err("no such key")
MUST_BE_POSITIVE = err("value is out of range, must be positive")
RANK_ZERO = err(
    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
    "or use negative to start from the end of the list"
)
RANK_RANGE = err(
    "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
)
COUNT_NEGATIVE = err("COUNT can't be negative")
MAXLEN_NEGATIVE = err("MAXLEN can't be negative")
#: ranges longer than this are encoded node by node into one Raw reply
_RAW_FROM = 64


def fill_of(c: Client) -> int:
    return c.server.config.values["list-max-listpack-size"]  # type: ignore[no-any-return]


def _removed(c: Client, key: bytes, lst: ListValue, event: bytes) -> None:
    """listElementsRemoved: the event (a pop's, ``ltrim``), then the key deleted (``del``) or
    the encoding checked for shrinking."""
    notify(c, LIST, event, key)
    if not lst.count:
        c.db.delete(key)
        notify(c, GENERIC, b"del", key)
    else:
        lst.shrunk(fill_of(c))
        c.db.signal_modified(key)


def _range_reply(lst: ListValue, start: int, stop: int, reverse: bool = False) -> Reply:
    """Members start..stop as an array (reversed: from stop down); a long range is encoded
    node by node into one Raw, without a bytes object per member."""
    if start > stop:
        return []
    if reverse or stop - start < _RAW_FROM:
        items = lst.range(start, stop)
        if reverse:
            items.reverse()
        return items
    parts = [b"*%d\r\n" % (stop - start + 1)]
    for data, bounds in lst.spans(start, stop):
        chunk = [
            b"$%d\r\n%s\r\n" % (bounds[i + 1] - bounds[i], data[bounds[i] : bounds[i + 1]])
            for i in range(len(bounds) - 1)
        ]
        parts.append(b"".join(chunk))
    return Raw(b"".join(parts))


# -- pushes --------------------------------------------------------------------------------


def _push(c: Client, argv: list[bytes], head: bool, only_existing: bool) -> Reply | Written:
    key = argv[1]
    lst = write_as(c, key, ListValue)
    if lst is None:
        if only_existing:
            return 0
        lst = ListValue()
        c.db.set(key, lst)
    members = argv[2:]
    lst.prepare(sum(len(m) for m in members), len(members), fill_of(c))
    for member in members:
        lst.push(member, head)
    c.db.signal_modified(key)
    c.db.signal_ready(key)
    notify(c, LIST, b"lpush" if head else b"rpush", key)
    return Written(lst.count, as_given(len(members)))


def cmd_lpush(c: Client, argv: list[bytes]) -> Reply | Written:
    return _push(c, argv, True, False)


def cmd_rpush(c: Client, argv: list[bytes]) -> Reply | Written:
    return _push(c, argv, False, False)


def cmd_lpushx(c: Client, argv: list[bytes]) -> Reply | Written:
    return _push(c, argv, True, True)


def cmd_rpushx(c: Client, argv: list[bytes]) -> Reply | Written:
    return _push(c, argv, False, True)


def cmd_linsert(c: Client, argv: list[bytes]) -> Reply | Written:
    """LINSERT key BEFORE|AFTER pivot element"""
    where = argv[2].upper()
    if where not in (b"BEFORE", b"AFTER"):
        raise SYNTAX
    key, pivot, member = argv[1], argv[3], argv[4]
    lst = write_as(c, key, ListValue)
    if lst is None:
        return 0
    # (before looking for the pivot, as Redis: a miss may still have converted the list)
    lst.prepare(len(member), 1, fill_of(c))
    found = lst.positions(pivot, 1, 1, 0)
    if not found:
        return -1
    lst.insert(found[0], member, where == b"AFTER")
    c.db.signal_modified(key)
    notify(c, LIST, b"linsert", key)
    return Written(lst.count, ONE)


# -- reads ---------------------------------------------------------------------------------


def cmd_llen(c: Client, argv: list[bytes]) -> Reply:
    lst = read_as(c, argv[1], ListValue)
    return 0 if lst is None else lst.count


def cmd_lindex(c: Client, argv: list[bytes]) -> Reply:
    lst = read_as(c, argv[1], ListValue)
    if lst is None:
        return None
    return lst.get(parse_int(argv[2]))


def cmd_lrange(c: Client, argv: list[bytes]) -> Reply:
    start, stop = parse_int(argv[2]), parse_int(argv[3])
    lst = read_as(c, argv[1], ListValue)
    if lst is None:
        return []
    start, stop = index_range(start, stop, lst.count)
    return _range_reply(lst, start, stop)


def _long_option(raw: bytes, error: ReplyError) -> int:
    """getPositiveLongFromObjectOrReply with a message: the message for anything that is
    not an integer in 0..LONG_MAX."""
    value = strict_int(raw)
    if value is None or value < 0:
        raise error
    return value


def cmd_lpos(c: Client, argv: list[bytes]) -> Reply:
    """LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]"""
    rank, count, maxlen = 1, -1, 0
    j = 3
    while j < len(argv):
        option = argv[j].upper()
        more = j + 1 < len(argv)
        if option == b"RANK" and more:
            rank = parse_int(argv[j + 1])
            if rank == -(2**63):
                raise RANK_RANGE
            if rank == 0:
                raise RANK_ZERO
        elif option == b"COUNT" and more:
            count = _long_option(argv[j + 1], COUNT_NEGATIVE)
        elif option == b"MAXLEN" and more:
            maxlen = _long_option(argv[j + 1], MAXLEN_NEGATIVE)
        else:
            raise SYNTAX
        j += 2
    lst = read_as(c, argv[1], ListValue)
    if lst is None:
        return [] if count != -1 else None
    found = lst.positions(argv[2], rank, 1 if count == -1 else count, maxlen)
    if count != -1:
        return found
    return found[0] if found else None


# -- changes in place ----------------------------------------------------------------------


def cmd_lset(c: Client, argv: list[bytes]) -> Reply | Written:
    key = argv[1]
    lst = write_as(c, key, ListValue)
    if lst is None:
        raise NO_SUCH_KEY
    index = parse_int(argv[2])
    fill = fill_of(c)
    lst.prepare(len(argv[3]), 1, fill)
    if index < 0:
        index += lst.count
    if not lst.set(index, argv[3]):
        raise OUT_OF_RANGE
    c.db.signal_modified(key)
    notify(c, LIST, b"lset", key)
    lst.shrunk(fill)
    return Written(OK, ONE)


def cmd_lrem(c: Client, argv: list[bytes]) -> Reply | Written:
    """LREM key count element"""
    key = argv[1]
    limit = parse_int(argv[2])
    lst = write_as(c, key, ListValue)
    if lst is None:
        return 0
    removed = lst.remove(argv[3], abs(limit), limit < 0)
    if removed:
        c.db.signal_modified(key)
        notify(c, LIST, b"lrem", key)
    if not lst.count:
        c.db.delete(key)
        notify(c, GENERIC, b"del", key)
    elif removed:
        lst.shrunk(fill_of(c))
    return Written(removed, as_given(removed)) if removed else 0


def cmd_ltrim(c: Client, argv: list[bytes]) -> Reply | Written:
    key = argv[1]
    start, stop = parse_int(argv[2]), parse_int(argv[3])
    lst = write_as(c, key, ListValue)
    if lst is None:
        return OK
    n = lst.count
    start, stop = index_range(start, stop, n)
    if start > stop:
        left_cut, right_cut = n, 0
    else:
        left_cut, right_cut = start, n - stop - 1
    lst.delete_range(0, left_cut)
    if right_cut:
        lst.delete_range(lst.count - right_cut, right_cut)
    _removed(c, key, lst, b"ltrim")
    removed = left_cut + right_cut
    return Written(OK, as_given(removed)) if removed else OK


# -- pops ----------------------------------------------------------------------------------


def _pop_range(c: Client, key: bytes, lst: ListValue, head: bool, count: int) -> list[bytes]:
    """Pop up to count members from one end (in pop order) and do listElementsRemoved."""
    n = min(count, lst.count)
    if head:
        items = lst.range(0, n - 1)
        lst.delete_range(0, n)
    else:
        items = lst.range(lst.count - n, lst.count - 1)
        items.reverse()
        lst.delete_range(lst.count - n, n)
    _removed(c, key, lst, b"lpop" if head else b"rpop")
    return items


def _pop(c: Client, argv: list[bytes], head: bool) -> Reply | Written:
    """LPOP/RPOP key [count]"""
    if len(argv) > 3:
        raise wrong_arity(argv[0].decode("utf-8", "replace").lower())
    with_count = len(argv) == 3
    count = _long_option(argv[2], MUST_BE_POSITIVE) if with_count else 0
    key = argv[1]
    lst = write_as(c, key, ListValue)
    if lst is None:
        return NULL_ARRAY if with_count else None
    if with_count and not count:
        return []
    if not with_count:
        member = lst.pop(head)
        _removed(c, key, lst, b"lpop" if head else b"rpop")
        return Written(member, ONE)
    items = _pop_range(c, key, lst, head, count)
    return Written(items, as_given(len(items)))


def cmd_lpop(c: Client, argv: list[bytes]) -> Reply | Written:
    return _pop(c, argv, True)


def cmd_rpop(c: Client, argv: list[bytes]) -> Reply | Written:
    return _pop(c, argv, False)


def _pop_from(c: Client, key: bytes, head: bool, count: int) -> Written | None:
    """The pop of LMPOP and the blocking pops from one key (``pops.PopFrom``), None when it
    holds no list: propagated as the LPOP/RPOP Redis rewrites them to (with the number
    popped for the M forms)."""
    lst = write_as(c, key, ListValue)
    if lst is None or not lst.count:
        return None
    if not count:  # (BLPOP/BRPOP)
        member = lst.pop(head)
        _removed(c, key, lst, b"lpop" if head else b"rpop")
        return Written([key, member], Change(1, [[b"LPOP" if head else b"RPOP", key]]))
    items = _pop_range(c, key, lst, head, count)
    line = [b"LPOP" if head else b"RPOP", key, b"%d" % len(items)]
    return Written([key, items], Change(len(items), [line]))


def cmd_lmpop(c: Client, argv: list[bytes]) -> Reply | Written:
    """LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]"""
    return mpop(c, argv, b"LEFT", b"RIGHT", _pop_from)


# -- moves ---------------------------------------------------------------------------------


def _side(raw: bytes) -> bool:
    """LEFT (True) or RIGHT, else a syntax error (getListPositionFromObjectOrReply)."""
    side = raw.upper()
    if side == b"LEFT":
        return True
    if side == b"RIGHT":
        return False
    raise SYNTAX


def _move(c: Client, src: bytes, dst: bytes, from_head: bool, to_head: bool) -> bytes | None:
    """lmoveGenericCommand: the member moved, or None when src is missing."""
    source = write_as(c, src, ListValue)
    if source is None or not source.count:
        return None
    target = write_as(c, dst, ListValue)
    member = source.pop(from_head)
    if target is None:
        target = ListValue()
        c.db.set(dst, target)
    c.db.signal_modified(dst)
    target.prepare(len(member), 1, fill_of(c))
    target.push(member, to_head)
    c.db.signal_ready(dst)
    notify(c, LIST, b"lpush" if to_head else b"rpush", dst)
    _removed(c, src, source, b"lpop" if from_head else b"rpop")
    return member


def cmd_lmove(c: Client, argv: list[bytes]) -> Reply | Written:
    """LMOVE source destination LEFT|RIGHT LEFT|RIGHT"""
    from_head, to_head = _side(argv[3]), _side(argv[4])
    member = _move(c, argv[1], argv[2], from_head, to_head)
    return None if member is None else Written(member, ONE)


def cmd_rpoplpush(c: Client, argv: list[bytes]) -> Reply | Written:
    member = _move(c, argv[1], argv[2], False, True)
    return None if member is None else Written(member, ONE)


# -- blocking ------------------------------------------------------------------------------


def cmd_blpop(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    return blocking_pop(c, argv, True, _pop_from, ListValue)


def cmd_brpop(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    return blocking_pop(c, argv, False, _pop_from, ListValue)


def cmd_blmpop(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    """BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]"""
    return blocking_mpop(c, argv, b"LEFT", b"RIGHT", _pop_from, ListValue)


def _bmove(
    c: Client, argv: list[bytes], from_head: bool, to_head: bool, raw_timeout: bytes
) -> Reply | Written | Block:
    timeout_ms = parse_seconds_timeout(c, raw_timeout)
    src, dst = argv[1], argv[2]
    member = _move(c, src, dst, from_head, to_head)
    if member is None:
        # (a null bulk string where it may not wait, as Redis's lmove replies)
        return block_on(c, [src], timeout_ms, ListValue, null_if_denied=True)
    moved = [b"LMOVE", src, dst, argv[3], argv[4]] if len(argv) == 6 else None
    line = moved if moved is not None else [b"RPOPLPUSH", src, dst]
    return Written(member, Change(1, [line]))


def cmd_blmove(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    """BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout"""
    from_head, to_head = _side(argv[3]), _side(argv[4])
    return _bmove(c, argv, from_head, to_head, argv[5])


def cmd_brpoplpush(c: Client, argv: list[bytes]) -> Reply | Written | Block:
    return _bmove(c, argv, False, True, argv[3])


SPECS = (
    spec("lpush", -3, "write denyoom fast", (1, 1, 1), cmd_lpush),
    spec("rpush", -3, "write denyoom fast", (1, 1, 1), cmd_rpush),
    spec("lpushx", -3, "write denyoom fast", (1, 1, 1), cmd_lpushx),
    spec("rpushx", -3, "write denyoom fast", (1, 1, 1), cmd_rpushx),
    spec("linsert", 5, "write denyoom", (1, 1, 1), cmd_linsert),
    spec("llen", 2, "readonly fast", (1, 1, 1), cmd_llen),
    spec("lindex", 3, "readonly", (1, 1, 1), cmd_lindex),
    spec("lrange", 4, "readonly", (1, 1, 1), cmd_lrange),
    spec("lpos", -3, "readonly", (1, 1, 1), cmd_lpos),
    spec("lset", 4, "write denyoom", (1, 1, 1), cmd_lset),
    spec("lrem", 4, "write", (1, 1, 1), cmd_lrem),
    spec("ltrim", 4, "write", (1, 1, 1), cmd_ltrim),
    spec("lpop", -2, "write fast", (1, 1, 1), cmd_lpop),
    spec("rpop", -2, "write fast", (1, 1, 1), cmd_rpop),
    spec("lmpop", -4, "write movablekeys", (0, 0, 0), cmd_lmpop),
    spec("lmove", 5, "write denyoom", (1, 2, 1), cmd_lmove),
    spec("rpoplpush", 3, "write denyoom", (1, 2, 1), cmd_rpoplpush),
    spec("blpop", -3, "write blocking", (1, -2, 1), cmd_blpop),
    spec("brpop", -3, "write blocking", (1, -2, 1), cmd_brpop),
    spec("blmpop", -5, "write blocking movablekeys", (0, 0, 0), cmd_blmpop),
    spec("blmove", 6, "write denyoom blocking", (1, 2, 1), cmd_blmove),
    spec("brpoplpush", 4, "write denyoom blocking", (1, 2, 1), cmd_brpoplpush),
)
