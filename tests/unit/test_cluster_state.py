"""The cluster state: slots assigned and removed against a dict model, with
``check_invariants`` after every step; the state's health rules (the writable delay, full
coverage, the rejoin delay); and the routing decisions a one-node cluster cannot show
(MOVED, ASK to another node, reads on a replica with READONLY)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from headwater.cluster.routing import (
    ASK,
    CROSSSLOT,
    DOWN,
    DOWN_READONLY,
    DOWN_UNBOUND,
    MOVED,
    SERVE,
    TRYAGAIN,
    Request,
    redirection,
    route,
)
from headwater.cluster.slots import SLOTS, key_slot
from headwater.cluster.state import MASTER, MYSELF, REPLICA, Cluster, Node


def two_nodes() -> tuple[Cluster, Node, Node]:
    me = Node("a" * 40, MYSELF | MASTER, "10.0.0.1", 7000, 17000)
    other = Node("b" * 40, MASTER, "10.0.0.2", 7001, 17001)
    cluster = Cluster(me, lambda: 500, new_name=lambda: "c" * 40)
    cluster.nodes[other.name] = other
    return cluster, me, other


ops = st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, SLOTS - 1)), max_size=60)


@given(ops)
def test_slots_follow_a_dict_model(steps: list[tuple[bool, bool, int]]) -> None:
    cluster, me, other = two_nodes()
    model: dict[int, str] = {}
    for add, mine, slot in steps:
        node = me if mine else other
        if add and slot not in model:
            cluster.assign(slot, node)
            model[slot] = node.name
        elif not add and slot in model:
            cluster.unassign(slot)
            del model[slot]
        cluster.check_invariants()
    for slot in range(SLOTS):
        owner = cluster.owners[slot]
        assert (owner.name if owner is not None else None) == model.get(slot)
    assert cluster.assigned_count() == len(model)
    assert cluster.slots_of(me) == sorted(s for s, n in model.items() if n == me.name)


def test_state_waits_then_needs_every_slot_then_the_rejoin_delay() -> None:
    cluster, me, _ = two_nodes()
    del cluster.nodes["b" * 40]
    for slot in range(SLOTS):
        cluster.assign(slot, me)
    cluster.update_state(1000, True)
    assert not cluster.ok and cluster.size == 1  # the writable delay: nothing judged yet
    cluster.update_state(3000, True)
    assert cluster.ok
    cluster.unassign(5)
    cluster.update_state(3100, True)
    assert not cluster.ok  # a slot without owner
    cluster.update_state(3200, False)
    assert cluster.ok  # unless full coverage is not required
    for slot in cluster.slots_of(me):
        cluster.unassign(slot)
    cluster.update_state(4000, False)
    assert not cluster.ok and cluster.size == 0  # in a minority (no master with slots)
    cluster.assign(0, me)
    cluster.update_state(4200, False)
    assert not cluster.ok  # the rejoin delay (node timeout, 500 ms at least)
    cluster.update_state(4600, False)
    assert cluster.ok


def serving(cluster: Cluster) -> None:
    cluster.ok = True


def ask(cluster: Cluster, keys: list[bytes], request: Request, present: set[bytes]) -> int:
    return route(cluster, keys, request, present.__contains__, False, True).code


def test_moved_and_ask_name_the_other_node() -> None:
    cluster, me, other = two_nodes()
    foo = key_slot(b"foo")
    cluster.assign(foo, other)
    serving(cluster)
    verdict = route(cluster, [b"foo"], Request(False), lambda k: False, False, True)
    assert verdict.code == MOVED
    assert redirection(verdict, "ip", False).line() == b"MOVED 12182 10.0.0.2:7001"
    other.hostname = "b.example"
    assert redirection(verdict, "hostname", False).line() == b"MOVED 12182 b.example:7001"
    assert redirection(verdict, "unknown-endpoint", False).line() == b"MOVED 12182 :7001"
    cluster.unassign(foo)
    cluster.assign(foo, me)
    cluster.migrating[foo] = other
    assert ask(cluster, [b"foo"], Request(False), set()) == ASK
    assert ask(cluster, [b"foo"], Request(False), {b"foo"}) == SERVE
    assert ask(cluster, [b"foo", b"{foo}x"], Request(False), {b"foo"}) == TRYAGAIN
    assert ask(cluster, [b"foo"], Request(False, migrate=True), set()) == SERVE
    verdict = route(cluster, [b"foo"], Request(False), lambda k: False, False, True)
    assert redirection(verdict, "ip", False).line() == b"ASK 12182 10.0.0.2:7001"


def test_importing_serves_only_asking_clients() -> None:
    cluster, _me, other = two_nodes()
    foo = key_slot(b"foo")
    cluster.assign(foo, other)
    cluster.importing[foo] = other
    serving(cluster)
    assert ask(cluster, [b"foo"], Request(True), set()) == MOVED
    assert ask(cluster, [b"foo"], Request(True, asking=True), set()) == SERVE
    two = [b"foo", b"{foo}x"]
    assert ask(cluster, two, Request(True, asking=True), {b"foo"}) == TRYAGAIN
    assert ask(cluster, two, Request(True, asking=True), {b"foo", b"{foo}x"}) == SERVE


def test_a_replica_serves_reads_of_its_master_with_readonly() -> None:
    cluster, me, other = two_nodes()
    me.flags = MYSELF | REPLICA
    me.master = other
    other.replicas.append(me)
    cluster.assign(key_slot(b"foo"), other)
    serving(cluster)
    cluster.check_invariants()
    assert ask(cluster, [b"foo"], Request(False), set()) == MOVED
    assert ask(cluster, [b"foo"], Request(False, readonly_client=True), set()) == SERVE
    assert ask(cluster, [b"foo"], Request(True, readonly_client=True), set()) == MOVED


def test_down_states() -> None:
    cluster, me, _ = two_nodes()
    assert ask(cluster, [b"foo"], Request(False), set()) == DOWN_UNBOUND
    cluster.assign(key_slot(b"foo"), me)
    assert ask(cluster, [b"foo", b"bar"], Request(False), set()) == CROSSSLOT
    assert ask(cluster, [b"foo"], Request(False), set()) == DOWN
    reads = route(cluster, [b"foo"], Request(True), lambda k: False, True, True)
    assert reads.code == DOWN_READONLY
    assert route(cluster, [b"foo"], Request(False), lambda k: False, True, True).code == SERVE
    shard = Request(False, shard_pubsub=True)
    assert route(cluster, [b"foo"], shard, lambda k: False, False, True).code == SERVE
    assert route(cluster, [b"foo"], shard, lambda k: False, False, False).code == DOWN


def test_hard_reset_forgets_everything_and_takes_a_new_name() -> None:
    cluster, me, other = two_nodes()
    cluster.assign(1, me)
    cluster.assign(2, other)
    cluster.current_epoch = me.config_epoch = 3
    cluster.reset(hard=False)
    cluster.check_invariants()
    assert list(cluster.nodes) == ["a" * 40] and cluster.current_epoch == 3
    cluster.reset(hard=True)
    cluster.check_invariants()
    assert list(cluster.nodes) == ["c" * 40] and cluster.current_epoch == me.config_epoch == 0


def test_check_invariants_finds_a_miscount() -> None:
    import pytest

    from headwater.cluster.state import ClusterStateError

    cluster, me, _ = two_nodes()
    cluster.assign(7, me)
    me.numslots = 2
    with pytest.raises(ClusterStateError):
        cluster.check_invariants()
