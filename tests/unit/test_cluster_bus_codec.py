"""The bus codec: every message type survives encode → decode (hypothesis), the header is
Redis's 2256 bytes at its fixed offsets, and malformed messages are refused, never obeyed.
(tests/e2e/test_cluster_mixed_e2e.py talks to a real redis-server's bus.)"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.cluster import bus_codec as codec
from headwater.cluster.bus_codec import BusError, Gossip, Message

names = st.text("0123456789abcdef", min_size=40, max_size=40)
ips = st.sampled_from(["", "127.0.0.1", "10.1.2.3", "::1", "fe80::1:2:3:4"])
ports = st.integers(0, 65535)
u64 = st.integers(0, 2**64 - 1)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(range(11)))
    m = Message(kind, draw(names))
    m.port, m.cport, m.pport = draw(ports), draw(ports), draw(ports)
    m.current_epoch, m.config_epoch, m.offset = draw(u64), draw(u64), draw(u64)
    m.myslots = codec.bitmap_of(draw(st.lists(st.integers(0, 16383), max_size=30)))
    m.master = draw(st.one_of(st.just(""), names))
    m.myip = draw(ips)
    m.flags = draw(st.integers(0, 1023))
    m.state_ok = draw(st.booleans())
    m.mflags = draw(st.integers(0, 3))
    if kind in (codec.PING, codec.PONG, codec.MEET):
        m.gossip = [
            Gossip(draw(names), draw(st.integers(0, 2**32 - 1)), 5, draw(ips), 1, 2, 3, 4)
            for _ in range(draw(st.integers(0, 4)))
        ]
        m.hostname = draw(st.sampled_from(["", "a", "node-1.example.com", "x" * 20]))
    elif kind == codec.FAIL:
        m.about = draw(names)
    elif kind in (codec.PUBLISH, codec.PUBLISHSHARD):
        m.channel, m.payload = draw(st.binary(max_size=20)), draw(st.binary(max_size=50))
    elif kind == codec.UPDATE:
        m.about, m.update_epoch = draw(names), draw(u64)
        m.update_slots = codec.bitmap_of(draw(st.lists(st.integers(0, 16383), max_size=10)))
    return m


def fields(m: Message) -> dict[str, object]:
    out = {k: v for k, v in vars(m).items() if k != "gossip"}
    out["gossip"] = [vars(g) if hasattr(g, "__dict__") else _slots(g) for g in m.gossip]
    return out


def _slots(g: Gossip) -> dict[str, object]:
    return {name: getattr(g, name) for name in Gossip.__slots__}


@given(messages())
def test_every_message_round_trips(m: Message) -> None:
    raw = codec.encode(m)
    assert raw[:4] == b"RCmb" and struct.unpack(">I", raw[4:8])[0] == len(raw)
    assert codec.frame_length(raw[:8]) == len(raw)
    again = codec.decode(raw)
    expected = fields(m)
    if m.kind not in (codec.PING, codec.PONG, codec.MEET):
        expected["hostname"] = ""  # (only the pings carry extensions)
    got = fields(again)
    got["mflags"] = again.mflags & ~codec.MF_EXT_DATA
    assert got == expected
    assert codec.encode(again) == raw


def test_the_header_is_redis_layout() -> None:
    m = Message(codec.PING, "a" * 40)
    m.port, m.cport, m.flags, m.current_epoch = 7000, 17000, 1, 9
    m.myslots = codec.bitmap_of([0, 9, 16383])
    raw = codec.encode(m)
    assert len(raw) == codec.HEADER_LEN == 2256
    assert struct.unpack_from(">HHHH", raw, 8) == (1, 7000, codec.PING, 0)
    assert struct.unpack_from(">Q", raw, 16)[0] == 9
    assert raw[40:80] == b"a" * 40
    assert raw[80] == 0b1 and raw[81] == 0b10 and raw[80 + 2047] == 0x80  # slot j: bit j&7
    assert raw[2128:2168] == bytes(40)  # a master: no master name
    assert struct.unpack_from(">HHH", raw, 2246) == (0, 17000, 1)


def ping() -> bytes:
    m = Message(codec.PING, "b" * 40)
    m.gossip = [Gossip("c" * 40, 0, 0, "127.0.0.1", 1, 2, 3)]
    m.hostname = "host"
    return codec.encode(m)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda raw: b"XXXX" + raw[4:], "signature"),
        (lambda raw: raw[:100], "short"),
        (lambda raw: raw[:8] + struct.pack(">H", 2) + raw[10:], "version"),
        (lambda raw: raw + b"\0", "length"),
        (lambda raw: raw[:14] + struct.pack(">H", 9) + raw[16:], "cut short"),
        (lambda raw: raw[:-16] + struct.pack(">IHH", 13, 0, 0) + raw[-8:], "extension"),
    ],
)
def test_malformed_messages_are_refused(damage: object, problem: str) -> None:
    raw = damage(ping())  # type: ignore[operator]
    with pytest.raises(BusError, match=problem):
        codec.decode(raw)


def test_bodies_of_the_wrong_length_are_refused() -> None:
    for kind, body in ((codec.FAIL, b"x" * 39), (codec.UPDATE, b"x" * 10), (codec.MFSTART, b"x")):
        m = Message(kind, "a" * 40)
        raw = codec.encode(Message(codec.AUTH_ACK, "a" * 40))
        raw = raw[:4] + struct.pack(">I", len(raw) + len(body)) + raw[8:12]
        raw += struct.pack(">H", kind) + codec.encode(m)[14 : codec.HEADER_LEN] + body
        with pytest.raises(BusError):
            codec.decode(raw)


def test_a_frame_below_the_header_length_drops_the_link() -> None:
    with pytest.raises(BusError):
        codec.frame_length(b"RCmb" + struct.pack(">I", 100))
    with pytest.raises(BusError):
        codec.frame_length(b"HTTP/1.1")
