"""FLUSHDB and FLUSHALL against redis-server 7.0: the changes they count, and FLUSHALL's save.

Redis 7 counts one change per key a flush removes (none on an empty keyspace; the flush is
propagated all the same), and FLUSHALL with save rules configured saves the emptied dataset
at once (flushAllDataAndResetRDB), so a restart does not bring the flushed keys back and
``rdb_changes_since_last_save`` is 0 after it (Redis's other unit: "FLUSHALL should reset the
dirty counter to 0 if we enable save").
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from tests.helpers import RawClient, ServerProcess, start_headwater, start_redis


def _changes(client: RawClient) -> int:
    text = client.call("INFO", "persistence").decode()
    fields = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
    return int(fields["rdb_changes_since_last_save"])


def _flush_counts(server: ServerProcess) -> list[int]:
    """rdb_changes_since_last_save after each step, without save rules."""
    client = RawClient(server.port)
    try:
        client.call("CONFIG", "SET", "save", "")
        steps = [
            ("MSET", "a", "1", "b", "2", "c", "3"),
            ("FLUSHDB",),
            ("FLUSHDB",),
            ("SET", "a", "1"),
            ("SELECT", "1"),
            ("SET", "b", "1"),
            ("FLUSHALL",),
            ("FLUSHALL", "SYNC"),
            ("FLUSHDB", "ASYNC"),
        ]
        counts = []
        for step in steps:
            client.call(*step)
            counts.append(_changes(client))
        return counts
    finally:
        client.close()


def _both(measure: Callable[[ServerProcess], object]) -> tuple[object, object]:
    ours, theirs = start_headwater("--appendonly", "no"), start_redis()
    try:
        return measure(ours), measure(theirs)
    finally:
        ours.stop()
        theirs.stop()


def test_a_flush_counts_the_keys_it_removes_as_redis() -> None:
    ours, theirs = _both(_flush_counts)
    assert ours == theirs


def _flushall_with_save_rules(server: ServerProcess) -> tuple[int, int, bytes]:
    """FLUSHALL with save rules: the changes counted after it; then, after a crash (no save
    at shutdown) and a restart on the same directory, the number of keys and a key's value."""
    client = RawClient(server.port)
    try:
        client.call("SET", "kept", "before")
        client.call("SAVE")
        client.call("CONFIG", "SET", "save", "3600 1")
        client.call("SET", "gone", "x")
        client.call("FLUSHALL")
        after_flush = _changes(client)
    finally:
        client.close()
    server.proc.kill()
    server.proc.wait()
    restart = start_headwater if "hw-" in server.workdir else start_redis
    again = restart("--appendonly", "no", "--dir", server.workdir)
    client = RawClient(again.port)
    try:
        keys = client.call("DBSIZE")
        return after_flush, int(keys[1:-2]), client.call("GET", "kept")
    finally:
        client.close()
        again.proc.kill()
        again.proc.wait()
        shutil.rmtree(again.workdir, ignore_errors=True)


def test_flushall_with_save_rules_saves_the_empty_dataset_as_redis() -> None:
    ours, theirs = _both(_flushall_with_save_rules)
    assert theirs == (0, 0, b"$-1\r\n")
    assert ours == theirs
