"""Geo commands (Redis ``geo.c``) on sorted sets: a position is a member's score.

The positions arithmetic lives in ``structures.geohash``; this file parses, looks up and
replies. Writes go through the sorted-set commands' one write path:

- GEOADD is ZADD with the positions' scores, and is propagated (and notified, ``zadd``) as
  that ZADD: Redis replaces the command with ``zadd key [options] score member …``;
- GEORADIUS/GEORADIUSBYMEMBER … STORE|STOREDIST and GEOSEARCHSTORE replace the destination
  as the *STORE commands do (``georadiusstore``/``geosearchstore`` events, the destination
  deleted when nothing matched) and propagate as given: the search is deterministic.

Replies as Redis 7.2 gives them: GEODIST and WITHDIST as bulk strings with 4 decimals (RESP3
too); coordinates with ``%.17Lf`` trimmed of trailing zeros (Redis's "human" long double), a
RESP3 double in RESP3; WITHHASH the score as an integer.
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.commands.args import parse_double, parse_int
from headwater.commands.context import Client, spec
from headwater.commands.notify import read_as
from headwater.commands.zsets import AddFlags, add_scores, store_result
from headwater.errors import SYNTAX, err
from headwater.ops.change import Change, Written, as_given
from headwater.resp.types import NULL_ARRAY, Raw, Reply
from headwater.structures import geohash
from headwater.structures.geohash import Shape
from headwater.structures.zsets import ScoreRange, ZSetValue

UNSUPPORTED_UNIT = err("unsupported unit provided. please use M, KM, FT, MI")
RADIUS_NEGATIVE = err("radius cannot be negative")
BOX_NEGATIVE = err("height or width cannot be negative")
NO_MEMBER = err("could not decode requested zset member")
COUNT_NOT_POSITIVE = err("COUNT must be > 0")
ANY_NEEDS_COUNT = err("the ANY argument requires COUNT argument")
NEED_RADIUS = err("need numeric radius")
NEED_WIDTH = err("need numeric width")
NEED_HEIGHT = err("need numeric height")

#: metres in one unit (extractUnitOrReply; the unit's case does not matter since 7.0)
_UNITS = {b"m": 1.0, b"km": 1000.0, b"ft": 0.3048, b"mi": 1609.34}


def _unit(raw: bytes) -> float:
    to_meters = _UNITS.get(raw.lower())
    if to_meters is None:
        raise UNSUPPORTED_UNIT
    return to_meters


def _long_lat(raw_long: bytes, raw_lat: bytes) -> tuple[float, float]:
    """extractLongLatOrReply: two doubles within the Mercator ranges."""
    longitude, latitude = parse_double(raw_long), parse_double(raw_lat)
    if not (
        geohash.LONG_MIN <= longitude <= geohash.LONG_MAX
        and geohash.LAT_MIN <= latitude <= geohash.LAT_MAX
    ):
        raise err(f"invalid longitude,latitude pair {longitude:f},{latitude:f}")
    return longitude, latitude


def _member_position(z: ZSetValue, member: bytes) -> tuple[float, float] | None:
    score = z.scores.get(member)
    return None if score is None else geohash.decode_score(score)


def human(value: float) -> bytes:
    """Redis's ``ld2string(…, LD_STR_HUMAN)`` of a double: ``%.17Lf`` (the double is exact in
    a long double) without trailing zeros or dot; ``-0`` prints ``0``."""
    text = b"%.17f" % value
    if b"." in text:
        text = text.rstrip(b"0").rstrip(b".")
    return b"0" if text == b"-0" else text


def _coordinate(value: float, resp: int) -> Reply:
    """addReplyHumanLongDouble: a bulk string in RESP2, a double in RESP3."""
    text = human(value)
    return Raw(b",%s\r\n" % text) if resp == 3 else text


def distance_text(d: float) -> bytes:
    """addReplyDoubleDistance (7.2's fixedpoint_d2string): the distance rounded (half to even,
    as llrint) to 4 decimals."""
    if d == 0:
        return b"0.0000"
    scaled_d = d * 10000.0
    # llrint: out of range or NaN gives x86-64's "integer indefinite", LLONG_MIN
    in_range = -9223372036854775808.0 <= scaled_d < 9223372036854775808.0
    scaled = round(scaled_d) if in_range else -(1 << 63)
    sign = b"-" if scaled < 0 else b""
    scaled = abs(scaled)
    return b"%s%d.%04d" % (sign, scaled // 10000, scaled % 10000)


# -- GEOADD --------------------------------------------------------------------------------


def cmd_geoadd(c: Client, argv: list[bytes]) -> Reply | Written:
    """GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]"""
    flags = AddFlags()
    at = 2
    while at < len(argv):
        token = argv[at].lower()
        if token == b"nx":
            flags.nx = True
        elif token == b"xx":
            flags.xx = True
        elif token == b"ch":
            flags.ch = True
        else:
            break
        at += 1
    rest = len(argv) - at
    if rest % 3 or (flags.nx and flags.xx) or not rest:
        raise SYNTAX
    scores: list[float] = []
    members: list[bytes] = []
    line = [b"zadd", *argv[1:at]]
    for i in range(at, len(argv), 3):
        longitude, latitude = _long_lat(argv[i], argv[i + 1])
        bits = geohash.score_of(longitude, latitude)
        scores.append(float(bits))
        members.append(argv[i + 2])
        line.append(b"%d" % bits)
        line.append(argv[i + 2])
    result = add_scores(c, argv[1], flags, scores, members)
    if isinstance(result, Written):  # propagated as the ZADD it is
        return Written(result.reply, Change(result.change.dirty, [line]))
    return result


# -- GEOPOS, GEOHASH, GEODIST --------------------------------------------------------------


def cmd_geopos(c: Client, argv: list[bytes]) -> Reply:
    """GEOPOS key [member ...]"""
    z = read_as(c, argv[1], ZSetValue)
    out: list[Reply] = []
    for member in argv[2:]:
        position = None if z is None else _member_position(z, member)
        if position is None:
            out.append(NULL_ARRAY)
        else:
            out.append([_coordinate(position[0], c.resp), _coordinate(position[1], c.resp)])
    return out


def cmd_geohash(c: Client, argv: list[bytes]) -> Reply:
    """GEOHASH key [member ...]"""
    z = read_as(c, argv[1], ZSetValue)
    out: list[Reply] = []
    for member in argv[2:]:
        score = None if z is None else z.scores.get(member)
        out.append(None if score is None else geohash.standard_geohash(score))
    return out


def cmd_geodist(c: Client, argv: list[bytes]) -> Reply:
    """GEODIST key member1 member2 [M|KM|FT|MI]"""
    to_meters = 1.0
    if len(argv) == 5:
        to_meters = _unit(argv[4])
    elif len(argv) > 5:
        raise SYNTAX
    z = read_as(c, argv[1], ZSetValue)
    if z is None:
        return None
    first, second = _member_position(z, argv[2]), _member_position(z, argv[3])
    if first is None or second is None:
        return None
    return distance_text(geohash.distance(first[0], first[1], second[0], second[1]) / to_meters)


# -- searches ------------------------------------------------------------------------------

COORDS, MEMBER, SEARCH = 1, 2, 3
NONE, ASC, DESC = 0, 1, 2


class _Search:
    """A parsed GEORADIUS*/GEOSEARCH*: where, what shape, which options."""

    __slots__ = (
        "any",
        "box",
        "conversion",
        "count",
        "height",
        "latitude",
        "longitude",
        "radius",
        "sort",
        "store",
        "storedist",
        "width",
        "withcoord",
        "withdist",
        "withhash",
    )

    def __init__(self) -> None:
        self.longitude = self.latitude = 0.0
        self.radius = self.width = self.height = 0.0
        self.conversion = 1.0
        self.box = self.any = self.storedist = False
        self.withdist = self.withhash = self.withcoord = False
        self.count = 0
        self.sort = NONE
        self.store: bytes | None = None

    def shape(self) -> Shape:
        return Shape(self.longitude, self.latitude, self.conversion, self.radius, self.width,
                     self.height, self.box)  # fmt: skip


def _distance(q: _Search, raw: bytes, raw_unit: bytes) -> None:
    """extractDistanceOrReply: a radius, not negative, and its unit."""
    radius = parse_double(raw, NEED_RADIUS)
    if radius < 0:
        raise RADIUS_NEGATIVE
    q.radius = radius
    q.conversion = _unit(raw_unit)


def _box(q: _Search, raw_w: bytes, raw_h: bytes, raw_unit: bytes) -> None:
    """extractBoxOrReply: width and height, not negative, and their unit."""
    width = parse_double(raw_w, NEED_WIDTH)
    height = parse_double(raw_h, NEED_HEIGHT)
    if height < 0 or width < 0:
        raise BOX_NEGATIVE
    q.width, q.height = width, height
    q.conversion = _unit(raw_unit)


def _parse_search(
    argv: list[bytes], z: ZSetValue | None, kind: int, nostore: bool, searchstore: bool
) -> _Search:
    """georadiusGeneric's parsing, in its order (errors are Redis's first ones)."""
    q = _Search()
    if kind == COORDS:
        base = 6
        q.longitude, q.latitude = _long_lat(argv[2], argv[3])
        _distance(q, argv[4], argv[5])
    elif kind == MEMBER:
        base = 5
        if z is not None:  # (no key: the arguments are parsed for the reply's kind only)
            position = _member_position(z, argv[2])
            if position is None:
                raise NO_MEMBER
            q.longitude, q.latitude = position
            _distance(q, argv[3], argv[4])
    else:
        base = 3 if searchstore else 2
        if searchstore:
            q.store = argv[1]
    frommember = fromloc = byradius = bybox = False
    i, n = base, len(argv)
    while i < n:
        arg = argv[i].lower()
        left = n - i - 1  # arguments after this one
        if arg == b"withdist":
            q.withdist = True
        elif arg == b"withhash":
            q.withhash = True
        elif arg == b"withcoord":
            q.withcoord = True
        elif arg == b"any":
            q.any = True
        elif arg == b"asc":
            q.sort = ASC
        elif arg == b"desc":
            q.sort = DESC
        elif arg == b"count" and left >= 1:
            q.count = parse_int(argv[i + 1])
            if q.count <= 0:
                raise COUNT_NOT_POSITIVE
            i += 1
        elif arg in (b"store", b"storedist") and left >= 1 and not nostore and kind != SEARCH:
            q.store = argv[i + 1]
            q.storedist = arg == b"storedist"
            i += 1
        elif arg == b"storedist" and kind == SEARCH and searchstore:
            q.storedist = True
        elif arg == b"frommember" and left >= 1 and kind == SEARCH and not fromloc:
            if z is not None:
                position = _member_position(z, argv[i + 1])
                if position is None:
                    raise NO_MEMBER
                q.longitude, q.latitude = position
            frommember = True
            i += 1
        elif arg == b"fromlonlat" and left >= 2 and kind == SEARCH and not frommember:
            q.longitude, q.latitude = _long_lat(argv[i + 1], argv[i + 2])
            fromloc = True
            i += 2
        elif arg == b"byradius" and left >= 2 and kind == SEARCH and not bybox:
            _distance(q, argv[i + 1], argv[i + 2])
            q.box = False
            byradius = True
            i += 2
        elif arg == b"bybox" and left >= 3 and kind == SEARCH and not byradius:
            _box(q, argv[i + 1], argv[i + 2], argv[i + 3])
            q.box = True
            bybox = True
            i += 3
        else:
            raise SYNTAX
        i += 1
    if q.store is not None and (q.withdist or q.withhash or q.withcoord):
        what = "GEOSEARCHSTORE" if searchstore else "STORE option in GEORADIUS"
        raise err(f"{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
    name = argv[0].decode("utf-8", "replace")
    if kind == SEARCH and not (frommember or fromloc):
        raise err(f"exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")
    if kind == SEARCH and not (byradius or bybox):
        raise err(f"exactly one of BYRADIUS and BYBOX can be specified for {name}")
    if q.any and not q.count:
        raise ANY_NEEDS_COUNT
    return q


class Point:
    """A search's match (geoPoint)."""

    __slots__ = ("dist", "latitude", "longitude", "member", "score")

    def __init__(self, member: bytes, score: float, longitude: float, latitude: float,
                 dist: float) -> None:  # fmt: skip
        self.member = member
        self.score = score
        self.longitude = longitude
        self.latitude = latitude
        self.dist = dist


def search(z: ZSetValue, shape: Shape, limit: int) -> list[Point]:
    """membersOfAllNeighbors: the points inside the shape, cell by cell in Redis's order,
    each cell's in score order; with ``limit`` (ANY) the scan stops at that many."""
    found: list[Point] = []
    cells = geohash.search_cells(shape)
    last = 0
    for i, cell in enumerate(cells):
        if cell == geohash.ZERO:
            continue
        # huge radii: neighbours may be the same cell (Redis compares from the 2nd on)
        if last and cell == cells[last]:
            continue
        if found and limit and len(found) >= limit:
            break
        low, high = geohash.score_bounds(cell)
        first, end = z.score_span(ScoreRange(float(low), float(high), False, True))
        for score, member in z.by_rank(first, end - 1):
            longitude, latitude = geohash.decode_score(score)
            dist = geohash.within(shape, longitude, latitude)
            if dist is not None:
                found.append(Point(member, score, longitude, latitude, dist))
            if found and limit and len(found) >= limit:
                break
        last = i
    return found


def _point_reply(p: Point, q: _Search, resp: int) -> Reply:
    if not (q.withdist or q.withhash or q.withcoord):
        return p.member
    item: list[Reply] = [p.member]
    if q.withdist:
        item.append(distance_text(p.dist))
    if q.withhash:
        item.append(int(p.score))
    if q.withcoord:
        item.append([_coordinate(p.longitude, resp), _coordinate(p.latitude, resp)])
    return item


def _georadius(
    c: Client, argv: list[bytes], kind: int, nostore: bool = False, searchstore: bool = False
) -> Reply | Written:
    source = argv[2] if searchstore else argv[1]
    z = read_as(c, source, ZSetValue)
    q = _parse_search(argv, z, kind, nostore, searchstore)
    if z is None:
        if q.store is not None:
            return _stored(c, q.store, [], searchstore)
        return []
    sort = q.sort
    if q.count and sort == NONE and not q.any:
        sort = ASC  # (COUNT means the closest ones)
    points = search(z, q.shape(), q.count if q.any else 0)
    returned = min(q.count, len(points)) if q.count else len(points)
    if sort != NONE:
        if returned == len(points):  # glibc's qsort: a merge sort, stable
            points.sort(key=_dist_of, reverse=sort == DESC)
        else:  # Redis's partial quicksort: its own order among equal distances
            partial_sort(points, _desc if sort == DESC else _asc, 0, returned - 1)
    del points[returned:]
    for p in points:
        p.dist /= q.conversion
    if q.store is not None:
        pairs = [(p.dist if q.storedist else p.score, p.member) for p in points]
        return _stored(c, q.store, pairs, searchstore)
    return [_point_reply(p, q, c.resp) for p in points]


def _dist_of(p: Point) -> float:
    return p.dist


def _asc(a: Point, b: Point) -> int:
    """sort_gp_asc"""
    return 1 if a.dist > b.dist else 0 if a.dist == b.dist else -1


def _desc(a: Point, b: Point) -> int:
    return -_asc(a, b)


# -- Redis's pqsort ------------------------------------------------------------------------
#
# GEO* … COUNT n sorts with Redis's pqsort.c when n is less than the matches: Bentley and
# McIlroy's quicksort (median of three, or of nine past 40 elements; a three-way partition;
# insertion sort below 7 elements or when a pass swapped nothing) that only recurses into the
# parts overlapping positions [low, high]. Equal distances end up in its order, which is not
# the input's, so the algorithm is reproduced step for step (indexes for C's pointers).


def _med3(v: list[Point], a: int, b: int, c: int, cmp: Callable[[Point, Point], int]) -> int:
    if cmp(v[a], v[b]) < 0:
        return b if cmp(v[b], v[c]) < 0 else (c if cmp(v[a], v[c]) < 0 else a)
    return b if cmp(v[b], v[c]) > 0 else (a if cmp(v[a], v[c]) < 0 else c)


def _insertion(v: list[Point], a: int, n: int, cmp: Callable[[Point, Point], int]) -> None:
    for m in range(a + 1, a + n):
        i = m
        while i > a and cmp(v[i - 1], v[i]) > 0:
            v[i], v[i - 1] = v[i - 1], v[i]
            i -= 1


def _vecswap(v: list[Point], a: int, b: int, n: int) -> None:
    for i in range(n):
        v[a + i], v[b + i] = v[b + i], v[a + i]


def _outside(low: int, high: int, start: int, size: int) -> bool:
    """The part [start, start + size) holds none of positions [low, high]."""
    return (low < start and high < start) or (low >= start + size and high >= start + size)


def partial_sort(
    v: list[Point], cmp: Callable[[Point, Point], int], low: int, high: int, a: int = 0,
    n: int = -1,
) -> None:  # fmt: skip
    """pqsort(v, n, cmp, low, high): positions low..high hold what a full sort puts there."""
    if n < 0:
        n = len(v)
    while True:
        swapped = False
        if n < 7:
            _insertion(v, a, n, cmp)
            return
        pm = a + n // 2
        if n > 7:
            pl, pn = a, a + n - 1
            if n > 40:
                d = n // 8
                pl = _med3(v, pl, pl + d, pl + 2 * d, cmp)
                pm = _med3(v, pm - d, pm, pm + d, cmp)
                pn = _med3(v, pn - 2 * d, pn - d, pn, cmp)
            pm = _med3(v, pl, pm, pn, cmp)
        v[a], v[pm] = v[pm], v[a]
        pa = pb = a + 1
        pc = pd = a + n - 1
        while True:
            while pb <= pc:
                result = cmp(v[pb], v[a])
                if result > 0:
                    break
                if result == 0:
                    swapped = True
                    v[pa], v[pb] = v[pb], v[pa]
                    pa += 1
                pb += 1
            while pb <= pc:
                result = cmp(v[pc], v[a])
                if result < 0:
                    break
                if result == 0:
                    swapped = True
                    v[pc], v[pd] = v[pd], v[pc]
                    pd -= 1
                pc -= 1
            if pb > pc:
                break
            v[pb], v[pc] = v[pc], v[pb]
            swapped = True
            pb += 1
            pc -= 1
        if not swapped:
            _insertion(v, a, n, cmp)
            return
        pn = a + n
        r = min(pa - a, pb - pa)
        _vecswap(v, a, pb - r, r)
        r = min(pd - pc, pn - pd - 1)
        _vecswap(v, pb, pn - r, r)
        r = pb - pa
        if r > 1 and not _outside(low, high, a, r):
            partial_sort(v, cmp, low, high, a, r)
        r = pd - pc
        if r <= 1:
            return
        a, n = pn - r, r
        if _outside(low, high, a, n):
            return


def _stored(
    c: Client, destination: bytes, pairs: list[tuple[float, bytes]], searchstore: bool
) -> Written:
    """The STORE forms: the destination replaced (deleted when empty), propagated as given;
    Redis counts one change per stored member (or one for a deletion)."""
    event = b"geosearchstore" if searchstore else b"georadiusstore"
    written = store_result(c, destination, pairs, event)
    dirty = len(pairs) if pairs else written.change.dirty
    return Written(written.reply, as_given(dirty))


def cmd_georadius(c: Client, argv: list[bytes]) -> Reply | Written:
    """GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
    [COUNT count [ANY]] [ASC|DESC] [STORE key|STOREDIST key]"""
    return _georadius(c, argv, COORDS)


def cmd_georadius_ro(c: Client, argv: list[bytes]) -> Reply | Written:
    return _georadius(c, argv, COORDS, nostore=True)


def cmd_georadiusbymember(c: Client, argv: list[bytes]) -> Reply | Written:
    """GEORADIUSBYMEMBER key member radius M|KM|FT|MI … (GEORADIUS's options)"""
    return _georadius(c, argv, MEMBER)


def cmd_georadiusbymember_ro(c: Client, argv: list[bytes]) -> Reply | Written:
    return _georadius(c, argv, MEMBER, nostore=True)


def cmd_geosearch(c: Client, argv: list[bytes]) -> Reply | Written:
    """GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude
    BYRADIUS radius unit|BYBOX width height unit [ASC|DESC] [COUNT count [ANY]]
    [WITHCOORD] [WITHDIST] [WITHHASH]"""
    return _georadius(c, argv, SEARCH, nostore=True)


def cmd_geosearchstore(c: Client, argv: list[bytes]) -> Reply | Written:
    """GEOSEARCHSTORE destination source … (GEOSEARCH's from/by, ASC|DESC, COUNT [ANY])
    [STOREDIST]"""
    return _georadius(c, argv, SEARCH, nostore=True, searchstore=True)


SPECS = (
    spec("geoadd", -5, "write denyoom", (1, 1, 1), cmd_geoadd),
    spec("geopos", -2, "readonly", (1, 1, 1), cmd_geopos),
    spec("geohash", -2, "readonly", (1, 1, 1), cmd_geohash),
    spec("geodist", -4, "readonly", (1, 1, 1), cmd_geodist),
    spec("georadius", -6, "write denyoom movablekeys", (1, 1, 1), cmd_georadius),
    spec("georadius_ro", -6, "readonly", (1, 1, 1), cmd_georadius_ro),
    spec("georadiusbymember", -5, "write denyoom movablekeys", (1, 1, 1), cmd_georadiusbymember),
    spec("georadiusbymember_ro", -5, "readonly", (1, 1, 1), cmd_georadiusbymember_ro),
    spec("geosearch", -7, "readonly", (1, 1, 1), cmd_geosearch),
    spec("geosearchstore", -8, "write denyoom", (1, 2, 1), cmd_geosearchstore),
)
