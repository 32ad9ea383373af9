"""The pure and the compiled build split a stream into the same nodes, and so trim it alike.

Where a node ends is decided in Python (``node.room``); the C packer (``_pack.c``) only packs
entries within the budget it is handed. Two streams run the same random steps here: one packs
in Python (``Stream(None)``, as the pure build does), the other through the C packer (as the
compiled build does): appends of entries with the node's field names and with their own, of
varied sizes; extend runs (in a list: the C run packer; in a tuple: one entry at a time);
deletes; exact and ``~`` trims by MAXLEN and MINID, ``~`` ones with LIMIT, keeping references
or not; and changes of stream-node-max-bytes / -entries (0 included) between steps. After every
step both must hold the same nodes (first ID, entries, live and deleted counts, listpack
bytes, packed bytes), and every trim must have removed the same entries."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.stream import node as node_module
from headwater.stream.ids import MIN_ID, StreamID
from headwater.stream.node import Packer
from headwater.stream.stream import Stream

pytest.importorskip("headwater.stream._pack", reason="the pure build (no C packer to compare)")

MAX_ID = (2**64 - 1, 2**64 - 1)
_FIELDSETS = ([b"f"], [b"a", b"b"], [b"a", b"c"], [b"f", b"f"])
#: values at listpack's encoding steps: integers (in and out of int64), and strings around the
#: 64-byte step and big enough to fill a node alone
_VALUES = st.one_of(
    st.binary(max_size=12),
    st.integers(-(2**64), 2**64).map(lambda n: str(n).encode()),
    st.sampled_from([b"-0", b"007", b"0", b"-9223372036854775808"]),
    st.sampled_from([40, 63, 64, 200, 700, 4100]).map(lambda n: b"v" * n),
)
#: how far an entry's ID is from the one before: 0 is the next sequence number
_GAPS = st.sampled_from([0, 0, 0, 1, 2, 127, 128, 5000, 2**33])
_MAX_BYTES = st.sampled_from([0, 1, 40, 100, 300, 1000, 4096])
_MAX_ENTRIES = st.sampled_from([0, 1, 2, 3, 5, 10, 100])

#: an entry to be: (gap to the previous ID, field set: mostly the first one, values)
_ENTRY = st.tuples(
    _GAPS,
    st.one_of(st.just(0), st.just(0), st.integers(0, len(_FIELDSETS) - 1)),
    st.lists(_VALUES, min_size=2, max_size=2),
)
_LIMIT = st.sampled_from([0, 1, 3, 10, 100])
_POLICY = st.sampled_from(["keepref", "acked", "delref"])
_STEP = st.one_of(
    st.tuples(st.just("append"), _ENTRY, st.booleans()),
    st.tuples(st.just("extend"), st.lists(_ENTRY, min_size=1, max_size=40), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 10**6)),
    st.tuples(st.just("maxlen"), st.integers(0, 60), st.booleans(), _LIMIT, _POLICY),
    st.tuples(st.just("minid"), st.integers(0, 10**6), st.booleans(), _LIMIT, _POLICY),
    st.tuples(st.just("limits"), _MAX_BYTES, _MAX_ENTRIES),
)

Spec = tuple[int, int, list[bytes]]
Entry = tuple[StreamID, list[bytes], int]


@dataclass
class _Run:
    """The same steps on two streams: one packed in Python, one by the C packer."""

    packer: Packer
    max_bytes: int
    max_entries: int
    pure: Stream = field(default_factory=lambda: Stream(None))
    native: Stream = field(init=False)
    added: list[StreamID] = field(default_factory=list)
    last: StreamID = (1, 0)

    def __post_init__(self) -> None:
        self.native = Stream(self.packer)

    def entries(self, specs: list[Spec]) -> list[Entry]:
        out: list[Entry] = []
        for gap, fieldset, values in specs:
            ms, seq = self.last
            self.last = (ms, seq + 1) if gap == 0 else (ms + gap, 0)
            fields = _FIELDSETS[fieldset]
            pairs = [word for f, v in zip(fields, values, strict=False) for word in (f, v)]
            out.append((self.last, pairs, sum(map(len, pairs))))
            self.added.append(self.last)
        return out

    def step(self, step: tuple[object, ...]) -> None:
        kind = step[0]
        if kind == "append":
            _, spec, sized = step
            ((sid, pairs, size),) = self.entries([spec])  # type: ignore[list-item]
            for stream in (self.pure, self.native):
                stream.append(sid, pairs, self.max_bytes, self.max_entries, size if sized else None)
        elif kind == "extend":
            _, specs, as_list = step
            run = self.entries(specs)  # type: ignore[arg-type]
            for stream in (self.pure, self.native):
                stream.extend(run if as_list else tuple(run), self.max_bytes, self.max_entries)
        elif kind == "delete":
            sid = self.added[step[1] % len(self.added)] if self.added else MIN_ID  # type: ignore[operator]
            assert self.pure.delete(sid) == self.native.delete(sid)
        elif kind == "limits":
            _, self.max_bytes, self.max_entries = step  # type: ignore[assignment]
        else:
            assert _trimmed(self.pure, step, self.added) == _trimmed(self.native, step, self.added)

    def check(self) -> None:
        self.pure.check_invariants()
        self.native.check_invariants()
        assert _nodes(self.native) == _nodes(self.pure)
        assert _counters(self.native) == _counters(self.pure)


def _trimmed(stream: Stream, step: tuple[object, ...], added: list[StreamID]) -> object:
    """What a trim step removed from stream: the count, the last ID and each ID (``delref``)."""
    kind, bound, approx, limit, policy = step
    assert isinstance(bound, int) and isinstance(limit, int)
    maxlen = bound if kind == "maxlen" else None
    minid = (added[bound % len(added)] if added else MIN_ID) if kind == "minid" else None
    removed: list[StreamID] = []
    count = stream.trim(
        maxlen,
        minid,
        approx=bool(approx),
        limit=limit if approx else 0,  # (Redis takes LIMIT only with ~)
        keep=(lambda sid: sid[1] % 3 == 1) if policy == "acked" else None,
        on_remove=removed.append if policy == "delref" else None,
    )
    return count, stream.last_trimmed, removed


def _nodes(stream: Stream) -> list[tuple[object, ...]]:
    """Each node's boundaries and contents, as packed."""
    return [
        (
            node.master,
            len(node),
            node.count,
            node.deleted,
            node.lp_bytes,
            node.ms.tolist(),
            node.seq.tolist(),
            node.offsets.tolist(),
            bytes(node.blob),
            bytes(node.tomb) if node.tomb is not None else None,
        )
        for node in stream.nodes
    ]


def _counters(stream: Stream) -> tuple[object, ...]:
    return (
        stream.length,
        stream.first_id,
        stream.last_id,
        stream.max_deleted_id,
        stream.entries_added,
        stream.range(MIN_ID, MAX_ID),
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_MAX_BYTES, _MAX_ENTRIES, st.lists(_STEP, min_size=1, max_size=30))
def test_pure_and_c_packing_split_and_trim_alike(
    max_bytes: int, max_entries: int, steps: list[tuple[object, ...]]
) -> None:
    packer = node_module._native_pack()
    assert packer is not None  # (the module imports: importorskip above)
    run = _Run(packer, max_bytes, max_entries)
    for step in steps:
        run.step(step)
        run.check()


def test_a_long_run_splits_alike_at_every_limit() -> None:
    """Thousands of entries in one extend, past the master count's wider encodings (128,
    4096 live entries) where a node may grow that long."""
    packer = node_module._native_pack()
    assert packer is not None
    for max_bytes in (0, 100, 4096, 65536):
        for max_entries in (0, 1, 100, 5000):
            run = _Run(packer, max_bytes, max_entries)
            specs: list[Spec] = [(i % 2, 0, [b"%d" % i, b""]) for i in range(5000)]
            run.step(("extend", specs, True))
            run.check()
            run.step(("maxlen", 1234, True, 0, "keepref"))
            run.check()


def test_the_c_packer_stays_in_its_budget() -> None:
    """``pack_run`` takes its first ``free`` entries, then an entry while fewer than
    ``entries_left`` were taken and the listpack bytes it added before it plus its raw size
    stay within ``bytes_left``; a budget already spent (or overspent, when a limit was lowered)
    takes none but the free ones."""
    packer = node_module._native_pack()
    assert packer is not None
    # each entry: raw size 2 ("f" and "5"), 10 listpack bytes added (flags, the two ID deltas,
    # the value 5 and the entry's own element count: small integers of 2 bytes each)
    entries = [((7, k), [b"f", b"5"], 2) for k in range(10)]

    def taken(bytes_left: int, entries_left: int, free: int = 0) -> tuple[int, int]:
        stop, spent, _, _, _ = packer.pack_run(
            bytearray(), entries, 0, free, bytes_left, entries_left, 7, 0, [b"f"], 1
        )
        return stop, spent

    assert taken(22, 100) == (3, 30)  # the third: 20 spent + 2 == 22
    assert taken(21, 100) == (2, 20)
    assert taken(1000, 4) == (4, 40)
    assert taken(1000, 0) == (0, 0)
    assert taken(1000, -3) == (0, 0)
    assert taken(1, 100) == (0, 0)
    assert taken(-5, 100) == (0, 0)
    assert taken(-5, 0, free=1) == (1, 10)
    assert taken(1, 100, free=2) == (2, 20)
    assert taken(11, 100, free=1) == (1, 10)  # the second: 10 spent + 2 > 11
