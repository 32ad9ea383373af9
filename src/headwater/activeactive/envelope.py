"""The effect envelope: what one region ships to the others, and the ops inside it.

Why this shape
--------------
A region ships only its own writes. Each is an ``Effect``::

    Effect(origin=R, seq=n, vector={1: a, 2: b, 3: c}, ops=(op, ...))

``seq`` numbers R's effects 1, 2, … without gaps, so a receiver applies each exactly once and
in order, and resumes a broken link at ``applied[R] + 1``. ``vector`` is what the sender had
applied from every region when it made the effect (``vector[R] == seq``): the causal context
that the observed-remove and delete-wins rules read (see ``inbox.py``). The ops are
deterministic: concrete IDs, exact cuts, horizons; every region applies them alike. One
command's ops travel in one effect, applied atomically.

A *horizon* is, per sub-log (region), the last ID the sender held in that sub-log. Since a
sub-log's entries are made by one region in ascending ID order and delivered in that order,
"the entries at or below the horizon" are exactly the entries the sender had observed.

The line form (``to_line`` / ``from_line``) is one RESP-ready argv per effect, for the link and
the AOF::

    AAEFFECT <origin> <seq> <n> <region> <seq> … <op count> <op> <args…> …

with each op as its name, then its arguments (counts before lists).

The compact line
----------------
Most effects are one XADD of database 0 made when nothing but the origin's own effects was
applied since its previous one: the vector is the previous effect's with the own sequence
moved on. Such an effect ("it *follows*", ``Effect.follows``) is written without its vector
or counts::

    AAXADD <origin> <seq> <key> <id> <field> <value> …       (6+ words instead of 13+)

Every reader applies an origin's effects in sequence order, so when it reaches this one it
holds the vector of the one before (``Inbox.vectors``): ``from_line`` gives the effect with an
empty vector (``RELATIVE``), the inbox fills it in when it applies it (``Inbox.resolved``),
and the same ``apply_effect`` applies it. Snapshots and state transfers save each origin's
last vector for the lines after them. A reader without it (a snapshot of the layout before:
``HWAA3``) takes its applied vector instead: an ``Add``'s apply never reads the vector, it
only dates the effect.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import final

from headwater.errors import err
from headwater.stream.ids import StreamID, format_id, parse_id
from headwater.stream.node import total_size

#: (region, ID) pairs, sorted by region: a horizon or a set of per-sub-log points
Points = tuple[tuple[int, StreamID], ...]


class _Value:
    """An immutable value (the ops and ``Effect``): equal, hashed and shown by its fields.

    Plain classes with their fields set in ``__init__`` rather than NamedTuples: compiled by
    mypyc, they are native classes, made by a C call (a NamedTuple's ``__new__`` is interpreted)
    and read as struct fields (a NamedTuple's fields are read by name through the type); per
    XADD, an effect and its op are made and read a dozen times. Nothing sets a field after
    ``__init__``."""

    __slots__ = ()

    def astuple(self) -> tuple[object, ...]:
        """The fields, in order."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Value)
            and type(other) is type(self)
            and self.astuple() == other.astuple()
        )

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.astuple()))

    def __repr__(self) -> str:
        return type(self).__name__ + repr(self.astuple())


@final
class Add(_Value):
    """XADD: append (sid, pairs) to the origin's sub-log. ``size``: the bytes of the pairs
    (not part of the op's value: given by XADD's handler, which measured them already)."""

    __slots__ = ("key", "pairs", "sid", "size")

    def __init__(self, key: bytes, sid: StreamID, pairs: tuple[bytes, ...], size: int = -1) -> None:
        self.key = key
        self.sid = sid
        self.pairs = pairs
        self.size = size if size >= 0 else total_size(pairs)

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.sid, self.pairs)


@final
class Remove(_Value):
    """XDEL, XDELEX, XACKDEL: remove these (sub-log, ID) entries. ``delref`` (DELREF): every
    region also drops its own (local) pending entries of them, in every group."""

    __slots__ = ("delref", "entries", "key")

    def __init__(self, key: bytes, entries: Points, delref: bool = False) -> None:
        self.key = key
        self.entries = entries
        self.delref = delref

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.entries, self.delref)


@final
class Cut(_Value):
    """XTRIM: remove each named sub-log's entries at or below its point, except the ``kept``
    ones (ACKED: entries a group of the sender still needed). ``delref`` (DELREF): every
    region also drops its own pending entries of the entries it removes."""

    __slots__ = ("cuts", "delref", "kept", "key")

    def __init__(self, key: bytes, cuts: Points, kept: Points = (), delref: bool = False) -> None:
        self.key = key
        self.cuts = cuts
        self.kept = kept
        self.delref = delref

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.cuts, self.kept, self.delref)


@final
class Delete(_Value):
    """DEL/UNLINK/FLUSHDB: remove the observed entries (at or below the horizon) and every
    group (delete wins)."""

    __slots__ = ("horizon", "key")

    def __init__(self, key: bytes, horizon: Points) -> None:
        self.key = key
        self.horizon = horizon

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.horizon)


#: entries by value, per source sub-log: ((sub-log, ((ID, pairs), …)), …)
Payload = tuple[tuple[int, tuple[tuple[StreamID, tuple[bytes, ...]], ...]], ...]


@final
class Move(_Value):
    """RENAME: delete what src and dst held (their horizons, and their groups), then put the
    entries src held (carried by value) into dst: the k-th source sub-log becomes dst's
    sub-log ``moved_sub(origin, seq, k)``, a sub-log of its own, so that the horizons of later
    deletes stay exact and a concurrent DEL of src cannot reach the copy."""

    __slots__ = ("dst", "dst_horizon", "payload", "src", "src_horizon")

    def __init__(
        self, src: bytes, dst: bytes, src_horizon: Points, dst_horizon: Points, payload: Payload
    ) -> None:
        self.src = src
        self.dst = dst
        self.src_horizon = src_horizon
        self.dst_horizon = dst_horizon
        self.payload = payload

    def astuple(self) -> tuple[object, ...]:
        return (self.src, self.dst, self.src_horizon, self.dst_horizon, self.payload)


#: sub-logs above this are RENAME's moved sub-logs; below it, regions' own
MOVED_BASE = 1 << 64


def moved_sub(origin: int, seq: int, k: int) -> int:
    """The sub-log that holds the k-th source sub-log of the RENAME effect (origin, seq):
    unique, and the same in every region."""
    return MOVED_BASE + (seq << 32) + (origin << 16) + k


@final
class SetFloor(_Value):
    """XSETID: the stream's last ID is at least ``sid`` (max-merged). ENTRIESADDED sets the
    origin's own ``adjust`` of the entries-added counter (None: not given), so that the sum
    is what the origin asked for; concurrent XADDs elsewhere add on top, as counters do.
    MAXDELETEDID: the max-deleted-entry-id is at least ``max_deleted`` (max-merged)."""

    __slots__ = ("adjust", "key", "max_deleted", "sid")

    def __init__(
        self,
        key: bytes,
        sid: StreamID,
        adjust: int | None = None,
        max_deleted: StreamID = (0, 0),
    ) -> None:
        self.key = key
        self.sid = sid
        self.adjust = adjust
        self.max_deleted = max_deleted

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.sid, self.adjust, self.max_deleted)


@final
class IdmpConfig(_Value):
    """XCFGSET: the stream's IDMP settings (0: not given), a multi-value register per
    setting: the value of the causally latest XCFGSET wins, concurrent ones are ordered by
    their stamps (``stamp``), and a DEL removes the values it observed."""

    __slots__ = ("duration", "key", "maxsize")

    def __init__(self, key: bytes, duration: int, maxsize: int) -> None:
        self.key = key
        self.duration = duration
        self.maxsize = maxsize

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.duration, self.maxsize)


@final
class Select(_Value):
    """The ops after it, up to the next ``Select``, are about this database's streams (an
    effect starts in database 0)."""

    __slots__ = ("db",)

    def __init__(self, db: int) -> None:
        self.db = db

    def astuple(self) -> tuple[object, ...]:
        return (self.db,)


@final
class GroupCreate(_Value):
    """XGROUP CREATE: the group exists, starting after these per-sub-log cursors."""

    __slots__ = ("cursors", "group", "key")

    def __init__(self, key: bytes, group: bytes, cursors: Points) -> None:
        self.key = key
        self.group = group
        self.cursors = cursors

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.group, self.cursors)


@final
class GroupDestroy(_Value):
    """XGROUP DESTROY: the group is gone, whoever created it (delete wins)."""

    __slots__ = ("group", "key")

    def __init__(self, key: bytes, group: bytes) -> None:
        self.key = key
        self.group = group

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.group)


@final
class AckPrefix(_Value):
    """XACK, replicated as a contiguous prefix: every entry of each sub-log up to its point
    was delivered and acknowledged in the origin region."""

    __slots__ = ("group", "key", "points")

    def __init__(self, key: bytes, group: bytes, points: Points) -> None:
        self.key = key
        self.group = group
        self.points = points

    def astuple(self) -> tuple[object, ...]:
        return (self.key, self.group, self.points)


Op = (
    Add
    | Remove
    | Cut
    | Delete
    | Move
    | SetFloor
    | IdmpConfig
    | Select
    | GroupCreate
    | GroupDestroy
    | AckPrefix
)


#: (region, applied seq) pairs, sorted by region
Vector = tuple[tuple[int, int], ...]
#: the vector of an effect read from a compact line, until the inbox fills it in
RELATIVE: Vector = ()


@final
class Effect(_Value):
    """``follows``: the vector is the origin's previous effect's with ``seq`` in the origin's
    place, and the ops one ``Add`` of database 0: written as the compact line (an effect
    read from one has the ``RELATIVE`` vector until the inbox fills it in). Not one of the
    fields: an effect equals itself whichever line carried it."""

    __slots__ = ("follows", "ops", "origin", "seq", "vector")

    def __init__(
        self,
        origin: int,
        seq: int,
        vector: Vector,
        ops: tuple[Op, ...],
        follows: bool = False,
    ) -> None:
        self.origin = origin
        self.seq = seq
        self.vector = vector
        self.ops = ops
        self.follows = follows

    def astuple(self) -> tuple[object, ...]:
        return (self.origin, self.seq, self.vector, self.ops)

    def stamp(self) -> tuple[int, int, int]:
        """A total order of effects that extends causality: if the sender of b had applied
        a, b's vector is at least a's everywhere and greater at b's origin, so its sum is
        greater; concurrent effects are ordered by sum, then origin (a register's winner)."""
        return (sum(s for _, s in self.vector), self.origin, self.seq)

    def seen(self, region: int) -> int:
        """The sender's applied sequence of region (0: nothing)."""
        for r, s in self.vector:
            if r == region:
                return s
        return 0

    def to_line(self) -> list[bytes]:
        # (one list, appended to: no list per vector entry nor per Add, made on every XADD)
        seq = b"%d" % self.seq
        if self.follows:
            op = self.ops[0]
            if len(self.ops) == 1 and isinstance(op, Add):
                line = [b"AAXADD", _num(self.origin), seq, op.key, format_id(op.sid)]
                line.extend(op.pairs)
                return line
        line = [b"AAEFFECT", _num(self.origin), seq, _num(len(self.vector))]
        for region, applied in self.vector:
            # (an own effect's vector holds its own sequence: formatted once)
            line.append(_num(region))
            line.append(seq if applied == self.seq else b"%d" % applied)
        line.append(_num(len(self.ops)))
        for op in self.ops:
            if isinstance(op, Add):
                _add_words_into(line, op)
            else:
                line += _op_words(op)
        return line


#: the small counts and region ids of effect lines, formatted once (a line has several)
_SMALL = [b"%d" % i for i in range(256)]


def _num(n: int) -> bytes:
    return _SMALL[n] if 0 <= n < 256 else b"%d" % n


def follows(vector: Vector, prev: Vector, origin: int) -> bool:
    """Whether ``vector`` differs from ``prev`` (the origin's previous effect's) only in the
    origin's own sequence."""
    if len(vector) != len(prev):
        return False
    for i in range(len(vector)):
        region, seq = vector[i]
        prev_region, prev_seq = prev[i]
        if region != prev_region or (seq != prev_seq and region != origin):
            return False
    return True


def moved_on(prev: Vector, origin: int, seq: int) -> Vector:
    """``prev`` with ``seq`` in the origin's place (added, in order, if it had none)."""
    if len(prev) == 1 and prev[0][0] == origin:  # (a region without peers)
        return ((origin, seq),)
    applied = dict(prev)
    applied[origin] = seq
    return tuple(sorted(applied.items()))


def make_vector(applied: dict[int, int]) -> Vector:
    if len(applied) == 1:  # (a region without peers: no list to sort)
        for item in applied.items():
            return (item,)
    return tuple(sorted(applied.items()))


# ---------------------------------------------------------------------------------------------
# the line form


def _points(points: Points) -> list[bytes]:
    words = [b"%d" % len(points)]
    for region, sid in points:
        words += [b"%d" % region, format_id(sid)]
    return words


def _add_words_into(line: list[bytes], op: Add) -> None:
    """An Add's words, appended (``to_line`` fills its line in place on every XADD)."""
    line.append(b"ADD")
    line.append(op.key)
    line.append(format_id(op.sid))
    line.append(_num(len(op.pairs)))
    line.extend(op.pairs)


def _op_words(op: Op) -> list[bytes]:
    if isinstance(op, Add):
        words: list[bytes] = []
        _add_words_into(words, op)
        return words
    if isinstance(op, Remove):
        return [b"REMOVEREF" if op.delref else b"REMOVE", op.key, *_points(op.entries)]
    if isinstance(op, Cut):
        if op.kept or op.delref:
            flag = b"1" if op.delref else b"0"
            return [b"CUTREF", op.key, flag, *_points(op.cuts), *_points(op.kept)]
        return [b"CUT", op.key, *_points(op.cuts)]
    if isinstance(op, Delete):
        return [b"DELETE", op.key, *_points(op.horizon)]
    if isinstance(op, Move):
        words = [b"MOVE", op.src, op.dst, *_points(op.src_horizon), *_points(op.dst_horizon)]
        words.append(b"%d" % len(op.payload))
        for sub, entries in op.payload:
            words += [b"%d" % sub, b"%d" % len(entries)]
            for sid, pairs in entries:
                words += [format_id(sid), b"%d" % len(pairs), *pairs]
        return words
    if isinstance(op, SetFloor):
        if op.adjust is None and op.max_deleted == (0, 0):
            return [b"SETFLOOR", op.key, format_id(op.sid)]
        adjust = [b"0", b"0"] if op.adjust is None else [b"1", b"%d" % op.adjust]
        return [b"SETFLOORX", op.key, format_id(op.sid), *adjust, format_id(op.max_deleted)]
    if isinstance(op, IdmpConfig):
        return [b"IDMPCFG", op.key, b"%d" % op.duration, b"%d" % op.maxsize]
    if isinstance(op, Select):
        return [b"DB", _num(op.db)]
    if isinstance(op, GroupCreate):
        return [b"GCREATE", op.key, op.group, *_points(op.cursors)]
    if isinstance(op, GroupDestroy):
        return [b"GDESTROY", op.key, op.group]
    return [b"ACKPREFIX", op.key, op.group, *_points(op.points)]


BAD_EFFECT = err("malformed active-active effect line")


class _Words:
    """A cursor over an effect line; every read raises BAD_EFFECT past the end or on junk."""

    def __init__(self, line: list[bytes]) -> None:
        self.it: Iterator[bytes] = iter(line)

    def word(self) -> bytes:
        word = next(self.it, None)
        if word is None:
            raise BAD_EFFECT
        return word

    def int(self) -> int:
        word = self.word()
        if not word.isdigit():
            raise BAD_EFFECT
        return int(word)

    def sid(self) -> StreamID:
        return parse_id(self.word())

    def points(self) -> Points:
        return tuple((self.int(), self.sid()) for _ in range(self.int()))

    def pairs(self) -> tuple[bytes, ...]:
        return tuple(self.word() for _ in range(self.int()))

    def payload(self) -> Payload:
        subs = []
        for _ in range(self.int()):
            sub = self.int()
            subs.append((sub, tuple((self.sid(), self.pairs()) for _ in range(self.int()))))
        return tuple(subs)

    def done(self) -> bool:
        return next(self.it, None) is None


def _signed(words: _Words) -> int:
    word = words.word()
    if not (word[1:] if word[:1] == b"-" else word).isdigit():
        raise BAD_EFFECT
    return int(word)


def from_line(line: list[bytes]) -> Effect:
    """The effect a ``to_line`` made; raises BAD_EFFECT on anything else."""
    words = _Words(line)
    name = words.word().upper()
    if name == b"AAXADD":
        return _compact(words, len(line))
    if name != b"AAEFFECT":
        raise BAD_EFFECT
    origin, seq = words.int(), words.int()
    vector = tuple((words.int(), words.int()) for _ in range(words.int()))
    ops = tuple(_read_op(words) for _ in range(words.int()))
    if not words.done():
        raise BAD_EFFECT
    return Effect(origin, seq, vector, ops)


def _compact(words: _Words, size: int) -> Effect:
    """``AAXADD <origin> <seq> <key> <id> <field> <value> …``: the effect, its vector
    ``RELATIVE`` (the inbox fills it in)."""
    if size < 7 or size % 2 == 0:
        raise BAD_EFFECT
    origin, seq, key, sid = words.int(), words.int(), words.word(), words.sid()
    pairs = tuple(words.word() for _ in range(size - 5))
    return Effect(origin, seq, RELATIVE, (Add(key, sid, pairs),), True)


def _read_op(words: _Words) -> Op:
    name = words.word()
    if name == b"ADD":
        return Add(words.word(), words.sid(), words.pairs())
    if name == b"REMOVE" or name == b"REMOVEREF":
        return Remove(words.word(), words.points(), name == b"REMOVEREF")
    if name == b"CUT":
        return Cut(words.word(), words.points())
    if name == b"CUTREF":
        key, flag = words.word(), words.int()
        if flag > 1:
            raise BAD_EFFECT
        return Cut(key, words.points(), words.points(), flag == 1)
    if name == b"DELETE":
        return Delete(words.word(), words.points())
    if name == b"MOVE":
        src, dst = words.word(), words.word()
        src_horizon, dst_horizon = words.points(), words.points()
        return Move(src, dst, src_horizon, dst_horizon, words.payload())
    if name == b"SETFLOOR":
        return SetFloor(words.word(), words.sid())
    if name == b"SETFLOORX":
        key, sid, given, adjust = words.word(), words.sid(), words.int(), _signed(words)
        if given > 1:
            raise BAD_EFFECT
        return SetFloor(key, sid, adjust if given else None, words.sid())
    if name == b"IDMPCFG":
        return IdmpConfig(words.word(), words.int(), words.int())
    if name == b"DB":
        return Select(words.int())
    if name == b"GCREATE":
        return GroupCreate(words.word(), words.word(), words.points())
    if name == b"GDESTROY":
        return GroupDestroy(words.word(), words.word())
    if name == b"ACKPREFIX":
        return AckPrefix(words.word(), words.word(), words.points())
    raise BAD_EFFECT
