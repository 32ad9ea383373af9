"""The cluster bus's binary messages (Redis 7.0's ``clusterMsg``), bytes in and out.

Every message starts with a 2256-byte header (big-endian integers, fixed offsets pinned by
Redis's static asserts): the signature ``RCmb``, the total length, the protocol version 1,
the sender's ports, type, gossip count, epochs, replication offset, name, slot bitmap
(slot j is bit j & 7 of byte j >> 3), master's name, announced IP, extension count, flags,
its view of the cluster's state and the message flags. PING, PONG and MEET follow it with
104-byte gossip entries and the ping extensions (7.0 knows one: the hostname); FAIL,
PUBLISH(SHARD) and UPDATE have their own bodies; the failover messages are the header alone.

``decode`` refuses a message whose length does not match its type, as Redis ignores it.
"""

from __future__ import annotations

import struct

from headwater.cluster.slots import SLOTS

SIGNATURE = b"RCmb"
VERSION = 1
HEADER_LEN = 2256
GOSSIP_LEN = 104
BITMAP_LEN = SLOTS // 8
NAME_LEN = 40
NO_NAME = b"\0" * NAME_LEN

PING, PONG, MEET, FAIL, PUBLISH, AUTH_REQUEST, AUTH_ACK, UPDATE, MFSTART, MODULE = range(10)
PUBLISHSHARD = 10

# message flags (mflags[0])
MF_PAUSED = 1
MF_FORCEACK = 2
MF_EXT_DATA = 4

EXT_HOSTNAME = 0

_HEADER = struct.Struct(">4sIHHHHQQQ40s2048s40s46sH30sHHHB3s")
_GOSSIP = struct.Struct(">40sII46sHHHH2s")
_EXT = struct.Struct(">IHH")
_U32S = struct.Struct(">II")
_UPDATE = struct.Struct(">Q40s2048s")


class BusError(Exception):
    """A message that is not one of Redis's (the link may go on: Redis ignores it)."""


class Gossip:
    """What a message says of one other node."""

    __slots__ = ("cport", "flags", "ip", "name", "ping_sent_s", "pong_received_s", "port", "pport")

    def __init__(
        self,
        name: str,
        ping_sent_s: int,
        pong_received_s: int,
        ip: str,
        port: int,
        cport: int,
        flags: int,
        pport: int = 0,
    ) -> None:
        self.name = name
        self.ping_sent_s = ping_sent_s
        self.pong_received_s = pong_received_s
        self.ip = ip
        self.port = port
        self.cport = cport
        self.flags = flags
        self.pport = pport


class Message:
    """One bus message: the header's fields and the body of its type."""

    def __init__(self, kind: int, sender: str) -> None:
        self.kind = kind
        self.sender = sender
        self.port = 0
        self.cport = 0
        self.pport = 0
        self.current_epoch = 0
        self.config_epoch = 0
        self.offset = 0
        self.myslots = bytes(BITMAP_LEN)
        self.master = ""  # the sender's master ('' for a master)
        self.myip = ""
        self.flags = 0
        self.state_ok = True
        self.mflags = 0
        self.gossip: list[Gossip] = []
        self.hostname = ""
        #: FAIL's node; UPDATE's node, epoch and slots
        self.about = ""
        self.update_epoch = 0
        self.update_slots = b""
        #: PUBLISH and PUBLISHSHARD
        self.channel = b""
        self.payload = b""


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


def _name(raw: bytes) -> str:
    return "" if raw == NO_NAME else raw.decode("latin-1")


def _fixed(text: str, size: int) -> bytes:
    raw = text.encode("latin-1")
    if len(raw) > size:
        raise BusError(f"'{text}' is longer than {size} bytes")
    return raw.ljust(size, b"\0")


def encode(m: Message) -> bytes:
    body = _body(m)
    extensions = 0
    mflags = m.mflags & ~MF_EXT_DATA
    if m.hostname and m.kind in (PING, PONG, MEET):
        raw = m.hostname.encode("latin-1") + b"\0"
        raw = raw.ljust((len(raw) + 7) // 8 * 8, b"\0")
        body += _EXT.pack(8 + len(raw), EXT_HOSTNAME, 0) + raw
        extensions = 1
        mflags |= MF_EXT_DATA
    header = _HEADER.pack(
        SIGNATURE,
        HEADER_LEN + len(body),
        VERSION,
        m.port,
        m.kind,
        len(m.gossip) if m.kind in (PING, PONG, MEET) else 0,
        m.current_epoch,
        m.config_epoch,
        m.offset,
        _fixed(m.sender, NAME_LEN),
        m.myslots,
        _fixed(m.master, NAME_LEN) if m.master else NO_NAME,
        _fixed(m.myip, 46),
        extensions,
        bytes(30),
        m.pport,
        m.cport,
        m.flags,
        0 if m.state_ok else 1,
        bytes((mflags, 0, 0)),
    )
    return header + body


def _body(m: Message) -> bytes:
    if m.kind in (PING, PONG, MEET):
        return b"".join(
            _GOSSIP.pack(
                _fixed(g.name, NAME_LEN),
                g.ping_sent_s,
                g.pong_received_s,
                _fixed(g.ip, 46),
                g.port,
                g.cport,
                g.flags,
                g.pport,
                b"\0\0",
            )
            for g in m.gossip
        )
    if m.kind == FAIL:
        return _fixed(m.about, NAME_LEN)
    if m.kind in (PUBLISH, PUBLISHSHARD):
        return _U32S.pack(len(m.channel), len(m.payload)) + m.channel + m.payload
    if m.kind == UPDATE:
        return _UPDATE.pack(m.update_epoch, _fixed(m.about, NAME_LEN), m.update_slots)
    return b""


def frame_length(head: bytes) -> int:
    """The total length a message's first 8 bytes announce (raises for a bad signature or
    a length below the header's: the link is then dropped, as Redis drops it)."""
    if head[:4] != SIGNATURE:
        raise BusError("not a cluster bus message")
    total: int = _U32S.unpack_from(head, 0)[1]
    if total < HEADER_LEN:
        raise BusError(f"message length {total} is below the header's")
    return total


def decode(raw: bytes) -> Message:
    if len(raw) < HEADER_LEN:
        raise BusError("short message")
    fields = _HEADER.unpack_from(raw, 0)
    (sig, total, version, port, kind, count, current, config, offset, sender) = fields[:10]
    (myslots, master, myip, extensions, _, pport, cport, flags, state, mflags) = fields[10:]
    if sig != SIGNATURE or total != len(raw):
        raise BusError("bad signature or length")
    if version != VERSION:
        raise BusError(f"protocol version {version}")
    m = Message(kind, _name(sender))
    m.port, m.cport, m.pport = port, cport, pport
    m.current_epoch, m.config_epoch, m.offset = current, config, offset
    m.myslots, m.master, m.myip = myslots, _name(master), _text(myip)
    m.flags, m.state_ok, m.mflags = flags, state == 0, mflags[0]
    body = memoryview(raw)[HEADER_LEN:]
    if kind in (PING, PONG, MEET):
        _read_gossip(m, body, count, extensions)
    elif kind == FAIL:
        _expect(body, NAME_LEN)
        m.about = _name(bytes(body[:NAME_LEN]))
    elif kind in (PUBLISH, PUBLISHSHARD):
        if len(body) < 8:
            raise BusError("short PUBLISH")
        channel_len, payload_len = _U32S.unpack_from(body, 0)
        _expect(body, 8 + channel_len + payload_len)
        m.channel = bytes(body[8 : 8 + channel_len])
        m.payload = bytes(body[8 + channel_len :])
    elif kind == UPDATE:
        _expect(body, _UPDATE.size)
        m.update_epoch, about, m.update_slots = _UPDATE.unpack_from(body, 0)
        m.about = _name(about)
    elif kind in (AUTH_REQUEST, AUTH_ACK, MFSTART):
        _expect(body, 0)
    return m


def _expect(body: memoryview, size: int) -> None:
    if len(body) != size:
        raise BusError(f"body of {len(body)} bytes where {size} were due")


def _read_gossip(m: Message, body: memoryview, count: int, extensions: int) -> None:
    end = count * GOSSIP_LEN
    if len(body) < end:
        raise BusError("gossip section cut short")
    for at in range(0, end, GOSSIP_LEN):
        name, ping, pong, ip, port, cport, flags, pport, _ = _GOSSIP.unpack_from(body, at)
        m.gossip.append(Gossip(_name(name), ping, pong, _text(ip), port, cport, flags, pport))
    if not m.mflags & MF_EXT_DATA:
        return
    at = end
    for _ in range(extensions):
        if at + 8 > len(body):
            raise BusError("ping extension cut short")
        length, kind, _unused = _EXT.unpack_from(body, at)
        if length % 8 or length < 8 or at + length > len(body):
            raise BusError(f"ping extension of length {length}")
        if kind == EXT_HOSTNAME:
            m.hostname = _text(bytes(body[at + 8 : at + length]))
        at += length
    if at != len(body):
        raise BusError("bytes after the ping extensions")


def bitmap_of(slots: list[int]) -> bytes:
    bitmap = bytearray(BITMAP_LEN)
    for slot in slots:
        bitmap[slot >> 3] |= 1 << (slot & 7)
    return bytes(bitmap)


#: the set bits of each byte value
_BITS = [tuple(bit for bit in range(8) if value >> bit & 1) for value in range(256)]


def slots_in(bitmap: bytes | bytearray) -> list[int]:
    return [(index << 3) + bit for index, byte in enumerate(bitmap) if byte for bit in _BITS[byte]]


def claimed_beyond(claim: bytes, held: bytes | bytearray) -> list[int]:
    """The slots set in ``claim`` and not in ``held`` (what a node claims that we do not
    know it holds), read byte by byte: an unchanged claim costs a comparison."""
    if claim == held:
        return []
    return [
        (index << 3) + bit
        for index, (want, have) in enumerate(zip(claim, held, strict=True))
        if want & ~have
        for bit in _BITS[want & ~have]
    ]
