"""An RDB written by several processes (``server/rdb_parts.py``, issue 35): the same keys,
values and expiries as one writer's file, a file redis-check-rdb accepts, and no helper's
file left behind, whether the helpers succeed or one fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from headwater.config import Config
from headwater.keyspace import Keyspace
from headwater.ops.dump import Limits, dump_payload
from headwater.persistence.rdb_load import load_rdb
from headwater.persistence.rdb_write import write_rdb
from headwater.server.rdb_parts import HelperFailed, share_path, write_rdb_parallel, writers_for
from tests.unit.conftest import Harness

NOW_MS = 1_700_000_000_000


def filled() -> Harness:
    """Every type in three databases, some keys with a TTL, a stream with a group."""
    h = Harness()
    c = h.client()
    for db in (0, 3, 9):
        h.call(c, "SELECT", db)
        for i in range(40):
            h.call(c, "SET", f"s{i}", f"v{i}" * (i % 7))
            h.call(c, "HSET", f"h{i}", *[f"f{k}" for k in range(i % 5 + 1) for _ in (0, 1)])
            h.call(c, "RPUSH", f"l{i}", *range(i % 9 + 1))
            h.call(c, "SADD", f"set{i}", *range(i % 6 + 1))
            h.call(c, "ZADD", f"z{i}", *[w for k in range(i % 4 + 1) for w in (k * 1.5, f"m{k}")])
            h.call(c, "XADD", f"x{i}", f"{i + 1}-1", "f", i)
            if i % 3 == 0:
                h.call(c, "PEXPIREAT", f"s{i}", NOW_MS + 60_000 + i)
        h.call(c, "XGROUP", "CREATE", "x5", "g", "0")
        h.call(c, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "x5", ">")
    return h


def contents(path: Path) -> dict[tuple[int, bytes], tuple[bytes, int]]:
    """Each key of the file: its DUMP payload and expiry."""
    keyspace = Keyspace(16)
    load_rdb(path.read_bytes(), keyspace, Limits.of(Config()), NOW_MS)
    return {
        (db.index, key): (dump_payload(value), db.expires.get(key, -1))
        for db in keyspace.dbs
        for key, value in db.data.items()
    }


@pytest.mark.parametrize("writers", [2, 3, 4])
def test_several_writers_write_what_one_writes(tmp_path: Path, writers: int) -> None:
    h = filled()
    dbs = h.engine.keyspace.dbs
    one = tmp_path / "one.rdb"
    with open(one, "wb") as f:
        write_rdb(f.write, dbs, [], NOW_MS)
    many = tmp_path / "many.rdb"
    with open(many, "wb") as f:
        write_rdb_parallel(f, dbs, [], {"repl-offset": "7"}, writers, many, NOW_MS)
    want = contents(one)
    assert len(want) == 3 * 6 * 40 and sum(ttl > 0 for _, ttl in want.values()) == 3 * 14
    assert contents(many) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.rdb", "one.rdb"]
    checker = shutil.which("redis-check-rdb")
    if checker is not None:
        done = subprocess.run([checker, str(many)], capture_output=True, text=True, check=False)
        assert done.returncode == 0 and "RDB looks OK" in done.stdout, done.stdout


def test_a_failed_helper_fails_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    """A value no writer can encode, in the last share: its helper fails, and so does the
    whole file (the replica is told the sync failed), with no helper's file left."""
    h = filled()
    dbs = h.engine.keyspace.dbs
    dbs[9].data[b"zz-unencodable"] = object()  # (the last key of the last database)
    path = tmp_path / "many.rdb"
    with open(path, "wb") as f, pytest.raises(HelperFailed, match=r"many\.rdb\.part2"):
        write_rdb_parallel(f, dbs, [], {}, 3, path)
    assert not share_path(path, 1).exists() and not share_path(path, 2).exists()


def test_writers_grow_with_keys_and_stop_at_the_cores() -> None:
    assert writers_for(0) == 1
    assert writers_for(19_999) == 1
    assert 1 <= writers_for(10_000_000) <= 4
