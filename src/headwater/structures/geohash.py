"""Redis's geohash (``geohash.c``, ``geohash_helper.c``), computed as Redis computes it.

Why this shape: a geo set is a sorted set whose scores are positions. A position is encoded
at step 26 (26 bits of longitude, 26 of latitude, interleaved: latitude in the even bits,
longitude in the odd ones) into a 52-bit integer, which a double holds exactly::

    score bits  51 50 49 48 ...  1  0
                lo la lo la ... lo la      (lo: longitude bit, la: latitude bit, MSB first)

The latitude range is Web Mercator's, ±85.05112878 (not ±90), so the score is not the
standard geohash; GEOHASH re-encodes the decoded centre over ±90 for its 11-character form.
A decoded position is the centre of the score's cell, clamped to the ranges (that is what
GEOPOS prints). A search covers the query's bounding box with a centre cell and its eight
neighbours at a step estimated from the radius, scans each cell's score range
[min, max) and keeps the points that pass the shape's test (great-circle distance for a
radius; latitude and longitude distances for a box).

Every floating-point step below is the one Redis's C performs, in the same order, with the
same libm (Python's ``math`` calls it), so positions and distances agree to the last bit.
Integers are Python's, masked where C's ``uint64_t`` would wrap.
"""

from __future__ import annotations

import math
from typing import NamedTuple

STEP_MAX = 26
LONG_MIN, LONG_MAX = -180.0, 180.0
LAT_MIN, LAT_MAX = -85.05112878, 85.05112878
#: the ±90 latitude range GEOHASH's standard form uses
STD_LAT_MIN, STD_LAT_MAX = -90.0, 90.0
EARTH_RADIUS_IN_METERS = 6372797.560856
MERCATOR_MAX = 20037726.37
D_R = math.pi / 180.0

_U64 = (1 << 64) - 1
_EVEN = 0x5555555555555555
_ODD = 0xAAAAAAAAAAAAAAAA
_ALPHABET = b"0123456789bcdefghjkmnpqrstuvwxyz"


class Cell(NamedTuple):
    """A geohash cell: ``bits`` at ``step`` (2*step bits). Cell(0, 0) is Redis's zero hash,
    a neighbour excluded from the search."""

    bits: int
    step: int


ZERO = Cell(0, 0)


class Area(NamedTuple):
    long_min: float
    long_max: float
    lat_min: float
    lat_max: float


class Shape(NamedTuple):
    """A search: centre, and a radius (``width``/``height`` 0) or a box, in the unit whose
    size in metres is ``conversion``."""

    longitude: float
    latitude: float
    conversion: float
    radius: float = 0.0
    width: float = 0.0
    height: float = 0.0
    box: bool = False


# -- C's libm: NaN where Python's math raises (an infinite radius, rounding past 1) --------


def _cos(x: float) -> float:
    return math.cos(x) if math.isfinite(x) else math.nan


def _sin(x: float) -> float:
    return math.sin(x) if math.isfinite(x) else math.nan


def _asin(x: float) -> float:
    return math.asin(x) if -1.0 <= x <= 1.0 else math.nan


def _sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0.0 else math.nan


# -- bits ----------------------------------------------------------------------------------


def _spread(v: int) -> int:
    """The low 32 bits of v into the even bit positions (Redis's interleave64 masks)."""
    v &= 0xFFFFFFFF
    v = (v | (v << 16)) & 0x0000FFFF0000FFFF
    v = (v | (v << 8)) & 0x00FF00FF00FF00FF
    v = (v | (v << 4)) & 0x0F0F0F0F0F0F0F0F
    v = (v | (v << 2)) & 0x3333333333333333
    return (v | (v << 1)) & _EVEN


def _squash(v: int) -> int:
    """The even bits of v packed into 32 bits (deinterleave64)."""
    v &= _EVEN
    v = (v | (v >> 1)) & 0x3333333333333333
    v = (v | (v >> 2)) & 0x0F0F0F0F0F0F0F0F
    v = (v | (v >> 4)) & 0x00FF00FF00FF00FF
    v = (v | (v >> 8)) & 0x0000FFFF0000FFFF
    return (v | (v >> 16)) & 0xFFFFFFFF


def interleave(lat_bits: int, long_bits: int) -> int:
    return _spread(lat_bits) | (_spread(long_bits) << 1)


def c_uint64(value: float) -> int:
    """C's ``(uint64_t)value`` as gcc compiles it on x86-64 (cvttsd2si): truncation; a
    negative value wraps; a value past the conversion's range gives 2**63 (below 2**63) or
    0 (from 2**63 up), infinities included. Only a score set by ZADD can be such."""
    if value != value:
        return 1 << 63
    if value < 9223372036854775808.0:
        if value <= -9223372036854775809.0 or value == -math.inf:
            return 1 << 63
        return int(value) & _U64
    if value < 18446744073709551616.0:
        return int(value)
    return 0


def encode(longitude: float, latitude: float, step: int = STEP_MAX,
           lat_min: float = LAT_MIN, lat_max: float = LAT_MAX) -> Cell | None:  # fmt: skip
    """geohashEncode over [-180, 180] and [lat_min, lat_max] (None: outside the ranges;
    Redis checks the Mercator limits whatever the range)."""
    if not (LONG_MIN <= longitude <= LONG_MAX and LAT_MIN <= latitude <= LAT_MAX):
        return None
    if not (lat_min <= latitude <= lat_max):
        return None
    lat_offset = (latitude - lat_min) / (lat_max - lat_min)
    long_offset = (longitude - LONG_MIN) / (LONG_MAX - LONG_MIN)
    scale = float(1 << step)
    return Cell(interleave(int(lat_offset * scale), int(long_offset * scale)), step)


def score_of(longitude: float, latitude: float) -> int:
    """A position's score (its step-26 cell aligned to 52 bits); the caller has checked the
    ranges."""
    cell = encode(longitude, latitude)
    if cell is None:
        raise ValueError("position outside the geo ranges")
    return cell.bits


def decode_area(cell: Cell, lat_min: float = LAT_MIN, lat_max: float = LAT_MAX) -> Area:
    """geohashDecode: the cell's bounds."""
    step = cell.step
    lat_scale = lat_max - lat_min
    long_scale = LONG_MAX - LONG_MIN
    ilat = _squash(cell.bits)
    ilong = _squash(cell.bits >> 1)
    size = float(1 << step)
    return Area(
        LONG_MIN + (ilong * 1.0 / size) * long_scale,
        LONG_MIN + ((ilong + 1) * 1.0 / size) * long_scale,
        lat_min + (ilat * 1.0 / size) * lat_scale,
        lat_min + ((ilat + 1) * 1.0 / size) * lat_scale,
    )


def _pair_table() -> list[int]:
    """For each 16 bits: their 8 even bits, and their 8 odd bits shifted up by 32."""
    return [_squash(v) | (_squash(v >> 1) << 32) for v in range(1 << 16)]


_PAIRS = _pair_table()
_LAT_SCALE = LAT_MAX - LAT_MIN
_LONG_SCALE = LONG_MAX - LONG_MIN
_CELLS = float(1 << STEP_MAX)


def decode_score(score: float) -> tuple[float, float]:
    """The (longitude, latitude) a score stands for: its cell's centre, clamped (decodeGeohash
    and geohashDecodeAreaToLongLat; decode_area's arithmetic, inlined: the searches' loop)."""
    bits = int(score) if 0.0 <= score < 9223372036854775808.0 else c_uint64(score)
    pairs = _PAIRS
    both = (
        pairs[bits & 0xFFFF]
        | (pairs[(bits >> 16) & 0xFFFF] << 8)
        | (pairs[(bits >> 32) & 0xFFFF] << 16)
        | (pairs[(bits >> 48) & 0xFFFF] << 24)
    )
    ilat = both & 0xFFFFFFFF
    ilong = both >> 32
    cells = _CELLS
    longitude = (
        (LONG_MIN + (ilong * 1.0 / cells) * _LONG_SCALE)
        + (LONG_MIN + ((ilong + 1) * 1.0 / cells) * _LONG_SCALE)
    ) / 2
    latitude = (
        (LAT_MIN + (ilat * 1.0 / cells) * _LAT_SCALE)
        + (LAT_MIN + ((ilat + 1) * 1.0 / cells) * _LAT_SCALE)
    ) / 2
    if longitude > LONG_MAX:
        longitude = LONG_MAX
    elif longitude < LONG_MIN:
        longitude = LONG_MIN
    if latitude > LAT_MAX:
        latitude = LAT_MAX
    elif latitude < LAT_MIN:
        latitude = LAT_MIN
    return longitude, latitude


def standard_geohash(score: float) -> bytes:
    """GEOHASH's 11 characters: the decoded centre re-encoded over ±90 at step 26; the 11th
    character stands for bits Redis does not have (always ``0``)."""
    longitude, latitude = decode_score(score)
    cell = encode(longitude, latitude, STEP_MAX, STD_LAT_MIN, STD_LAT_MAX)
    bits = 0 if cell is None else cell.bits
    out = bytearray(11)
    for i in range(10):
        out[i] = _ALPHABET[(bits >> (52 - (i + 1) * 5)) & 0x1F]
    out[10] = _ALPHABET[0]
    return bytes(out)


# -- neighbours ----------------------------------------------------------------------------


def _move_x(cell: Cell, d: int) -> Cell:
    """One cell east (d > 0) or west: the longitude bits are the odd ones."""
    bits, step = cell.bits, cell.step
    x = bits & _ODD
    y = bits & _EVEN
    zz = _EVEN >> (64 - step * 2)
    x = x + (zz + 1) if d > 0 else (x | zz) - (zz + 1)
    x &= _ODD >> (64 - step * 2)
    return Cell((x | y) & _U64, step)


def _move_y(cell: Cell, d: int) -> Cell:
    """One cell north (d > 0) or south: the latitude bits are the even ones."""
    bits, step = cell.bits, cell.step
    x = bits & _ODD
    y = bits & _EVEN
    zz = _ODD >> (64 - step * 2)
    y = y + (zz + 1) if d > 0 else (y | zz) - (zz + 1)
    y &= _EVEN >> (64 - step * 2)
    return Cell((x | y) & _U64, step)


class Neighbours(NamedTuple):
    north: Cell
    south: Cell
    east: Cell
    west: Cell
    north_east: Cell
    north_west: Cell
    south_east: Cell
    south_west: Cell


def neighbours(cell: Cell) -> Neighbours:
    east, west = _move_x(cell, 1), _move_x(cell, -1)
    return Neighbours(
        north=_move_y(cell, 1),
        south=_move_y(cell, -1),
        east=east,
        west=west,
        north_east=_move_y(east, 1),
        north_west=_move_y(west, 1),
        south_east=_move_y(east, -1),
        south_west=_move_y(west, -1),
    )


# -- searches ------------------------------------------------------------------------------


def estimate_step(range_meters: float, latitude: float) -> int:
    """geohashEstimateStepsByRadius: the step whose cells are about the search's size."""
    if range_meters == 0:
        return 26
    step = 1
    while range_meters < MERCATOR_MAX:
        range_meters *= 2
        step += 1
    step -= 2
    if latitude > 66 or latitude < -66:
        step -= 1
        if latitude > 80 or latitude < -80:
            step -= 1
    return min(max(step, 1), 26)


def bounding_box(shape: Shape) -> tuple[float, float, float, float]:
    """geohashBoundingBox: (min longitude, min latitude, max longitude, max latitude)."""
    longitude, latitude = shape.longitude, shape.latitude
    if shape.box:
        height = shape.conversion * shape.height / 2
        width = shape.conversion * shape.width / 2
    else:
        height = width = shape.conversion * shape.radius
    lat_delta = (height / EARTH_RADIUS_IN_METERS) / D_R
    long_delta_top = (width / EARTH_RADIUS_IN_METERS / _cos((latitude + lat_delta) * D_R)) / D_R
    long_delta_bottom = (width / EARTH_RADIUS_IN_METERS / _cos((latitude - lat_delta) * D_R)) / D_R
    long_delta = long_delta_bottom if latitude < 0 else long_delta_top
    return (longitude - long_delta, latitude - lat_delta, longitude + long_delta,
            latitude + lat_delta)  # fmt: skip


def search_cells(shape: Shape) -> list[Cell]:
    """geohashCalculateAreasByShapeWGS84: the centre cell and its eight neighbours, in the
    order Redis scans them (centre, N, S, E, W, NE, NW, SE, SW), the useless ones ZERO."""
    min_lon, min_lat, max_lon, max_lat = bounding_box(shape)
    if shape.box:
        half_w, half_h = shape.width / 2, shape.height / 2
        radius_meters = _sqrt(half_w * half_w + half_h * half_h)
    else:
        radius_meters = shape.radius
    radius_meters *= shape.conversion
    step = estimate_step(radius_meters, shape.latitude)
    cell = encode(shape.longitude, shape.latitude, step)
    if cell is None:
        raise ValueError("search centre outside the geo ranges")
    near = neighbours(cell)
    if step > 1 and (
        decode_area(near.north).lat_max < max_lat
        or decode_area(near.south).lat_min > min_lat
        or decode_area(near.east).long_max < max_lon
        or decode_area(near.west).long_min > min_lon
    ):
        step -= 1
        cell = encode(shape.longitude, shape.latitude, step)
        if cell is None:
            raise ValueError("search centre outside the geo ranges")
        near = neighbours(cell)
    area = decode_area(cell)
    n, s, e, w = near.north, near.south, near.east, near.west
    ne, nw, se, sw = near.north_east, near.north_west, near.south_east, near.south_west
    if step >= 2:
        if area.lat_min < min_lat:
            s = sw = se = ZERO
        if area.lat_max > max_lat:
            n = ne = nw = ZERO
        if area.long_min < min_lon:
            w = sw = nw = ZERO
        if area.long_max > max_lon:
            e = se = ne = ZERO
    return [cell, n, s, e, w, ne, nw, se, sw]


def score_bounds(cell: Cell) -> tuple[int, int]:
    """scoresOfGeoHashBox: the scores [min, max) of the points inside the cell."""
    shift = 52 - cell.step * 2
    return cell.bits << shift, (cell.bits + 1) << shift


def lat_distance(lat1: float, lat2: float) -> float:
    """geohashGetLatDistance (Redis 7.2): the distance along a meridian."""
    return EARTH_RADIUS_IN_METERS * math.fabs(lat2 * D_R - lat1 * D_R)


def distance(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """geohashGetDistance (Redis 7.2): haversine on Redis's sphere, in metres."""
    lon1r = lon1 * D_R
    lon2r = lon2 * D_R
    v = _sin((lon2r - lon1r) / 2)
    if v == 0.0:
        return lat_distance(lat1, lat2)
    lat1r = lat1 * D_R
    lat2r = lat2 * D_R
    u = _sin((lat2r - lat1r) / 2)
    a = u * u + _cos(lat1r) * _cos(lat2r) * v * v
    return 2.0 * EARTH_RADIUS_IN_METERS * _asin(_sqrt(a))


def within(shape: Shape, longitude: float, latitude: float) -> float | None:
    """geoWithinShape: the point's distance from the centre in metres, or None when it lies
    outside the shape."""
    x1, y1 = shape.longitude, shape.latitude
    if not shape.box:
        d = distance(x1, y1, longitude, latitude)
        return None if d > shape.radius * shape.conversion else d
    height_m = shape.height * shape.conversion
    width_m = shape.width * shape.conversion
    if lat_distance(latitude, y1) > height_m / 2:
        return None
    if distance(longitude, latitude, x1, latitude) > width_m / 2:
        return None
    return distance(x1, y1, longitude, latitude)
