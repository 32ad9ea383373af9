"""``headwater import-rdb``: an RDB file saved by redis-server 7.0 becomes a data directory that
Headwater starts from with the same data (the server converts the RDB at its start, and its
AOF or next save keeps it in Headwater's format); bad files change nothing. Issue 19."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import hiredis
import pytest

from headwater.rdb import listpack
from headwater.rdb.crc64 import crc64
from headwater.rdb.encoding import write_string
from headwater.rdb.objects import write_hash_object
from tests.helpers import (
    HEADWATER,
    ROOT,
    RawClient,
    ServerProcess,
    free_port,
    start_headwater,
    start_redis,
)


def _decode(reply: bytes) -> object:
    reader = hiredis.Reader()
    reader.feed(reply)
    return reader.gets()


@pytest.fixture
def redis() -> Iterator[ServerProcess]:
    server = start_redis()
    yield server
    server.stop()


def _import(rdb: Path, data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HEADWATER, "import-rdb", str(rdb), "--dir", str(data_dir), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def _fill(c: RawClient) -> None:
    c.call("SET", "plain", "hello")
    c.call("SET", "int", 12345)
    c.call("SET", "long", "abc" * 1000)
    c.call("SET", "ttl", "x", "PX", 10**9)
    c.call("HSET", "small", "a", 1, "b", 2)
    c.call("HSET", "big", *[x for i in range(600) for x in (f"f{i}", i)])
    for i in range(300):
        c.call("XADD", "stream", f"{i + 1}-0", "f", i, "g", "v" * (i % 9))
    c.call("XDEL", "stream", "7-0")
    c.call("SADD", "ints", *range(20))
    c.call("SADD", "workers", "w1", "w2")
    c.call("ZADD", "delayed", 1.5, "job1", 3, "job2")
    c.call("ZADD", "ranked", *[x for i in range(200) for x in (i % 13, f"m{i}")])
    c.call("RPUSH", "queue", "a", "b", -7, "x" * 80)
    c.call("RPUSH", "backlog", *[f"job-{i}" for i in range(2000)])
    c.call("XGROUP", "CREATE", "stream", "grp", "0")
    c.call("XREADGROUP", "GROUP", "grp", "alice", "COUNT", 10, "STREAMS", "stream", ">")
    c.call("SELECT", 5)
    c.call("SET", "in-db-5", "yes")
    c.call("SELECT", 0)
    c.call(
        "FUNCTION",
        "LOAD",
        "#!lua name=mylib\nredis.register_function('f', function() return 1 end)",
    )
    c.call("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    c.call("SET", "expired", "x", "PX", 1)


def _state(c: RawClient) -> list[object]:
    """What both servers must agree on."""
    out: list[object] = []
    for args in (
        ("GET", "plain"),
        ("GET", "int"),
        ("GET", "long"),
        ("PEXPIRETIME", "ttl"),
        ("HGETALL", "small"),
        ("HLEN", "big"),
        ("XRANGE", "stream", "-", "+"),
        ("XPENDING", "stream", "grp"),
        ("XINFO", "GROUPS", "stream"),
        ("EXISTS", "expired"),
        ("SMEMBERS", "ints"),
        ("SCARD", "workers"),
        ("SISMEMBER", "workers", "w2"),
        ("ZRANGE", "delayed", 0, -1, "WITHSCORES"),
        ("ZRANGE", "ranked", 0, -1, "WITHSCORES"),
        ("OBJECT", "ENCODING", "ranked"),
        ("LRANGE", "queue", 0, -1),
        ("LRANGE", "backlog", 0, -1),
        ("DUMP", "backlog"),
        ("FCALL", "f", 0),
        ("SELECT", 5),
        ("GET", "in-db-5"),
        ("SELECT", 0),
        ("OBJECT", "ENCODING", "big"),
        ("OBJECT", "ENCODING", "small"),
    ):
        out.append(_decode(c.call(*args)))
    groups = out[8]  # (XINFO GROUPS)
    assert isinstance(groups, list)
    for g in groups:  # Headwater adds fields of newer versions
        if b"nacked-count" in g:
            at = g.index(b"nacked-count")
            del g[at : at + 2]
    return out


def test_import_of_a_redis_dump(redis: ServerProcess, tmp_path: Path) -> None:
    c = RawClient(redis.port)
    try:
        _fill(c)
        assert c.call("SAVE") == b"+OK\r\n"
        want = _state(c)
    finally:
        c.close()
    rdb = Path(redis.workdir) / "dump.rdb"
    data_dir = tmp_path / "data"
    done = _import(rdb, data_dir)
    assert done.returncode == 0, done.stderr
    assert "Redis 7.0" in done.stdout and "checksum good" in done.stdout
    assert (data_dir / "dump.hwsnap").read_bytes() == rdb.read_bytes()  # (put in place)
    # a second import refuses to overwrite; --verify converts every key first and counts
    again = _import(rdb, data_dir)
    assert again.returncode == 1 and "--force" in again.stderr
    verified = _import(rdb, data_dir, "--force", "--verify")
    assert verified.returncode == 0, verified.stderr
    assert "14 keys (db0: 13, db5: 1)" in verified.stdout
    assert "1 expired keys skipped" in verified.stdout
    assert "1 function libraries" in verified.stdout
    # the start converts it (and, appendonly yes, makes it the new AOF's base); a restart
    # then loads the AOF: the same data both times
    for _ in range(2):
        hw = start_headwater("--dir", str(data_dir))
        try:
            ours = RawClient(hw.port)
            got = _state(ours)
            ours.close()
        finally:
            hw.stop()
        assert got == want
    assert (data_dir / "appendonlydir").is_dir()


def test_a_snapshot_only_server_saves_the_import_in_its_own_format(
    redis: ServerProcess, tmp_path: Path
) -> None:
    c = RawClient(redis.port)
    try:
        _fill(c)
        c.call("SAVE")
        want = _state(c)
    finally:
        c.close()
    data_dir = tmp_path / "data"
    assert _import(Path(redis.workdir) / "dump.rdb", data_dir).returncode == 0
    for _ in range(2):  # (converted, saved as Headwater's snapshot; then that one loaded)
        hw = start_headwater("--dir", str(data_dir), "--appendonly", "no")
        try:
            ours = RawClient(hw.port)
            got = _state(ours)
            assert ours.call("SAVE") == b"+OK\r\n"
            ours.close()
        finally:
            hw.stop()
        assert got == want
        assert not (data_dir / "dump.hwsnap").read_bytes().startswith(b"REDIS")


def _with_field_ttls(rdb: bytes) -> bytes:
    """Redis's file with one more key before its end: a Redis 7.4 hash whose field has a TTL
    (RDB_TYPE_HASH_LISTPACK_EX), which Redis 7.0 cannot write."""
    body = bytearray(rdb[:-9])  # (without the EOF opcode and the checksum)
    body += b"\x19"  # type 25
    write_string(body, b"ttl-hash")
    body += (10**13).to_bytes(8, "little")  # the smallest field expiry
    write_string(body, listpack.encode([b"f", b"v", 10**13]))
    record = bytearray()  # and one as a large hash (RDB_TYPE_HASH_METADATA), as DUMP writes it
    write_hash_object(record, [(b"a", b"1"), (b"b", b"2")], False, {b"b": 10**13 + 5})
    body += record[:1]
    write_string(body, b"ttl-table")
    body += record[1:]
    body += b"\xff"
    return bytes(body) + crc64(bytes(body)).to_bytes(8, "little")


def test_field_ttls_of_7_4_come_along_and_bad_files_are_refused(
    redis: ServerProcess, tmp_path: Path
) -> None:
    c = RawClient(redis.port)
    try:
        c.call("SET", "ok", "1")
        c.call("RPUSH", "queue", "a", "b")
        c.call("SAVE")
    finally:
        c.close()
    saved = Path(redis.workdir) / "dump.rdb"
    rdb = tmp_path / "newer.rdb"
    rdb.write_bytes(_with_field_ttls(saved.read_bytes()))
    data_dir = tmp_path / "data"
    done = _import(rdb, data_dir)
    assert done.returncode == 0, done.stderr
    hw = start_headwater("--dir", str(data_dir))
    try:
        ours = RawClient(hw.port)
        assert ours.call("HPEXPIRETIME", "ttl-hash", "FIELDS", 1, "f") == b"*1\r\n:%d\r\n" % 10**13
        assert ours.call("HPEXPIRETIME", "ttl-table", "FIELDS", 2, "a", "b") == (
            b"*2\r\n:-1\r\n:%d\r\n" % (10**13 + 5)
        )
        assert ours.call("LRANGE", "queue", 0, -1) == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        ours.close()
    finally:
        hw.stop()
    data = saved.read_bytes()
    fresh = tmp_path / "fresh"
    half = tmp_path / "half.rdb"
    half.write_bytes(data[: len(data) // 2])
    for extra in ((), ("--verify",)):
        done = _import(half, fresh, *extra)
        assert done.returncode == 1 and "truncated or corrupt" in done.stderr
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.rdb"
    bad.write_bytes(bytes(flipped))
    done = _import(bad, fresh)
    assert done.returncode == 1 and "checksum mismatch" in done.stderr
    # without a checksum (rdbchecksum no) the whole file is read before anything is written
    unsummed = tmp_path / "unsummed.rdb"
    unsummed.write_bytes(data[: len(data) // 2] + b"\xff" + bytes(8))
    done = _import(unsummed, fresh)
    assert done.returncode == 1 and "unsummed.rdb: the file" in done.stderr
    assert not fresh.exists()
    # the checksum is Redis's CRC-64 of the file
    assert int.from_bytes(data[-8:], "little") == crc64(data[:-8])


def _with_module_value(rdb: bytes) -> bytes:
    """Redis's file with one more key before its end: a module value (RDB_TYPE_MODULE_2),
    which Headwater does not have; its checksum is good."""
    body = bytearray(rdb[:-9])
    body += b"\x07"
    write_string(body, b"from-a-module")
    body += bytes(16)
    body += b"\xff"
    return bytes(body) + crc64(bytes(body)).to_bytes(8, "little")


def _saved_one_key(redis: ServerProcess) -> Path:
    """redis-server's dump.rdb holding one key."""
    c = RawClient(redis.port)
    try:
        c.call("SET", "ok", "1")
        c.call("SAVE")
    finally:
        c.close()
    return Path(redis.workdir) / "dump.rdb"


def _headwater(*args: str) -> subprocess.CompletedProcess[str]:
    """A ``headwater`` command line run to its end (a server that refuses to start)."""
    return subprocess.run([*HEADWATER, *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def _server(data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _headwater("server", "--port", str(free_port()), "--dir", str(data_dir), *extra)


def test_a_module_value_is_refused_by_verify_and_by_the_start(
    redis: ServerProcess, tmp_path: Path
) -> None:
    saved = _saved_one_key(redis)
    rdb = tmp_path / "module.rdb"
    rdb.write_bytes(_with_module_value(saved.read_bytes()))
    data_dir = tmp_path / "data"
    done = _import(rdb, data_dir, "--verify")
    assert done.returncode == 1 and "module values are not supported" in done.stderr
    assert not data_dir.exists()
    # its checksum is good: the import puts it in place, and the start refuses it, naming
    # what is wrong, loading nothing and leaving the directory as it was
    assert _import(rdb, data_dir).returncode == 0
    server = _server(data_dir)
    assert server.returncode == 1
    assert "a Redis RDB file" in server.stdout + server.stderr
    assert "module values are not supported" in server.stdout + server.stderr
    assert (data_dir / "dump.hwsnap").read_bytes() == rdb.read_bytes()
    assert not any((data_dir / "appendonlydir").iterdir())  # (no AOF was started)
    check = _headwater("check-snapshot", str(data_dir / "dump.hwsnap"))
    assert check.returncode == 1 and "module values are not supported" in check.stdout
    (data_dir / "dump.hwsnap").write_bytes(saved.read_bytes())
    check = _headwater("check-snapshot", str(data_dir / "dump.hwsnap"))
    assert check.returncode == 0 and "loads: 1 keys (db0: 1)" in check.stdout


def test_a_region_refuses_a_redis_rdb(redis: ServerProcess, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert _import(_saved_one_key(redis), data_dir).returncode == 0
    server = _server(data_dir, "--region-id", "1")
    assert server.returncode == 1
    assert "active-active region" in server.stdout + server.stderr


def test_help() -> None:
    done = subprocess.run(
        [*HEADWATER, "import-rdb", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0 and "--dir" in done.stdout
