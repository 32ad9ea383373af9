"""The reply gate: one object per client between the transport and the engine."""

from __future__ import annotations

from headwater.commands.context import Client
from headwater.commands.gate import ReplyGate
from tests.unit.conftest import Harness
from tests.unit.test_engine import TEST_COMMANDS


class Transport:
    """What a transport gives the gate: a reply policy and a resume hook, counted."""

    def __init__(self) -> None:
        self.allow = True
        self.asked: list[Client] = []
        self.resumed = 0

    def may_reply(self, c: Client) -> bool:
        self.asked.append(c)
        return self.allow

    def resume(self) -> None:
        self.resumed += 1


def gated_client(h: Harness) -> tuple[Client, Transport]:
    transport = Transport()
    gate = ReplyGate(transport.may_reply, transport.resume)
    c = h.engine.new_client("127.0.0.1:5000", "127.0.0.1:6379", gate)
    return c, transport


def test_the_client_holds_the_gate_it_was_made_with() -> None:
    h = Harness(TEST_COMMANDS)
    gate = ReplyGate()
    c = h.engine.new_client("", "", gate)
    assert c.gate is gate
    assert h.client().gate is not gate  # each client its own


def test_a_client_without_transport_may_always_reply_and_resumes_to_nothing() -> None:
    h = Harness(TEST_COMMANDS)
    c = h.client()
    assert c.gate.may_reply(c)
    assert c.gate.blocked is None and not c.gate.paused
    c.gate.resume()  # nothing to do, nothing raised


def test_may_reply_asks_the_transports_policy() -> None:
    h = Harness(TEST_COMMANDS)
    c, transport = gated_client(h)
    assert c.gate.may_reply(c)
    transport.allow = False
    assert not c.gate.may_reply(c)
    assert transport.asked == [c, c]


def test_blocking_sets_the_gate_and_a_served_wait_resumes_the_transport_once() -> None:
    h = Harness(TEST_COMMANDS)
    reader, transport = gated_client(h)
    writer = h.client()
    h.call(reader, "TAKE", "q", "0")
    assert reader.gate.blocked is not None and "b" in reader.flags_string()
    assert transport.resumed == 0
    h.call(writer, "PUT", "q", "one")
    assert reader.gate.blocked is None and transport.resumed == 1
    assert h.raw(reader) == b"$3\r\none\r\n"


def test_a_timed_out_or_unblocked_wait_resumes_the_transport() -> None:
    h = Harness(TEST_COMMANDS)
    reader, transport = gated_client(h)
    h.call(reader, "TAKE", "q", "100")
    h.scheduler.advance(100)
    assert reader.gate.blocked is None and transport.resumed == 1
    h.call(reader, "TAKE", "q", "0")
    assert h.engine.unblock_client(reader, error=True)
    assert reader.gate.blocked is None and transport.resumed == 2


def test_a_closed_client_leaves_no_waiter_behind() -> None:
    h = Harness(TEST_COMMANDS)
    reader, transport = gated_client(h)
    h.call(reader, "TAKE", "q", "0")
    h.engine.client_closed(reader)
    assert reader.gate.blocked is None and h.engine.blocked_count == 0
    assert transport.resumed == 0  # nobody to resume
