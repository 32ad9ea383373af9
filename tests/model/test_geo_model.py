"""Geo commands against a plain model (hypothesis): a dict of member → position.

GEOADD (NX/XX/CH) and ZREM change the model; after each step the set's ``check_invariants()``
holds, GEOADD's reply counts what the model says it added or changed, GEOPOS shows the model's
positions decoded as Redis decodes them, and GEOSEARCH/GEOSEARCHSTORE find exactly the
members a brute-force scan of the model finds (ASC: by distance). Chunks are small, so the
sorted set splits and drops chunks as it grows and shrinks.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.commands.geo import human
from headwater.structures import geohash, zsets
from headwater.structures.geohash import Shape
from headwater.structures.zsets import ZSetValue
from tests.unit.conftest import Harness

members = st.sampled_from(["a", "b", "c", "dd", "e", "f", "g", "h"])
positions = st.tuples(st.floats(10, 14, allow_nan=False), st.floats(40, 44, allow_nan=False))
flags = st.sampled_from([[], ["NX"], ["XX"], ["CH"], ["XX", "CH"], ["NX", "CH"]])
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"), flags, st.lists(st.tuples(positions, members), min_size=1, max_size=4)
        ),
        st.tuples(
            st.just("rem"),
            st.just([]),
            st.lists(st.tuples(positions, members), min_size=1, max_size=2),
        ),
        st.tuples(
            st.just("search"),
            st.sampled_from([["ASC"], []]),
            st.lists(st.tuples(positions, members), min_size=1, max_size=1),
        ),
    ),
    max_size=25,
)


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zsets, "CHUNK", 3)


def _check(h: Harness, key: str) -> None:
    value = h.engine.keyspace.dbs[0].get(key.encode())
    if value is not None:
        assert isinstance(value, ZSetValue)
        value.check_invariants()


@settings(max_examples=150, deadline=None)
@given(steps, st.floats(1_000, 300_000))
def test_geo_matches_a_dict_of_positions(
    plan: list[tuple[str, list[str], Any]], radius: float
) -> None:
    h = Harness()
    c = h.client()
    model: dict[str, int] = {}  # member -> score (the encoded position)
    for kind, options, items in plan:
        if kind == "add":
            argv: list[Any] = ["GEOADD", "g", *options]
            for position, member in items:
                argv += [repr(position[0]), repr(position[1]), member]
            reply = h.call(c, *argv)
            added = changed = 0
            for position, member in items:  # (pair by pair, as ZADD)
                score = geohash.score_of(*position)
                if member not in model:
                    if "XX" not in options:
                        model[member] = score
                        added += 1
                elif "NX" not in options and model[member] != score:
                    model[member] = score
                    changed += 1
            assert reply == (added + changed if "CH" in options else added)
        elif kind == "rem":
            for _, member in items:
                h.call(c, "ZREM", "g", member)
                model.pop(member, None)
        else:
            (lon, lat), _ = items[0]
            shape = Shape(lon, lat, 1.0, radius)
            reply = h.call(c, "GEOSEARCH", "g", "FROMLONLAT", repr(lon), repr(lat), "BYRADIUS",
                           repr(radius), "m", *options)  # fmt: skip
            brute = {}
            for member, score in model.items():
                dist = geohash.within(shape, *geohash.decode_score(float(score)))
                if dist is not None:
                    brute[member.encode()] = dist
            assert sorted(reply) == sorted(brute)
            if options == ["ASC"]:
                assert [brute[m] for m in reply] == sorted(brute.values())
            stored = h.call(c, "GEOSEARCHSTORE", "d", "g", "FROMLONLAT", repr(lon), repr(lat),
                            "BYRADIUS", repr(radius), "m")  # fmt: skip
            assert stored == len(brute)
            _check(h, "d")
        _check(h, "g")
        for member, score in model.items():
            lon, lat = geohash.decode_score(float(score))
            assert h.call(c, "GEOPOS", "g", member) == [[human(lon), human(lat)]]
    assert h.call(c, "ZCARD", "g") == len(model)
