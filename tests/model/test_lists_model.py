"""List commands against a plain Python list (hypothesis), through the engine, with fills
small enough that every path of the quicklist runs (new nodes at both ends, LINSERT into the
neighbour, a new node or a split and merges, emptied nodes dropped, listpack ⇄ quicklist both
ways); ``check_invariants`` after every step."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.structures.lists import ListValue, exceeds, node_limits
from tests.unit.conftest import Harness

members = st.sampled_from(
    [b"a", b"b", b"", b"7", b"-12", b"300", b"70000", b"x" * 40, b"y" * 90, b"z" * 700]
)
indexes = st.integers(-12, 12)
ops = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["LPUSH", "RPUSH"]), st.lists(members, min_size=1, max_size=12)),
        st.tuples(st.sampled_from(["LPOP", "RPOP"]), st.integers(0, 4)),
        st.tuples(st.just("LINSERT"), st.booleans(), members, members),
        st.tuples(st.just("LINSERT"), st.booleans(), members, members),
        st.tuples(st.just("LINSERT"), st.booleans(), members, members),
        st.tuples(st.just("LSET"), indexes, members),
        st.tuples(st.just("LREM"), st.integers(-2, 2), members),
        st.tuples(st.just("LTRIM"), indexes, indexes),
        st.tuples(st.just("LMOVE"), st.booleans(), st.booleans()),
        st.tuples(st.just("LPOS"), members, st.sampled_from([1, 2, -1, -2]), st.integers(0, 8)),
    ),
    max_size=60,
)


def _model_step(model: list[bytes], op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind in ("LPUSH", "RPUSH"):
        for m in op[1]:
            if kind == "LPUSH":
                model.insert(0, m)
            else:
                model.append(m)
    elif kind in ("LPOP", "RPOP"):
        n = max(op[1], 1)
        for _ in range(min(n, len(model))):
            model.pop(0 if kind == "LPOP" else -1)
    elif kind == "LINSERT":
        _, after, pivot, member = op
        if pivot in model:
            at = model.index(pivot)
            model.insert(at + 1 if after else at, member)
    elif kind == "LSET":
        _, index, member = op
        if -len(model) <= index < len(model):
            model[index] = member
    elif kind == "LREM":
        _, count, member = op
        hits = [i for i, m in enumerate(model) if m == member]
        if count < 0:
            hits = hits[::-1][:-count]
        elif count > 0:
            hits = hits[:count]
        for i in sorted(hits, reverse=True):
            del model[i]
    elif kind == "LTRIM":
        _, start, stop = op
        n = len(model)
        start, stop = (start + n if start < 0 else start), (stop + n if stop < 0 else stop)
        start = max(start, 0)
        model[:] = [] if start > stop or start >= n else model[start : min(stop, n - 1) + 1]
    elif kind == "LMOVE":
        _, from_head, to_head = op
        if model:
            m = model.pop(0 if from_head else -1)
            model.insert(0, m) if to_head else model.append(m)


def _lpos(model: list[bytes], member: bytes, rank: int, maxlen: int) -> list[int]:
    order = range(len(model)) if rank > 0 else range(len(model) - 1, -1, -1)
    scanned = list(order)[:maxlen] if maxlen else list(order)
    hits = [i for i in scanned if model[i] == member]
    return hits[abs(rank) - 1 :]


@settings(max_examples=250, deadline=None)
@given(ops, st.sampled_from(["-1", "-2", "1", "2", "3", "5"]))
def test_matches_a_python_list(steps: list[tuple[Any, ...]], fill: str) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "list-max-listpack-size", fill)
    model: list[bytes] = []
    for op in steps:
        kind = op[0]
        if kind in ("LPUSH", "RPUSH"):
            assert h.call(c, kind, "k", *op[1]) == len(model) + len(op[1])
        elif kind in ("LPOP", "RPOP"):
            h.call(c, kind, "k", *([op[1]] if op[1] else []))
        elif kind == "LINSERT":
            h.call(c, "LINSERT", "k", "AFTER" if op[1] else "BEFORE", op[2], op[3])
        elif kind == "LSET":
            h.call(c, "LSET", "k", op[1], op[2])
        elif kind in ("LREM", "LTRIM"):
            h.call(c, kind, "k", op[1], op[2])
        elif kind == "LMOVE":
            h.call(c, "LMOVE", "k", "k", *("LEFT" if x else "RIGHT" for x in op[1:]))
        elif kind == "LPOS":
            _, member, rank, maxlen = op
            got = h.call(c, "LPOS", "k", member, "RANK", rank, "COUNT", 0, "MAXLEN", maxlen)
            assert got == _lpos(model, member, rank, maxlen)
        _model_step(model, op)
        value = h.engine.keyspace.dbs[0].data.get(b"k")
        if not model:
            assert value is None  # (an emptied list is deleted)
            continue
        assert isinstance(value, ListValue)
        value.check_invariants()
        assert list(value) == model
        assert list(value.reversed_items()) == model[::-1]
        assert h.call(c, "LRANGE", "k", 0, -1) == model
        assert h.call(c, "LINDEX", "k", len(model) // 2) == model[len(model) // 2]
        _check_layout(value, int(fill))


def _check_layout(value: ListValue, fill: int) -> None:
    """What Redis's rules promise about the layout whatever the history: a listpack is one
    node; quicklist nodes may exceed the limit only alone (one big member) or after LSET."""
    if value.listpack:
        assert len(value.nodes) == 1
        return
    size_limit, count_limit = node_limits(value.fill)
    assert value.fill == fill or fill < -5
    for node in value.nodes:
        if len(node.starts) > 1 and exceeds(value.fill, node.size, len(node.starts)):
            # (LSET replaces in place, and a converted listpack keeps its bytes: both may
            # leave a node past the limit, as in Redis)
            assert node.size <= 2 * 65536 and len(node.starts) <= max(count_limit, 64)
        assert size_limit > 0
