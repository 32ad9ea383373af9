"""Consumer groups over TCP with redis-py: worker processes, blocking group reads, parsed helpers.

Every test runs against Headwater; those whose expectations hold for Redis 7.0 too also run against
a real redis-server, which shows the test itself is sound. Blocking-read behaviour that changed
after 7.0 (see STREAMS-REFERENCE.md §6) is asserted with each server's own semantics.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from tests.helpers import ROOT, RawClient, ServerProcess, redis_available, start_headwater

pytestmark = pytest.mark.e2e

TARGETS = [pytest.param("redis", marks=pytest.mark.redis), "headwater"]

# XREADGROUP BLOCK released because its group or key went away: 8.x, and 7.0 (§6).
NOGROUP_BLOCKED = (
    "NOGROUP No such key '{key}' or consumer group '{group}' in XREADGROUP with GROUP option"
)
REDIS70_DESTROYED = "NOGROUP the consumer group this client was blocked on no longer exists"
REDIS70_DELETED = "UNBLOCKED the stream key no longer exists"


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> tuple[str, ServerProcess]:
    if request.param == "redis" and not redis_available():
        pytest.skip("redis-server not installed")
    fixture = "redis_server" if request.param == "redis" else "headwater"
    return request.param, request.getfixturevalue(fixture)


def _version(info: dict[str, object]) -> tuple[int, ...]:
    return tuple(int(p) for p in str(info["redis_version"]).split("."))


# -- worker processes ---------------------------------------------------------------------------


def _spawn(port: int, key: str, group: str, name: str, log: Path, *opts: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tests.e2e.group_consumer", str(port), key, group, name]
    return subprocess.Popen(
        [*cmd, str(log), *opts], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def _records(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def _wait_started(logs: list[Path], procs: list[subprocess.Popen], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not all(["S"] in _records(log) for log in logs):
        for proc in procs:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.05)


def _finish(procs: list[subprocess.Popen], timeout: float = 50) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout
    results = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        results.append((proc.returncode, out.decode()))
    return results


def test_three_worker_processes_one_killed_mid_batch(
    target: tuple[str, ServerProcess], tmp_path: Path
) -> None:
    """The seed's example consumer, three OS processes, a stream produced concurrently.

    `victim` (RESP2) SIGKILLs itself after reading a batch, having processed half of it and
    acknowledged none of it. `auto` (RESP3, XAUTOCLAIM) and `seed` (RESP2, XPENDING IDLE + XCLAIM)
    claim its stale entries and finish. Every entry is processed at least once, and acknowledged
    exactly once across all workers; the group ends with nothing pending, lag 0 and entries-read
    equal to the stream length.
    """
    _, server = target
    key, group, done = "grp:workers", "workers", "grp:workers:done"
    total, burst = 3000, 30
    r = redis.Redis(port=server.port, socket_timeout=15)
    r.delete(key, done)
    assert r.xgroup_create(key, group, id="$", mkstream=True) is True
    logs = {name: tmp_path / f"{name}.log" for name in ("victim", "auto", "seed")}
    common = ["--done-key", done, "--count", "20", "--min-idle", "500", "--deadline", "40"]
    procs = {
        "victim": _spawn(server.port, key, group, "victim", logs["victim"], *common,
                         "--die-after", "300", "--min-idle", "-1"),
        "auto": _spawn(server.port, key, group, "auto", logs["auto"], *common,
                       "--protocol", "3", "--claim-with", "xautoclaim"),
        "seed": _spawn(server.port, key, group, "seed", logs["seed"], *common,
                       "--claim-with", "xclaim"),
    }  # fmt: skip
    try:
        _wait_started(list(logs.values()), list(procs.values()))
        produced: dict[str, str] = {}  # id -> n
        for start in range(0, total, burst):
            pipe = r.pipeline(transaction=False)
            for n in range(start, start + burst):
                pipe.xadd(key, {"n": n})
            for n, sid in enumerate(pipe.execute(), start):
                produced[sid.decode()] = str(n)
            time.sleep(0.01)
        r.set(done, 1)
        results = dict(zip(procs, _finish(list(procs.values())), strict=True))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    records = {name: _records(log) for name, log in logs.items()}
    assert results["victim"][0] == -signal.SIGKILL, (results["victim"], records["victim"][-3:])
    assert results["auto"] == (0, ""), (results["auto"], records["auto"][-3:])
    assert results["seed"] == (0, ""), (results["seed"], records["seed"][-3:])

    processed: dict[str, list[tuple[str, str]]] = defaultdict(list)  # id -> [(worker, source)]
    acks: Counter[str] = Counter()
    for name, lines in records.items():
        for rec in lines:
            if rec[0] == "P":
                assert produced.get(rec[1]) == rec[2], (name, rec)  # the entry's own body
                processed[rec[1]].append((name, rec[3]))
            elif rec[0] == "A":
                assert rec[2] in ("0", "1"), (name, rec)
                acks[rec[1]] += int(rec[2])
    # The victim died holding a batch it had read and not acknowledged.
    (killed,) = [rec[1:] for rec in records["victim"] if rec[0] == "K"]
    assert len(killed) >= 2
    assert records["victim"][-1][0] == "K"
    half = len(killed) // 2
    for i, sid in enumerate(killed):
        assert (("victim", "new") in processed[sid]) == (i < half), (sid, processed[sid])
        claimers = [w for w, source in processed[sid] if source == "claim"]
        assert claimers and "victim" not in claimers, (sid, processed[sid])

    assert set(processed) == set(produced), "entries never processed or unknown IDs processed"
    wrong = {sid: n for sid in produced if (n := acks[sid]) != 1}
    assert not wrong, f"{len(wrong)} entries not acknowledged exactly once, e.g. {list(wrong)[:5]}"
    for name in ("auto", "seed"):  # both survivors took part in the normal `>` flow too
        assert any(rec[0] == "P" and rec[3] == "new" for rec in records[name]), name

    assert r.xlen(key) == total
    assert r.xpending(key, group) == {"pending": 0, "min": None, "max": None, "consumers": []}
    (info,) = r.xinfo_groups(key)
    assert info["name"] == group.encode()
    assert info["pending"] == 0
    assert info["consumers"] == 3
    assert info["last-delivered-id"] == list(produced)[-1].encode()
    assert info["entries-read"] == total
    assert info["lag"] == 0
    consumers = {c["name"]: c["pending"] for c in r.xinfo_consumers(key, group)}
    assert consumers == {b"auto": 0, b"seed": 0, b"victim": 0}
    r.delete(key, done)


@pytest.mark.parametrize("protocol", ["2", "3"])
def test_restarted_worker_processes_its_own_pending_history_first(
    target: tuple[str, ServerProcess], tmp_path: Path, protocol: str
) -> None:
    """A worker that crashed holding five entries comes back: it first re-reads its history with
    ID 0 (those five, in order), then reads the rest with `>`."""
    _, server = target
    key, group, done = f"grp:restart:{protocol}", "g", f"grp:restart:{protocol}:done"
    r = redis.Redis(port=server.port, socket_timeout=15)
    r.delete(key, done)
    ids = [r.xadd(key, {"n": n}).decode() for n in range(12)]
    r.xgroup_create(key, group, id="0")
    crashed = r.xreadgroup(group, "w", {key: ">"}, count=5)
    assert [sid.decode() for sid, _ in crashed[0][1]] == ids[:5]
    r.set(done, 1)
    log = tmp_path / "w.log"
    opts = ["--done-key", done, "--protocol", protocol, "--count", "2", "--min-idle", "-1"]
    ((status, out),) = _finish([_spawn(server.port, key, group, "w", log, *opts)], timeout=30)
    assert (status, out) == (0, "")
    lines = _records(log)
    start = lines.index(["S"])
    history = [rec[1:] for rec in lines[:start] if rec[0] == "P"]
    assert history == [[sid, str(n), "history"] for n, sid in enumerate(ids[:5])]
    fresh = [rec[1:] for rec in lines[start:] if rec[0] == "P"]
    assert fresh == [[sid, str(n), "new"] for n, sid in enumerate(ids[5:], 5)]
    assert sorted(rec[1:] for rec in lines if rec[0] == "A") == sorted([sid, "1"] for sid in ids)
    assert r.xpending(key, group)["pending"] == 0
    assert r.xinfo_groups(key)[0]["lag"] == 0
    r.delete(key, done)


# -- blocking group reads -----------------------------------------------------------------------


async def _blocked(client: aioredis.Redis) -> int:
    return int((await client.info("clients"))["blocked_clients"])


async def _wait_blocked(client: aioredis.Redis, count: int) -> None:
    for _ in range(200):
        if await _blocked(client) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"expected {count} blocked clients, have {await _blocked(client)}")


@pytest.mark.asyncio
async def test_resp3_xreadgroup_block_woken_by_xadd_from_another_client(
    target: tuple[str, ServerProcess],
) -> None:
    _, server = target
    key, group = "grp:wake", "g"
    reader = aioredis.Redis(port=server.port, protocol=3)
    writer = aioredis.Redis(port=server.port, protocol=3)
    try:
        await writer.delete(key)
        assert await writer.xgroup_create(key, group, id="$", mkstream=True) is True
        assert await reader.xreadgroup(group, "c", {key: ">"}, block=100) == {}  # timed out
        started = time.monotonic()  # a history read never blocks, and names the key even if empty
        assert await reader.xreadgroup(group, "c", {key: "0"}, block=5000) == {key.encode(): [[]]}
        with pytest.raises(redis.ResponseError) as err:  # nor does a read of a missing key
            await reader.xreadgroup(group, "c", {"grp:missing": ">"}, block=5000)
        assert str(err.value) == NOGROUP_BLOCKED.format(key="grp:missing", group=group)
        assert time.monotonic() - started < 4
        base = await _blocked(writer)
        started = time.monotonic()
        task = asyncio.create_task(reader.xreadgroup(group, "c", {key: ">"}, block=20_000))
        await _wait_blocked(writer, base + 1)
        assert not task.done()
        sid = await writer.xadd(key, {"f": "v"})
        result = await asyncio.wait_for(task, timeout=10)
        assert time.monotonic() - started < 10
        assert result == {key.encode(): [[(sid, {b"f": b"v"})]]}
        assert await _blocked(writer) == base
        pending = await writer.xpending(key, group)
        assert pending == {"pending": 1, "min": sid, "max": sid,
                           "consumers": [{"name": b"c", "pending": 1}]}  # fmt: skip
    finally:
        await writer.delete(key)
        await reader.aclose()
        await writer.aclose()


@pytest.mark.asyncio
async def test_resp3_blocked_group_readers_served_fifo_one_entry_each(
    target: tuple[str, ServerProcess],
) -> None:
    """Four consumers of one group block on `>` in a known order. Each XADD of one entry wakes
    them all in FIFO order (§6); the first takes the entry (the group's last-delivered-id moves
    past it) and the rest find nothing new and stay blocked. So XADD k serves exactly reader k."""
    _, server = target
    key, group, n = "grp:fifo", "g", 4
    writer = aioredis.Redis(port=server.port, protocol=3)
    readers = [aioredis.Redis(port=server.port, protocol=3) for _ in range(n)]
    tasks: list[asyncio.Task] = []
    try:
        await writer.delete(key)
        await writer.xgroup_create(key, group, id="$", mkstream=True)
        base = await _blocked(writer)
        for i, reader in enumerate(readers):
            read = reader.xreadgroup(group, f"c{i}", {key: ">"}, count=10, block=20_000)
            tasks.append(asyncio.create_task(read))
            await _wait_blocked(writer, base + i + 1)  # parked in this order
        if _version(await writer.info("server")) >= (7, 2):  # consumers exist once named (§4)
            consumers = await writer.xinfo_consumers(key, group)
            assert [(c["name"], c["pending"]) for c in consumers] == [
                (f"c{i}".encode(), 0) for i in range(n)
            ]
        sids = []
        for i in range(n):
            sid = await writer.xadd(key, {"i": i})
            sids.append(sid)
            result = await asyncio.wait_for(tasks[i], timeout=10)
            assert result == {key.encode(): [[(sid, {b"i": str(i).encode()})]]}, i
            await _wait_blocked(writer, base + n - i - 1)
            assert await _blocked(writer) == base + n - i - 1
            assert not any(t.done() for t in tasks[i + 1 :]), i
        owners = {p["message_id"]: p["consumer"]
                  for p in await writer.xpending_range(key, group, "-", "+", 10)}  # fmt: skip
        assert owners == {sid: f"c{i}".encode() for i, sid in enumerate(sids)}
        (info,) = await writer.xinfo_groups(key)
        assert (info["entries-read"], info["lag"], info["pending"]) == (n, 0, n)
    finally:
        for task in tasks:
            task.cancel()
        await writer.delete(key)
        for client in [writer, *readers]:
            await client.aclose()


@pytest.mark.asyncio
async def test_resp3_one_transaction_of_three_xadds_serves_the_first_blocked_reader(
    target: tuple[str, ServerProcess],
) -> None:
    """Readers are woken once per command: the first blocked reader gets all three entries of a
    MULTI (it asked for COUNT 10), the second finds nothing new and waits for the next XADD."""
    _, server = target
    key, group = "grp:multi", "g"
    writer = aioredis.Redis(port=server.port, protocol=3)
    readers = [aioredis.Redis(port=server.port, protocol=3) for _ in range(2)]
    tasks: list[asyncio.Task] = []
    try:
        await writer.delete(key)
        await writer.xgroup_create(key, group, id="$", mkstream=True)
        base = await _blocked(writer)
        for i, reader in enumerate(readers):
            read = reader.xreadgroup(group, f"c{i}", {key: ">"}, count=10, block=20_000)
            tasks.append(asyncio.create_task(read))
            await _wait_blocked(writer, base + i + 1)
        pipe = writer.pipeline(transaction=True)
        for i in range(3):
            pipe.xadd(key, {"i": i})
        sids = await pipe.execute()
        first = await asyncio.wait_for(tasks[0], timeout=10)
        assert first == {
            key.encode(): [[(sid, {b"i": str(i).encode()}) for i, sid in enumerate(sids)]]
        }
        await _wait_blocked(writer, base + 1)
        assert await _blocked(writer) == base + 1 and not tasks[1].done()
        sid = await writer.xadd(key, {"i": 3})
        assert await asyncio.wait_for(tasks[1], timeout=10) == {
            key.encode(): [[(sid, {b"i": b"3"})]]
        }
        pending = await writer.xpending(key, group)
        assert pending["consumers"] == [
            {"name": b"c0", "pending": 3},
            {"name": b"c1", "pending": 1},
        ]
    finally:
        for task in tasks:
            task.cancel()
        await writer.delete(key)
        for client in [writer, *readers]:
            await client.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [False, True])
async def test_client_unblock_releases_a_blocked_xreadgroup(
    target: tuple[str, ServerProcess], error: bool
) -> None:
    """CLIENT UNBLOCK id → the timeout reply; CLIENT UNBLOCK id ERROR → -UNBLOCKED (§6)."""
    _, server = target
    key, group = "grp:unblock", "g"
    writer = aioredis.Redis(port=server.port, protocol=3)
    reader = aioredis.Redis(port=server.port, protocol=3, single_connection_client=True)
    try:
        await writer.delete(key)
        await writer.xgroup_create(key, group, id="$", mkstream=True)
        base = await _blocked(writer)
        target_id = await reader.client_id()
        task = asyncio.create_task(reader.xreadgroup(group, "c", {key: ">"}, block=20_000))
        await _wait_blocked(writer, base + 1)
        assert await writer.client_unblock(target_id, error=error) is True
        if error:
            with pytest.raises(redis.ResponseError) as err:
                await asyncio.wait_for(task, timeout=10)
            assert str(err.value) == "UNBLOCKED client unblocked via CLIENT UNBLOCK"
        else:
            assert await asyncio.wait_for(task, timeout=10) == {}
        assert await _blocked(writer) == base
        assert await writer.client_unblock(target_id) is False  # no longer blocked
        await writer.xadd(key, {"f": "v"})  # nothing was delivered while it was blocked
        assert (await writer.xinfo_groups(key))[0]["lag"] == 1
    finally:
        await writer.delete(key)
        await reader.aclose()
        await writer.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("how", ["destroy", "del"])
async def test_blocked_xreadgroup_gets_nogroup_when_group_or_key_goes(
    target: tuple[str, ServerProcess], protocol: int, how: str
) -> None:
    """Two readers of group g and one of group h block on the same key. XGROUP DESTROY g (or
    DEL key) releases g's readers with NOGROUP (8.x, §6; Redis 7.0 has its own texts, checked
    against the real server). After DESTROY, h's reader is still blocked and an XADD serves it."""
    name, server = target
    key = f"grp:gone:{how}:{protocol}"
    writer = aioredis.Redis(port=server.port, protocol=protocol)
    readers = [aioredis.Redis(port=server.port, protocol=protocol) for _ in range(3)]
    tasks: list[asyncio.Task] = []
    try:
        await writer.delete(key)
        await writer.xgroup_create(key, "g", id="$", mkstream=True)
        await writer.xgroup_create(key, "h", id="$")
        base = await _blocked(writer)
        for i, (reader, group) in enumerate(zip(readers, ["g", "h", "g"], strict=True)):
            read = reader.xreadgroup(group, f"c{i}", {key: ">"}, block=20_000)
            tasks.append(asyncio.create_task(read))
            await _wait_blocked(writer, base + i + 1)
        if how == "destroy":
            assert await writer.xgroup_destroy(key, "g") == 1
        else:
            assert await writer.delete(key) == 1
        if name == "redis" and _version(await writer.info("server")) < (7, 2):
            expected = REDIS70_DESTROYED if how == "destroy" else REDIS70_DELETED
        else:
            expected = NOGROUP_BLOCKED.format(key=key, group="g")
        for i in (0, 2):
            with pytest.raises(redis.ResponseError) as err:
                await asyncio.wait_for(tasks[i], timeout=10)
            assert str(err.value) == expected
        if how == "destroy":
            await asyncio.sleep(0.1)
            assert not tasks[1].done()
            assert await _blocked(writer) == base + 1
            sid = await writer.xadd(key, {"f": "v"})
            result = await asyncio.wait_for(tasks[1], timeout=10)
            entries = result[key.encode()][0] if protocol == 3 else result[0][1]
            assert entries == [(sid, {b"f": b"v"})]
        else:
            with pytest.raises(redis.ResponseError) as err:
                await asyncio.wait_for(tasks[1], timeout=10)
            if expected != REDIS70_DELETED:
                expected = NOGROUP_BLOCKED.format(key=key, group="h")
            assert str(err.value) == expected
        assert await _blocked(writer) == base
        assert await writer.ping() is True  # the connection is still usable
    finally:
        for task in tasks:
            task.cancel()
        await writer.delete(key)
        for client in [writer, *readers]:
            await client.aclose()


# -- redis-py's parsed helpers ------------------------------------------------------------------


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def helper_client(
    request: pytest.FixtureRequest, target: tuple[str, ServerProcess]
) -> Iterator[redis.Redis]:
    r = redis.Redis(port=target[1].port, protocol=request.param, socket_timeout=10)
    r.delete("grp:helpers")
    yield r
    r.delete("grp:helpers")
    r.close()


def test_parsed_helpers(helper_client: redis.Redis) -> None:
    """xpending, xpending_range, xinfo_groups, xinfo_consumers, xclaim, xautoclaim, xack."""
    r, key = helper_client, "grp:helpers"
    for i in range(1, 6):
        r.xadd(key, {"f": i}, id=f"{i}-0")
    assert r.xgroup_create(key, "g", id="0") is True
    with pytest.raises(redis.ResponseError, match=r"^BUSYGROUP"):
        r.xgroup_create(key, "g", id="0")
    assert r.xinfo_groups(key) == [{"name": b"g", "consumers": 0, "pending": 0,
        "last-delivered-id": b"0-0", "entries-read": None, "lag": 5}]  # fmt: skip
    r.xreadgroup("g", "c1", {key: ">"}, count=3)
    r.xreadgroup("g", "c2", {key: ">"}, count=2)

    assert r.xpending(key, "g") == {"pending": 5, "min": b"1-0", "max": b"5-0",
        "consumers": [{"name": b"c1", "pending": 3}, {"name": b"c2", "pending": 2}]}  # fmt: skip
    rows = r.xpending_range(key, "g", "-", "+", 10)
    assert [(p["message_id"], p["consumer"], p["times_delivered"]) for p in rows] == [
        (b"1-0", b"c1", 1), (b"2-0", b"c1", 1), (b"3-0", b"c1", 1),
        (b"4-0", b"c2", 1), (b"5-0", b"c2", 1)]  # fmt: skip
    assert all(isinstance(p["time_since_delivered"], int) for p in rows)
    assert all(0 <= p["time_since_delivered"] < 5000 for p in rows)
    rows = r.xpending_range(key, "g", "(1-0", "+", 1, consumername="c2")
    assert [p["message_id"] for p in rows] == [b"4-0"]
    assert r.xpending_range(key, "g", "-", "+", 10, idle=60_000) == []
    assert r.xpending_range(key, "g", "-", "+", 10, consumername="nobody") == []
    assert r.xinfo_groups(key) == [{"name": b"g", "consumers": 2, "pending": 5,
        "last-delivered-id": b"5-0", "entries-read": 5, "lag": 0}]  # fmt: skip

    assert r.xclaim(key, "g", "c3", 0, ["1-0"]) == [(b"1-0", {b"f": b"1"})]
    assert r.xclaim(key, "g", "c3", 0, ["2-0", "9-0"], justid=True) == [b"2-0"]
    assert r.xclaim(key, "g", "c3", 60_000, ["3-0"]) == []  # not idle long enough
    rows = r.xpending_range(key, "g", "-", "+", 10, consumername="c3")
    assert [(p["message_id"], p["times_delivered"]) for p in rows] == [(b"1-0", 2), (b"2-0", 1)]

    assert r.xautoclaim(key, "g", "c4", 0, "0-0", count=2) == [
        b"3-0", [(b"1-0", {b"f": b"1"}), (b"2-0", {b"f": b"2"})], []]  # fmt: skip
    assert r.xdel(key, "4-0") == 1  # a pending entry gone from the stream is dropped, reported
    assert r.xautoclaim(key, "g", "c4", 0, "3-0", count=10) == [
        b"0-0", [(b"3-0", {b"f": b"3"}), (b"5-0", {b"f": b"5"})], [b"4-0"]]  # fmt: skip
    assert r.xautoclaim(key, "g", "c4", 0, "(3-0", count=1, justid=True) == [b"5-0"]
    assert r.xautoclaim(key, "g", "c4", 60_000, "0-0") == [b"0-0", [], []]
    assert r.xpending(key, "g") == {"pending": 4, "min": b"1-0", "max": b"5-0",
        "consumers": [{"name": b"c4", "pending": 4}]}  # fmt: skip

    consumers = r.xinfo_consumers(key, "g")
    assert [(c["name"], c["pending"]) for c in consumers] == [
        (b"c1", 0), (b"c2", 0), (b"c3", 0), (b"c4", 4)]  # fmt: skip
    assert all(isinstance(c["idle"], int) and c["idle"] >= 0 for c in consumers)
    if _version(r.info("server")) >= (7, 2):
        assert all(isinstance(c["inactive"], int) for c in consumers)
        assert set(consumers[0]) == {"name", "pending", "idle", "inactive"}
    else:
        assert set(consumers[0]) == {"name", "pending", "idle"}

    assert r.xack(key, "g", "1-0", "2-0", "2-0", "4-0") == 2
    assert r.xack(key, "g", "1-0") == 0
    assert r.xack(key, "nogroup", "3-0") == 0
    with pytest.raises(
        redis.ResponseError,
        match=r"^NOGROUP No such key 'grp:helpers' or consumer group 'nogroup'$",
    ):
        r.xpending(key, "nogroup")
    assert r.xinfo_groups(key)[0]["pending"] == 2


# -- XNACK (Redis 8.8; Headwater only: Debian's 7.0 does not have it) ---------------------------


@pytest.fixture(scope="module")
def aof_headwater() -> Iterator[ServerProcess]:
    """A Headwater with an append-only file, so DEBUG LOADAOF replays what XNACK wrote."""
    server = start_headwater("--appendonly", "yes")
    yield server
    server.stop()


def _zone_state(r: redis.Redis, key: str) -> tuple[object, ...]:
    """The group's pending rows and NACK zone as the wire shows them (times dropped)."""
    rows = r.xpending_range(key, "g", "-", "+", 100)
    full = r.execute_command("XINFO", "STREAM", key, "FULL")
    group = full[b"groups"][0] if isinstance(full, dict) else full[-1][0]
    fields = group if isinstance(group, dict) else dict(zip(group[::2], group[1::2], strict=True))
    fields.pop(b"consumers")  # (seen/active times are when a reload replayed the commands)
    return tuple(sorted((row["message_id"], row["consumer"]) for row in rows)), fields


@pytest.mark.parametrize("protocol", [2, 3])
def test_xnack_over_tcp(aof_headwater: ServerProcess, protocol: int) -> None:
    key = f"grp:nack{protocol}"
    r = redis.Redis(port=aof_headwater.port, protocol=protocol, socket_timeout=10)
    try:
        r.delete(key)
        ids = [r.xadd(key, {"f": i}, id=f"{i}-0") for i in range(1, 5)]
        r.xgroup_create(key, "g", id="0")
        r.xreadgroup("g", "c1", {key: ">"})
        with pytest.raises(redis.ResponseError) as error:
            r.execute_command("XNACK", key, "g", "SOFT", "IDS", 1, ids[0])
        # the wire says "-ERR ERR mode …"; redis-py takes the first "ERR" as the error code
        assert str(error.value) == "ERR mode must be SILENT, FAIL, or FATAL"
        assert r.execute_command("XNACK", key, "g", "FAIL", "IDS", 2, ids[2], ids[0]) == 2
        assert r.execute_command("XNACK", key, "g", "FATAL", "IDS", 1, ids[1]) == 1
        rows = r.xpending_range(key, "g", "-", "+", 10)
        assert [(row["consumer"], row["time_since_delivered"]) for row in rows] == [
            (b"", -1), (b"", -1), (b"", -1), (b"c1", rows[3]["time_since_delivered"]),
        ]  # fmt: skip
        assert [row["times_delivered"] for row in rows] == [1, 2**63 - 1, 1, 1]
        assert r.xpending(key, "g")["consumers"] == [{"name": b"c1", "pending": 1}]
        # XAUTOCLAIM takes nacked entries whatever min-idle says (in ID order)
        r.xautoclaim(key, "g", "c2", 3_600_000, "0-0", count=1, justid=True)
        rows = r.xpending_range(key, "g", "-", "+", 10)
        assert [row["consumer"] for row in rows] == [b"c2", b"", b"", b"c1"]
        # the zone (3-0, 2-0 left, in nack order) survives replaying the AOF ...
        before = _zone_state(r, key)
        assert before[1][b"nacked-count"] == 2
        assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
        assert _zone_state(r, key) == before
        # ... and XREADGROUP … CLAIM serves it first, oldest nack first
        raw = RawClient(aof_headwater.port)
        try:
            reply_bytes = raw.call("XREADGROUP", "GROUP", "g", "c3", "COUNT", 2, "CLAIM",
                                   3_600_000, "STREAMS", key, ">")  # fmt: skip
        finally:
            raw.close()
        assert reply_bytes.index(b"3-0") < reply_bytes.index(b"2-0")
        assert b"1-0" not in reply_bytes and b"4-0" not in reply_bytes
    finally:
        r.delete(key)
        r.close()


def test_xnack_zone_survives_a_rewrite_and_a_snapshot_reload(aof_headwater: ServerProcess) -> None:
    key = "grp:nack-rewrite"
    r = redis.Redis(port=aof_headwater.port, socket_timeout=10)
    try:
        r.delete(key)
        ids = [r.xadd(key, {"f": i}, id=f"{i}-0") for i in range(1, 71)]
        r.xgroup_create(key, "g", id="0")
        r.xreadgroup("g", "c1", {key: ">"})
        order = [*reversed(ids[:66]), ids[69]]
        assert r.execute_command("XNACK", key, "g", "SILENT", "IDS", len(order), *order) == 67
        r.execute_command("XNACK", key, "g", "FATAL", "IDS", 1, ids[10])
        before = _zone_state(r, key)
        r.bgrewriteaof()
        deadline = time.monotonic() + 30
        while r.info("persistence")["aof_rewrite_in_progress"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.info("persistence")["aof_last_bgrewrite_status"] == "ok"
        assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
        assert _zone_state(r, key) == before
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"
        assert _zone_state(r, key) == before
        raw = RawClient(aof_headwater.port)
        try:
            reply = raw.call("XREADGROUP", "GROUP", "g", "c2", "COUNT", 3, "CLAIM", 0,
                             "STREAMS", key, ">")  # fmt: skip
        finally:
            raw.close()
        positions = [reply.index(b"$4\r\n%s\r\n" % sid) for sid in (ids[65], ids[64], ids[63])]
        assert positions == sorted(positions)  # the first three nacks, in nack order
    finally:
        r.delete(key)
        r.close()


@pytest.mark.asyncio
async def test_xnack_wakes_a_blocked_xreadgroup_claim(headwater: ServerProcess) -> None:
    key, group = "grp:nack-wake", "g"
    reader = aioredis.Redis(port=headwater.port)
    writer = aioredis.Redis(port=headwater.port)
    try:
        await writer.delete(key)
        sid = await writer.xadd(key, {"f": "v"})
        await writer.xgroup_create(key, group, id="0")
        await writer.xreadgroup(group, "dead", {key: ">"})
        base = await _blocked(writer)
        args = ["XREADGROUP", "GROUP", group, "live", "BLOCK", 20_000, "CLAIM", 3_600_000]
        task = asyncio.create_task(reader.execute_command(*args, "STREAMS", key, ">"))
        await _wait_blocked(writer, base + 1)
        assert await writer.execute_command("XNACK", key, group, "FAIL", "IDS", 1, sid) == 1
        result = await asyncio.wait_for(task, timeout=10)
        assert sid in repr(result).encode()
        rows = await writer.xpending_range(key, group, "-", "+", 10)
        assert [(row["consumer"], row["times_delivered"]) for row in rows] == [(b"live", 2)]
    finally:
        await writer.delete(key)
        await reader.aclose()
        await writer.aclose()
