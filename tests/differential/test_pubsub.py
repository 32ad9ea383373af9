"""Pub/Sub and MONITOR, byte for byte against redis-server 7.0: what every connection
receives after each step (confirmations, messages, push frames, errors, monitor lines with
their time and address masked)."""

from __future__ import annotations

import pytest

from tests.differential.pubsub_session import Step, transcript, words
from tests.helpers import ServerProcess


def _steps(*lines: str) -> list[Step]:
    """``"sub: SUBSCRIBE a b"`` → the step on connection ``sub``."""
    steps: list[Step] = []
    for line in lines:
        name, _, command = line.partition(": ")
        steps.append((name, words(command)))
    return steps


SCENARIOS: dict[str, tuple[list[str], list[Step]]] = {
    "resp2_subscribed_mode": (
        ["sub", "pub"],
        _steps(
            "sub: SUBSCRIBE a b",
            "sub: GET x",
            "sub: PING",
            "sub: PING hi",
            "sub: PING a b",
            "sub: HELLO 3",
            "sub: CLIENT ID",
            "sub: MULTI",
            "sub: FOO",
            "sub: SUBSCRIBE",
            "sub: UNSUBSCRIBE c",
            "sub: PUNSUBSCRIBE",
            "sub: PSUBSCRIBE h*llo",
            "sub: SSUBSCRIBE x",
            "sub: SUBSCRIBE a",
            "pub: PUBLISH a m1",
            "pub: PUBLISH hello m2",
            "pub: PUBLISH nobody m",
            "pub: SPUBLISH x m3",
            "pub: SPUBLISH a m",
            "pub: PUBSUB NUMSUB a b c",
            "pub: PUBSUB NUMSUB",
            "pub: PUBSUB NUMPAT",
            "pub: PUBSUB CHANNELS a",
            "pub: PUBSUB CHANNELS [a]*",
            "pub: PUBSUB SHARDCHANNELS",
            "pub: PUBSUB SHARDCHANNELS y*",
            "pub: PUBSUB SHARDNUMSUB x y",
            "pub: PUBSUB FOO",
            "pub: PUBSUB CHANNELS a b",
            "pub: PUBSUB NUMPAT x",
            "pub: PUBSUB",
            "sub: UNSUBSCRIBE b",
            "sub: UNSUBSCRIBE",
            "sub: PUNSUBSCRIBE",
            "sub: SUNSUBSCRIBE",
            "sub: GET x",
            "sub: UNSUBSCRIBE",
            "sub: SUNSUBSCRIBE",
            "pub: PUBSUB NUMPAT",
            "pub: PUBLISH a m4",
        ),
    ),
    "resp3_push_frames": (
        ["sub", "pub"],
        _steps(
            "sub: SUBSCRIBE a",
            "sub: PSUBSCRIBE *",
            "sub: SSUBSCRIBE s",
            "pub: PUBLISH a m1",
            "pub: SPUBLISH s m2",
            "sub: GET x",
            "sub: PING",
            "sub: PING hi",
            "sub: SET x 1",
            "sub: GET x",
            "sub: UNSUBSCRIBE a",
            "sub: UNSUBSCRIBE",
            "sub: PUNSUBSCRIBE",
            "sub: SUNSUBSCRIBE s",
            "sub: SUNSUBSCRIBE",
            "pub: PUBLISH a m3",
        ),
    ),
    "reset_and_quit_end_subscriptions": (
        ["sub", "pub", "other"],
        _steps(
            "sub: SUBSCRIBE q",
            "sub: PSUBSCRIBE q*",
            "other: SUBSCRIBE q",
            "pub: PUBLISH q m",
            "sub: RESET",
            "sub: GET x",
            "pub: PUBSUB NUMSUB q",
            "pub: PUBSUB NUMPAT",
            "pub: PUBLISH q m",
            "other: QUIT",
            "pub: PUBSUB NUMSUB q",
            "pub: PUBLISH q m",
        ),
    ),
    "back_to_resp2_while_subscribed": (
        ["sub", "pub"],
        _steps(
            "sub: SUBSCRIBE a",
            "sub: PING",
            "sub: CLIENT SETNAME x",
            "pub: PUBLISH a m",
        ),
    ),
    "monitor": (
        ["mon", "cli"],
        _steps(
            "mon: MONITOR",
            "cli: SET k v",
            "cli: AUTH a b",
            "cli: AUTH onlypassword",
            "cli: MULTI",
            "cli: SET a b",
            "cli: GET a",
            "cli: EXEC",
            "cli: XADD s 1-1 f v",
            "cli: SELECT 3",
            "cli: XLEN s",
            "cli: CONFIG GET maxclients",
            "cli: CLIENT GETNAME",
            "cli: FOO",
            "cli: GET",
            "cli: PUBLISH ch m",
            "mon: PING",
            "mon: GET k",
            "mon: SET k v",
            "mon: XADD s * f v",
            "mon: PUBLISH ch m",
            "mon: PING x",
            "mon: MONITOR",
            "mon: SUBSCRIBE x",
            "mon: RESET",
            "cli: SET k v2",
            "mon: GET k",
        ),
    ),
}


def _hello3(steps: list[Step]) -> list[Step]:
    """The scenario with its subscriber on RESP3 (HELLO's reply differs: drop it)."""
    return [("sub", ["HELLO", "3", "SETNAME", "x"]), *steps]


def _transcript(server: ServerProcess, name: str) -> list[object]:
    names, steps = SCENARIOS[name]
    if name == "resp3_push_frames":
        got = transcript(server, names, _hello3(steps))
        return got[1:]
    if name == "back_to_resp2_while_subscribed":
        steps = [
            ("sub", ["HELLO", "3"]),
            ("sub", ["SUBSCRIBE", "a"]),
            ("sub", ["HELLO", "2"]),
            *steps,
        ]
        got = transcript(server, names, steps)
        return [got[1], *got[3:]]
    return transcript(server, names, steps)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_same_as_redis(headwater: ServerProcess, redis_server: ServerProcess, name: str) -> None:
    ours = _transcript(headwater, name)
    theirs = _transcript(redis_server, name)
    for got, want in zip(ours, theirs, strict=True):
        assert got == want


def test_pubsub_help_is_redis_text(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    steps = _steps("c: PUBSUB HELP")
    assert transcript(headwater, ["c"], steps) == transcript(redis_server, ["c"], steps)
