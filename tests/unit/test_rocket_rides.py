"""Rocket Rides (issue #7, UNIFIED-LOG.md): the pipeline's parts without Spark, against a real
Headwater process and the application database (SQLite always; PostgreSQL when reachable).

Each test states one promise of the spec: invalid input changes nothing, a double-sent batch is
harmless, a consumer crash neither loses nor double-counts, trimming never passes the slowest
checkpoint, and the reconciliation stays exact over a trimmed stream (archive + what is left).
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
from examples.rocket_rides import streamer as streamer_module
from examples.rocket_rides.api import InvalidRide, parse_ride, serve
from examples.rocket_rides.consumers import GroupReader, PlainConsumer, apply_records
from examples.rocket_rides.faults import Faults, InjectedCrash
from examples.rocket_rides.log import (
    RideRecord,
    ensure_stream,
    kept_checkpoint,
    parse_entry,
    stream_info,
)
from examples.rocket_rides.money import format_cents, to_cents
from examples.rocket_rides.reconcile import (
    EMPTY,
    Archive,
    Summary,
    archive_below,
    archive_from_fields,
    archive_to_fields,
    combine,
    read_all,
    read_archive,
    reconcile_in_python,
    summarize_log,
    summarize_records,
    summarize_retained_in_python,
)
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


def test_streamer_counts_a_trim_that_passed_a_checkpoint(
    conn: db.Connection, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check after every trim: silent while trim_threshold holds, loud when it does not."""
    slow = PlainConsumer("slow", conn, r, batch_size=150)
    counters = Counters()
    streamer = Streamer(conn, r, counters=counters, batch_size=100, max_length=10)
    add_rides(conn, [100] * 300)
    drain(streamer)
    slow.run_once()  # stops at ride 150
    add_rides(conn, [100] * 100)
    drain(streamer)
    assert counters.get("trims") >= 1 and counters.get("trims_past_checkpoint") == 0

    def ignores_the_floor(r: redis.Redis, key: str, *_: object) -> str:
        return str(r.xrevrange(key, "+", "-", count=1)[0][0].decode())  # the newest entry

    monkeypatch.setattr(streamer_module, "trim_threshold", ignores_the_floor)
    add_rides(conn, [100] * 300)
    drain(streamer)
    assert counters.get("trims_past_checkpoint") >= 1


def test_kept_checkpoint_reads_the_first_live_entry() -> None:
    assert kept_checkpoint("9-0", "5-0", removed=4)
    assert kept_checkpoint("10-0", "10-0", removed=9)  # the checkpoint entry itself stays
    assert not kept_checkpoint("10-0", "11-0", removed=10)  # "10-0" < "9-0" as text: not here
    assert not kept_checkpoint("10-0", None, removed=10)  # everything went
    assert kept_checkpoint("0-0", "1-0", removed=0)  # nothing trimmed: nothing lost


# -- the archive: reconciling a trimmed stream ------------------------------------------------


def records(*ride_ids: int) -> list[RideRecord]:
    """One entry per ride id (ms = position), a ride's distance = its id in whole units."""
    return [RideRecord(f"{i + 1}-0", ride, ride * 100) for i, ride in enumerate(ride_ids)]


def test_combine_equals_one_summary_of_both_parts_at_every_split() -> None:
    """A re-sent ride (3) and a late duplicate (2): split anywhere, the parts add up exactly."""
    log = records(1, 2, 3, 3, 4, 2, 5, 6)
    whole = summarize_records(log)
    assert (whole.rows, whole.distinct_rides, whole.total_cents, whole.last_ride_id) == (
        8,
        6,
        2_100,
        6,
    )
    for cut in range(len(log) + 1):
        earlier = summarize_records(log[:cut])
        later = summarize_records(log[cut:], after_ride_id=earlier.last_ride_id or 0)
        assert combine(earlier, later) == whole, f"split before entry {cut}"
    assert combine(EMPTY, whole) == whole == combine(whole, EMPTY)


def test_archive_fields_round_trip() -> None:
    full = Archive("12-3", summarize_records(records(1, 2, 2)))
    assert archive_from_fields(archive_to_fields(full)) == full
    empty = Archive("0-0", EMPTY)
    assert archive_from_fields(archive_to_fields(empty)) == empty
    assert archive_from_fields({}) == empty  # no hash yet


def test_archive_and_trim_keep_the_reconciliation_exact(
    conn: db.Connection, r: redis.Redis
) -> None:
    """1,500 rides through a stream trimmed to ~250: the total still comes out to the cent.

    (250 is not a multiple of the node size, so ``~`` leaves archived entries in the stream.)
    """
    consumer = PlainConsumer("c", conn, r)
    streamer = Streamer(conn, r, batch_size=100, max_length=250, idle_trim_every=0)
    cents = [to_cents(f"{i}.{i % 100:02d}") for i in range(1, 1_501)]
    for start in range(0, 1_500, 100):
        add_rides(conn, cents[start : start + 100])
        drain(streamer)
        drain(consumer)
    drain(streamer)  # an idle round trims up to the consumer's final checkpoint
    info = stream_info(r, STREAM)
    assert info.entries_added == 1_500 and info.length < 400  # the stream really shrank
    assert summarize_records(read_all(r)).total_cents < sum(cents)  # it alone is not enough

    result = reconcile_in_python(r, [db.consumer_state(conn, "c")])
    assert (result["total_cents"], result["last_ride_id"], result["disagreeing"]) == (
        sum(cents),
        1_500,
        [],
    )
    archive = read_archive(r)
    retained = len(r.xrange(STREAM, archive.upto, "+"))
    assert info.length > retained  # archived entries that ~ left in place ...
    assert (result["entries"], result["duplicates"]) == (1_500, 0)  # ... are not read twice
    assert result["archived_entries"] == archive.summary.rows == 1_500 - retained


def test_a_crash_between_archiving_and_trimming_counts_nothing_twice(
    conn: db.Connection, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive's HSET went through, the XADDs that carry the trim never did."""
    consumer = PlainConsumer("c", conn, r)
    streamer = Streamer(conn, r, batch_size=100, max_length=100, idle_trim_every=0)
    add_rides(conn, [100] * 300)
    drain(streamer)
    drain(consumer)
    add_rides(conn, [200] * 100)

    def crash(*_: object) -> None:
        raise InjectedCrash("after the archive's HSET, before the XADDs")

    monkeypatch.setattr(streamer, "send", crash)
    with pytest.raises(InjectedCrash):
        streamer.run_once()
    archived = read_archive(r)
    assert archived.summary.rows == 299 and stream_info(r, STREAM).length == 300
    # Rides 1..299 are archived *and* still in the stream: counted once, from the archive.
    assert (reconcile_in_python(r, [])["total_cents"], reconcile_in_python(r, [])["entries"]) == (
        30_000,
        300,
    )
    assert archive_below(r, STREAM, archived.upto) == archived  # archiving again adds nothing

    monkeypatch.undo()  # the restarted streamer archives on from upto, and trims
    drain(streamer)
    drain(consumer)
    drain(streamer)  # an idle round: the archive moves one entry up, past ride 300
    assert read_archive(r).summary.rows == 300 and stream_info(r, STREAM).length < 400
    result = reconcile_in_python(r, [db.consumer_state(conn, "c")])
    assert (result["total_cents"], result["entries"], result["disagreeing"]) == (50_000, 400, [])


def test_the_reconciliation_reads_again_when_a_trim_slips_in(
    conn: db.Connection, r: redis.Redis
) -> None:
    """A trim between reading the archive and reading the stream would lose entries."""
    consumer = PlainConsumer("c", conn, r)
    add_rides(conn, [100] * 300)
    drain(Streamer(conn, r))
    drain(consumer)
    checkpoint = db.consumer_state(conn, "c").last_stream_id
    in_python = summarize_retained_in_python(r, STREAM)
    reads: list[str] = []

    def archive_and_trim_first(archive: Archive) -> Summary:
        if not reads:  # what the streamer might do just then
            archive_below(r, STREAM, checkpoint)
            r.xtrim(STREAM, minid=checkpoint, approximate=True)
        reads.append(archive.upto)
        return in_python(archive)

    archive, summary = summarize_log(r, STREAM, archive_and_trim_first)
    assert reads == ["0-0", checkpoint] and archive.upto == checkpoint
    assert (summary.total_cents, summary.last_ride_id, summary.rows) == (30_000, 300, 300)


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
        max_length=1_000,
        first_entry_id="1-0",
        archived_upto="0-0",
        archived_entries=0,
        reconciled_entries=2,
        trims=0,
        trims_past_checkpoint=0,
    )


def test_report_passes_only_when_everyone_agrees_to_the_cent() -> None:
    assert outcome(400).ok
    assert not outcome(401).ok
    text = table(outcome(401))
    assert "| spark (Spark Structured Streaming)" in text and "NO |" in text
    assert "duplicates prevented by IDMP" in text


def trimmed_outcome(**changes: object) -> Outcome:
    """3,000 rides, MAXLEN ~ 1,000: 1,900 entries trimmed, consumers at ride 3,000 (ID 3000-0)."""
    o = outcome(400)
    o.expected = db.RideTotals(3_000, 400, 3_000)
    o.states = [state(n, "3000-0", 3_000, 400) for n in ("consumer-0", "spark")]
    o.reconciled_last_ride_id = o.rides_sent = 3_000
    o.stream_length, o.entries_added, o.reconciled_entries = 1_100, 3_000, 3_000
    o.first_entry_id, o.archived_upto, o.archived_entries, o.trims = "1901-0", "1950-0", 1_949, 30
    for name, value in changes.items():
        setattr(o, name, value)
    return o


def facts(text: str) -> dict[str, str]:
    """The table's fact rows (two cells) as {label: value}."""
    rows = [[c.strip() for c in line[1:-1].split("|")] for line in text.splitlines()]
    return {cells[0]: cells[1] for cells in rows if len(cells) == 2}


def test_report_shows_trimming_and_fails_when_it_went_wrong() -> None:
    o = trimmed_outcome()
    assert o.ok and o.removed == 1_900
    shown = facts(table(o))
    assert "removed by trimming 1,900" in shown["entries in the stream"]
    assert shown["trimming (MAXLEN ~ 1,000)"] == (
        "yes: 30 trims, 0 past a checkpoint; archive below 1950-0"
    )
    assert shown["first entry <= every checkpoint"] == (
        "yes: 1901-0 <= 3000-0 (slowest: consumer-0)"
    )
    assert shown["reconciliation read each entry once"] == (
        "yes: 1,949 archived + 1,051 from the stream = 3,000 of 3,000 added"
    )

    past = trimmed_outcome(states=[state("spark", "1900-0", 3_000, 400)])
    assert not past.ok
    assert facts(table(past))["first entry <= every checkpoint"] == (
        "NO: 1901-0 <= 1900-0 (slowest: spark)"
    )
    mid_run = trimmed_outcome(trims_past_checkpoint=1)  # seen by the streamer after a trim
    assert not mid_run.ok
    assert facts(table(mid_run))["trimming (MAXLEN ~ 1,000)"].startswith("NO: 30 trims, 1 past")
    never = trimmed_outcome(stream_length=3_000, first_entry_id="1-0")
    assert not never.ok
    assert facts(table(never))["trimming (MAXLEN ~ 1,000)"].startswith("NO: ")
    assert trimmed_outcome(stream_length=3_000, rides_sent=1_100).trimmed_as_expected  # one node
    assert not trimmed_outcome(reconciled_entries=3_049).ok  # archived entries read twice


def test_sqlite_urls() -> None:
    assert db.sqlite_path("sqlite:////tmp/x.db") == "/tmp/x.db"
    assert db.sqlite_path("sqlite:///x.db") == "x.db"
    assert db.sqlite_path("/tmp/y.db") == "/tmp/y.db"
    assert not db.Database("/tmp/y.db").postgres
    assert db.Database("postgresql://u@h/d").postgres
