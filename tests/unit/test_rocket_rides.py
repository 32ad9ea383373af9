"""Rocket Rides (issue #7, UNIFIED-LOG.md): the pipeline's parts without Spark, against a real
Headwater process and the application database (SQLite always; PostgreSQL when reachable).

Each test states one promise of the spec: invalid input changes nothing, a double-sent batch is
harmless, a consumer crash neither loses nor double-counts, trimming never passes the slowest
checkpoint.
"""

from __future__ import annotations

import http.client
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from examples.rocket_rides import db
from examples.rocket_rides.api import InvalidRide, parse_ride, serve
from examples.rocket_rides.consumers import GroupReader, PlainConsumer, apply_records
from examples.rocket_rides.faults import Faults, InjectedCrash
from examples.rocket_rides.log import RideRecord, ensure_stream, parse_entry, stream_info
from examples.rocket_rides.money import format_cents, to_cents
from examples.rocket_rides.reconcile import read_all, reconcile_in_python, summarize_records
from examples.rocket_rides.report import Outcome, table
from examples.rocket_rides.status import Counters
from examples.rocket_rides.streamer import Streamer

from tests.helpers import ServerProcess, start_headwater

STREAM = "rocket-rides-log"
PG_URL = os.environ.get("HEADWATER_TEST_PG_URL", "postgresql://postgres@localhost/postgres")


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    proc = start_headwater()
    yield proc
    proc.stop()


@pytest.fixture
def r(server: ServerProcess) -> Iterator[redis.Redis]:
    client = redis.Redis(port=server.port)
    client.flushall()
    yield client
    client.close()


def _postgres_reason() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when a server answers."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"PostgreSQL not reachable at {PG_URL} (set HEADWATER_TEST_PG_URL): {first_line}"
    return None


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[db.Database]:
    """A fresh application database: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        database = db.Database(f"sqlite:///{tmp_path / 'rides.db'}")
        database.create_schema(reset=True)
        yield database
        return
    reason = _postgres_reason()
    if reason is not None:
        pytest.skip(reason)
    database = db.Database(PG_URL, pg_schema=f"rocket_rides_test_{uuid.uuid4().hex[:12]}")
    database.create_schema(reset=True)
    yield database
    database.drop_pg_schema()


@pytest.fixture
def conn(database: db.Database) -> Iterator[db.Connection]:
    connection = database.connect()
    yield connection
    connection.close()


def add_rides(conn: db.Connection, cents: list[int]) -> None:
    for amount in cents:
        db.insert_ride(conn, amount)


def drain(component: PlainConsumer | GroupReader | Streamer) -> int:
    """Run rounds until one finds nothing to do; the number of rounds that did something."""
    rounds = 0
    while component.run_once():
        rounds += 1
    return rounds


def stream_rides(r: redis.Redis) -> list[RideRecord]:
    return [parse_entry(e) for e in r.xrange(STREAM)]


def always(value: bool) -> Iterator[bool]:
    while True:
        yield value


# -- money and parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cents"),
    [("456.7", 45670), ("0.01", 1), ("539.836923415231", 53984), ("0.125", 12), ("0.135", 14)],
)
def test_distances_round_half_even_to_the_cent(text: str, cents: int) -> None:
    assert to_cents(text) == cents


def test_cents_format_exactly() -> None:
    assert [format_cents(c) for c in (45670, 1, 100, -250)] == ["456.70", "0.01", "1.00", "-2.50"]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[456.7]",
        b"{}",
        b'{"distance": "456.7"}',
        b'{"distance": true}',
        b'{"distance": null}',
        b'{"distance": -1}',
        b'{"distance": 0}',
        b'{"distance": 0.004}',
        b'{"distance": NaN}',
        b'{"distance": Infinity}',
        b'{"distance": 1e300}',
        b'{"distance": 5, "pilot": "ada"}',
    ],
)
def test_parse_ride_refuses_invalid_bodies(body: bytes) -> None:
    with pytest.raises(InvalidRide):
        parse_ride(body)


def test_parse_ride_never_goes_through_a_float() -> None:
    assert parse_ride(b'{"distance": 0.29}') == 29  # float(0.29) * 100 == 28.999999999999996
    assert parse_ride(b'{"distance": 1000000}') == 100_000_000


# -- API --------------------------------------------------------------------------------------


@pytest.fixture
def api(database: db.Database) -> Iterator[int]:
    import threading

    httpd = serve(database)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    thread.join()
    httpd.server_close()


def post(port: int, body: bytes, path: str = "/rides") -> tuple[int, dict[str, object]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_api_creates_ride_and_staged_record_in_one_transaction(
    api: int, conn: db.Connection
) -> None:
    status, reply = post(api, b'{"distance": 456.7}')
    assert status == 201
    assert reply == {"ride": {"id": 1, "distance": 456.7}}
    assert db.ride_totals(conn) == db.RideTotals(rides=1, total_cents=45670, last_ride_id=1)
    (staged,) = db.staged_batch(conn, 10)
    assert (staged.action, staged.object, staged.data) == (
        "create",
        "ride",
        {"id": 1, "distance": "456.70"},
    )


def test_api_invalid_input_gets_422_and_changes_nothing(api: int, conn: db.Connection) -> None:
    for body in (b'{"distance": -3}', b'{"distance": "far"}', b"{", b'{"distance": 1, "x": 2}'):
        status, reply = post(api, body)
        assert status == 422, body
        assert isinstance(reply["error"], str) and reply["error"]
    assert db.ride_totals(conn).rides == 0
    assert db.count_staged(conn) == 0


def test_api_wrong_path_is_404(api: int) -> None:
    assert post(api, b'{"distance": 1}', "/ride")[0] == 404


# -- streamer ---------------------------------------------------------------------------------


def test_streamer_moves_staged_records_in_id_order(conn: db.Connection, r: redis.Redis) -> None:
    add_rides(conn, [100, 200, 300])
    streamer = Streamer(conn, r, batch_size=2)
    assert drain(streamer) == 2
    assert [(e.ride_id, e.cents) for e in stream_rides(r)] == [(1, 100), (2, 200), (3, 300)]
    assert db.count_staged(conn) == 0


def test_streamer_widens_the_idmp_window_before_the_first_entry(r: redis.Redis) -> None:
    ensure_stream(r, STREAM)
    info = stream_info(r, STREAM)
    assert (info.length, info.idmp_duration, info.idmp_maxsize) == (0, 86_400, 10_000)


def test_streamer_double_send_is_harmless_thanks_to_idmp(
    conn: db.Connection, r: redis.Redis
) -> None:
    """Every batch sent twice (the article's double-send at 100%): no entry appears twice."""
    add_rides(conn, list(range(1, 1_501)))
    counters = Counters()
    streamer = Streamer(conn, r, faults=Faults(script=always(True)), counters=counters)
    drain(streamer)
    assert counters.get("double_sent_batches") == 2
    assert [e.ride_id for e in stream_rides(r)] == list(range(1, 1_501))
    assert stream_info(r, STREAM).iids_duplicates == 1_500


def test_streamer_crash_after_sending_resends_without_duplicates(
    conn: db.Connection, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Confirmed by Headwater but not deleted (crash before commit): the retry adds nothing."""
    add_rides(conn, [10, 20, 30])
    streamer = Streamer(conn, r)
    real_delete = db.delete_staged

    def crash(*_: object) -> None:
        raise InjectedCrash("before deleting the staged records")

    monkeypatch.setattr(db, "delete_staged", crash)
    with pytest.raises(InjectedCrash):
        streamer.run_once()
    assert db.count_staged(conn) == 3  # rolled back: still staged
    assert len(stream_rides(r)) == 3  # but already in the stream
    monkeypatch.setattr(db, "delete_staged", real_delete)
    drain(streamer)
    assert [e.ride_id for e in stream_rides(r)] == [1, 2, 3]
    assert db.count_staged(conn) == 0


# -- consumers --------------------------------------------------------------------------------


def state(
    name: str = "c", stream_id: str = "0-0", ride: int = 0, total: int = 0
) -> db.ConsumerState:
    return db.ConsumerState(name, stream_id, ride, total)


def test_apply_records_skips_ride_ids_already_consumed_but_moves_the_checkpoint() -> None:
    records = [RideRecord("5-0", 1, 100), RideRecord("6-0", 2, 200), RideRecord("7-0", 1, 100)]
    applied = apply_records(state(), records)
    assert (applied.consumed, applied.skipped) == (2, 1)
    assert applied.state == state(stream_id="7-0", ride=2, total=300)


def run_until_caught_up(make: type[PlainConsumer] | type[GroupReader], **kw: object) -> int:
    """Restart the consumer after every injected crash, as the demo's supervisor does."""
    crashes = 0
    incarnation = 0
    while True:
        extra = {"incarnation": incarnation} if make is GroupReader else {}
        consumer = make(**kw, **extra)  # type: ignore[arg-type]
        try:
            drain(consumer)
            return crashes
        except InjectedCrash:
            crashes += 1
            incarnation += 1


@pytest.mark.parametrize("kind", [PlainConsumer, GroupReader])
def test_consumer_crash_before_commit_neither_loses_nor_double_counts(
    kind: type[PlainConsumer] | type[GroupReader], conn: db.Connection, r: redis.Redis
) -> None:
    cents = [to_cents(f"{i}.{i % 100:02d}") for i in range(1, 1_201)]
    add_rides(conn, cents)
    drain(Streamer(conn, r))
    script = iter([False, True, True, False, True, False, False, True] * 10)
    crashes = run_until_caught_up(
        kind, name="c", conn=conn, r=r, faults=Faults(script=script), batch_size=100
    )
    assert crashes >= 4
    final = db.consumer_state(conn, "c")
    assert (final.total_cents, final.last_ride_id) == (sum(cents), 1_200)


def test_consumer_skips_duplicate_entries_that_bypassed_idmp(
    conn: db.Connection, r: redis.Redis
) -> None:
    """Without IDMP (say, its window expired) a re-sent batch is in the stream twice."""
    add_rides(conn, [100, 200, 300])
    for ride_id, cents in [(1, 100), (2, 200), (1, 100), (2, 200), (3, 300)]:
        r.xadd(
            STREAM, {"action": "create", "object": "ride", "id": ride_id, "distance": cents / 100}
        )
    counters = Counters()
    drain(PlainConsumer("c", conn, r, counters=counters))
    final = db.consumer_state(conn, "c")
    assert (final.total_cents, final.last_ride_id, counters.get("skipped_duplicates")) == (
        600,
        3,
        2,
    )


def test_group_reader_acks_everything_and_forgets_dead_members(
    conn: db.Connection, r: redis.Redis
) -> None:
    add_rides(conn, [1_000] * 300)
    drain(Streamer(conn, r))
    script = iter([True])  # the first batch crashes before its commit: left pending
    crashes = run_until_caught_up(
        GroupReader, name="g", conn=conn, r=r, faults=Faults(script=script), batch_size=100
    )
    assert crashes == 1
    assert r.xpending(STREAM, "rocket-rides-readers")["pending"] == 0
    members = [m["name"] for m in r.xinfo_consumers(STREAM, "rocket-rides-readers")]
    assert members == [b"g-1"]
    assert db.consumer_state(conn, "g").total_cents == 300_000


# -- trimming ---------------------------------------------------------------------------------


def test_trimming_never_passes_the_slowest_checkpoint(conn: db.Connection, r: redis.Redis) -> None:
    """MAXLEN ~ 200 is the target, but a consumer that stopped at ride 450 holds the rest."""
    fast, slow = PlainConsumer("fast", conn, r), PlainConsumer("slow", conn, r, batch_size=450)
    streamer = Streamer(conn, r, batch_size=100, max_length=200)
    add_rides(conn, [100] * 500)
    drain(streamer)
    slow.run_once()  # reads rides 1..450 and stops there
    for _ in range(10):
        add_rides(conn, [100] * 100)
        drain(streamer)
        drain(fast)
    slow_cp = db.consumer_state(conn, "slow").last_stream_id
    remaining = r.xrange(STREAM, f"({slow_cp}", "+")
    assert len(remaining) == 1_500 - 450  # nothing unread by "slow" was removed
    assert stream_info(r, STREAM).length < 1_500  # but trimming did happen below it
    drain(slow)
    assert db.consumer_state(conn, "slow").total_cents == 150_000


def test_no_trimming_while_a_registered_consumer_has_read_nothing(
    conn: db.Connection, r: redis.Redis
) -> None:
    PlainConsumer("idle", conn, r)
    add_rides(conn, [100] * 300)
    drain(Streamer(conn, r, batch_size=100, max_length=10))
    assert stream_info(r, STREAM).length == 300


# -- reconciliation and report ----------------------------------------------------------------


def test_reconciliation_counts_each_ride_once_and_names_who_disagrees(
    conn: db.Connection, r: redis.Redis
) -> None:
    add_rides(conn, [150, 250])
    drain(Streamer(conn, r))
    r.xadd(STREAM, {"id": 2, "distance": "2.50"})  # a duplicate that slipped through
    good, bad = state("good", ride=2, total=400), state("bad", ride=2, total=650)
    result = reconcile_in_python(r, [good, bad])
    assert result["total_cents"] == 400 and result["last_ride_id"] == 2
    assert (result["entries"], result["duplicates"], result["disagreeing"]) == (3, 1, ["bad"])
    assert summarize_records(read_all(r), after_ride_id=1).total_cents == 250


def outcome(total: int) -> Outcome:
    return Outcome(
        expected=db.RideTotals(2, 400, 2),
        states=[state("consumer-0", ride=2, total=400), state("spark", ride=2, total=total)],
        crashes={"consumer-0": 3},
        reconciliation_label="reconciliation",
        reconciled_total_cents=400,
        reconciled_last_ride_id=2,
        reconciled_disagreeing=[],
        stream_length=2,
        entries_added=2,
        stream_duplicates=0,
        idmp_duplicates=5,
        double_sent_batches=1,
        resent_records=5,
        server_kills=0,
        reconnects=0,
        refused=4,
        invalid_sent=4,
        rides_sent=2,
    )


def test_report_passes_only_when_everyone_agrees_to_the_cent() -> None:
    assert outcome(400).ok
    assert not outcome(401).ok
    text = table(outcome(401))
    assert "| spark (Spark Structured Streaming)" in text and "NO |" in text
    assert "duplicates prevented by IDMP" in text


def test_sqlite_urls() -> None:
    assert db.sqlite_path("sqlite:////tmp/x.db") == "/tmp/x.db"
    assert db.sqlite_path("sqlite:///x.db") == "x.db"
    assert db.sqlite_path("/tmp/y.db") == "/tmp/y.db"
    assert not db.Database("/tmp/y.db").postgres
    assert db.Database("postgresql://u@h/d").postgres
