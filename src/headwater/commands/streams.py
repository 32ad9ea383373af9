"""Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XDELEX, XTRIM, XSETID, XREAD, XINFO.

Each command is ``parse_x`` (argv → options, raises ReplyError), an operation on the stream,
and ``cmd_x`` (reply and effects). Semantics and error texts: STREAMS-REFERENCE §1-3, §6-8.
Effects are deterministic: XADD propagates its concrete ID, ``~`` trims propagate as exact
trims (``=`` with the resulting length or first remaining ID).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from headwater.commands.args import INT64_MAX, parse_int, strict_int
from headwater.commands.context import Block, Client, spec
from headwater.commands.entries import encode_entries
from headwater.commands.notify import lookup_read
from headwater.errors import (
    NO_SUCH_KEY,
    SYNTAX,
    WRONGTYPE,
    ReplyError,
    err,
    wrong_arity,
)
from headwater.ops.change import Change, Written, one_line
from headwater.ops.streams import idmp_retry
from headwater.resp.types import NULL_ARRAY, PairMap, Reply
from headwater.stream.groups import drop_references, referenced, trim_policy
from headwater.stream.ids import (
    AUTO_SEQ,
    ID_TOO_SMALL,
    MAX_ID,
    MIN_ID,
    UINT64_MAX,
    StreamID,
    above,
    format_id,
    incr_id,
    parse_id,
    parse_range_bound,
)
from headwater.stream.stream import Stream

ID_ZERO = err("The ID specified in XADD must be greater than 0-0")
EXHAUSTED = err("The stream has exhausted the last possible ID, unable to add more items")
TOO_LARGE = err("Elements are too large to be stored")
BOTH_STRATEGIES = err("syntax error, MAXLEN and MINID options at the same time are not compatible")
LIMIT_NO_STRATEGY = err("syntax error, LIMIT cannot be used without specifying a trimming strategy")
LIMIT_NO_TILDE = err("syntax error, LIMIT cannot be used without the special ~ option")
XTRIM_NO_STRATEGY = err("syntax error, XTRIM must be called with a trimming strategy")
IDMP_TWICE = err("syntax error, IDMP/IDMPAUTO specified multiple times")
IDMP_AUTO_ONLY = err("syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs")
_REF_STRATEGIES = (b"KEEPREF", b"DELREF", b"ACKED")


# ---------------------------------------------------------------------------------------------
# Lookups


def lookup_stream(c: Client, key: bytes) -> Stream | None:
    """A write's lookup of a stream (not counted in INFO stats)."""
    return _as_stream(c.db.get(key))


def read_stream(c: Client, key: bytes) -> Stream | None:
    """A read's lookup of a stream: a keyspace hit or miss (``lookup_read``)."""
    return _as_stream(lookup_read(c, key))


def _as_stream(value: object) -> Stream | None:
    if value is None or isinstance(value, Stream):
        return value
    raise WRONGTYPE


def new_stream(c: Client) -> Stream:
    stream = Stream()
    stream.idmp_duration = c.server.config["stream-idmp-duration"]
    stream.idmp_maxsize = c.server.config["stream-idmp-maxsize"]
    return stream


# ---------------------------------------------------------------------------------------------
# Trimming options, shared by XADD and XTRIM


@dataclass
class TrimOpts:
    maxlen: int | None = None
    minid: StreamID | None = None
    approx: bool = False
    limit: int = 0
    limit_given: bool = False
    strategy_index: int = 0  # argv index of the threshold (for the exact rewrite)
    ref: bytes = b"KEEPREF"

    @property
    def given(self) -> bool:
        return self.maxlen is not None or self.minid is not None


def _parse_trim_token(argv: list[bytes], i: int, token: bytes, opts: TrimOpts) -> int | None:
    """Parse MAXLEN/MINID/LIMIT at argv[i]; returns the index of its last argument, or None
    when the token is not a trim option."""
    more = len(argv) - 1 - i
    if token in (b"MAXLEN", b"MINID") and more:
        if opts.given:
            raise BOTH_STRATEGIES
        opts.approx = False
        if more >= 2 and argv[i + 1] in (b"~", b"="):
            opts.approx = argv[i + 1] == b"~"
            i += 1
        if token == b"MAXLEN":
            value = parse_int(argv[i + 1])
            if value < 0:
                raise err("The MAXLEN argument must be >= 0.")
            opts.maxlen = value
        else:
            opts.minid = parse_id(argv[i + 1])
        opts.strategy_index = i + 1
        return i + 1
    if token == b"LIMIT" and more:
        opts.limit = parse_int(argv[i + 1])
        if opts.limit < 0:
            raise err("The LIMIT argument must be >= 0.")
        opts.limit_given = True
        return i + 1
    return None


def _finish_trim(c: Client, opts: TrimOpts) -> None:
    if opts.limit and not opts.given:
        raise LIMIT_NO_STRATEGY
    if c.replaying:
        # An effect: its threshold is the exact one reached live (``exact_trim_args``), and
        # the LIMIT it keeps must not stop the trim short (Redis: mustObeyClient).
        opts.limit = 0
    elif opts.limit_given:
        if not opts.approx:
            raise LIMIT_NO_TILDE
    elif opts.approx:
        limit = 100 * c.server.config["stream-node-max-entries"]
        opts.limit = 10000 if limit <= 0 else min(limit, 1_000_000)
    else:
        opts.limit = 0


def apply_trim(stream: Stream, opts: TrimOpts) -> int:
    keep, on_remove = trim_policy(stream, opts.ref)
    return stream.trim(opts.maxlen, opts.minid, opts.approx, opts.limit, keep, on_remove)


def exact_trim_args(stream: Stream, opts: TrimOpts) -> list[bytes]:
    """The trim as replicas must apply it: ``=`` and the threshold actually reached."""
    if opts.maxlen is not None:
        return [b"MAXLEN", b"=", b"%d" % stream.length]
    # Just past the last entry removed: an exact trim there removes what this one did, also
    # when it went entry by entry (DELREF, ACKED) and kept some (ACKED) or left tombstones.
    # Nothing removed: a threshold below every entry.
    upto = stream.last_trimmed
    threshold = MIN_ID if upto is None else incr_id(upto) or upto
    return [b"MINID", b"=", format_id(threshold)]


# ---------------------------------------------------------------------------------------------
# XADD


@dataclass
class XAddOpts:
    trim: TrimOpts = field(default_factory=TrimOpts)
    nomkstream: bool = False
    id: StreamID | None = None  # None = "*"; seq AUTO_SEQ = "<ms>-*"
    id_index: int = 2
    idmp: tuple[bytes, bytes | None] | None = None  # (pid, iid or None for IDMPAUTO)


def parse_xadd(c: Client, argv: list[bytes]) -> XAddOpts:
    """XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO pid | IDMP pid iid]
    [<MAXLEN | MINID> [= | ~] threshold [LIMIT count]] <* | id> field value [...]"""
    opts = XAddOpts()
    trim = opts.trim
    ref_given = False
    i = 2
    while i < len(argv):
        arg = argv[i]
        if arg == b"*":
            break
        token = arg.upper()
        end = _parse_trim_token(argv, i, token, trim)
        if end is not None:
            i = end + 1
            continue
        if token == b"NOMKSTREAM":
            opts.nomkstream = True
        elif token in _REF_STRATEGIES and not ref_given:
            trim.ref, ref_given = token, True
        elif token == b"IDMPAUTO" and len(argv) - 1 - i >= 1:
            _set_idmp(opts, argv[i + 1], None)
            i += 1
        elif token == b"IDMP" and len(argv) - 1 - i >= 2:
            _set_idmp(opts, argv[i + 1], argv[i + 2])
            i += 2
        else:
            opts.id = parse_id(arg, allow_auto_seq=True)
            break
        i += 1
    opts.id_index = i
    if opts.idmp is not None and opts.id is not None and not c.replaying:
        raise IDMP_AUTO_ONLY  # replays carry the concrete ID of the original XADD
    _finish_trim(c, trim)
    fields = len(argv) - i - 1
    if fields < 2 or fields % 2:
        raise wrong_arity("xadd")
    if opts.id == (0, 0):
        raise ID_ZERO
    return opts


def _set_idmp(opts: XAddOpts, pid: bytes, iid: bytes | None) -> None:
    if opts.idmp is not None:
        raise IDMP_TWICE
    kind = "IDMPAUTO" if iid is None else "IDMP"
    if not pid:
        raise err(f"syntax error, {kind} requires a non-empty producer ID")
    if iid is not None and not iid:
        raise err("syntax error, IDMP requires a non-empty idempotent ID")
    opts.idmp = (pid, iid)


def next_id(stream: Stream, requested: StreamID | None, now_ms: int) -> StreamID:
    """The ID XADD gives the entry (streamAppendItem's rules), or raise."""
    last = stream.last_id
    if requested is None:
        if now_ms > last[0]:
            return (now_ms, 0)
        nxt = incr_id(last)
        assert nxt is not None  # exhaustion is checked before
        return nxt
    ms, seq = requested
    if seq == AUTO_SEQ:
        if ms == last[0]:
            if last[1] == UINT64_MAX:
                raise ID_TOO_SMALL
            return (ms, last[1] + 1)
        sid = (ms, 0)
    else:
        sid = requested
    return above(sid, last)


_PLAIN_XADD = XAddOpts()  # ``XADD key * f v ...``: no options (never mutated)


def _explicit_xadd(raw_id: bytes) -> XAddOpts:
    """``XADD key <id> f v ...`` without options (what replays are made of): an argument
    starting with a digit can only be the ID."""
    sid = parse_id(raw_id, allow_auto_seq=True)
    if sid == (0, 0):
        raise ID_ZERO
    return XAddOpts(trim=_NO_TRIM, id=sid)


_NO_TRIM = TrimOpts()  # shared by the fast paths below (never mutated)


def _idmp_xadd(argv: list[bytes]) -> XAddOpts | None:
    """``XADD key IDMP pid iid * f v ...`` / ``XADD key IDMPAUTO pid * f v ...`` with no
    other option, the shape idempotent producers send: parsed without the option loop. None
    for any other shape (the full parser then decides, errors included)."""
    option, n = argv[2], len(argv)
    if option != b"IDMP" and option != b"IDMPAUTO":
        if len(option) > 8:
            return None
        option = option.upper()
    if option == b"IDMP" and n >= 8 and not n % 2 and argv[5] == b"*" and argv[3] and argv[4]:
        return _IdmpOpts(5, (argv[3], argv[4]))
    if option == b"IDMPAUTO" and n >= 7 and n % 2 and argv[4] == b"*" and argv[3]:
        return _IdmpOpts(4, (argv[3], None))
    return None


class _IdmpOpts(XAddOpts):
    """XAddOpts of the idempotent-producer fast path: built without the dataclass's
    __init__ (it runs per XADD)."""

    def __init__(self, id_index: int, idmp: tuple[bytes, bytes | None]) -> None:
        self.trim, self.nomkstream, self.id = _NO_TRIM, False, None
        self.id_index, self.idmp = id_index, idmp


def cmd_xadd(c: Client, argv: list[bytes]) -> Reply | Written:
    odd = len(argv) % 2
    if argv[2] == b"*" and odd:
        opts = _PLAIN_XADD
    elif odd and argv[2][:1].isdigit():
        opts = _explicit_xadd(argv[2])
    else:
        opts = _idmp_xadd(argv) or parse_xadd(c, argv)
    return c.server.streams.add(c, argv, opts)


def _idmp_retry(
    c: Client, argv: list[bytes], id_index: int, stream: Stream, original: StreamID
) -> Written:
    """A retry: its effect carries the original ID (``ops.streams.idmp_retry``)."""
    dirty = idmp_retry(c.db, argv[1], stream, c.server.stats)
    reply = format_id(original)
    if not c.server.propagating:
        return Written(reply, Change(dirty, []))
    effect = list(argv)
    effect[id_index] = reply
    return Written(reply, one_line(dirty, effect))


def _rewrite_trim(effect: list[bytes], stream: Stream, trim: TrimOpts) -> None:
    """Turn ``MAXLEN ~ n`` into ``MAXLEN = <length>`` (or MINID = <first id>) in place."""
    exact = exact_trim_args(stream, trim)
    effect[trim.strategy_index - 1] = b"="
    effect[trim.strategy_index] = exact[2]


# ---------------------------------------------------------------------------------------------
# XRANGE / XREVRANGE / XLEN


def parse_xrange(argv: list[bytes], reverse: bool) -> tuple[StreamID, StreamID, int | None]:
    """XRANGE key start end [COUNT count] / XREVRANGE key end start [COUNT count]: (start,
    end, count: None when not given), for a region's XRANGE too."""
    lo_raw, hi_raw = (argv[3], argv[2]) if reverse else (argv[2], argv[3])
    start = parse_range_bound(lo_raw, is_start=True)
    end = parse_range_bound(hi_raw, is_start=False)
    count: int | None = None
    i = 4
    while i < len(argv):
        if argv[i].upper() == b"COUNT" and i + 1 < len(argv):
            count = max(parse_int(argv[i + 1]), 0)
            i += 2
        else:
            raise SYNTAX
    return start, end, count


def _range(c: Client, argv: list[bytes], reverse: bool) -> Reply:
    """XRANGE key start end [COUNT count] / XREVRANGE key end start [COUNT count]"""
    start, end, count = parse_xrange(argv, reverse)
    store = c.server.streams
    stream = store.stream(c, argv[1])
    if stream is None:
        return []
    if count == 0:
        return NULL_ARRAY
    return store.range(c, stream, start, end, count or 0, reverse)


def cmd_xrange(c: Client, argv: list[bytes]) -> Reply:
    return _range(c, argv, reverse=False)


def cmd_xrevrange(c: Client, argv: list[bytes]) -> Reply:
    return _range(c, argv, reverse=True)


def cmd_xlen(c: Client, argv: list[bytes]) -> Reply:
    store = c.server.streams
    stream = store.stream(c, argv[1])
    return 0 if stream is None else store.length(stream)


# ---------------------------------------------------------------------------------------------
# XDEL / XDELEX / XTRIM / XSETID


def cmd_xdel(c: Client, argv: list[bytes]) -> Reply | Written:
    """XDEL key id [id ...]"""
    store = c.server.streams
    stream = store.stream(c, argv[1], read=False)
    if stream is None:
        return 0
    ids = [parse_id(raw) for raw in argv[2:]]
    return store.delete(c, argv[1], stream, ids)


def parse_ref_and_ids(argv: list[bytes], start: int) -> tuple[bytes, list[bytes]]:
    """``[KEEPREF | DELREF | ACKED] IDS numids id [id ...]`` (shared by XDELEX and XACKDEL)."""
    ref: bytes | None = None
    ids: list[bytes] | None = None
    i = start
    while i < len(argv):
        token = argv[i].upper()
        if token in _REF_STRATEGIES:
            if ref is not None:
                raise SYNTAX
            ref = token
            i += 1
        elif token == b"IDS" and i + 1 < len(argv) and ids is None:
            numids = strict_int(argv[i + 1])
            if numids is None or numids <= 0:
                raise err("Number of IDs must be a positive integer")
            if numids > len(argv) - i - 2:
                raise err("The `numids` parameter must match the number of arguments")
            ids = argv[i + 2 : i + 2 + numids]
            i += 2 + numids
        else:
            raise SYNTAX
    if ids is None:
        raise err("IDS option is required")
    return ref or b"KEEPREF", ids


def cmd_xdelex(c: Client, argv: list[bytes]) -> Reply | Written:
    """XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]"""
    store = c.server.streams
    stream = store.stream(c, argv[1], read=False)
    ref, raw_ids = parse_ref_and_ids(argv, 2)
    if stream is None:
        return [-1] * len(raw_ids)
    ids = [parse_id(raw) for raw in raw_ids]
    return store.delete_ex(c, argv[1], stream, ids, ref)


def _delete_with_ref(stream: Stream, sid: StreamID, ref: bytes) -> int:
    """XDELEX's per-ID result: 1 deleted, -1 no such entry, 2 kept because still referenced."""
    if ref == b"ACKED" and referenced(stream, sid):
        return 2
    if not stream.delete(sid):
        return -1
    if ref == b"DELREF":
        drop_references(stream, sid)
    return 1


def parse_xtrim(argv: list[bytes]) -> TrimOpts:
    """XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]
    (a region's XTRIM parses the same)."""
    trim = TrimOpts()
    ref_given = False
    i = 2
    while i < len(argv):
        token = argv[i].upper()
        end = _parse_trim_token(argv, i, token, trim)
        if end is not None:
            i = end + 1
        elif token in _REF_STRATEGIES and not ref_given:
            trim.ref, ref_given = token, True
            i += 1
        else:
            raise SYNTAX
    if trim.limit and not trim.given:
        raise LIMIT_NO_STRATEGY
    if not trim.given:
        raise XTRIM_NO_STRATEGY
    return trim


def cmd_xtrim(c: Client, argv: list[bytes]) -> Reply | Written:
    """XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]"""
    trim = parse_xtrim(argv)
    _finish_trim(c, trim)
    store = c.server.streams
    stream = store.stream(c, argv[1], read=False)
    if stream is None:
        return 0
    return store.trim(c, argv, stream, trim)


def parse_xsetid(argv: list[bytes]) -> tuple[StreamID, int | None, StreamID | None]:
    """XSETID's last ID, ENTRIESADDED and MAXDELETEDID (None: not given), with Redis's
    errors in its order (a region's XSETID parses the same)."""
    last = parse_id(argv[2])
    entries_added: int | None = None
    max_deleted: StreamID | None = None
    i = 3
    while i < len(argv):
        token = argv[i].upper()
        if i + 1 >= len(argv):
            raise SYNTAX
        if token == b"ENTRIESADDED":
            entries_added = parse_int(argv[i + 1])
            if entries_added < 0:
                raise err("entries_added must be positive")
        elif token == b"MAXDELETEDID":
            max_deleted = parse_id(argv[i + 1])
            if last < max_deleted:
                raise err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
                )
        else:
            raise SYNTAX
        i += 2
    return last, entries_added, max_deleted


def cmd_xsetid(c: Client, argv: list[bytes]) -> Reply | Written:
    """XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]"""
    last, entries_added, max_deleted = parse_xsetid(argv)
    store = c.server.streams
    stream = store.stream(c, argv[1], read=False)
    if stream is None:
        raise NO_SUCH_KEY
    return store.set_id(c, argv[1], stream, last, entries_added, max_deleted)


# ---------------------------------------------------------------------------------------------
# XREAD


@dataclass
class XReadOpts:
    count: int = 0  # per stream; 0 = unlimited
    maxcount: int = 0  # MAXCOUNT, entries in the whole reply; 0 = none
    maxsize: int = 0  # MAXSIZE, reply bytes (see ReplyCaps); 0 = none
    block_ms: int | None = None  # None = no BLOCK
    keys: list[bytes] = field(default_factory=list)
    id_index: int = 0  # argv index of the first ID
    # XREADGROUP only
    group: bytes = b""
    consumer: bytes = b""
    noack: bool = False
    claim_ms: int | None = None


def parse_block_timeout(c: Client, raw: bytes) -> int:
    value = strict_int(raw)
    if value is None:
        raise err("timeout is not an integer or out of range")
    if value < 0:
        raise err("timeout is negative")
    if value > 0 and value > INT64_MAX - c.server.keyspace.now_ms:
        raise err("timeout is out of range")
    return value


_UNBALANCED_XREAD = err(
    "Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified."
)
_UNBALANCED_XREADGROUP = err(
    "Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."
)
# Redis 8.10's tests check "*MAXCOUNT must be a positive integer*"; the MAXSIZE and the
# MAXCOUNT-below-COUNT texts are ours, in the same style (the 8.10 source was not available).
MAXCOUNT_NOT_POSITIVE = err("MAXCOUNT must be a positive integer")
MAXSIZE_NOT_POSITIVE = err("MAXSIZE must be a positive integer")
MAXCOUNT_BELOW_COUNT = err("MAXCOUNT must be greater than or equal to COUNT")


def parse_xread(c: Client, argv: list[bytes], group: bool = False) -> XReadOpts:
    """XREAD [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK milliseconds]
    STREAMS key [key ...] id [id ...], and with ``group`` XREADGROUP GROUP group consumer
    [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK ms] [CLAIM min-idle] [NOACK]
    STREAMS ... (one parser, as Redis's xreadCommand). Repeated options: the last wins."""
    opts = XReadOpts()
    group_given = False
    i = 1
    while i < len(argv):
        token = argv[i].upper()
        more = len(argv) - 1 - i
        if token == b"BLOCK" and more:
            opts.block_ms = parse_block_timeout(c, argv[i + 1])
            i += 2
        elif token == b"COUNT" and more:
            opts.count = max(parse_int(argv[i + 1]), 0)
            i += 2
        elif token == b"MAXCOUNT" and more:
            opts.maxcount = _parse_cap(argv[i + 1], MAXCOUNT_NOT_POSITIVE)
            i += 2
        elif token == b"MAXSIZE" and more:
            opts.maxsize = _parse_cap(argv[i + 1], MAXSIZE_NOT_POSITIVE)
            i += 2
        elif token == b"STREAMS" and more:
            rest = len(argv) - i - 1
            if rest % 2:
                raise _UNBALANCED_XREADGROUP if group else _UNBALANCED_XREAD
            opts.keys = argv[i + 1 : i + 1 + rest // 2]
            opts.id_index = i + 1 + rest // 2
            break
        elif (
            not group
            and token in (b"GROUP", b"NOACK", b"CLAIM")
            and (more >= 2 or token != b"GROUP")
        ):
            raise err(
                f"The {token.decode()} option is only supported by XREADGROUP. "
                "You called XREAD instead."
            )
        elif group and token == b"GROUP" and more >= 2:
            opts.group, opts.consumer = argv[i + 1], argv[i + 2]
            group_given = True
            i += 3
        elif group and token == b"NOACK":
            opts.noack = True
            i += 1
        elif group and token == b"CLAIM" and more:
            opts.claim_ms = _parse_claim(argv[i + 1])
            i += 2
        else:
            raise SYNTAX
    if not opts.keys:
        raise SYNTAX
    if group and not group_given:
        raise err("Missing GROUP option for XREADGROUP")
    if opts.maxcount and opts.count and opts.maxcount < opts.count:
        raise MAXCOUNT_BELOW_COUNT  # a cumulative cap below the per-stream one is a mistake
    return opts


def _parse_cap(raw: bytes, not_positive: ReplyError) -> int:
    value = parse_int(raw)
    if value <= 0:
        raise not_positive
    return value


def _parse_claim(raw: bytes) -> int:
    claim = strict_int(raw)
    if claim is None:
        raise err("min-idle-time is not an integer or out of range")
    if claim < 0:
        raise err("min-idle-time must be a positive integer")
    return claim


def _resolve_read_ids(
    c: Client, argv: list[bytes], opts: XReadOpts
) -> list[tuple[Stream | None, StreamID | None]]:
    """Each stream (looked up once) and its "greater than" ID; None means "+" (the last
    entry)."""
    resolved: list[tuple[Stream | None, StreamID | None]] = []
    for n, key in enumerate(opts.keys):
        raw = argv[opts.id_index + n]
        stream = read_stream(c, key)
        if raw == b"$":
            after: StreamID | None = stream.last_id if stream is not None else MIN_ID
        else:
            after = parse_read_id(raw)
        resolved.append((stream, after))
    return resolved


def parse_read_id(raw: bytes) -> StreamID | None:
    """An XREAD ID other than ``$`` (which the caller resolves against its stream): ``+`` is
    None (the last entry), ``>`` is refused, else the ID."""
    if raw == b"+":
        return None
    if raw == b">":
        raise err(
            "The > ID can be specified only when calling XREADGROUP using the GROUP "
            "<group> <consumer> option."
        )
    return parse_id(raw)


def xread_end(
    c: Client,
    argv: list[bytes],
    opts: XReadOpts,
    served: list[tuple[bytes, Reply]],
    afters: Sequence[tuple[object, StreamID | None]],
    wakes_on: type,
) -> Reply | Block:
    """XREAD's reply once its streams are read (a region's XREAD ends the same): the streams
    served (a map in RESP3), else a null array, or with BLOCK a wait on the keys, its ``$``
    IDs fixed to the last IDs they stood for (``afters``: each key's (stream, ID))."""
    if served:
        if c.resp == 3:
            return PairMap(served)  # a key named twice is served twice, as in Redis
        return [[key, entries] for key, entries in served]
    if opts.block_ms is None:
        return NULL_ARRAY
    for n, raw in enumerate(argv[opts.id_index :]):
        if raw == b"$":  # later retries must not chase entries added after we blocked
            argv[opts.id_index + n] = format_id(afters[n][1] or MIN_ID)
    deadline = c.server.clock.monotonic_ms() + opts.block_ms if opts.block_ms else 0
    return Block(list(opts.keys), deadline, NULL_ARRAY, wakes_on=wakes_on)


class ReplyCaps:
    """The MAXCOUNT / MAXSIZE budget of one XREAD or XREADGROUP call, shared by its streams in
    argument order ([8.10]).

    ``sent`` counts the entries put in the reply. ``sent_bytes`` counts the reply bytes
    written so far, in the client's protocol, as Redis measures its reply buffer: each served
    stream's key (RESP2 ``*2`` pair header and key bulk, RESP3 key bulk) and each entry,
    ``[id, [f1, v1, ...]]`` (the same bytes in both protocols), ``[id, fields, idle, count]``
    with CLAIM, ``[id, nil]`` for a deleted entry in a history read (``*-1`` or ``_``). Array
    and map lengths are not counted: Redis writes them last (deferred lengths). A key is
    charged with its stream's first entry (or when the stream is closed, for a history read
    that sends none), so a stream reached is never sent as an empty list. The size check
    comes before each entry and only once something was sent: a reply always holds at least
    one entry and passes MAXSIZE by less than one entry and key (Redis's soft cap). Once full,
    the remaining streams of the call are not looked at.
    """

    __slots__ = ("max_bytes", "max_entries", "pair_head", "sent", "sent_bytes", "unpaid")

    def __init__(self, max_entries: int = 0, max_bytes: int = 0, resp: int = 2) -> None:
        self.max_entries = max_entries  # 0 = no MAXCOUNT
        self.max_bytes = max_bytes  # 0 = no MAXSIZE
        self.pair_head = 4 if resp == 2 else 0  # "*2\r\n" before each key in RESP2
        self.sent = 0
        self.sent_bytes = 0
        self.unpaid = 0  # bytes of the current stream's key, not charged yet

    def full(self) -> bool:
        if self.max_entries and self.sent >= self.max_entries:
            return True
        return self.max_bytes > 0 and self.sent > 0 and self.sent_bytes >= self.max_bytes

    def per_stream(self, count: int) -> int:
        """The entry limit for the next stream (0 = none): COUNT, lowered to what MAXCOUNT
        leaves. Only called while not full, so MAXCOUNT leaves at least one."""
        if not self.max_entries:
            return count
        left = self.max_entries - self.sent
        return min(count, left) if count else left

    def open_stream(self, key: bytes) -> None:
        """The stream of this key is about to be served."""
        self.unpaid = self.pair_head + len(b"$%d\r\n" % len(key)) + len(key) + 2

    def close_stream(self, served: bool) -> None:
        """Its key is in the reply (``served``) or not."""
        if served:
            self.sent_bytes += self.unpaid
        self.unpaid = 0

    def add(self, entry: bytes, extra: int = 0) -> None:
        self.sent += 1
        self.sent_bytes += len(entry) + extra + self.unpaid
        self.unpaid = 0


_FIRST_CHUNK = 16  # entries encoded at a time under MAXSIZE, growing: most replies stop early
_MAX_CHUNK = 4096


def read_entries(
    stream: Stream,
    start: StreamID,
    count: int,
    caps: ReplyCaps,
    ids: list[StreamID] | None = None,
    extra: int = 0,
) -> list[bytes]:
    """The live entries with ID >= start, encoded, at most ``count`` (0 = all) and within the
    caps, which they are charged to (each with ``extra`` bytes more: what the caller adds to
    the entry); their IDs are appended to ``ids``. Without MAXSIZE this is one
    ``encode_entries``; with it, entries are encoded in growing chunks and checked one by one,
    so a small MAXSIZE over a long stream does not encode the whole stream."""
    limit = caps.per_stream(count)
    if not caps.max_bytes:
        parts = encode_entries(stream, start, MAX_ID, limit, ids=ids)
        caps.sent += len(parts)
        return parts
    parts = []
    chunk = _FIRST_CHUNK
    while True:
        want = min(chunk, limit - len(parts)) if limit else chunk
        chunk_ids: list[StreamID] = []
        encoded = encode_entries(stream, start, MAX_ID, want, ids=chunk_ids)
        for entry, sid in zip(encoded, chunk_ids, strict=True):
            if caps.full():
                return parts
            caps.add(entry, extra)
            parts.append(entry)
            if ids is not None:
                ids.append(sid)
        following = incr_id(chunk_ids[-1]) if len(encoded) == want else None
        if following is None or (limit and len(parts) >= limit):
            return parts
        start = following
        chunk = min(chunk * 4, _MAX_CHUNK)


def cmd_xread(c: Client, argv: list[bytes]) -> Reply | Block:
    return c.server.streams.read(c, argv, parse_xread(c, argv))


SPECS = (
    spec("xadd", -5, "write denyoom fast", (1, 1, 1), cmd_xadd),
    spec("xrange", -4, "readonly", (1, 1, 1), cmd_xrange),
    spec("xrevrange", -4, "readonly", (1, 1, 1), cmd_xrevrange),
    spec("xlen", 2, "readonly fast", (1, 1, 1), cmd_xlen),
    spec("xdel", -3, "write fast", (1, 1, 1), cmd_xdel),
    spec("xdelex", -5, "write fast", (1, 1, 1), cmd_xdelex),
    spec("xtrim", -4, "write", (1, 1, 1), cmd_xtrim),
    spec("xsetid", -3, "write denyoom fast", (1, 1, 1), cmd_xsetid),
    spec("xread", -4, "readonly blocking movablekeys", (0, 0, 0), cmd_xread),
)
