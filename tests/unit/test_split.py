"""Canonical commands split out of a byte stream (``resp/split.py``): the C ``Splitter``
(``_split.c``, the compiled build), ``PySplitter`` (its scan in Python) and
``HiredisSplitter`` (the pure build: hiredis, and the scan where hiredis is not trusted),
against the commands that were encoded, however the bytes are cut into reads; garbage,
non-canonical forms and headers over the limits refused with nothing of them taken, in the
same words by all."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater._build import build_kind
from headwater.resp.encoder import encode_command
from headwater.resp.split import (
    MAX_BULK,
    MAX_WORDS,
    CommandSplitter,
    HiredisSplitter,
    PySplitter,
    new_splitter,
)


def _c_splitter() -> CommandSplitter:
    try:
        module = importlib.import_module("headwater.resp._split")
    except ImportError:
        pytest.skip("the pure build (no _split module)")
    splitter: CommandSplitter = module.Splitter()
    return splitter


SPLITTERS: list[Callable[[], CommandSplitter]] = [_c_splitter, PySplitter, HiredisSplitter]

_WORDS = st.one_of(
    st.binary(max_size=12),
    st.sampled_from([b"", b"\r\n", b"*1\r\n", b"$3\r\n", b"x" * 9, b"y" * 10, b"z" * 100]),
)
_COMMANDS = st.lists(st.lists(_WORDS, min_size=1, max_size=12), min_size=1, max_size=20)


def test_the_built_splitter_is_the_c_one_in_the_compiled_build() -> None:
    native = type(new_splitter()) is not HiredisSplitter
    assert native == (build_kind() == "compiled")


def _split_all(splitter: CommandSplitter, data: bytes, cuts: list[int]) -> list[list[bytes]]:
    got: list[list[bytes]] = []
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        splitter.feed(data[start:end])
        while (argv := splitter.gets()) is not False:
            got.append(argv)
    return got


@pytest.mark.parametrize("make", SPLITTERS)
@settings(max_examples=150)
@given(commands=_COMMANDS, data=st.data())
def test_commands_come_out_as_encoded_however_cut(
    make: Callable[[], CommandSplitter], commands: list[list[bytes]], data: st.DataObject
) -> None:
    stream = b"".join(encode_command(argv) for argv in commands)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=30)))
    splitter = make()
    assert _split_all(splitter, stream, cuts) == commands
    assert splitter.taken == len(stream)


@pytest.mark.parametrize("make", SPLITTERS)
def test_taken_counts_whole_commands_only(make: Callable[[], CommandSplitter]) -> None:
    splitter = make()
    first = encode_command([b"XADD", b"s", b"1-1", b"f", b"v"])
    second = encode_command([b"PING"])
    splitter.feed(first + second[:5])
    assert splitter.gets() == [b"XADD", b"s", b"1-1", b"f", b"v"]
    assert splitter.gets() is False
    assert splitter.taken == len(first)
    splitter.feed(second[5:])
    assert splitter.gets() == [b"PING"]
    assert splitter.gets() is False
    assert splitter.taken == len(first) + len(second)


@pytest.mark.parametrize("make", SPLITTERS)
def test_a_long_command_in_many_reads(make: Callable[[], CommandSplitter]) -> None:
    splitter = make()
    argv = [b"HSET", b"h", *[b"%d" % i for i in range(20_000)]]
    stream = encode_command(argv) + encode_command([b"BIG", b"b" * 300_000])
    for start in range(0, len(stream), 1000):
        splitter.feed(stream[start : start + 1000])
        if start + 1000 < len(stream) - 300_020:
            assert splitter.gets() is False
    assert splitter.gets() == argv
    assert splitter.gets() == [b"BIG", b"b" * 300_000]
    assert splitter.gets() is False
    assert splitter.taken == len(stream)


#: what the splitters say of garbage
REFUSED = (
    r"^(expected '\$', got byte|expected '\*', got byte|an empty command"
    r"|a '[*$]' length that is not canonical)"
)
GARBAGE = [
    b"this is not RESP\r\n",
    b"*0\r\n",
    b"*-1\r\n",
    b"*1\r\n:1\r\n",  # an integer where a bulk string goes
    b"*1\r\n*1\r\n$1\r\na\r\n",  # a nested array
    b"*1\r\n$-1\r\n",  # a null bulk string
    b"+OK\r\n",
]
_STAR = "a '*' length that is not canonical"
_DOLLAR = "a '$' length that is not canonical"
#: not the canonical form a server sends (most of it valid RESP), and garbage: what the
#: splitters say of each
NOT_CANONICAL = [
    (b"*1\r\n$1\r\nab\r\n", "a bulk string not followed by CRLF"),
    (b"*01\r\n$1\r\na\r\n", _STAR),
    (b"*1\r\n$01\r\na\r\n", _DOLLAR),
    (b"*1\r\n$+1\r\na\r\n", _DOLLAR),
    (b"*1 \r\n$1\r\na\r\n", _STAR),
    (b"*1\r\n$1\n\na\r\n", _DOLLAR),
    (b"*1\r\n$" + b"9" * 16 + b"\r\n", _DOLLAR),
    (b"*" + b"9" * 12 + b"\r\n", "a '*' length over the limit"),
    (b"this is not RESP\r\n", "expected '*', got byte 0x74"),
    (b"*0\r\n", "an empty command"),
    (b"*-1\r\n", _STAR),
    (b"*1\r\n:1\r\n", "expected '$', got byte 0x3a"),
    (b"*1\r\n*1\r\n$1\r\na\r\n", "expected '$', got byte 0x2a"),
    (b"*1\r\n$-1\r\n", _DOLLAR),
    (b"+OK\r\n", "expected '*', got byte 0x2b"),
]


@pytest.mark.parametrize("make", SPLITTERS)
@pytest.mark.parametrize("garbage", GARBAGE)
def test_garbage_after_good_commands(make: Callable[[], CommandSplitter], garbage: bytes) -> None:
    splitter = make()
    good = encode_command([b"SET", b"k", b"v"])
    splitter.feed(good + garbage)
    assert splitter.gets() == [b"SET", b"k", b"v"]
    with pytest.raises(ValueError, match=REFUSED):
        splitter.gets()
    assert splitter.taken == len(good)


@pytest.mark.parametrize("make", SPLITTERS)
@pytest.mark.parametrize(("garbage", "why"), NOT_CANONICAL)
def test_non_canonical_commands_are_refused(
    make: Callable[[], CommandSplitter], garbage: bytes, why: str
) -> None:
    splitter = make()
    splitter.feed(garbage)
    for _ in range(2):  # (and again: nothing was taken)
        with pytest.raises(ValueError, match=f"^{re.escape(why)}$"):
            splitter.gets()
    assert splitter.taken == 0


@pytest.mark.parametrize(
    "short", [b"*", b"*1", b"*1\r", b"*1\r\n$", b"*1\r\n$3\r\nab", b"*1\r\n$3\r\nabc\r"]
)
@pytest.mark.parametrize("make", SPLITTERS)
def test_a_command_cut_short_waits(make: Callable[[], CommandSplitter], short: bytes) -> None:
    splitter = make()
    splitter.feed(short)
    assert splitter.gets() is False
    splitter.feed(encode_command([b"abc"])[len(short) :])
    assert splitter.gets() == [b"abc"]


@pytest.mark.parametrize("make", SPLITTERS)
def test_bad_feeds(make: Callable[[], CommandSplitter]) -> None:
    splitter = make()
    with pytest.raises(TypeError):
        splitter.feed("text")  # type: ignore[arg-type]
    splitter.feed(bytearray(b"*1\r\n$1\r\nx\r\n"))  # (any bytes-like object)
    assert splitter.gets() == [b"x"]


@pytest.mark.parametrize("make", SPLITTERS)
def test_headers_over_the_limits_are_refused_as_soon_as_they_are_whole(
    make: Callable[[], CommandSplitter],
) -> None:
    splitter = make()
    assert (splitter.max_words, splitter.max_bulk) == (MAX_WORDS, MAX_BULK)
    splitter.max_words, splitter.max_bulk = 3, 5
    splitter.feed(encode_command([b"a", b"b", b"c"]) + encode_command([b"12345"]))
    assert splitter.gets() == [b"a", b"b", b"c"]
    assert splitter.gets() == [b"12345"]
    splitter.feed(b"*4\r")
    assert splitter.gets() is False  # (not whole yet)
    splitter.feed(b"\n")
    for _ in range(2):
        with pytest.raises(ValueError, match=r"^a '\*' length over the limit$"):
            splitter.gets()
    splitter.max_words = 4
    splitter.feed(b"$6\r\n")  # (its data never comes: refused before it)
    with pytest.raises(ValueError, match=r"^a '\$' length over the limit$"):
        splitter.gets()


@pytest.mark.parametrize("make", SPLITTERS)
def test_pending_bytes_are_handed_over_by_take_rest(make: Callable[[], CommandSplitter]) -> None:
    splitter = make()
    first = encode_command([b"PING"])
    rest = b"*2\r\n$3\r\nGET\r\n$1\r\n"
    splitter.feed(first + rest)
    assert splitter.pending == len(first) + len(rest)
    assert splitter.gets() == [b"PING"]
    assert splitter.gets() is False
    assert splitter.pending == len(rest)
    assert splitter.take_rest() == rest
    assert splitter.pending == 0
    assert splitter.taken == len(first)
    splitter.feed(first)  # (it goes on from an empty buffer)
    assert splitter.gets() == [b"PING"]
    assert splitter.take_rest() == b""
