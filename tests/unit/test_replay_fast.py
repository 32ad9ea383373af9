"""AOF replay's fast paths (issue #6): replaying a file with them must leave exactly the keyspace
that replaying it command by command through ``Engine.apply`` leaves (``Replayer(fast=False)``),
node layout, IDMP maps and consumer times included, and fail, count and truncate the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from headwater.engine.replay import FailedCommand, Replayer, ReplayResult
from headwater.persistence.aof import CorruptAof, TornTail, encode_command
from headwater.resp.parser import wire_size
from tests.unit.conftest import Harness
from tests.unit.test_rewrite import exact_state

NODE_SETTINGS = [("stream-node-max-entries", "4"), ("stream-node-max-bytes", "0")]


def _quiet(config: list[tuple[str, str]]) -> Harness:
    """An engine with no effect sink (as at startup: the fast paths may run)."""
    h = Harness()
    h.engine.effect_sinks.clear()
    c = h.client()
    for name, value in config:
        h.call(c, "CONFIG", "SET", name, value)
    return h


def _replay_both(
    path: Path, config: list[tuple[str, str]], now_ms: int, truncate: bool = True
) -> tuple[Harness, ReplayResult | str, Harness, ReplayResult | str]:
    """Replay a copy of path each way; returns (fast engine, result, reference, result). A
    replay that stops at a failed command gives its message as the result (both must stop at
    the same command, with the same keyspace)."""
    data = path.read_bytes()
    out: list[Any] = []
    for fast in (True, False):
        h = _quiet(config)
        h.clock.now = now_ms
        copy = path.with_name(f"{path.name}.{fast}")
        copy.write_bytes(data)
        replayer = Replayer(h.engine, fast=fast)
        result: ReplayResult | str
        try:
            result = replayer.replay(copy, truncate)
        except FailedCommand as exc:
            result = str(exc).replace(str(copy), "<file>")
        replayer.close()
        out += [h, result, copy.read_bytes()]
    fast_h, fast_r, fast_file, ref_h, ref_r, ref_file = out
    assert fast_file == ref_file
    return fast_h, fast_r, ref_h, ref_r


def _assert_same(path: Path, config: list[tuple[str, str]], now_ms: int) -> ReplayResult | str:
    fast_h, fast_r, ref_h, ref_r = _replay_both(path, config, now_ms)
    assert fast_r == ref_r
    assert exact_state(fast_h.engine.keyspace.dbs) == exact_state(ref_h.engine.keyspace.dbs)
    assert fast_h.engine.dirty == ref_h.engine.dirty
    return fast_r


# -- random workloads ------------------------------------------------------------------------

keys = st.sampled_from(["s", "t"])
values = st.sampled_from(["v", "12", "-7", "0", "x" * 70, "0123456789abcdef"])
ops = st.one_of(
    st.tuples(st.just("add"), keys, st.integers(1, 4), values),
    st.tuples(st.just("add2"), keys, values),  # other field names: the node's own-fields path
    st.tuples(st.just("idmp"), keys, st.sampled_from(["p", "q"]), st.integers(0, 4)),
    st.tuples(st.just("idmpauto"), keys, st.sampled_from(["p", "q"]), values),
    st.tuples(st.just("read"), st.sampled_from(["g1", "g2"]), st.sampled_from(["a", "b"])),
    st.tuples(st.just("ack"), st.integers(1, 40)),
    st.tuples(st.just("claim"), st.integers(1, 40), st.sampled_from(["a", "c"])),
    st.tuples(st.just("del"), keys, st.integers(1, 40)),
    st.tuples(st.just("trim"), keys, st.integers(0, 8)),
    st.tuples(st.just("setid"), st.sampled_from(["g1", "g2"])),
    st.tuples(st.just("multi"), keys, st.integers(1, 3)),
    st.tuples(st.just("select"), st.integers(0, 1)),
    st.tuples(st.just("expire"), keys, st.booleans()),
    st.tuples(st.just("delkey"), keys),
    st.tuples(st.just("string"), keys),
    st.tuples(st.just("cfg"), keys, st.integers(1, 4)),
    st.tuples(st.just("advance"), st.integers(1, 300)),
    # written into the file as they are, as a foreign or damaged AOF may hold them
    st.tuples(st.just("raw"), st.sampled_from(["small", "zero", "huge", "lower", "wrongtype"])),
)


def _run(
    h: Harness, c: Any, op: tuple[Any, ...], counter: list[int], raw: list[list[bytes]]
) -> None:
    kind, *args = op
    if kind in ("add", "add2", "multi"):
        n = args[1] if kind != "add2" else 1
        if kind == "multi":
            h.call(c, "MULTI")
        for _ in range(n):
            counter[0] += 1
            if kind == "add2":
                h.call(c, "XADD", args[0], f"{counter[0]}-1", "other", args[1], "f", "x")
            else:
                h.call(
                    c, "XADD", args[0], f"{counter[0]}-{n}", "f", args[2] if kind == "add" else "m"
                )
        if kind == "multi":
            h.call(c, "EXEC")
    elif kind == "idmp":
        h.call(c, "XADD", args[0], "IDMP", args[1], f"iid{args[2]}", "*", "f", "i")
    elif kind == "idmpauto":
        h.call(c, "XADD", args[0], "IDMPAUTO", args[1], "*", "f", args[2])
    elif kind == "read":
        h.call(c, "XREADGROUP", "GROUP", args[0], args[1], "COUNT", 3, "STREAMS", "s", ">")
    elif kind == "ack":
        h.call(c, "XACK", "s", "g1", f"{args[0]}-1")
    elif kind == "claim":
        h.call(c, "XCLAIM", "s", "g2", args[1], 0, f"{args[0]}-1", f"{args[0]}-2")
    elif kind == "del":
        h.call(c, "XDEL", args[0], f"{args[1]}-1", f"{args[1]}-2")
    elif kind == "trim":
        h.call(c, "XTRIM", args[0], "MAXLEN", args[1])
    elif kind == "setid":
        h.call(c, "XGROUP", "SETID", "s", args[0], "0")
    elif kind == "select":
        h.call(c, "SELECT", args[0])
    elif kind == "expire":
        h.call(c, "PEXPIRE", args[0], 100_000 if args[1] else 50)
    elif kind == "delkey":
        h.call(c, "DEL", args[0])
    elif kind == "string":
        h.call(c, "SET", args[0], "not a stream")
    elif kind == "cfg":
        h.call(c, "XCFGSET", args[0], "IDMP-MAXSIZE", args[1])
    elif kind == "advance":
        h.clock.advance(args[0])
    elif kind == "raw":
        counter[0] += 1
        raw.append(
            {
                "small": [b"XADD", b"s", b"1-1", b"f", b"late"],
                "zero": [b"XADD", b"s", b"0-0", b"f", b"zero"],
                "huge": [b"XADD", b"s", b"18446744073709551615-0", b"f", b"big"],
                "lower": [b"xadd", b"s", b"%d-9" % counter[0], b"f", b"lower"],
                "wrongtype": [b"XADD", b"str", b"%d-9" % counter[0], b"f", b"w"],
            }[args[0]]
        )


def _write_workload(h: Harness, workload: list[tuple[Any, ...]], path: Path) -> None:
    c = h.client()
    h.call(c, "SET", "str", "x")
    h.call(c, "XGROUP", "CREATE", "s", "g1", "0", "MKSTREAM")
    h.call(c, "XGROUP", "CREATE", "s", "g2", "$")
    h.call(c, "XADD", "t", "IDMP", "p", "first", "*", "f", "v")
    counter = [0]
    with open(path, "wb") as f:
        db = None
        for op in workload:
            raw: list[list[bytes]] = []
            _run(h, c, op, counter, raw)
            effects = h.effects[:]
            h.effects.clear()
            for argv in raw:
                effects.append((c.db.index, argv))
            for index, argv in effects:
                if index != db:
                    f.write(encode_command([b"SELECT", b"%d" % index]))
                    db = index
                f.write(encode_command(argv))


@settings(max_examples=200, deadline=None)
@given(
    workload=st.lists(ops, min_size=5, max_size=60),
    small_nodes=st.booleans(),
    clock_skew=st.integers(-500, 500),  # TIME of an XCLAIM effect past "now" is clamped
)
def test_fast_replay_gives_the_keyspace_of_the_generic_replay(
    workload: list[tuple[Any, ...]], small_nodes: bool, clock_skew: int, tmp_path_factory: Any
) -> None:
    config = NODE_SETTINGS if small_nodes else []
    h = Harness()
    c = h.client()
    for name, value in config:
        h.call(c, "CONFIG", "SET", name, value)
    path = Path(tmp_path_factory.mktemp("fast")) / "a.aof"
    _write_workload(h, workload, path)
    result = _assert_same(path, config, h.clock.now_ms() + clock_skew)
    if isinstance(result, str):
        event("stopped at a failed command")
    else:
        event(f"fast path took {'some' if result.fast else 'no'} commands")


def test_runs_longer_than_a_batch_and_many_nodes(tmp_path: Path) -> None:
    """Thousands of XADDs in a row (several queued runs, node boundaries by entries and by
    bytes), with IDMP retries in the middle."""
    path = tmp_path / "a.aof"
    with open(path, "wb") as f:
        for i in range(1, 5000):
            f.write(encode_command([b"XADD", b"s", b"%d-0" % i, b"f", b"v" * (i % 90)]))
            if i % 700 == 0:  # iid i1 comes again at 2800: a retry, nothing is added
                iid = b"i%d" % (i % 3)
                f.write(
                    encode_command([b"XADD", b"s", b"IDMP", b"p", iid, b"%d-1" % i, b"f", b"x"])
                )
    for config in ([], [("stream-node-max-bytes", "300")], [("stream-node-max-entries", "0")]):
        result = _assert_same(path, config, 1_700_000_000_000)
        assert isinstance(result, ReplayResult)
        assert result.commands == 4999 + 7
        assert result.fast == result.commands - 1  # the first XADD creates the stream


# -- offsets: torn tails, unfinished transactions, corruption --------------------------------


def _xadds(n: int, start: int = 1) -> bytes:
    return b"".join(
        encode_command([b"XADD", b"s", b"%d-0" % i, b"f", b"v"]) for i in range(start, start + n)
    )


def test_a_torn_tail_is_cut_at_the_same_offset(tmp_path: Path) -> None:
    good = _xadds(3000)
    path = tmp_path / "a.aof"
    for torn in (b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n", b"*5\r\n$4\r\nXA", b"*"):
        path.write_bytes(good + torn)
        _, fast_r, _, ref_r = _replay_both(path, [], 0)
        assert fast_r == ref_r
        assert fast_r.truncated_at == len(good)
        assert fast_r.commands == 3000
        path.write_bytes(good + torn)
        with pytest.raises(TornTail) as torn_info:
            Replayer(_quiet([]).engine).replay(path, truncate_torn=False)
        assert torn_info.value.offset == len(good)


def test_an_unfinished_transaction_is_cut_at_its_multi(tmp_path: Path) -> None:
    before = _xadds(500)
    path = tmp_path / "a.aof"
    path.write_bytes(before + encode_command([b"MULTI"]) + _xadds(10, 501))
    fast_h, fast_r, _, ref_r = _replay_both(path, [], 0)
    assert fast_r == ref_r
    assert fast_r.truncated_at == len(before)
    c = fast_h.client()
    assert fast_h.call(c, "XLEN", "s") == 500


@pytest.mark.parametrize(
    ("bad", "reason"),
    [(encode_command([b"NOSUCH", b"x"]), "unknown command"), (b"+OK\r\n", "not a command")],
)
def test_corruption_is_reported_at_the_same_offset(tmp_path: Path, bad: bytes, reason: str) -> None:
    good = _xadds(2000)
    path = tmp_path / "a.aof"
    path.write_bytes(good + bad + _xadds(5, 2001))
    offsets = []
    for fast in (True, False):
        with pytest.raises(CorruptAof, match=reason) as info:
            Replayer(_quiet([]).engine, fast=fast).replay(path, truncate_torn=True)
        offsets.append(info.value.offset)
    assert offsets == [len(good), len(good)]


def test_wire_size_is_the_encoded_size() -> None:
    big = [b"XADD", b"s", b"1-1", b"f", b"v" * 20_000]
    for argv in ([b"PING"], [b"SET", b"k", b"v" * 5000], big, [b"x"] * 12_000, [b""] * 99):
        assert wire_size(argv) == len(encode_command(argv))


def test_replay_ignores_requirepass(tmp_path: Path) -> None:
    """The file holds what the server accepted: group commands and transactions replay even
    when a password is set (they were refused with NOAUTH before)."""
    path = tmp_path / "a.aof"
    path.write_bytes(
        encode_command([b"XGROUP", b"CREATE", b"s", b"g", b"0", b"MKSTREAM"])
        + encode_command([b"MULTI"])
        + encode_command([b"XADD", b"s", b"1-1", b"f", b"v"])
        + encode_command([b"EXEC"])
    )
    for fast in (True, False):
        h = _quiet([("requirepass", "secret")])
        Replayer(h.engine, fast=fast).replay(path, truncate_torn=False)
        c = h.client()
        h.call(c, "AUTH", "secret")
        assert h.call(c, "XINFO", "GROUPS", "s")[0][1] == b"g"
        assert h.call(c, "XLEN", "s") == 1


@pytest.mark.parametrize(
    "bad",
    [
        b"$1\r\ns\r\n$3\r\n9-1\r\n$1\r\nf\r\n*1\r\n$1\r\nx\r\n",  # a nested array value
        b"$1\r\ns\r\n$3\r\n9-1\r\n*1\r\n$1\r\nx\r\n$1\r\nv\r\n",  # ... field
        b"$1\r\ns\r\n*1\r\n$1\r\nx\r\n$1\r\nf\r\n$1\r\nv\r\n",  # ... ID
        b"*1\r\n$1\r\nx\r\n$3\r\n9-1\r\n$1\r\nf\r\n$1\r\nv\r\n",  # ... key
        b"$1\r\ns\r\n$3\r\n9-1\r\n$1\r\nf\r\n:7\r\n",  # an integer
        b"$1\r\ns\r\n$3\r\n9-1\r\n$1\r\nf\r\n$-1\r\n",  # a null
    ],
)
def test_only_arrays_of_bulk_strings_are_commands(tmp_path: Path, bad: bytes) -> None:
    """As in Redis's loader, a command holding anything but bulk strings is corruption, at
    its own offset, with or without the fast paths (and before a run of XADDs ends)."""
    good = _xadds(50)
    path = tmp_path / "a.aof"
    path.write_bytes(good + b"*5\r\n$4\r\nXADD\r\n" + bad + _xadds(5, 100))
    for fast in (True, False):
        h = _quiet([])
        with pytest.raises(CorruptAof, match="not a command") as info:
            Replayer(h.engine, fast=fast).replay(path, truncate_torn=True)
        assert info.value.offset == len(good)
        assert h.call(h.client(), "XLEN", "s") == 50
