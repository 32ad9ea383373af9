"""The application database: SQLite by default, PostgreSQL by URL, one schema for both.

Tables (amounts are integer cents, see ``money.py``):

    rides               (id, distance_cents, created_at)
    staged_log_records  (id, action, object, data)          -- the transactional outbox
    checkpoints         (name, last_stream_id, last_ride_id)
    consumer_states     (name, total_distance_cents, query_id, last_batch_id)

``query_id``/``last_batch_id`` are the Spark consumer's idempotence record (the micro-batch its
total includes); plain consumers leave them NULL.

Theory of operation
-------------------
Ids must become visible in id order: a consumer skips every ride id at or below the last one it
consumed, so a ride that committed *after* a higher id was streamed would be skipped forever.
SQLite has one writer at a time (``BEGIN IMMEDIATE``), so this holds by construction; on
PostgreSQL a sequence hands out ids outside the transaction, so the API takes a transaction-level
advisory lock before inserting (:func:`insert_ride`). Ids never repeat either (``AUTOINCREMENT``,
``BIGSERIAL``): the streamer's idempotence key is the staged record's id.

A :class:`Connection` hides the two drivers' differences (placeholders, ``BEGIN`` flavours) and
runs in autocommit mode with explicit transactions, so every transaction is visible in the code.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .log import stream_id_key
from .money import format_cents

TxKind = Literal["write", "snapshot"]
PG_SCHEMA = "rocket_rides"
ADVISORY_LOCK_RIDES = 7_171_717  # any constant: the API's "one ride at a time" lock on PostgreSQL

SQLITE_DDL = (
    """CREATE TABLE IF NOT EXISTS rides (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        distance_cents INTEGER NOT NULL CHECK (distance_cents > 0),
        created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS staged_log_records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        action TEXT NOT NULL,
        object TEXT NOT NULL,
        data TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS checkpoints (
        name TEXT PRIMARY KEY,
        last_stream_id TEXT NOT NULL,
        last_ride_id INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS consumer_states (
        name TEXT PRIMARY KEY,
        total_distance_cents INTEGER NOT NULL,
        query_id TEXT,
        last_batch_id INTEGER)""",
)

PG_DDL = (
    """CREATE TABLE IF NOT EXISTS rides (
        id BIGSERIAL PRIMARY KEY,
        distance_cents BIGINT NOT NULL CHECK (distance_cents > 0),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now())""",
    """CREATE TABLE IF NOT EXISTS staged_log_records (
        id BIGSERIAL PRIMARY KEY,
        action TEXT NOT NULL,
        object TEXT NOT NULL,
        data JSONB NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS checkpoints (
        name TEXT PRIMARY KEY,
        last_stream_id TEXT NOT NULL,
        last_ride_id BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS consumer_states (
        name TEXT PRIMARY KEY,
        total_distance_cents BIGINT NOT NULL,
        query_id TEXT,
        last_batch_id BIGINT)""",
)

TABLES = ("rides", "staged_log_records", "checkpoints", "consumer_states")


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def sqlite_path(url: str) -> str:
    """``sqlite:///rel/path``, ``sqlite:////abs/path`` (SQLAlchemy's spelling) or a plain path."""
    return url.removeprefix("sqlite:///")


class Connection:
    """One driver connection in autocommit mode; statements use ``?`` placeholders."""

    def __init__(self, raw: Any, postgres: bool) -> None:
        self.raw = raw
        self.postgres = postgres

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        cur = self.raw.execute(self._sql(sql), tuple(params))
        return int(cur.rowcount)

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.raw.execute(self._sql(sql), tuple(params)).fetchall()]

    def row(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        found = self.raw.execute(self._sql(sql), tuple(params)).fetchone()
        return None if found is None else tuple(found)

    @contextlib.contextmanager
    def transaction(self, kind: TxKind = "write") -> Iterator[Connection]:
        """One transaction: ``write`` (SQLite takes the write lock at once) or ``snapshot``
        (PostgreSQL REPEATABLE READ; SQLite's snapshot that may write is the same lock)."""
        if self.postgres:
            begin = "BEGIN ISOLATION LEVEL REPEATABLE READ" if kind == "snapshot" else "BEGIN"
        else:
            begin = "BEGIN IMMEDIATE"
        self.raw.execute(begin)
        try:
            yield self
        except BaseException:
            with contextlib.suppress(Exception):
                self.raw.execute("ROLLBACK")
            raise
        self.raw.execute("COMMIT")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()


class Database:
    """Where the application's tables live: a SQLite file or a PostgreSQL schema."""

    def __init__(self, url: str, *, pg_schema: str = PG_SCHEMA) -> None:
        self.url = url
        self.postgres = is_postgres(url)
        self.pg_schema = pg_schema

    def describe(self) -> str:
        if self.postgres:
            return f"PostgreSQL (schema {self.pg_schema})"
        return f"SQLite ({sqlite_path(self.url)})"

    def connect(self) -> Connection:
        if self.postgres:
            return self._connect_postgres()
        # Handed between threads (the API pool, Spark's callback thread), never shared at once.
        raw = sqlite3.connect(
            sqlite_path(self.url), timeout=60, isolation_level=None, check_same_thread=False
        )
        raw.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
        raw.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives process crashes
        return Connection(raw, postgres=False)

    def _connect_postgres(self) -> Connection:
        import psycopg  # only needed for PostgreSQL URLs (extra headwater[demo])

        raw = psycopg.connect(self.url, autocommit=True)
        raw.execute(f"CREATE SCHEMA IF NOT EXISTS {self.pg_schema}")
        raw.execute(f"SET search_path TO {self.pg_schema}")
        return Connection(raw, postgres=True)

    def create_schema(self, *, reset: bool = False) -> None:
        """Create the tables; ``reset`` drops them first (the demo starts from nothing)."""
        conn = self.connect()
        try:
            if reset:
                for table in TABLES:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
            for ddl in PG_DDL if self.postgres else SQLITE_DDL:
                conn.execute(ddl)
        finally:
            conn.close()

    def drop_pg_schema(self) -> None:
        """Remove the whole PostgreSQL schema (tests clean up after themselves)."""
        conn = self.connect()
        try:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.pg_schema} CASCADE")
        finally:
            conn.close()


def is_transient(exc: BaseException) -> bool:
    """A database error worth a retry: a locked SQLite file, a lost PostgreSQL connection or a
    serialization failure. (SQLite reports bad SQL as OperationalError too: that is a bug, not
    something to retry.)"""
    if isinstance(exc, sqlite3.OperationalError):
        return "locked" in str(exc) or "busy" in str(exc)
    with contextlib.suppress(ImportError):
        import psycopg

        return isinstance(exc, psycopg.OperationalError)
    return False


# ---------------------------------------------------------------------------------------------
# Rides and the staged log records (API and streamer)


@dataclass(frozen=True)
class StagedRecord:
    id: int
    action: str
    object: str
    data: dict[str, Any]


def insert_ride(conn: Connection, cents: int) -> int:
    """Insert a ride and its staged log record in one transaction; the new ride's id."""
    with conn.transaction("write"):
        if conn.postgres:
            conn.row("SELECT pg_advisory_xact_lock(?)", (ADVISORY_LOCK_RIDES,))
        found = conn.row("INSERT INTO rides (distance_cents) VALUES (?) RETURNING id", (cents,))
        assert found is not None
        ride_id = int(found[0])
        data = json.dumps({"id": ride_id, "distance": format_cents(cents)})
        conn.execute(
            "INSERT INTO staged_log_records (action, object, data) VALUES (?, ?, ?)",
            ("create", "ride", data),
        )
    return ride_id


def staged_batch(conn: Connection, limit: int) -> list[StagedRecord]:
    """Up to ``limit`` staged records, oldest first."""
    rows = conn.rows(
        "SELECT id, action, object, data FROM staged_log_records ORDER BY id LIMIT ?", (limit,)
    )
    return [
        StagedRecord(int(i), a, o, json.loads(d) if isinstance(d, str) else dict(d))
        for i, a, o, d in rows
    ]


def delete_staged(conn: Connection, ids: Sequence[int]) -> None:
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        conn.execute(f"DELETE FROM staged_log_records WHERE id IN ({marks})", chunk)


def count_staged(conn: Connection) -> int:
    found = conn.row("SELECT COUNT(*) FROM staged_log_records")
    return int(found[0]) if found else 0


@dataclass(frozen=True)
class RideTotals:
    """The truth, from the rides table: what every consumer must end up with."""

    rides: int
    total_cents: int
    last_ride_id: int


def ride_totals(conn: Connection) -> RideTotals:
    found = conn.row("SELECT COUNT(*), COALESCE(SUM(distance_cents), 0), MAX(id) FROM rides")
    assert found is not None
    return RideTotals(int(found[0]), int(found[1]), int(found[2] or 0))


# ---------------------------------------------------------------------------------------------
# Checkpoints and consumer states (consumers, streamer's trim floor, report)


@dataclass(frozen=True)
class ConsumerState:
    name: str
    last_stream_id: str
    last_ride_id: int
    total_cents: int
    query_id: str | None = None
    last_batch_id: int | None = None


def register_consumer(conn: Connection, name: str) -> None:
    """Create the consumer's checkpoint and state at the stream's start, if they are missing.

    Registering before reading matters: the streamer never trims below a registered checkpoint.
    """
    with conn.transaction("write"):
        if conn.row("SELECT 1 FROM checkpoints WHERE name = ?", (name,)) is None:
            conn.execute(
                "INSERT INTO checkpoints (name, last_stream_id, last_ride_id) VALUES (?, ?, ?)",
                (name, "0-0", 0),
            )
        if conn.row("SELECT 1 FROM consumer_states WHERE name = ?", (name,)) is None:
            conn.execute(
                "INSERT INTO consumer_states (name, total_distance_cents) VALUES (?, ?)", (name, 0)
            )


def consumer_state(conn: Connection, name: str) -> ConsumerState:
    found = conn.row(
        "SELECT c.name, c.last_stream_id, c.last_ride_id, s.total_distance_cents, s.query_id,"
        " s.last_batch_id FROM checkpoints c JOIN consumer_states s ON s.name = c.name"
        " WHERE c.name = ?",
        (name,),
    )
    if found is None:
        raise LookupError(f"consumer {name!r} is not registered")
    return _state(found)


def consumer_states(conn: Connection) -> list[ConsumerState]:
    rows = conn.rows(
        "SELECT c.name, c.last_stream_id, c.last_ride_id, s.total_distance_cents, s.query_id,"
        " s.last_batch_id FROM checkpoints c JOIN consumer_states s ON s.name = c.name"
        " ORDER BY c.name"
    )
    return [_state(r) for r in rows]


def _state(r: tuple[Any, ...]) -> ConsumerState:
    batch = None if r[5] is None else int(r[5])
    return ConsumerState(r[0], r[1], int(r[2]), int(r[3]), r[4], batch)


def save_progress(
    conn: Connection, before: ConsumerState, after: ConsumerState, *, guard: bool = True
) -> None:
    """Write a consumer's new total and checkpoint (inside the caller's transaction).

    With ``guard`` the checkpoint must still be where ``before`` read it: a second copy of the
    same consumer that got there first makes this one fail instead of counting twice.
    """
    changed = conn.execute(
        "UPDATE checkpoints SET last_stream_id = ?, last_ride_id = ? WHERE name = ?"
        + (" AND last_stream_id = ?" if guard else ""),
        (after.last_stream_id, after.last_ride_id, after.name)
        + ((before.last_stream_id,) if guard else ()),
    )
    if changed != 1:
        raise RuntimeError(f"checkpoint of {after.name!r} moved under it; not committing")
    conn.execute(
        "UPDATE consumer_states SET total_distance_cents = ?, query_id = ?, last_batch_id = ?"
        " WHERE name = ?",
        (after.total_cents, after.query_id, after.last_batch_id, after.name),
    )


def oldest_checkpoint(conn: Connection) -> str | None:
    """The smallest ``last_stream_id`` of all registered consumers (None: nobody registered)."""
    ids = [r[0] for r in conn.rows("SELECT last_stream_id FROM checkpoints")]
    return min(ids, key=stream_id_key) if ids else None
