"""LATENCY against redis-server 7.0: the replies and errors of every subcommand as bytes
(RESP2 and RESP3) where they do not depend on timing; the events' shapes (LATEST, HISTORY,
GRAPH's sparkline with its numbers masked) after the same DEBUG SLEEPs; and the
histograms: the same commands and calls, and every ``histogram_usec`` bucket one that HDR's
logarithmic iteration names (1, 2, 4, 8, 16, 33, 66 … µs), on both servers.

LATENCY DOCTOR's statistics are Redis's but its advice is Headwater's own (README): only its
presence is compared."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from headwater.commands.latency import bucket_of, highest_equivalent
from tests.differential.harness import argv_of, parse
from tests.helpers import RawClient, ServerProcess

REPLIES = [
    "LATENCY RESET",
    "LATENCY LATEST",
    "LATENCY HISTORY command",
    "LATENCY HISTORY nope",
    "LATENCY GRAPH nope",
    "LATENCY RESET nope other",
    "LATENCY HISTOGRAM blabla",
    "LATENCY HISTOGRAM blabla blabla2",
    "LATENCY HISTOGRAM client|nope",
    "LATENCY HELP",
    "LATENCY HELP xxx",
    "LATENCY HISTORY",
    "LATENCY GRAPH",
    "LATENCY LATEST x",
    "LATENCY DOCTOR x",
    "LATENCY NOPE",
    "LATENCY",
    "CONFIG SET latency-tracking-info-percentiles abc",
    "CONFIG SET latency-tracking-info-percentiles '50 101'",
    "CONFIG SET latency-tracking-info-percentiles -1",
    "CONFIG SET latency-tracking-info-percentiles nan",
    "CONFIG SET latency-tracking maybe",
    "CONFIG SET latency-tracking-info-percentiles '50.5000 99 0'",
    "CONFIG GET latency-tracking-info-percentiles",
    "CONFIG SET latency-tracking-info-percentiles ''",
    "CONFIG GET latency-tracking-info-percentiles",
    "CONFIG SET latency-tracking-info-percentiles '50 99 99.9'",
]


@pytest.fixture
def clients(headwater: ServerProcess, redis_server: ServerProcess) -> Iterator[list[RawClient]]:
    pair = [RawClient(headwater.port), RawClient(redis_server.port)]
    yield pair
    for client in pair:
        client.call("CONFIG", "SET", "latency-monitor-threshold", "0")
        client.call("LATENCY", "RESET")
        client.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_replies_and_errors_are_redis_bytes(clients: list[RawClient], resp: int) -> None:
    outputs = []
    for client in clients:
        client.call("HELLO", str(resp))
        client.call("CONFIG", "SET", "latency-monitor-threshold", "0")
        outputs.append([client.call(*argv_of(command)) for command in REPLIES])
    for command, ours, theirs in zip(REPLIES, *outputs, strict=True):
        assert ours == theirs, f"RESP{resp} {command}: headwater {ours!r} != redis {theirs!r}"


def _events(client: RawClient) -> dict[str, object]:
    client.call("CONFIG", "SET", "latency-monitor-threshold", "20")
    client.call("LATENCY", "RESET")
    client.call("DEBUG", "SLEEP", "0.05")
    time.sleep(1.1)
    client.call("DEBUG", "SLEEP", "0.15")
    client.call("CONFIG", "SET", "latency-monitor-threshold", "0")
    latest = parse(client.call("LATENCY", "LATEST"))
    history = parse(client.call("LATENCY", "HISTORY", "command"))
    graph = parse(client.call("LATENCY", "GRAPH", "command"))
    assert isinstance(latest, list) and isinstance(history, list) and isinstance(graph, bytes)
    [[event, when, last, worst]] = latest
    assert 150 <= last <= worst < 400 and abs(when - time.time()) < 5
    assert [len(sample) for sample in history] == [2, 2]
    assert 50 <= history[0][1] < 150 <= history[1][1]
    assert history[0][0] < history[1][0] == when
    doctor = parse(client.call("LATENCY", "DOCTOR"))
    assert isinstance(doctor, bytes) and b"command" in doctor
    return {"event": event, "graph": re.sub(rb"\d+", b"N", graph)}


def test_events_latest_history_and_graph(clients: list[RawClient]) -> None:
    ours, theirs = (_events(client) for client in clients)
    assert ours == theirs


#: the buckets HDR's logarithmic iteration (from 1024 ns, base 2) reports, in µs
BUCKETS = {highest_equivalent(bucket_of(1024 << k)) // 1000 for k in range(21)}


def _histograms(client: RawClient, sleeps: list[str]) -> dict[bytes, object]:
    client.call("CONFIG", "RESETSTAT")
    client.call("SET", "a", "b")
    client.call("GET", "a")
    client.call("CLIENT", "ID")
    for seconds in sleeps:
        client.call("DEBUG", "SLEEP", seconds)
    value = parse(client.call("LATENCY", "HISTOGRAM", "set", "get", "client", "debug", "nope"))
    assert isinstance(value, list)
    shapes: dict[bytes, object] = {}
    for name, body in zip(value[::2], value[1::2], strict=True):
        calls_key, calls, usec_key, buckets = body
        keys, counts = buckets[::2], buckets[1::2]
        assert set(keys) <= BUCKETS, keys
        assert counts == sorted(counts) and counts[-1] == calls
        shapes[name] = (calls_key, calls, usec_key)
    return shapes


def test_histograms_count_the_same_calls_in_hdr_buckets(clients: list[RawClient]) -> None:
    sleeps = ["0", "0.001", "0.003", "0.01", "0.02"]
    ours, theirs = (_histograms(client, sleeps) for client in clients)
    assert ours == theirs
    assert ours[b"debug"] == (b"calls", len(sleeps), b"histogram_usec")
