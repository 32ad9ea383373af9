"""The effects of a capped XREADGROUP (MAXCOUNT / MAXSIZE) describe exactly what it delivered.

A random workload of capped reads over two streams (new entries, NOACK, CLAIM, history reads)
runs on one engine while its effects are captured; executing the effects on an empty engine
must rebuild the same streams, group positions, PELs and consumers. An entry the caps left out
must appear in no XCLAIM and move no XGROUP SETID.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.ops.change import NO_DB
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness
from tests.unit.test_groups_effects import group_state

KEYS = ["s1", "s2"]
GROUPS = ["g1", "g2"]

caps = st.tuples(
    st.sampled_from([0, 1, 2, 3]),  # COUNT
    st.sampled_from([0, 1, 2, 5]),  # MAXCOUNT
    st.sampled_from([0, 1, 40, 70, 100, 200]),  # MAXSIZE
)
reads = st.tuples(
    st.just("read"),
    st.sampled_from(GROUPS),
    st.sampled_from(["a", "b", "c"]),
    st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
    caps,
    st.sampled_from(["new", "noack", "claim", "history"]),
)
commands = st.one_of(
    reads,
    reads,
    st.tuples(st.just("add"), st.sampled_from(KEYS), st.integers(0, 30)),
    st.tuples(st.just("advance"), st.integers(1, 300)),
    st.tuples(st.just("ack"), st.sampled_from(KEYS), st.sampled_from(GROUPS), st.integers(1, 20)),
    st.tuples(st.just("del"), st.sampled_from(KEYS), st.integers(1, 20)),
)


def cap_options(count: int, maxcount: int, maxsize: int) -> list[Any]:
    if maxcount and count > maxcount:
        count = maxcount
    out: list[Any] = ["COUNT", count] if count else []
    out += ["MAXCOUNT", maxcount] if maxcount else []
    return out + (["MAXSIZE", maxsize] if maxsize else [])


def run(h: Harness, c: Any, command: tuple[Any, ...], top: dict[str, int]) -> None:
    kind, *args = command
    if kind == "add":
        key, size = args
        top[key] += 1
        h.call(c, "XADD", key, f"{top[key]}-0", "f", "x" * size)
    elif kind == "advance":
        h.clock.advance(args[0])
    elif kind == "ack":
        h.call(c, "XACK", args[0], args[1], f"{args[2]}-0")
    elif kind == "del":
        h.call(c, "XDEL", args[0], f"{args[1]}-0")
    else:
        group, consumer, keys, (count, maxcount, maxsize), mode = args
        head = ["XREADGROUP", "GROUP", group, consumer, *cap_options(count, maxcount, maxsize)]
        if mode == "noack":
            head.append("NOACK")
        elif mode == "claim":
            head += ["CLAIM", 100]
        ids = ["0" if mode == "history" else ">"] * len(keys)
        h.call(c, *head, "STREAMS", *keys, *ids)


def state(h: Harness) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in KEYS:
        stream = h.engine.keyspace.dbs[0].get(key.encode())
        assert isinstance(stream, Stream)
        stream.check_invariants()
        for group in stream.groups.values():
            group.check_invariants()
        out[key] = (
            stream.range((0, 0), (2**64 - 1, 2**64 - 1)),
            stream.last_id,
            {name: group_state(group) for name, group in stream.groups.items()},
        )
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(commands, min_size=5, max_size=40))
def test_replaying_capped_reads_rebuilds_the_groups(workload: list[tuple[Any, ...]]) -> None:
    primary = Harness()
    c = primary.client()
    top = dict.fromkeys(KEYS, 0)
    for key in KEYS:
        for _ in range(3):
            run(primary, c, ("add", key, 5), top)
        for group in GROUPS:
            primary.call(c, "XGROUP", "CREATE", key, group, "0")
    for command in workload:
        run(primary, c, command, top)

    replica = Harness()
    replica.clock.advance(primary.clock.now_ms() - replica.clock.now_ms())
    r = replica.client()
    for db, argv in primary.effects:
        assert db in (0, NO_DB)  # (NO_DB: the MULTI and EXEC around several effects)
        replica.engine.execute(r, list(argv))
        reply = replica.raw(r)
        assert not reply.startswith(b"-"), (argv, reply)
    assert state(replica) == state(primary)


def test_entries_left_out_are_not_in_the_effects() -> None:
    h = Harness()
    c = h.client()
    for n in range(1, 5):
        h.call(c, "XADD", "s1", f"{n}-0", "f", "v")
    h.call(c, "XADD", "s2", "1-0", "f", "v")
    h.call(c, "XGROUP", "CREATE", "s1", "g", "0")
    h.call(c, "XGROUP", "CREATE", "s2", "g", "0")
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "MAXCOUNT", 2, "STREAMS", "s1", "s2", ">", ">")
    now = b"%d" % h.clock.now_ms()
    assert h.effect_lines() == [  # (the XCLAIMs create the consumer on the replica)
        [b"XCLAIM", b"s1", b"g", b"a", b"0", b"1-0", b"TIME", now, b"RETRYCOUNT", b"1",
         b"FORCE", b"JUSTID", b"LASTID", b"1-0"],
        [b"XCLAIM", b"s1", b"g", b"a", b"0", b"2-0", b"TIME", now, b"RETRYCOUNT", b"1",
         b"FORCE", b"JUSTID", b"LASTID", b"2-0"],
        [b"XGROUP", b"SETID", b"s1", b"g", b"2-0", b"ENTRIESREAD", b"2"],
    ]  # fmt: skip
