"""Pub/Sub, MONITOR and keyspace notifications inside the engine (fake clock): what the
differential tests cannot drive (expiry at a chosen time, replayed commands, the hooked flag)."""

from __future__ import annotations

import re

import pytest

from headwater.commands.monitor import monitor_line, quote
from headwater.commands.redact import redacted
from headwater.glob import compile_glob
from headwater.keyevents import INVALID, flags_string, parse_flags
from tests.unit.conftest import Harness


def _config(h: Harness, c: object, value: str) -> None:
    assert h.call(c, "CONFIG", "SET", "notify-keyspace-events", value) == b"OK"


def test_expired_events_lazy_and_active() -> None:
    h = Harness()
    c, sub = h.client(), h.client()
    _config(h, c, "Ex")
    h.call(sub, "SUBSCRIBE", "__keyevent@0__:expired")
    h.raw(sub)
    h.call(c, "SET", "lazy", "v", "PX", "10")
    h.call(c, "SET", "active", "v", "PX", "10")
    h.clock.advance(20)
    assert h.call(c, "GET", "lazy") is None
    want = b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$%d\r\n%s\r\n"
    assert h.raw(sub) == want % (4, b"lazy")
    h.engine.cron()
    assert h.raw(sub) == want % (6, b"active")


def test_nothing_configured_publishes_nothing_and_hooks_nobody() -> None:
    h = Harness()
    c, sub = h.client(), h.client()
    h.call(sub, "HELLO", "3")
    h.call(sub, "PSUBSCRIBE", "*")
    h.raw(sub)
    h.call(c, "XADD", "s", "*", "f", "v")
    h.call(c, "SET", "k", "v")
    assert h.raw(sub) == b""
    assert not c.hooked and not sub.hooked  # a RESP3 subscriber is not restricted


def test_hooked_follows_monitors_and_subscriptions() -> None:
    h = Harness()
    a, b = h.client(), h.client()
    h.call(a, "SUBSCRIBE", "x")
    assert a.hooked and not b.hooked
    h.call(b, "MONITOR")
    late = h.client()
    assert a.hooked and b.hooked and late.hooked
    h.call(b, "RESET")
    assert a.hooked and not b.hooked and not late.hooked
    h.engine.client_closed(a)
    assert not h.engine.pubsub.channels
    h.engine.pubsub.check_invariants(h.engine.clients.values())


def test_monitor_hides_replayed_and_admin_commands() -> None:
    h = Harness()
    mon, c = h.client(), h.client()
    h.call(mon, "MONITOR")
    h.raw(mon)
    c.replaying = True
    h.call(c, "SET", "k", "v")
    c.replaying = False
    h.call(c, "CONFIG", "GET", "maxclients")
    assert h.raw(mon) == b""
    h.call(c, "SELECT", "2")
    line = h.raw(mon)
    assert re.fullmatch(rb'\+\d+\.\d{6} \[2 127\.0\.0\.1:5000\] "SELECT" "2"\r\n', line)


def test_monitor_quoting_and_redaction() -> None:
    assert quote(b'a"b\\c\x01\n\r\t\x07\x08\xff ') == b'"a\\"b\\\\c\\x01\\n\\r\\t\\a\\b\\xff "'
    assert redacted([b"AUTH", b"u", b"p"]) == [b"AUTH", b"(redacted)", b"(redacted)"]
    hello = [b"HELLO", b"3", b"auth", b"u", b"p", b"SETNAME", b"n"]
    assert redacted(hello) == [
        b"HELLO",
        b"3",
        b"auth",
        b"(redacted)",
        b"(redacted)",
        b"SETNAME",
        b"n",
    ]
    assert redacted([b"HELLO", b"3", b"SETNAME", b"auth"]) == [b"HELLO", b"3", b"SETNAME", b"auth"]
    r = b"(redacted)"
    assert redacted([b"ACL", b"SETUSER", b"u", b"on", b">p"]) == [b"ACL", b"SETUSER", r, r, r]
    assert redacted([b"acl", b"getuser", b"u", b"x"]) == [b"acl", b"getuser", r, b"x"]
    assert redacted([b"ACL", b"DELUSER", b"u", b"v"]) == [b"ACL", b"DELUSER", r, r]
    assert redacted([b"ACL", b"WHOAMI", b"x"]) == [b"ACL", b"WHOAMI", b"x"]
    setting = [b"CONFIG", b"SET", b"maxmemory", b"1", b"MasterAuth", b"s"]
    assert redacted(setting) == [b"CONFIG", b"SET", b"maxmemory", b"1", b"MasterAuth", r]
    h = Harness()
    c = h.client()
    assert monitor_line(c, [b"GET", b"k"], 1_700_000_000_000_042) == (
        b'+1700000000.000042 [0 127.0.0.1:5000] "GET" "k"\r\n'
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [("", ""), ("KEA", "AKE"), ("Kn", "nK"), ("KAn", "AK"), ("mEtgK", "gtKEm"), ("x$E", "$xE")],
)
def test_notify_flags_normalised(text: str, shown: str) -> None:
    assert flags_string(parse_flags(text)) == shown


def test_notify_flags_invalid() -> None:
    with pytest.raises(ValueError, match=re.escape(INVALID)):
        parse_flags("KEQ")


def test_info_counts_channels_patterns_and_subscribers() -> None:
    h = Harness()
    a, b = h.client(), h.client()
    h.call(a, "SUBSCRIBE", "x", "y")
    h.call(b, "HELLO", "3")
    h.call(b, "PSUBSCRIBE", "p*")
    h.call(b, "SSUBSCRIBE", "s")
    info = h.call(b, "INFO")
    fields = dict(line.split(":", 1) for line in info.decode().splitlines() if ":" in line)
    assert fields["pubsub_clients"] == "2"
    assert fields["pubsub_channels"] == "2"
    assert fields["pubsub_patterns"] == "1"
    assert fields["pubsubshard_channels"] == "1"


def test_always_events_wait_for_the_effect_they_show() -> None:
    """appendfsync always: a subscriber's output waits for the effect behind each event
    (its ``seen_seq``, which the durability policy compares with what is on disk)."""
    h = Harness()
    h.engine.replies_wait_for_disk = True
    c, sub = h.client(), h.client()
    _config(h, c, "Etx")
    h.call(sub, "PSUBSCRIBE", "__keyevent@0__:*")
    h.call(c, "XADD", "s", "1-1", "f", "v")
    assert sub.seen_seq == h.engine.effect_seq > 0
    assert h.effects[-1][1][0] == b"XADD"
    h.call(c, "SET", "k", "v", "PX", "5")
    h.clock.advance(10)
    h.engine.cron()
    assert h.effects[-1][1] == [b"DEL", b"k"]
    assert sub.seen_seq == h.engine.effect_seq
    reader = h.client()
    h.call(reader, "XLEN", "s")
    h.call(reader, "PUBLISH", "__keyevent@0__:x", "m")  # it read: its message waits as well
    assert sub.seen_seq == reader.seen_seq == h.engine.effect_seq


def test_always_monitor_lines_wait_for_the_write_they_show() -> None:
    h = Harness()
    h.engine.replies_wait_for_disk = True
    mon, c = h.client(), h.client()
    h.call(mon, "MONITOR")
    h.call(c, "XADD", "s", "1-1", "f", "v")
    assert mon.seen_seq == c.effect_seq == h.engine.effect_seq > 0


def test_many_patterns_are_not_compiled_again_on_every_publish() -> None:
    """More patterns than the glob module's cache holds (256): each PUBLISH compiled every
    pattern again (1000 patterns: 120 ms a PUBLISH)."""
    h = Harness()
    sub, pub = h.client(), h.client()
    h.call(sub, "PSUBSCRIBE", *[f"p{i}:*" for i in range(300)])
    assert h.call(pub, "PUBLISH", "p7:x", "m") == 1
    before = compile_glob.cache_info().misses
    assert h.call(pub, "PUBLISH", "p299:x", "m") == 1
    assert compile_glob.cache_info().misses == before
    h.call(sub, "PUNSUBSCRIBE")
    h.call(sub, "PSUBSCRIBE", "q*")
    assert h.call(pub, "PUBLISH", "q", "m") == 1
    assert set(h.engine.pubsub.matchers) == {b"q*"}  # those of patterns gone are forgotten


def test_new_event_for_a_key_that_had_expired() -> None:
    h = Harness()
    c, sub = h.client(), h.client()
    _config(h, c, "En")
    h.call(sub, "SUBSCRIBE", "__keyevent@0__:new")
    h.raw(sub)
    h.call(c, "SET", "k", "v", "PX", "5")
    h.call(c, "SET", "k", "v2")  # exists: no event
    h.call(c, "PEXPIRE", "k", "5")
    h.clock.advance(10)
    h.call(c, "SET", "k", "v3")  # had expired (still stored): new again
    new = b"*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:new\r\n$1\r\nk\r\n"
    assert h.raw(sub) == new * 2
