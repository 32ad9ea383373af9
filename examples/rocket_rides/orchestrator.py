"""``demo.py``: run the whole Rocket Rides pipeline once and print the verdict.

Steps: start Headwater (durable defaults, its own directory), create the database tables and
register every consumer's checkpoint, start the workers (API, streamer, consumer-0, consumer-1,
group-reader, Spark), send N rides through the API with a progress bar (optionally kill -9
Headwater half-way and restart it), wait until every consumer has the last ride and the streamer
has trimmed once more, ask the Spark worker to reconcile, print one table, and exit 0 only if
everybody agrees to the cent. Every process started here is stopped on the way out, including on
Ctrl-C and on failure (the run directory is then kept for its logs).

Trimming is part of the demo: the streamer's ``MAXLEN ~`` target defaults to a fifth of the rides
(at least 1,000), so the stream is trimmed again and again while consumers read it and the
reconciliation needs the archive of what was trimmed. Consumers are registered before any ride
flows: the streamer trims below the oldest *registered* checkpoint, and a consumer that
registered late would find the start of the stream gone. The verdict fails if a trim passed a
checkpoint, or if a run with clearly more rides than the target never trimmed at all.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from . import db, load
from .log import STREAM, connect, ensure_stream, stream_info
from .pipeline import Pipeline, free_port
from .report import Outcome, table
from .status import read_counters

MIN_MAX_LENGTH = 1_000  # the default MAXLEN ~ target: max(this, rides // 5)

CONSUMERS = ("consumer-0", "consumer-1", "group-reader")


@dataclass(frozen=True)
class Options:
    rides: int
    database: str | None
    faults: bool
    kill_server: bool
    port: int | None
    seed: int
    spark: bool
    threads: int
    timeout: float
    run_dir: Path | None
    keep_run_dir: bool
    max_length: int


def parse_args(argv: list[str] | None) -> Options:
    p = argparse.ArgumentParser(
        prog="demo.py", description="Rocket Rides: a unified log on Headwater, end to end."
    )
    p.add_argument("--rides", type=int, default=10_000, help="rides to create (default 10000)")
    p.add_argument("--database", help="postgresql://… (default: SQLite in the run directory)")
    p.add_argument("--no-faults", dest="faults", action="store_false", help="no injected faults")
    p.add_argument("--kill-server", action="store_true", help="kill -9 Headwater half-way")
    p.add_argument("--port", type=int, help="Headwater's port (default: a free one)")
    p.add_argument("--seed", type=int, default=7, help="seed for distances and faults")
    p.add_argument("--no-spark", dest="spark", action="store_false", help="skip the Spark parts")
    p.add_argument("--threads", type=int, default=8, help="concurrent HTTP clients")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for catch-up")
    p.add_argument("--run-dir", type=Path, help="where data and logs go (default: a temp dir)")
    p.add_argument("--keep-run-dir", action="store_true", help="keep it even on success")
    p.add_argument(
        "--max-length",
        type=int,
        help=f"the streamer's MAXLEN ~ target (default: max({MIN_MAX_LENGTH}, rides / 5))",
    )
    a = p.parse_args(argv)
    if a.rides < 1:
        p.error("--rides must be at least 1")
    if a.max_length is not None and a.max_length < 1:
        p.error("--max-length must be at least 1")
    max_length = a.max_length or max(MIN_MAX_LENGTH, a.rides // 5)
    return Options(
        a.rides, a.database, a.faults, a.kill_server, a.port, a.seed, a.spark, a.threads,
        a.timeout, a.run_dir, a.keep_run_dir, max_length,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    run_dir = opts.run_dir or Path(tempfile.mkdtemp(prefix="rocket-rides-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    # Ctrl-C and `kill <demo>` both unwind through run()'s cleanup (explicitly installed:
    # a shell that starts the demo in the background would leave SIGINT ignored).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    outcome = "failed"
    try:
        outcome = "ok" if run(opts, run_dir) else "disagreement"
    except KeyboardInterrupt:
        outcome = "interrupted"
        print("\ninterrupted; everything started was stopped", file=sys.stderr)
    except Exception as exc:
        print(f"\ndemo failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        keep = opts.keep_run_dir or outcome in ("failed", "disagreement")
        if keep:
            print(f"run directory (logs, data): {run_dir}", file=sys.stderr)
        elif opts.run_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    return {"ok": 0, "disagreement": 1, "interrupted": 130}.get(outcome, 2)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def run(opts: Options, run_dir: Path) -> bool:
    database = db.Database(opts.database or f"sqlite:///{run_dir / 'rides.db'}")
    database.create_schema(reset=True)
    _register_consumers(database, opts)
    with Pipeline(run_dir, database.url, opts.seed, opts.faults) as pipe:
        pipe.start_server(opts.port or free_port())
        r = connect(pipe.redis_url)  # reconnects by itself after a server restart
        ensure_stream(r)
        _start_workers(pipe, opts)
        print(_banner(opts, database), flush=True)
        pipe.wait_ready(["api"], timeout=60)
        if opts.spark:  # rides flow only once every consumer runs, Spark included
            print("starting Spark (session and a warm-up job: 30-60 s)", flush=True)
            pipe.wait_ready(["spark"], timeout=300, counter="query_starts")
        refused = load.refused_requests(pipe.api_port)
        killer = ServerKiller(pipe, r, opts)
        _drive(pipe, opts, killer)
        _wait_caught_up(pipe, database, opts, killer)
        _wait_for_idle_trim(pipe)
        outcome = _outcome(pipe, database, r, opts, refused, killer)
        print(table(outcome), flush=True)
        return outcome.ok


def _banner(opts: Options, database: db.Database) -> str:
    faults = "on (double-send 10%, crash 10%)" if opts.faults else "off"
    kill = ", Headwater killed -9 half-way" if opts.kill_server else ""
    return (
        f"Rocket Rides: {opts.rides:,} rides, faults {faults}{kill}, {database.describe()},"
        f" stream trimmed to MAXLEN ~ {opts.max_length:,}"
    )


def _register_consumers(database: db.Database, opts: Options) -> None:
    """Every checkpoint exists (at 0-0) before the streamer starts, so it never trims below a
    consumer whose process has not started yet."""
    conn = database.connect()
    try:
        for name in _names(opts):
            db.register_consumer(conn, name)
    finally:
        conn.close()


def _start_workers(pipe: Pipeline, opts: Options) -> None:
    pipe.start_worker("api", "api", "--port", str(pipe.api_port))
    pipe.start_worker("streamer", "streamer", "--max-length", str(opts.max_length))
    for name in CONSUMERS:
        pipe.start_worker("group-reader" if name == "group-reader" else "consumer", name)
    if opts.spark:
        pipe.start_worker(
            "spark",
            "spark",
            "--checkpoint-dir",
            str(pipe.run_dir / "spark-checkpoint"),
            "--result-file",
            str(pipe.run_dir / "reconciliation.json"),
            stdin=True,
        )


class ServerKiller:
    """``--kill-server``: one kill -9 of Headwater once half the rides are in and the Spark
    consumer (if any) has committed a batch, so every consumer is mid-flight when it happens."""

    def __init__(self, pipe: Pipeline, r: redis.Redis, opts: Options) -> None:
        self.pipe = pipe
        self.r = r
        self.armed = opts.kill_server
        self.half = opts.rides // 2
        self.wait_for_spark = opts.spark
        self.kills = 0
        self.earlier_duplicates = 0  # IDMP duplicates counted by servers killed since

    def maybe_kill(self, rides_done: int, say: Callable[[str], None]) -> None:
        if not self.armed or rides_done < self.half:
            return
        if self.wait_for_spark:
            spark = read_counters(self.pipe.status_dir).get("spark", {})
            if not spark.get("batches"):
                return
        self.armed = False
        say("killing Headwater with SIGKILL, then restarting it")
        # iids-duplicates is a counter of the running server, not persisted: keep its count.
        self.earlier_duplicates += stream_info(self.r).iids_duplicates
        self.pipe.kill_server()
        self.pipe.restart_server()
        self.kills += 1


def _drive(pipe: Pipeline, opts: Options, killer: ServerKiller) -> None:
    """Send the rides with a progress bar."""
    from tqdm import tqdm

    with tqdm(total=opts.rides, unit="ride", desc="rides via API", mininterval=0.5) as bar:

        def progress(done: int) -> None:
            bar.update(1)
            if done % 100 == 0:
                killer.maybe_kill(done, bar.write)

        load.drive(pipe.api_port, load.distances(opts.rides, opts.seed), opts.threads, progress)


def _names(opts: Options) -> list[str]:
    return [*CONSUMERS, "spark"] if opts.spark else list(CONSUMERS)


def _wait_caught_up(
    pipe: Pipeline, database: db.Database, opts: Options, killer: ServerKiller
) -> None:
    """Until nothing is staged and every consumer has the last ride (workers must stay up)."""
    from tqdm import tqdm

    conn = database.connect()
    deadline = time.monotonic() + opts.timeout
    try:
        last = db.ride_totals(conn).last_ride_id
        with tqdm(total=last, unit="ride", desc="slowest consumer", mininterval=0.5) as bar:
            while True:
                pipe.check_alive()
                states = {s.name: s.last_ride_id for s in db.consumer_states(conn)}
                slowest = min(states.get(n, 0) for n in _names(opts))
                bar.update(slowest - bar.n)
                bar.set_postfix_str(" ".join(f"{n}={states.get(n, 0)}" for n in _names(opts)))
                killer.maybe_kill(opts.rides, bar.write)
                if slowest >= last and db.count_staged(conn) == 0 and not killer.armed:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"consumers did not catch up in {opts.timeout:.0f}s")
                time.sleep(0.5)
    finally:
        conn.close()


def _wait_for_idle_trim(pipe: Pipeline, timeout: float = 60) -> None:
    """Until the streamer completed an idle trim round that began after the catch-up (the second
    one from now), so the stream is as trimmed as the final checkpoints allow."""

    def rounds() -> int:
        return read_counters(pipe.status_dir).get("streamer", {}).get("idle_trim_rounds", 0)

    target = rounds() + 2
    deadline = time.monotonic() + timeout
    while rounds() < target:
        pipe.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the streamer did not trim while idle in {timeout:.0f}s")
        time.sleep(0.2)


def _outcome(
    pipe: Pipeline,
    database: db.Database,
    r: redis.Redis,
    opts: Options,
    refused: int,
    killer: ServerKiller,
) -> Outcome:
    conn = database.connect()
    try:
        expected, states = db.ride_totals(conn), db.consumer_states(conn)
    finally:
        conn.close()
    recon = _reconcile(pipe, r, opts, states)
    info = stream_info(r, STREAM)
    counters = read_counters(pipe.status_dir)
    crashes = {name: c.get("crashes", 0) for name, c in counters.items()}
    streamer = counters.get("streamer", {})
    return Outcome(
        expected=expected,
        states=[s for s in states if s.name in _names(opts)],
        crashes=crashes,
        reconciliation_label=recon["label"],
        reconciled_total_cents=recon["total_cents"],
        reconciled_last_ride_id=recon["last_ride_id"],
        reconciled_disagreeing=recon["disagreeing"],
        stream_length=info.length,
        entries_added=info.entries_added,
        stream_duplicates=recon["duplicates"],
        idmp_duplicates=killer.earlier_duplicates + info.iids_duplicates,
        resent_records=streamer.get("resent_records", 0),
        double_sent_batches=streamer.get("double_sent_batches", 0),
        server_kills=killer.kills,
        reconnects=sum(
            c.get("reconnects", 0) + c.get("query_failures", 0) for c in counters.values()
        ),
        refused=refused,
        invalid_sent=len(load.INVALID_BODIES),
        rides_sent=opts.rides,
        max_length=opts.max_length,
        first_entry_id=info.first_id,
        archived_upto=recon["archived_upto"],
        archived_entries=recon["archived_entries"],
        reconciled_entries=recon["entries"],
        trims=streamer.get("trims", 0),
        trims_past_checkpoint=streamer.get("trims_past_checkpoint", 0),
    )


def _reconcile(
    pipe: Pipeline, r: redis.Redis, opts: Options, states: list[db.ConsumerState]
) -> dict[str, Any]:
    """The Spark batch job's result (run by the Spark worker), or Python's without Spark."""
    if not opts.spark:
        from .reconcile import reconcile_in_python

        result = reconcile_in_python(r, states)
        return {"label": "reconciliation (Python: archive + stream)", **result}
    result_file = pipe.run_dir / "reconciliation.json"
    pipe.send_command("spark", "reconcile")
    deadline = time.monotonic() + 300
    while not result_file.exists():
        pipe.check_alive(allow_exit=("spark",))
        if time.monotonic() > deadline:
            raise TimeoutError("the Spark reconciliation did not finish in 300s")
        time.sleep(0.5)
    data = json.loads(result_file.read_text())
    return {"label": "reconciliation (Spark batch: archive + stream)", **data}


if __name__ == "__main__":
    sys.exit(main())
