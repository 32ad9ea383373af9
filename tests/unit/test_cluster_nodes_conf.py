"""nodes.conf: files Redis writes are read back and written the same; every malformed line
is refused with its number; a state survives ``render`` → ``parse`` (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.cluster.nodes_conf import NodesConfError, parse, render
from headwater.cluster.state import MASTER, MYSELF, REPLICA, Cluster, Node

A, B, C = "a" * 40, "b" * 40, "c" * 40

REDIS_FILE = (
    f"{A} 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-9 21-100 [5->-{B}] [300-<-{B}]\n"
    f"{B} 10.0.0.2:7001@17001,b.example master - 0 1700000000000 2 connected 101-200\n"
    f"{C} 10.0.0.3:7002@17002 slave {B} 0 1700000000000 2 disconnected\n"
    "vars currentEpoch 2 lastVoteEpoch 1\n"
)


def read(text: str) -> Cluster:
    return parse(text, lambda: 15000, now_ms=5, new_name=lambda: "d" * 40)


def test_a_file_redis_wrote_reads_back_and_renders_the_same() -> None:
    cluster = read(REDIS_FILE)
    cluster.check_invariants()
    assert cluster.myself.name == A and cluster.current_epoch == 2
    assert cluster.last_vote_epoch == 1
    assert cluster.migrating[5].name == B and cluster.importing[300].name == B
    assert cluster.nodes[C].master is cluster.nodes[B]
    assert cluster.nodes[B].hostname == "b.example"
    assert cluster.nodes[B].pong_received_ms == 5  # (a time in the file means "now")
    # (no link is up right after a load)
    expected = REDIS_FILE.replace("0 1700000000000", "0 5").replace(
        " connected 101", " disconnected 101"
    )
    assert render(cluster) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"{B} :1@2 master - 0 0 0 connected\n", "no line describes this node"),
        (f"{A} :1@2 myself,master - 0 0 0\n", "line 1: a node line needs at least 8 fields"),
        (f"{A[:-1]} :1@2 myself,master - 0 0 0 connected\n", "invalid node name"),
        (f"{A} :1@2 myself,boss - 0 0 0 connected\n", "unknown flag 'boss'"),
        (f"{A} 127.0.0.1 myself,master - 0 0 0 connected\n", "invalid address"),
        (f"{A} :1@2 myself,master - 0 0 x connected\n", "'x' is not a number"),
        (f"{A} :1@2 myself,master - 0 0 0 connected 16384\n", "slot 16384 is out of range"),
        (f"{A} :1@2 myself,master - 0 0 0 connected 1-3 2\n", "slot 2 is assigned twice"),
        (f"{A} :1@2 myself,master - 0 0 0 connected [1->-{B}]\n", "names unknown node"),
        (f"{A} :1@2 myself,master - 0 0 0 connected\nvars currentEpoch\n", "line 2: 'vars'"),
        (f"{A} :1@2 myself,master - 0 0 0 connected\n" * 2, "two nodes are 'myself'"),
    ],
)
def test_a_malformed_file_is_refused_with_its_line(text: str, problem: str) -> None:
    with pytest.raises(NodesConfError, match=problem.replace("(", r"\(")):
        read(text)


def test_a_missing_bus_port_is_the_port_plus_10000() -> None:
    cluster = read(f"{A} 127.0.0.1:7000 myself,master - 0 0 0 connected\n")
    assert cluster.myself.cport == 17000


@given(
    st.lists(st.integers(0, 16383), unique=True, max_size=50),
    st.lists(st.integers(0, 16383), unique=True, max_size=50),
    st.integers(0, 2**40),
    st.booleans(),
)
def test_render_then_parse_keeps_the_state(
    mine: list[int], theirs: list[int], epoch: int, replica: bool
) -> None:
    me = Node(A, MYSELF | MASTER, "10.0.0.1", 7000, 17000)
    other = Node(B, MASTER, "10.0.0.2", 7001, 17001)
    cluster = Cluster(me, lambda: 15000)
    cluster.nodes[B] = other
    for slot in mine:
        cluster.assign(slot, me)
    for slot in set(theirs) - set(mine):
        cluster.assign(slot, other)
    if replica:
        third = Node(C, REPLICA, "10.0.0.3", 7002, 17002)
        third.master = other
        other.replicas.append(third)
        cluster.nodes[C] = third
    cluster.current_epoch = other.config_epoch = epoch
    again = read(render(cluster))
    again.check_invariants()
    assert render(again) == render(cluster)
    assert [o.name if o else None for o in again.owners] == [
        o.name if o else None for o in cluster.owners
    ]


def test_saves_in_place_and_durably_both_read_back(tmp_path: object) -> None:
    from pathlib import Path

    from headwater.cluster.nodes_conf import save

    path = str(Path(str(tmp_path)) / "nodes.conf")
    cluster = read(REDIS_FILE)
    save(path, cluster)  # (in place)
    shorter = read(REDIS_FILE)
    shorter.unassign_all(shorter.nodes[B])
    shorter.changed = True
    save(path, shorter)
    text = Path(path).read_text()
    assert render(read(text)) == render(shorter)
    shorter.bump_epoch()  # (an epoch taken: the durable way)
    assert shorter.must_sync
    save(path, shorter)
    assert not shorter.must_sync and render(read(Path(path).read_text())) == render(shorter)
