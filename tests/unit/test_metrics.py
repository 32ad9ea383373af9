"""/metrics (server/metrics.py) read back with Prometheus's own parser: every stream, group
and consumer series says what XINFO says (hypothesis drives the streams), the INFO figures
and per-command counts are INFO's, scraping changes no statistic, the streams described are
bounded by metrics-max-streams (the longest first), and odd names survive as labels."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from headwater.server import metrics
from headwater.server.metrics import observer, render_metrics
from tests.unit.conftest import Harness

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(h: Harness) -> Samples:
    text = render_metrics(h.engine, observer(h.engine))
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, f"{key} twice"
            samples[key] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def pairs(reply: list[Any]) -> dict[bytes, Any]:
    return dict(zip(reply[::2], reply[1::2], strict=True))


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(["s1", "s2"]), st.integers(1, 5)),
        st.tuples(st.just("group"), st.sampled_from(["s1", "s2"]), st.sampled_from(["g1", "g2"])),
        st.tuples(
            st.just("read"),
            st.sampled_from(["s1", "s2"]),
            st.sampled_from(["g1", "g2"]),
            st.sampled_from(["alice", "bob"]),
        ),
        st.tuples(st.just("ack"), st.sampled_from(["s1", "s2"]), st.sampled_from(["g1", "g2"])),
        st.tuples(st.just("tick"), st.integers(1, 5000)),
    ),
    max_size=40,
)


def _apply(h: Harness, c: Any, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "add":
        for _ in range(op[2]):
            h.call(c, "XADD", op[1], "*", "f", "v")
    elif kind == "group":
        h.call(c, "XGROUP", "CREATE", op[1], op[2], "0", "MKSTREAM")
    elif kind == "read":
        h.call(c, "XREADGROUP", "GROUP", op[2], op[3], "COUNT", "2", "STREAMS", op[1], ">")
    elif kind == "ack":
        pending = h.call(c, "XPENDING", op[1], op[2], "-", "+", "1")
        if isinstance(pending, list) and pending:
            h.call(c, "XACK", op[1], op[2], pending[0][0])
    else:
        h.clock.advance(op[1])


def _counted(h: Harness, c: Any) -> list[str]:
    """What a scrape must not move: the keyspace's hits and misses, expired keys, and every
    command's counts but INFO's own."""
    text = h.call(c, "INFO", "stats", "commandstats").decode()
    watched = ("keyspace_hits", "keyspace_misses", "expired_keys", "cmdstat_")
    lines = [line for line in text.split("\r\n") if line.startswith(watched)]
    return [line for line in lines if not line.startswith("cmdstat_info:")]


@settings(max_examples=60, deadline=None)
@given(ops)
def test_stream_series_say_what_xinfo_says(script: list[tuple[Any, ...]]) -> None:
    h = Harness()
    c = h.client()
    for op in script:
        _apply(h, c, op)
    h.engine.keyspace.now_ms = h.clock.now_ms()
    before = _counted(h, c)
    samples = scrape(h)
    assert _counted(h, c) == before  # (scraping counted nothing)
    for key in (b"s1", b"s2"):
        if not h.call(c, "EXISTS", key):
            continue
        stream = {"db": "db0", "stream": key.decode()}
        info = pairs(h.call(c, "XINFO", "STREAM", key))
        assert value(samples, "redis_stream_length", **stream) == info[b"length"]
        assert value(samples, "redis_stream_groups", **stream) == info[b"groups"]
        last_ms = int(info[b"last-generated-id"].split(b"-")[0])
        assert value(samples, "redis_stream_last_generated_id", **stream) == last_ms
        for group in map(pairs, h.call(c, "XINFO", "GROUPS", key)):
            labels = {**stream, "group": group[b"name"].decode()}
            assert (
                value(samples, "redis_stream_group_messages_pending", **labels) == group[b"pending"]
            )
            assert value(samples, "redis_stream_group_consumers", **labels) == group[b"consumers"]
            assert value(samples, "redis_stream_group_lag", **labels) == group[b"lag"]
            for consumer in map(pairs, h.call(c, "XINFO", "CONSUMERS", key, group[b"name"])):
                of = {**labels, "consumer": consumer[b"name"].decode()}
                pending = value(samples, "redis_stream_group_consumer_messages_pending", **of)
                assert pending == consumer[b"pending"]
                idle = value(samples, "redis_stream_group_consumer_idle_seconds", **of)
                assert idle == consumer[b"idle"] / 1e3


def test_info_figures_and_command_counts_are_infos() -> None:
    h = Harness()
    c = h.client()
    for i in range(3):
        h.call(c, "SET", f"k{i}", "v")
    h.call(c, "GET", "k0")
    h.call(c, "GET", "missing")
    h.call(c, "PEXPIRE", "k1", "100000")
    samples = scrape(h)
    stats = h.call(c, "INFO", "all").decode()
    fields = dict(
        line.split(":", 1) for line in stats.split("\r\n") if line and not line.startswith("#")
    )
    assert value(samples, "redis_keyspace_hits_total") == int(fields["keyspace_hits"])
    assert value(samples, "redis_keyspace_misses_total") == int(fields["keyspace_misses"])
    assert value(samples, "redis_db_keys", db="db0") == 3
    assert value(samples, "redis_db_keys_expiring", db="db0") == 1
    assert value(samples, "redis_commands_total", cmd="set") == 3
    assert value(samples, "redis_commands_total", cmd="get") == 2
    assert value(samples, "redis_up") == 1
    instance = [key for key in samples if key[0] == "redis_instance_info"]
    assert dict(instance[0][1])["redis_version"] == fields["redis_version"]


def test_the_longest_streams_are_described_up_to_the_limit() -> None:
    h = Harness()
    c = h.client()
    for n, key in enumerate(["a", "b", "c", "d", "e"], start=1):
        for _ in range(n):
            h.call(c, "XADD", key, "*", "f", "v")
    h.call(c, "CONFIG", "SET", "metrics-max-streams", "2")
    samples = scrape(h)
    described = {
        dict(labels)["stream"] for name, labels in samples if name == "redis_stream_length"
    }
    assert described == {"d", "e"}
    assert value(samples, "headwater_metrics_streams_omitted") == 3
    assert value(samples, "headwater_streams") == 5


def test_odd_names_survive_as_labels() -> None:
    h = Harness()
    c = h.client()
    name = b'we"ird\\na\nme\xff'
    h.call(c, "XADD", name, "*", "f", "v")
    h.call(c, "XGROUP", "CREATE", name, 'g"1', "0")
    samples = scrape(h)
    shown = name.decode("utf-8", "backslashreplace")
    assert value(samples, "redis_stream_length", db="db0", stream=shown) == 1
    assert value(samples, "redis_stream_group_lag", db="db0", stream=shown, group='g"1') == 1


def test_a_scrape_goes_in_steps_and_leaves_out_a_stream_deleted_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics, "KEYS_A_STEP", 4)
    monkeypatch.setattr(metrics, "STREAMS_A_STEP", 1)
    h = Harness()
    c = h.client()
    for i in range(10):
        h.call(c, "SET", f"k{i}", "v")
    for key in ("s1", "s2", "s3"):
        h.call(c, "XADD", key, "*", "f", "v")
    scrape = metrics.Scrape(h.engine, metrics.observer(h.engine))
    steps = 0
    while scrape.step():
        steps += 1
        if steps == 4:  # (13 keys looked at 4 a step, then the choice: s2 goes now)
            h.call(c, "DEL", "s2")
    assert steps >= 6
    families = {f.name: f for f in text_string_to_metric_families(scrape.text())}
    described = {s.labels["stream"] for s in families["redis_stream_length"].samples}
    assert described == {"s1", "s3"}
    assert families["headwater_streams"].samples[0].value == 3
