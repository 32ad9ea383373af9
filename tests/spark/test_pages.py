"""XRANGE replies split into Arrow buffers (``spark/pages.py``, ``spark/_pages.c``): the C
split against the Python reference (hiredis) on generated replies, whole, cut anywhere and
resumed, or malformed; the arrays made over the buffers; and pages read from a server,
errors included."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater._build import build_kind
from headwater.spark import pages
from headwater.spark.nodes import Nodes
from tests.helpers import ServerProcess, start_headwater

Entry = list[Any]


def _bulk(word: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(word), word)


def encode(entries: Sequence[Entry]) -> bytes:
    """An XRANGE reply as a server sends it (RESP2)."""
    out = [b"*%d\r\n" % len(entries)]
    for sid, pairs in entries:
        out.append(b"*2\r\n" + _bulk(sid) + b"*%d\r\n" % len(pairs))
        out.extend(map(_bulk, pairs))
    return b"".join(out)


words = st.binary(max_size=40) | st.sampled_from([b"", b"\r\n", b"$3\r\n", b"*2\r\n"])
entry_lists = st.lists(
    st.tuples(
        st.from_regex(rb"\A[0-9]{1,13}-[0-9]{1,5}\Z"),
        st.lists(st.tuples(words, words), max_size=5).map(
            lambda pairs: [word for pair in pairs for word in pair]
        ),
    ).map(list),
    max_size=12,
)


def _native() -> pages.Splitter:
    module = importlib.import_module("headwater.spark._pages")
    split: pages.Splitter = module.split_xrange
    return split


def splitters() -> Iterator[pages.Splitter]:
    yield pages.split_xrange_py
    if build_kind() == "compiled":
        yield _native()


def test_the_compiled_build_splits_in_c() -> None:
    assert (pages.split_xrange is not pages.split_xrange_py) == (build_kind() == "compiled")


@settings(max_examples=200)
@given(entry_lists)
def test_a_whole_reply_splits_into_the_reference_columns(entries: list[Entry]) -> None:
    want = pages.columns_of(entries)
    for split in splitters():
        assert split(encode(entries), None) == (None, want)
        page = pages.page_of(want)
        assert page.ids.to_pylist() == [sid for sid, _ in entries]
        pairs = [pair for _, flat in entries for pair in zip(flat[0::2], flat[1::2], strict=True)]
        assert list(zip(page.fields.to_pylist(), page.values.to_pylist(), strict=True)) == pairs


@pytest.mark.skipif(build_kind() != "compiled", reason="the pure build parses whole replies")
@settings(max_examples=200)
@given(entry_lists, st.lists(st.integers(0, 10_000), max_size=6))
def test_a_reply_cut_anywhere_resumes_to_the_same_columns(
    entries: list[Entry], cuts: list[int]
) -> None:
    reply = encode(entries)
    split, progress = _native(), None
    for cut in sorted({c % len(reply) for c in cuts if c % len(reply)}):
        progress, columns = split(reply[:cut], progress)
        assert columns is None and progress is not None
    assert split(reply, progress) == (None, pages.columns_of(entries))


@pytest.mark.parametrize(
    "reply",
    [
        b"-MOVED 3999 127.0.0.1:7002\r\n",
        b"-ERR\r\n",
        b"$3\r\nabc\r\n",
        b"*-1\r\n",
        b"*1\r\n*3\r\n$1\r\na\r\n*0\r\n$0\r\n\r\n",  # an entry of three
        b"*1\r\n*2\r\n$3\r\n1-0\r\n*1\r\n$1\r\nf\r\n",  # a field without its value
        b"*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$-1\r\n",  # a nil value
        b"*1\r\n*2\r\n$3\r\n1-0\r\n$1\r\nf\r\n",  # fields not an array
        b"*1\r\n*2\r\n$3\r\n1-0X\r\n*0\r\n",  # a bulk longer than said
        b"*0\r\n+OK\r\n",  # more than one reply
        b"%1\r\n$1\r\na\r\n$1\r\nb\r\n",  # RESP3
    ],
)
def test_what_is_not_one_page_is_refused_by_both(reply: bytes) -> None:
    for split in splitters():
        with pytest.raises(ValueError, match="not an XRANGE reply"):
            split(reply, None)


def test_a_short_reply_is_not_a_page_yet() -> None:
    reply = encode([[b"1-0", [b"f", b"v"]]])
    for split in splitters():
        for cut in range(len(reply)):
            progress, columns = split(reply[:cut], None)
            assert columns is None and progress is not None


# -- against a server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    proc = start_headwater("--appendonly", "no", "--save", "")
    try:
        yield proc
    finally:
        proc.stop()


def test_pages_read_from_a_server_match_xrange(server: ServerProcess) -> None:
    client = redis.Redis(port=server.port)
    client.delete("s")
    for i in range(250):
        client.xadd("s", {"f": str(i), "g": "x" * (i % 7)}, id=f"{i + 1}-0")
    nodes = Nodes(f"redis://127.0.0.1:{server.port}/0", 5.0)
    try:
        page = pages.read_page(nodes, "s", ("XRANGE", "s", "(5-0", "+", "COUNT", 200))
        want = client.xrange("s", "(5-0", "+", count=200)
        assert page.ids.to_pylist() == [sid for sid, _ in want]
        assert page.pair_offsets.to_pylist()[-1] == 2 * len(want)
        assert page.values.to_pylist()[0::2] == [fields[b"f"] for _, fields in want]
        assert len(pages.read_page(nodes, "none", ("XRANGE", "none", "-", "+"))) == 0
    finally:
        nodes.close()


def test_an_error_reply_raises_and_the_connection_stays_in_step(server: ServerProcess) -> None:
    client = redis.Redis(port=server.port)
    client.set("text", "v")
    client.delete("s2")
    client.xadd("s2", {"f": "v"}, id="1-0")
    nodes = Nodes(f"redis://127.0.0.1:{server.port}/0", 5.0)
    try:
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            pages.read_page(nodes, "text", ("XRANGE", "text", "-", "+"))
        with pytest.raises(redis.ResponseError, match="Invalid stream ID"):
            pages.read_page(nodes, "s2", ("XRANGE", "s2", "nope", "+"))
        page = pages.read_page(nodes, "s2", ("XRANGE", "s2", "-", "+"))
        assert page.ids.to_pylist() == [b"1-0"] and page.values.to_pylist() == [b"v"]
    finally:
        nodes.close()
