"""Stateful model test of idempotent producers (XADD IDMP / IDMPAUTO, XCFGSET, XIDMPRECORD and
the expiry cron) through the engine, against a plain model written from the spec (§2.1).

The model keeps, per stream (two of them) and per producer, the list of (iid, entry ID) pairs in
insertion order; the iid space is tiny so duplicates are common, MAXSIZE is 1..4 so eviction is
common, and DURATION is 1..3 s with a fake clock so expiry is common. The cron's once-a-second
gate is modelled exactly (the engine starts with its last run at 0 ms).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import hiredis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from headwater.stream.stream import Stream
from tests.unit.conftest import Harness

StreamID = tuple[int, int]
# ("m", iid) for IDMP, ("auto", sorted field/value pairs) for IDMPAUTO.
IidKey = tuple[str, Any]

KEYS = st.sampled_from([b"s", b"t"])
PIDS = st.sampled_from([b"p1", b"p2", b"p3"])
IIDS = st.sampled_from([b"i1", b"i2", b"i3", b"i4", b"i5"])
VALUES = st.sampled_from([b"1", b"2"])
MAXLEN = st.one_of(st.none(), st.integers(0, 4))
PAIRS = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), VALUES), min_size=1, max_size=3)


def fmt(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


def parse(raw: bytes) -> StreamID:
    ms, seq = raw.split(b"-")
    return int(ms), int(seq)


def flat(pairs: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [x for pair in pairs for x in pair]


def as_map(reply: list[Any]) -> dict[bytes, Any]:
    return dict(zip(reply[::2], reply[1::2], strict=True))


@dataclass
class ModelStream:
    duration: int  # seconds
    maxsize: int  # iids per producer
    entries: list[tuple[StreamID, list[bytes]]] = field(default_factory=list)
    last: StreamID = (0, 0)
    producers: dict[bytes, list[tuple[IidKey, StreamID]]] = field(default_factory=dict)
    added: int = 0
    duplicates: int = 0

    def lookup(self, pid: bytes, iid: IidKey) -> StreamID | None:
        for known, sid in self.producers.get(pid, []):
            if known == iid:
                return sid
        return None

    def record(self, pid: bytes, iid: IidKey, sid: StreamID) -> None:
        iids = self.producers.setdefault(pid, [])
        iids.append((iid, sid))
        self.added += 1
        while len(iids) > self.maxsize:
            iids.pop(0)

    def expire(self, cutoff_ms: int) -> None:
        for pid in list(self.producers):
            iids = self.producers[pid]
            while iids and iids[0][1][0] <= cutoff_ms:
                iids.pop(0)
            if not iids:
                del self.producers[pid]

    def tracked(self) -> int:
        return sum(len(iids) for iids in self.producers.values())


class IdmpCommands(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.c = self.h.client()
        self.streams: dict[bytes, ModelStream] = {}
        self.default_duration = 100
        self.default_maxsize = 100
        self.last_cron_ms = 0  # Engine._last_second_ms starts at 0
        self.total_added = 0  # INFO stats, server-wide
        self.total_duplicates = 0
        self.last_idmp: tuple[bytes, list[bytes], list[bytes], IidKey] | None = None

    def call(self, *args: Any) -> Any:
        return self.h.call(self.c, *args)

    # -- configuration -------------------------------------------------------------------------

    @initialize(duration=st.sampled_from([1, 2, 3, 100]), maxsize=st.sampled_from([1, 2, 4, 100]))
    def defaults(self, duration: int, maxsize: int) -> None:
        self.config_set(duration, maxsize)

    @rule(duration=st.integers(1, 3), maxsize=st.integers(1, 4))
    def config_set(self, duration: int, maxsize: int) -> None:
        """New defaults apply to streams created later, never to existing ones."""
        assert self.call("CONFIG", "SET", "stream-idmp-duration", duration) == b"OK"
        assert self.call("CONFIG", "SET", "stream-idmp-maxsize", maxsize) == b"OK"
        self.default_duration, self.default_maxsize = duration, maxsize

    @rule(
        key=KEYS,
        duration=st.one_of(st.none(), st.integers(1, 3), st.sampled_from([0, 86401])),
        maxsize=st.one_of(st.none(), st.integers(1, 4), st.sampled_from([0, 10001])),
        maxsize_first=st.booleans(),
        seed_spelling=st.booleans(),
    )
    def xcfgset(
        self,
        key: bytes,
        duration: int | None,
        maxsize: int | None,
        maxsize_first: bool,
        seed_spelling: bool,
    ) -> None:
        names = (b"DURATION", b"MAXSIZE") if seed_spelling else (b"IDMP-DURATION", b"IDMP-MAXSIZE")
        args: list[Any] = []
        if duration is not None:
            args += [names[0], duration]
        if maxsize is not None:
            args += [names[1], maxsize]
        if maxsize_first and duration is not None and maxsize is not None:
            args = args[2:] + args[:2]
        command = ["XIDMP", "CFGSET"] if seed_spelling else ["XCFGSET"]
        reply = self.call(*command, key, *args)
        m = self.streams.get(key)
        expected_error = None
        if m is None:
            expected_error = "ERR no such key"
        elif not args:
            expected_error = "ERR At least one parameter must be specified"
        else:
            for name, value in zip(args[::2], args[1::2], strict=True):
                if name == names[0] and not 1 <= value <= 86400:
                    expected_error = f"ERR {name.decode()} must be between 1 and 86400 seconds"
                    break
                if name == names[1] and not 1 <= value <= 10000:
                    expected_error = f"ERR {name.decode()} must be between 1 and 10000 entries"
                    break
        if expected_error is not None:
            assert isinstance(reply, hiredis.ReplyError), reply
            if not seed_spelling:  # the seed spelling's texts are Headwater's own
                assert str(reply) == expected_error
            return
        assert reply == b"OK"
        assert m is not None
        changed = (duration is not None and duration != m.duration) or (
            maxsize is not None and maxsize != m.maxsize
        )
        if changed:
            if duration is not None:
                m.duration = duration
            if maxsize is not None:
                m.maxsize = maxsize
            m.producers.clear()  # lifetime counters stay
        cfg = as_map(self.call("XIDMP", "CFGGET", key))
        assert cfg == {b"duration": m.duration, b"maxsize": m.maxsize}

    # -- writes --------------------------------------------------------------------------------

    def _xadd(
        self,
        key: bytes,
        idmp: list[bytes],
        pairs: list[bytes],
        iid: IidKey | None,
        maxlen: int | None,
        trim_first: bool,
    ) -> None:
        trim: list[Any] = [] if maxlen is None else [b"MAXLEN", b"=", maxlen]
        options = trim + idmp if trim_first else idmp + trim
        if idmp and iid is not None:
            self.last_idmp = (key, idmp, pairs, iid)
        reply = self.call("XADD", key, *options, "*", *pairs)
        m = self.streams.get(key)
        if m is None:
            m = self.streams[key] = ModelStream(self.default_duration, self.default_maxsize)
        pid = idmp[1] if idmp else None
        original = m.lookup(pid, iid) if pid is not None and iid is not None else None
        if original is not None:
            # A duplicate: the original ID (even if since deleted), nothing added or trimmed.
            assert reply == fmt(original), (reply, original)
            m.duplicates += 1
            self.total_duplicates += 1
        else:
            now = self.h.clock.now_ms()
            sid = (now, 0) if now > m.last[0] else (m.last[0], m.last[1] + 1)
            assert reply == fmt(sid), (reply, sid)
            m.entries.append((sid, pairs))
            m.last = sid
            if pid is not None and iid is not None:
                m.record(pid, iid, sid)
                self.total_added += 1
            if maxlen is not None:
                m.entries = m.entries[max(len(m.entries) - maxlen, 0) :]
        assert self.call("XLEN", key) == len(m.entries)
        self._check_info_stats()

    @rule(
        key=KEYS,
        pid=PIDS,
        iid=IIDS,
        value=VALUES,
        maxlen=MAXLEN,
        trim_first=st.booleans(),
    )
    def xadd_idmp(
        self, key: bytes, pid: bytes, iid: bytes, value: bytes, maxlen: int | None, trim_first: bool
    ) -> None:
        # The fields are not compared: a retry with another value is still a duplicate.
        self._xadd(key, [b"IDMP", pid, iid], [b"f", value], ("m", iid), maxlen, trim_first)

    @rule(
        key=KEYS,
        pid=PIDS,
        pairs=PAIRS,
        maxlen=MAXLEN,
        trim_first=st.booleans(),
        data=st.data(),
    )
    def xadd_idmpauto(
        self,
        key: bytes,
        pid: bytes,
        pairs: list[tuple[bytes, bytes]],
        maxlen: int | None,
        trim_first: bool,
        data: st.DataObject,
    ) -> None:
        """The iid is the multiset of field/value pairs: order never matters, names do."""
        sent = data.draw(st.permutations(pairs))
        iid = ("auto", tuple(sorted(Counter(pairs).elements())))
        self._xadd(key, [b"IDMPAUTO", pid], flat(sent), iid, maxlen, trim_first)

    @rule(maxlen=MAXLEN, data=st.data())
    def retry_last(self, maxlen: int | None, data: st.DataObject) -> None:
        """Resend the last IDMP/IDMPAUTO XADD, as a producer does after a lost reply (with the
        fields in any order)."""
        if self.last_idmp is None:
            return
        key, idmp, pairs, iid = self.last_idmp
        sent = data.draw(st.permutations(list(zip(pairs[::2], pairs[1::2], strict=True))))
        self._xadd(key, idmp, flat(sent), iid, maxlen, data.draw(st.booleans()))

    @rule(key=KEYS, value=VALUES, maxlen=MAXLEN)
    def xadd_plain(self, key: bytes, value: bytes, maxlen: int | None) -> None:
        self._xadd(key, [], [b"f", value], None, maxlen, False)

    @rule(key=KEYS, pick=st.integers(0, 20))
    def xdel(self, key: bytes, pick: int) -> None:
        m = self.streams.get(key)
        if m is None or not m.entries:
            return
        sid, _ = m.entries.pop(pick % len(m.entries))
        assert self.call("XDEL", key, fmt(sid)) == 1

    @rule(key=KEYS)
    def delete(self, key: bytes) -> None:
        """The stream goes, and its IDMP maps and settings with it."""
        assert self.call("DEL", key) == (1 if key in self.streams else 0)
        self.streams.pop(key, None)

    @rule(key=KEYS, pid=PIDS, iid=IIDS, pick=st.integers(0, 20), bogus=st.booleans())
    def xidmprecord(self, key: bytes, pid: bytes, iid: bytes, pick: int, bogus: bool) -> None:
        m = self.streams.get(key)
        if m is not None and m.entries and not bogus:
            sid = m.entries[pick % len(m.entries)][0]
        else:
            sid = (m.last[0] + 1, 0) if m is not None else (1, 0)  # no such entry
        reply = self.call("XIDMPRECORD", key, pid, iid, fmt(sid))
        if m is None:
            assert str(reply) == "ERR no such key"
            return
        if all(sid != live for live, _ in m.entries):
            assert str(reply) == "ERR No such message in stream"
            return
        known = m.lookup(pid, ("m", iid))
        if known is not None and known != sid:
            assert str(reply) == (
                "ERR IID already exists for this producer with a different stream ID"
            )
            return
        assert reply == b"OK"
        if known is None:
            m.record(pid, ("m", iid), sid)
            self.total_added += 1

    # -- time ----------------------------------------------------------------------------------

    @rule(ms=st.sampled_from([1, 250, 999, 1000, 1001, 2000, 3500]), then_cron=st.booleans())
    def advance(self, ms: int, then_cron: bool) -> None:
        self.h.clock.advance(ms)
        if then_cron:
            self.cron()

    @rule()
    def cron(self) -> None:
        self.h.engine.cron()
        now = self.h.clock.now_ms()
        if now - self.last_cron_ms >= 1000:
            self.last_cron_ms = now
            for m in self.streams.values():
                m.expire(now - m.duration * 1000)

    # -- checks --------------------------------------------------------------------------------

    def _check_info_stats(self) -> None:
        info = self.call("INFO", "stats").decode()
        stats = dict(
            line.split(":", 1) for line in info.splitlines() if line and not line.startswith("#")
        )
        assert int(stats["stream_idmp_iids_added"]) == self.total_added
        assert int(stats["stream_idmp_iids_duplicates"]) == self.total_duplicates

    @invariant()
    def matches_model(self) -> None:
        for key in (b"s", b"t"):
            m = self.streams.get(key)
            stream = self.h.engine.keyspace.dbs[0].get(key)
            if m is None:
                assert stream is None
                continue
            assert isinstance(stream, Stream)
            if stream.idmp is not None:
                stream.idmp.check_invariants(stream.idmp_maxsize)
            info = as_map(self.call("XINFO", "STREAM", key))
            assert info[b"length"] == len(m.entries)
            assert info[b"last-generated-id"] == fmt(m.last)
            assert info[b"idmp-duration"] == m.duration
            assert info[b"idmp-maxsize"] == m.maxsize
            assert info[b"pids-tracked"] == len(m.producers)
            assert info[b"iids-tracked"] == m.tracked()
            assert info[b"iids-added"] == m.added
            assert info[b"iids-duplicates"] == m.duplicates
            if stream.idmp is not None:  # the same (pid, iid) -> ID maps, oldest first
                maps = {
                    pid: list(producer.entries()) for pid, producer in stream.idmp.producers.items()
                }
                assert {pid: [sid for _, sid in v] for pid, v in maps.items()} == {
                    pid: [sid for _, sid in v] for pid, v in m.producers.items()
                }
                for pid, iids in m.producers.items():
                    manual = [iid[1] for iid, _ in iids if iid[0] == "m"]
                    assert manual == [iid for iid, _ in maps[pid] if len(iid) != 16]


IdmpCommands.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_idmp_commands = IdmpCommands.TestCase
