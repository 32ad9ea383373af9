"""The request parser: the canonical fast path and the exact slow path must agree on every
split."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.resp.parser import RequestError, RequestParser, split_args, wire_size
from tests.helpers import encode_command

args_st = st.lists(st.binary(max_size=40), min_size=1, max_size=6)
inline_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)


def _encode_inline(words: list[str]) -> bytes:
    return (" ".join(words) + "\r\n").encode()


def parse_chunks(chunks: list[bytes], **kwargs: object) -> list[list[bytes]]:
    parser = RequestParser(**kwargs)  # type: ignore[arg-type]
    out: list[list[bytes]] = []
    for chunk in chunks:
        parser.feed(chunk)
        while (cmd := parser.next()) is not None:
            out.append(cmd)
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return [p for p in pieces if p]


@given(
    st.lists(
        st.one_of(
            args_st.map(lambda a: ("resp", a)),
            st.lists(inline_word, min_size=1, max_size=4).map(lambda w: ("inline", w)),
            st.just(("blank", None)),
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.integers(min_value=0), max_size=8),
)
def test_any_split_of_mixed_stream_parses_the_same(
    items: list[tuple[str, object]], cuts: list[int]
) -> None:
    data = b""
    expected: list[list[bytes]] = []
    for kind, payload in items:
        if kind == "resp":
            args = payload
            data += encode_command(*args)  # type: ignore[misc]
            expected.append(list(args))  # type: ignore[call-overload]
        elif kind == "inline":
            data += _encode_inline(payload)  # type: ignore[arg-type]
            expected.append([w.encode() for w in payload])  # type: ignore[union-attr]
        else:
            data += b"\r\n"
    assert parse_chunks(_split(data, cuts)) == expected


def test_big_command_is_checked_against_proto_max_bulk_len_before_buffering() -> None:
    parser = RequestParser(max_bulk_len=1024 * 1024)
    parser.feed(b"*2\r\n$3\r\nSET\r\n$2000000\r\n")
    with pytest.raises(RequestError, match="invalid bulk length"):
        parser.next()  # (before any of its data)


def test_proto_max_bulk_len_set_between_reads_applies_to_the_next_header() -> None:
    parser = RequestParser()
    parser.feed(encode_command("SET", "k", b"v" * 2000))
    assert parser.next() == [b"SET", b"k", b"v" * 2000]
    parser.max_bulk_len = 1000  # (CONFIG SET proto-max-bulk-len, as the connection applies it)
    parser.feed(encode_command("SET", "k", b"v" * 2000))
    with pytest.raises(RequestError, match="invalid bulk length"):
        parser.next()


def test_large_command_split_in_many_chunks() -> None:
    value = b"v" * (3 << 20)
    data = encode_command(b"SET", b"k", value) + encode_command(b"GET", b"k")
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    assert parse_chunks(chunks) == [[b"SET", b"k", value], [b"GET", b"k"]]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"*abc\r\n", "Protocol error: invalid multibulk length"),
        (b"*1\r\n$abc\r\n", "Protocol error: invalid bulk length"),
        (b"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"),
        (b"*1\r\n:5\r\n", "Protocol error: expected '$', got ':'"),
        (b"*2\r\n$1\r\na\r\n*1\r\n", "Protocol error: expected '$', got '*'"),
        (b"*3000000000\r\n", "Protocol error: invalid multibulk length"),
        (b"*1\r\n$01\r\na\r\n", "Protocol error: invalid bulk length"),
        (b'SET a "b\r\n', "Protocol error: unbalanced quotes in request"),
        (b"x" * (70 * 1024), "Protocol error: too big inline request"),
        (b"*1" + b"1" * (70 * 1024), "Protocol error: too big mbulk count string"),
    ],
)
def test_protocol_errors_have_redis_texts(data: bytes, message: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_chunks([data])
    assert str(info.value) == message


def test_commands_before_an_error_are_still_returned() -> None:
    parser = RequestParser()
    parser.feed(encode_command("PING") + encode_command("ECHO", "x") + b"*1\r\n:1\r\n")
    assert parser.next() == [b"PING"]
    assert parser.next() == [b"ECHO", b"x"]
    with pytest.raises(RequestError):
        parser.next()


def test_unauthenticated_limits() -> None:
    with pytest.raises(RequestError, match="unauthenticated multibulk length"):
        parse_chunks([b"*11\r\n"], auth_required=True)
    with pytest.raises(RequestError, match="unauthenticated bulk length"):
        parse_chunks([b"*1\r\n$16385\r\n"], auth_required=True)
    assert parse_chunks([encode_command("AUTH", "pw")], auth_required=True) == [[b"AUTH", b"pw"]]


def test_unauthenticated_limits_return_when_the_client_must_authenticate_again() -> None:
    """RESET de-authenticates: the next command is held to the unauthenticated limits even
    when the parser was on the fast path with it already buffered."""
    parser = RequestParser()
    parser.feed(encode_command("RESET") + encode_command("DEL", *[f"k{i}" for i in range(11)]))
    assert parser.next() == [b"RESET"]
    parser.authenticated(False)
    with pytest.raises(RequestError, match="unauthenticated multibulk length"):
        parser.next()
    later = RequestParser()
    later.feed(encode_command("RESET"))
    assert later.next() == [b"RESET"]
    assert later.next() is None
    later.authenticated(False)
    later.feed(encode_command("GET", b"x" * 16385))
    with pytest.raises(RequestError, match="unauthenticated bulk length"):
        later.next()


def test_authenticating_lifts_the_limits() -> None:
    parser = RequestParser(auth_required=True)
    big = encode_command("DEL", *[f"k{i}" for i in range(11)])
    parser.feed(encode_command("AUTH", "pw") + big)
    assert parser.next() == [b"AUTH", b"pw"]
    parser.authenticated(True)
    assert parser.next() == [b"DEL", *[b"k%d" % i for i in range(11)]]


@pytest.mark.parametrize("inline", [False, True], ids=["resp", "inline"])
def test_unauthenticated_query_buffer_is_limited_to_1mb(inline: bool) -> None:
    """Redis 7.4+: an unauthenticated client's query buffer may not pass 1 MB (closed without
    a reply), whatever client-query-buffer-limit allows."""
    command = b"PING\r\n" if inline else encode_command("PING")
    count = 1024 * 1024 // len(command)
    parser = RequestParser(auth_required=True)
    parser.feed(command * count)  # 1 MB or just under: unparsed, but allowed
    with pytest.raises(RequestError) as raised:
        parser.feed(command)
    assert not raised.value.reply
    authenticated = RequestParser()
    authenticated.feed(command * count)
    authenticated.feed(command)
    assert authenticated.buffered() > 1024 * 1024


def _unauthenticated_model(commands: list[list[bytes]]) -> tuple[list[list[bytes]], str | None]:
    """What Redis runs of these commands from a client that must authenticate first, and the
    protocol error that ends the connection (it looks at each header as it arrives)."""
    accepted: list[list[bytes]] = []
    for argv in commands:
        if len(argv) > 10:
            return accepted, "Protocol error: unauthenticated multibulk length"
        if any(len(arg) > 16384 for arg in argv):
            return accepted, "Protocol error: unauthenticated bulk length"
        accepted.append(argv)
    return accepted, None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0, 4, 16384, 16385]), min_size=1, max_size=12),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.integers(min_value=0), max_size=6),
)
def test_unauthenticated_limits_on_any_split(lengths: list[list[int]], cuts: list[int]) -> None:
    commands = [[b"a" * n for n in command] for command in lengths]
    data = b"".join(encode_command(*argv) for argv in commands)
    parser = RequestParser(auth_required=True)
    got: list[list[bytes]] = []
    error = None
    try:
        for chunk in _split(data, cuts):
            parser.feed(chunk)
            while (cmd := parser.next()) is not None:
                got.append(cmd)
    except RequestError as exc:
        error = str(exc)
    assert (got, error) == _unauthenticated_model(commands)


def test_unauthenticated_commands_stay_on_the_fast_path() -> None:
    """A flood of commands before AUTH is refused (-NOAUTH) at the fast path's cost: the exact
    path took ~10 us a command, 100 flooding connections kept PING waiting a second."""
    parser = RequestParser(auth_required=True)
    parser.feed(encode_command("PING") * 100 + encode_command("SET", "k", b"v" * 16384))
    assert [parser.next() for _ in range(101)][-1] == [b"SET", b"k", b"v" * 16384]
    assert parser._exact is None


def test_empty_multibulk_and_blank_lines_are_skipped() -> None:
    assert parse_chunks([b"*0\r\n*-1\r\n\r\n\n" + encode_command("PING")]) == [[b"PING"]]


def test_query_buffer_limit_closes_without_reply() -> None:
    parser = RequestParser(max_query_buffer=2 * 1024 * 1024)
    parser.feed(b"*1\r\n$100000000\r\n")
    with pytest.raises(RequestError) as info:
        for _ in range(40):
            parser.feed(b"x" * 65536)
            parser.next()
    assert info.value.reply is False


@pytest.mark.parametrize(
    ("line", "args"),
    [
        (b"set a b", [b"set", b"a", b"b"]),
        (b'  set "a b"  c ', [b"set", b"a b", b"c"]),
        (b'"\\x41\\n\\t\\\\"', [b"A\n\t\\"]),
        (b"'it\\'s' x", [b"it's", b"x"]),
        (b'a"b c"', [b"ab c"]),
        (b"", []),
        (b'"unterminated', None),
        (b'"closed"x', None),
        (b"'closed'x", None),
    ],
)
def test_split_args_matches_sdssplitargs(line: bytes, args: list[bytes] | None) -> None:
    assert split_args(line) == args


PING_CMD = encode_command("PING")
SPLIT_CASES = [
    b"*1\r\n+PING\r\n",
    PING_CMD + b"*2\r\n$4\r\nECHO\r\n+hi\r\n" + PING_CMD,
    PING_CMD + b"*2\r\n$4\r\nECHO\r\n=5\r\ntxt:x\r\n" + PING_CMD,
    PING_CMD + b"~1\r\n$4\r\nPING\r\n",
    PING_CMD + b">1\r\n$4\r\nPING\r\n",
    PING_CMD + b"*2000000000\r\n$1\r\n",
    PING_CMD + b"|2000000000\r\n",
    b"*2\r\n$1\r\na\r\n*1\r\n$4\r\nPING\r\n",
    PING_CMD + b"PING\r\n" + encode_command("ECHO", "x") + b"  set a 'b c'\r\n",
    b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
]


def _outcome(chunks: list[bytes]) -> tuple[list[list[bytes]], str | None]:
    parser = RequestParser()
    out: list[list[bytes]] = []
    try:
        for chunk in chunks:
            parser.feed(chunk)
            while (cmd := parser.next()) is not None:
                out.append(cmd)
    except RequestError as exc:
        return out, str(exc)
    return out, None


@pytest.mark.parametrize("data", SPLIT_CASES)
def test_every_split_of_odd_input_gives_the_same_outcome(data: bytes) -> None:
    whole = _outcome([data])
    for cut in range(1, len(data)):
        assert _outcome([data[:cut], data[cut:]]) == whole, f"split at {cut}"


@given(st.binary(max_size=60).filter(lambda b: not any(ch in b for ch in b"\"'\\\0\x0b\x0c")))
def test_plain_split_equals_sdssplitargs_without_special_bytes(line: bytes) -> None:
    assert line.split() == split_args(line)


def test_ordinary_arguments_stay_on_the_fast_path() -> None:
    """Regression: ``$1\r\n+\r\n`` (XRANGE … +) once sent every such command to the slow
    path, costing ~20 us each."""
    parser = RequestParser()
    batch = encode_command("XRANGE", "r", "000000001234", "+", "COUNT", "1") * 3
    parser.feed(batch + encode_command("SET", "k", "=v"))
    assert parser._exact is None
    assert [parser.next() for _ in range(4)][-1] == [b"SET", b"k", b"=v"]
    assert parser._exact is None


def test_a_huge_multibulk_count_costs_nothing_until_its_words_come() -> None:
    """``*2147483647`` (and ``*2000000000`` with a few words): hiredis's reader allocated the
    whole list at the header (16 GB of address space, seconds to free); the splitter keeps
    only the bytes until the command is whole."""
    parser = RequestParser()
    tracemalloc.start()
    try:
        parser.feed(b"*2147483647\r\n" + b"$1\r\na\r\n" * 1000)
        assert parser.next() is None
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert parser.buffered() == len(b"*2147483647\r\n") + 7000


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"*2147483648\r\n", "Protocol error: invalid multibulk length"),
        (b"*1\r\n$536870913\r\n", "Protocol error: invalid bulk length"),
    ],
)
def test_headers_just_over_redis_limits_are_refused(header: bytes, message: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_chunks([header])
    assert str(info.value) == message
    assert parse_chunks([header.replace(b"48", b"47").replace(b"913", b"912")]) == []


@pytest.mark.parametrize(
    "cmd",
    [
        [b"XADD", b"s", b"*", b"f", b"v"],
        [b"SET", b"k", b"v" * 9_999],
        [b"SET", b"k", b"v" * 10_000],  # beyond the size table
        [b"X"] * 10_000,  # beyond the header table
    ],
)
def test_wire_size_is_the_encoded_size(cmd: list[bytes]) -> None:
    assert wire_size(cmd) == len(encode_command(*cmd))
