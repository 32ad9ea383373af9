"""Geo: the geohash arithmetic's properties, and the write path (effects, changes, events).

Byte-for-byte replies against Redis are in tests/differential/test_geo.py; here:

- a position encodes to a cell whose decoded centre encodes back to the same score, and lies
  within half a cell of the position;
- a search finds exactly the points a brute-force scan finds (away from the poles and the
  antimeridian, where Redis's nine cells are known to cover the shape), in Redis's scan order;
- GEOADD propagates as the ZADD it is (Redis replaces the command), notifies ``zadd``, and
  counts one change per member added or moved; the STORE forms propagate as given, count one
  change per stored member, notify ``georadiusstore``/``geosearchstore`` (``del`` when empty).
"""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from headwater.structures import geohash
from headwater.structures.geohash import Cell, Shape
from headwater.structures.zsets import ZSetLimits, ZSetValue
from tests.unit.conftest import Harness, decode_all

longitude = st.floats(-180, 180, allow_nan=False)
latitude = st.floats(geohash.LAT_MIN, geohash.LAT_MAX, allow_nan=False)


@example(180.0, 25.0)  # (found by CI: the longitude's top edge moved the latitude 1.3 cells)
@given(longitude, latitude)
def test_a_position_decodes_to_its_cells_centre(lon: float, lat: float) -> None:
    bits = geohash.score_of(lon, lat)
    assert 0 <= bits < 1 << 54
    dlon, dlat = geohash.decode_score(float(bits))
    if bits >= 1 << 52:
        # At a range's top edge the offset is 2**26, past the cells: its bit lands among the
        # other coordinate's, as in Redis (tests/differential/test_geo.py compares those
        # scores and positions with Redis's); the position is then only near its cell.
        assert abs(dlon - lon) <= 360 / 2**25 and abs(dlat - lat) <= 171 / 2**25
        return
    assert geohash.score_of(dlon, dlat) == bits
    assert abs(dlon - lon) <= 360 / 2**26 and abs(dlat - lat) <= 171 / 2**26


def test_c_conversion_of_odd_scores() -> None:
    assert geohash.c_uint64(-1.0) == 2**64 - 1
    assert geohash.c_uint64(-0.5) == 0
    assert geohash.c_uint64(1e30) == 0
    assert geohash.c_uint64(math.inf) == 0
    assert geohash.c_uint64(-math.inf) == 2**63
    assert geohash.c_uint64(-1e30) == 2**63
    assert geohash.c_uint64(2.0**63) == 2**63


def test_neighbours_are_the_adjacent_cells() -> None:
    cell = geohash.encode(13.36, 38.11, 10)
    assert cell is not None
    area = geohash.decode_area(cell)
    near = geohash.neighbours(cell)
    east, north = geohash.decode_area(near.east), geohash.decode_area(near.north)
    assert math.isclose(east.long_min, area.long_max) and east.lat_min == area.lat_min
    assert math.isclose(north.lat_min, area.lat_max) and north.long_min == area.long_min
    ne = geohash.decode_area(near.north_east)
    assert math.isclose(ne.long_min, area.long_max) and math.isclose(ne.lat_min, area.lat_max)
    assert geohash.score_bounds(Cell(0b101010, 3)) == (0b101010 << 46, 0b101011 << 46)


def _geo_set(points: list[tuple[float, float]]) -> ZSetValue:
    z = ZSetValue()
    for i, (lon, lat) in enumerate(points):
        z.set(b"p%d" % i, float(geohash.score_of(lon, lat)), ZSetLimits())
    return z


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-20, 20), st.floats(-20, 20)), min_size=1, max_size=60),
    st.floats(-15, 15),
    st.floats(-15, 15),
    st.floats(1, 2_000_000),
    st.booleans(),
)
def test_search_finds_what_a_brute_force_scan_finds(
    points: list[tuple[float, float]], clon: float, clat: float, size: float, box: bool
) -> None:
    from headwater.commands.geo import search

    z = _geo_set(points)
    shape = Shape(clon, clat, 1.0, 0.0 if box else size, size, size / 2, box)
    found = search(z, shape, 0)
    expected = set()
    for score, member in z:
        lon, lat = geohash.decode_score(score)
        if geohash.within(shape, lon, lat) is not None:
            expected.add(member)
    assert [p.member for p in found if p.member in expected] == [p.member for p in found]
    assert {p.member for p in found} == expected
    assert len(found) == len(expected)  # (no cell scanned twice)
    limited = search(z, shape, 2)
    assert len(limited) == min(2, len(expected))


def _events(raw: bytes) -> list[bytes]:
    replies = decode_all(raw)
    return [
        r[2].split(b":", 1)[1] + b" " + r[3]
        for r in replies
        if isinstance(r, list) and r and r[0] == b"pmessage"
    ]


def test_geoadd_is_propagated_and_notified_as_zadd(h: Harness) -> None:
    c, sub = h.client(), h.client()
    h.call(c, "CONFIG", "SET", "notify-keyspace-events", "KEA")
    h.call(sub, "PSUBSCRIBE", "__keyevent@0__:*")
    dirty = h.engine.dirty
    assert h.call(c, "GEOADD", "g", "ch", "13.361389", "38.115556", "Palermo", "15", "37", "C") == 2
    assert h.engine.dirty - dirty == 2
    assert h.effect_lines()[-1] == [
        b"zadd",
        b"g",
        b"ch",
        b"3479099956230698",
        b"Palermo",
        b"3476504601741708",
        b"C",
    ]
    effects = len(h.effects)
    assert h.call(c, "GEOADD", "g", "NX", "1", "1", "Palermo") == 0  # nothing changed
    assert len(h.effects) == effects
    assert h.call(c, "GEOADD", "g", "XX", "CH", "1", "1", "Palermo", "2", "2", "new") == 1
    assert h.effect_lines()[-1] == [
        b"zadd",
        b"g",
        b"XX",
        b"CH",
        b"3377822707026402",
        b"Palermo",
        b"3378191666521995",
        b"new",
    ]
    assert h.call(c, "ZCARD", "g") == 2
    assert _events(h.raw(sub)) == [b"zadd g", b"zadd g"]


def test_store_forms_propagate_as_given_and_count_each_member(h: Harness) -> None:
    c, sub = h.client(), h.client()
    h.call(c, "GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "C")
    h.call(c, "CONFIG", "SET", "notify-keyspace-events", "KEA")
    h.call(sub, "PSUBSCRIBE", "__keyevent@0__:*")
    dirty = h.engine.dirty
    store = ["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "d"]
    assert h.call(c, *store) == 2
    assert h.engine.dirty - dirty == 2
    assert h.effect_lines()[-1] == [arg.encode() for arg in store]
    search = ["GEOSEARCHSTORE", "e", "g", "FROMMEMBER", "C", "BYRADIUS", "1", "km", "STOREDIST"]
    assert h.call(c, *search) == 1
    assert h.effect_lines()[-1] == [arg.encode() for arg in search]
    assert h.call(c, "ZSCORE", "e", "C") == b"0"
    effects = len(h.effects)
    assert h.call(c, "GEORADIUS", "g", "0", "0", "1", "km", "STORE", "nothing") == 0
    assert len(h.effects) == effects  # (no destination to delete: no change)
    assert h.call(c, "GEORADIUSBYMEMBER", "g", "C", "1", "m", "STORE", "d") == 1
    assert h.call(c, "GEORADIUS", "g", "0", "0", "1", "km", "STORE", "d") == 0
    assert h.call(c, "EXISTS", "d") == 0
    assert _events(h.raw(sub)) == [
        b"georadiusstore d",
        b"geosearchstore e",
        b"georadiusstore d",
        b"del d",
    ]


@given(st.lists(st.integers(0, 6), max_size=120), st.data())
def test_partial_sort_puts_the_first_k_in_order(dists: list[int], data: st.DataObject) -> None:
    from headwater.commands.geo import Point, _asc, _desc, partial_sort

    k = data.draw(st.integers(1, max(1, len(dists))))
    for cmp, reverse in ((_asc, False), (_desc, True)):
        points = [Point(b"m%d" % i, 0.0, 0.0, 0.0, float(d)) for i, d in enumerate(dists)]
        partial_sort(points, cmp, 0, k - 1)
        assert sorted(p.member for p in points) == sorted(b"m%d" % i for i in range(len(dists)))
        want = sorted((float(d) for d in dists), reverse=reverse)[:k]
        assert [p.dist for p in points[:k]] == want


def test_redis_7_2_arithmetic() -> None:
    """Where 7.2 differs from the 7.0 of the differential tests: a distance along a meridian
    is R * |dlat| without the haversine (geohashGetLatDistance), and distances are rounded to
    4 decimals by llrint(d * 10000) (fixedpoint_d2string; 7.0's printf gives ``0.0001`` for
    0.00005, whose double is a hair above the half)."""
    from headwater.commands.geo import distance_text

    r = geohash.EARTH_RADIUS_IN_METERS
    assert geohash.distance(12.5, 10.0, 12.5, 11.0) == r * abs(
        11.0 * geohash.D_R - 10.0 * geohash.D_R
    )
    assert geohash.distance(12.5, 10.0, 12.6, 10.0) > 0
    assert distance_text(0.00005) == b"0.0000"
    assert distance_text(0.0) == b"0.0000"
    assert distance_text(166274.15156960033) == b"166274.1516"
    assert distance_text(1.5) == b"1.5000"
