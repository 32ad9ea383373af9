"""Consumer-group effects: replaying what a server propagated rebuilds the same groups.

A random workload runs on one engine while its effects (what an AOF or a replica receives) are
captured; the effects are then executed on an empty engine, and the stream, its groups, their
PELs (delivery time, count, owner), their NACK zones (in order) and their consumers must come
out identical. Seen and active times are local to each server (as in Redis) and are not
compared.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.ops.change import NO_DB
from headwater.stream.groups import Group
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness

KEY = b"s"
GROUPS = ["g1", "g2"]
CONSUMERS = ["a", "b", "c"]

ids = st.integers(1, 40).map(lambda n: f"{n}-0")
groups = st.sampled_from(GROUPS)
consumers = st.sampled_from(CONSUMERS)

commands = st.one_of(
    st.tuples(st.just("add"), st.integers(1, 3)),
    st.tuples(st.just("advance"), st.integers(1, 500)),
    st.tuples(st.just("readnew"), groups, consumers, st.integers(0, 3), st.booleans()),
    st.tuples(st.just("history"), groups, consumers, st.integers(0, 3)),
    st.tuples(st.just("ack"), groups, st.lists(ids, min_size=1, max_size=3)),
    st.tuples(
        st.just("claim"),
        groups,
        consumers,
        st.integers(0, 600),
        st.lists(ids, min_size=1, max_size=3),
        st.sampled_from([[], ["JUSTID"], ["FORCE"], ["RETRYCOUNT", "7"], ["IDLE", "50"]]),
    ),
    st.tuples(st.just("autoclaim"), groups, consumers, st.integers(0, 600), st.booleans()),
    st.tuples(st.just("del"), ids),
    st.tuples(st.just("trim"), st.integers(0, 10), st.sampled_from(["KEEPREF", "DELREF", "ACKED"])),
    st.tuples(st.just("setid"), groups, st.integers(0, 40)),
    st.tuples(st.just("delconsumer"), groups, consumers),
    st.tuples(
        st.just("nack"),
        groups,
        st.sampled_from(["SILENT", "FAIL", "FATAL"]),
        st.lists(ids, min_size=1, max_size=4),
        st.sampled_from([[], ["FORCE"], ["RETRYCOUNT", "3"], ["FORCE", "RETRYCOUNT", "0"]]),
    ),
    st.tuples(st.just("claimread"), groups, consumers, st.integers(0, 3), st.integers(0, 600)),
)


def run(h: Harness, c: Any, command: tuple[Any, ...], state: dict[str, int]) -> None:
    kind, *args = command
    if kind == "add":
        for _ in range(args[0]):
            state["next"] += 1
            h.call(c, "XADD", KEY, f"{state['next']}-0", "f", state["next"])
    elif kind == "advance":
        h.clock.advance(args[0])
    elif kind == "readnew":
        group, consumer, count, noack = args
        extra = ["NOACK"] if noack else []
        options = ["COUNT", count, *extra]
        h.call(c, "XREADGROUP", "GROUP", group, consumer, *options, "STREAMS", KEY, ">")
    elif kind == "history":
        group, consumer, count = args
        h.call(c, "XREADGROUP", "GROUP", group, consumer, "COUNT", count, "STREAMS", KEY, "0")
    elif kind == "ack":
        h.call(c, "XACK", KEY, args[0], *args[1])
    elif kind == "claim":
        group, consumer, min_idle, claim_ids, options = args
        h.call(c, "XCLAIM", KEY, group, consumer, min_idle, *claim_ids, *options)
    elif kind == "autoclaim":
        group, consumer, min_idle, justid = args
        extra = ["JUSTID"] if justid else []
        h.call(c, "XAUTOCLAIM", KEY, group, consumer, min_idle, "0", "COUNT", 2, *extra)
    elif kind == "del":
        h.call(c, "XDEL", KEY, args[0])
    elif kind == "trim":
        h.call(c, "XTRIM", KEY, "MAXLEN", args[0], args[1])
    elif kind == "setid":
        h.call(c, "XGROUP", "SETID", KEY, args[0], f"{args[1]}-0")
    elif kind == "delconsumer":
        h.call(c, "XGROUP", "DELCONSUMER", KEY, *args)
    elif kind == "nack":
        group, mode, nack_ids, options = args
        h.call(c, "XNACK", KEY, group, mode, "IDS", len(nack_ids), *nack_ids, *options)
    elif kind == "claimread":
        group, consumer, count, min_idle = args
        options = ["COUNT", count, "CLAIM", min_idle]
        h.call(c, "XREADGROUP", "GROUP", group, consumer, *options, "STREAMS", KEY, ">")


def group_state(group: Group) -> tuple[Any, ...]:
    return (
        group.last_id,
        group.entries_read,
        dict(group.pel),
        {name: list(consumer.pel) for name, consumer in group.consumers.items()},
        list(group.nacked),
    )


def stream_state(h: Harness) -> tuple[Any, ...]:
    stream = h.engine.keyspace.dbs[0].get(KEY)
    assert isinstance(stream, Stream)
    stream.check_invariants()
    for group in stream.groups.values():
        group.check_invariants()
    return (
        stream.range((0, 0), (2**64 - 1, 2**64 - 1)),
        stream.last_id,
        stream.entries_added,
        stream.max_deleted_id,
        {name: group_state(group) for name, group in stream.groups.items()},
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(commands, min_size=10, max_size=60))
def test_replaying_effects_rebuilds_groups_pels_and_consumers(
    workload: list[tuple[Any, ...]],
) -> None:
    primary = Harness()
    c = primary.client()
    primary.call(c, "XADD", KEY, "1-0", "f", "1")
    for name in GROUPS:
        primary.call(c, "XGROUP", "CREATE", KEY, name, "0")
    state = {"next": 1}
    for command in workload:
        run(primary, c, command, state)

    replica = Harness()
    replica.clock.advance(primary.clock.now_ms() - replica.clock.now_ms())
    r = replica.client()
    for db, argv in primary.effects:
        assert db in (0, NO_DB)  # (NO_DB: the MULTI and EXEC around several effects)
        replica.engine.execute(r, list(argv))
        reply = replica.raw(r)
        assert not reply.startswith(b"-"), (argv, reply)
    assert stream_state(replica) == stream_state(primary)


def test_xreadgroup_effects_are_xclaim_and_setid() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", KEY, "1-0", "f", "v")
    h.call(c, "XADD", KEY, "2-0", "f", "v")
    h.call(c, "XGROUP", "CREATE", KEY, "g", "0")
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", KEY, ">")
    now = b"%d" % h.clock.now_ms()
    # several effects of one command travel as one transaction: a torn log never has half
    assert [argv for _, argv in h.effects] == [
        [b"MULTI"],
        [b"XCLAIM", KEY, b"g", b"alice", b"0", b"1-0", b"TIME", now, b"RETRYCOUNT", b"1",
         b"FORCE", b"JUSTID", b"LASTID", b"1-0"],
        [b"XCLAIM", KEY, b"g", b"alice", b"0", b"2-0", b"TIME", now, b"RETRYCOUNT", b"1",
         b"FORCE", b"JUSTID", b"LASTID", b"2-0"],
        [b"XGROUP", b"SETID", KEY, b"g", b"2-0", b"ENTRIESREAD", b"2"],
        [b"EXEC"],
    ]  # fmt: skip
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", KEY, ">")  # nothing new
    assert h.effects == []


def test_noack_read_propagates_only_the_group_position() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", KEY, "1-0", "f", "v")
    h.call(c, "XGROUP", "CREATE", KEY, "g", "0")
    h.call(c, "XGROUP", "CREATECONSUMER", KEY, "g", "bob")
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "bob", "NOACK", "STREAMS", KEY, ">")
    assert [argv for _, argv in h.effects] == [
        [b"XGROUP", b"SETID", KEY, b"g", b"1-0", b"ENTRIESREAD", b"1"]
    ]


def test_idle_consumers_are_reclaimed_only_when_configured() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", KEY, "1-0", "f", "v")
    h.call(c, "XGROUP", "CREATE", KEY, "g", "0")
    h.call(c, "XGROUP", "CREATECONSUMER", KEY, "g", "idle")
    h.call(c, "XREADGROUP", "GROUP", "g", "busy", "STREAMS", KEY, ">")  # 1-0 pending
    h.clock.advance(10_000)
    h.engine.cron()
    assert h.call(c, "XINFO", "CONSUMERS", KEY, "g")[0][1] == b"busy"
    assert len(h.call(c, "XINFO", "CONSUMERS", KEY, "g")) == 2  # off by default
    h.call(c, "CONFIG", "SET", "stream-consumer-idle-reclaim-ms", "5000")
    h.effects.clear()
    h.engine.cron()
    # "busy" still has a pending entry, so only "idle" goes, and the drop is propagated
    assert [row[1] for row in h.call(c, "XINFO", "CONSUMERS", KEY, "g")] == [b"busy"]
    assert [argv for _, argv in h.effects] == [[b"XGROUP", b"DELCONSUMER", KEY, b"g", b"idle"]]
    # on access too: once acked, "busy" (seen 13 s ago) goes; "fresh", seen 3 s ago, stays
    h.call(c, "XGROUP", "CREATECONSUMER", KEY, "g", "fresh")
    h.call(c, "XACK", KEY, "g", "1-0")
    h.clock.advance(3000)
    h.call(c, "XPENDING", KEY, "g")
    names = [row[1] for row in h.call(c, "XINFO", "CONSUMERS", KEY, "g")]
    assert names == [b"fresh"]
    h.clock.advance(3000)
    h.call(c, "XPENDING", KEY, "g")
    assert h.call(c, "XINFO", "CONSUMERS", KEY, "g") == []
