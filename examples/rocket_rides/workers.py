"""Each pipeline component as its own OS process: ``python -m rocket_rides.workers ROLE …``.

The demo starts one process per component (API, streamer, two plain consumers, the group
reader, the Spark consumer), as a real deployment would, so they use both cores and a crash in
one never touches another. Inside a worker, :func:`supervise` is the restart policy: a crash
(injected, or a lost connection to Headwater or the database) throws the component away with its
connections and builds a new one, which resumes from what was committed.

SIGTERM (or SIGINT) stops a worker cleanly. The Spark worker also reads commands on stdin:
``reconcile`` stops its streaming query, runs the reconciliation job and writes its result.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import redis

from . import db
from .api import serve
from .consumers import GroupReader, PlainConsumer
from .faults import Faults, InjectedCrash
from .log import connect
from .status import Counters
from .streamer import DEFAULT_MAX_LENGTH, Streamer

IDLE_S = 0.05  # pause after a round that found nothing to do


class Component(Protocol):
    def run_once(self) -> int: ...


def supervise(
    build: Callable[[int], tuple[Component, Callable[[], None]]],
    counters: Counters,
    stop: threading.Event,
) -> None:
    """Run ``build(incarnation)``'s component round after round until ``stop``.

    ``build`` returns the component and a function that closes its connections. Injected
    crashes count as ``crashes``; lost connections as ``reconnects`` (with a short back-off).
    """
    incarnation = 0
    while not stop.is_set():
        close: Callable[[], None] = lambda: None  # noqa: E731 - replaced once build() succeeds
        try:
            component, close = build(incarnation)
            while not stop.is_set():
                if component.run_once() == 0:
                    stop.wait(IDLE_S)
        except InjectedCrash:
            counters.bump("crashes")
        except Exception as exc:
            if not is_retryable(exc):
                raise  # a bug: let the worker die, the demo reports its log
            counters.bump("reconnects")
            print(f"retrying after {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            stop.wait(0.5)
        finally:
            close()
        incarnation += 1


def is_retryable(exc: BaseException) -> bool:
    """Headwater unreachable (killed, restarting, loading) or the database busy or gone."""
    return isinstance(exc, redis.ConnectionError | redis.TimeoutError) or db.is_transient(exc)


def _faults(args: argparse.Namespace, salt: int) -> Faults:
    return Faults.demo(args.seed * 1000 + salt) if args.faults else Faults.none()


def _closer(conn: db.Connection, r: redis.Redis) -> Callable[[], None]:
    def close() -> None:
        conn.close()
        r.close()

    return close


def run_streamer(args: argparse.Namespace, counters: Counters, stop: threading.Event) -> None:
    database, faults = db.Database(args.database), _faults(args, 1)

    def build(_: int) -> tuple[Component, Callable[[], None]]:
        conn, r = database.connect(), connect(args.redis_url)
        close = _closer(conn, r)
        try:
            streamer = Streamer(
                conn, r, faults=faults, counters=counters, max_length=args.max_length
            )
        except BaseException:
            close()
            raise
        return streamer, close

    supervise(build, counters, stop)


def run_consumer(args: argparse.Namespace, counters: Counters, stop: threading.Event) -> None:
    database, faults = db.Database(args.database), _faults(args, 2 + sum(map(ord, args.name)))

    def build(incarnation: int) -> tuple[Component, Callable[[], None]]:
        conn, r = database.connect(), connect(args.redis_url)
        close = _closer(conn, r)
        try:
            if args.role == "group-reader":
                reader = GroupReader(
                    args.name, conn, r, incarnation=incarnation, faults=faults, counters=counters
                )
                return reader, close
            return PlainConsumer(args.name, conn, r, faults=faults, counters=counters), close
        except BaseException:
            close()
            raise

    supervise(build, counters, stop)


def run_api(args: argparse.Namespace, counters: Counters, stop: threading.Event) -> None:
    server = serve(db.Database(args.database), port=args.port)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2})
    thread.start()
    counters.bump("ready")
    stop.wait()
    server.shutdown()
    thread.join()
    server.server_close()


def run_spark(args: argparse.Namespace, counters: Counters, stop: threading.Event) -> None:
    """The Spark consumer; on ``reconcile`` (stdin) it stops and runs the reconciliation."""
    from .spark_jobs import SparkConsumer, build_session, reconcile

    spark = build_session(f"rocket-rides-{args.name}")
    database = db.Database(args.database)
    conn = database.connect()
    requested = threading.Event()
    threading.Thread(target=_read_commands, args=(stop, requested), daemon=True).start()
    consumer = SparkConsumer(
        args.name,
        conn,
        spark,
        args.redis_url,
        Path(args.checkpoint_dir),
        faults=_faults(args, 3),
        counters=counters,
    )
    counters.bump("ready")
    try:
        consumer.warm_up()
        consumer.run(stop)
        if requested.is_set():
            result = reconcile(spark, args.redis_url, db.consumer_states(conn))
            tmp = Path(args.result_file).with_suffix(".tmp")
            tmp.write_text(result.to_json())
            tmp.replace(args.result_file)  # the demo polls for the file: never half of it
    finally:
        conn.close()
        spark.stop()


def _read_commands(stop: threading.Event, requested: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "reconcile":
            requested.set()
            stop.set()
    stop.set()  # stdin closed: the demo is gone, stop too


ROLES: dict[str, Callable[[argparse.Namespace, Counters, threading.Event], None]] = {
    "api": run_api,
    "streamer": run_streamer,
    "consumer": run_consumer,
    "group-reader": run_consumer,
    "spark": run_spark,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m rocket_rides.workers")
    p.add_argument("role", choices=sorted(ROLES))
    p.add_argument("--name", required=True)
    p.add_argument("--database", required=True)
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--status-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--faults", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--port", type=int, default=0, help="api: the HTTP port")
    p.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH, help="streamer: MAXLEN ~")
    p.add_argument("--checkpoint-dir", default="spark-checkpoint", help="spark: its checkpoint")
    p.add_argument("--result-file", default="reconciliation.json", help="spark: the result")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    counters = Counters(args.status_dir / f"{args.name}.json")
    started = time.monotonic()
    with contextlib.suppress(KeyboardInterrupt):
        ROLES[args.role](args, counters, stop)
    print(f"{args.name}: stopped after {time.monotonic() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
