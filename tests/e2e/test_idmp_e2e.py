"""Idempotent producers over TCP with redis-py (sync RESP2, asyncio RESP3): a producer that
retries every batch gets every entry exactly once (STREAMS-REFERENCE §2.1, XCFGSET)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from tests.helpers import ServerProcess, encode_command, raw_client

pytestmark = pytest.mark.e2e

BATCHES, BATCH = 5, 100  # BATCH == the default idmp-maxsize: a whole batch stays tracked


def fields_of(batch: int, msg: int) -> dict[str, str]:
    return {"batch": str(batch), "msg": str(msg), "body": f"payload {batch}/{msg}"}


def expected_entries(batches: int) -> list[dict[bytes, bytes]]:
    return [
        {k.encode(): v.encode() for k, v in fields_of(b, m).items()}
        for b in range(batches)
        for m in range(BATCH)
    ]


def idmp_info(info: dict[str, Any]) -> dict[str, Any]:
    names = ("pids-tracked", "iids-tracked", "iids-added", "iids-duplicates")
    return {name: info[name] for name in names}


def stats(client: redis.Redis) -> tuple[int, int]:
    info = client.info("stats")
    return info["stream_idmp_iids_added"], info["stream_idmp_iids_duplicates"]


def send_batch(client: redis.Redis, key: str, batch: int, *, auto: bool = False) -> list[bytes]:
    pipe = client.pipeline(transaction=False)
    for msg in range(BATCH):
        fields = fields_of(batch, msg)
        if auto:
            pipe.xadd(key, fields, idmpauto="auto-producer")
        else:
            pipe.xadd(key, fields, idmp=("producer-1", f"batch-{batch}-msg-{msg}"))
    return pipe.execute()


def test_retried_batches_are_added_once_sync_resp2(headwater: ServerProcess) -> None:
    key = "idmp:retry:resp2"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    added_before, dups_before = stats(client)
    try:
        ids: list[bytes] = []
        for batch in range(BATCHES):
            first = send_batch(client, key, batch)
            assert len(set(first)) == BATCH
            retry = send_batch(client, key, batch)  # "the reply was lost": send it all again
            assert retry == first
            ids.extend(first)
        assert client.xlen(key) == BATCHES * BATCH
        entries = client.xrange(key)
        assert [sid for sid, _ in entries] == ids
        assert [fields for _, fields in entries] == expected_entries(BATCHES)
        info = client.xinfo_stream(key)
        assert idmp_info(info) == {
            "pids-tracked": 1,
            "iids-tracked": BATCH,  # maxsize 100: the last batch
            "iids-added": BATCHES * BATCH,
            "iids-duplicates": BATCHES * BATCH,
        }
        assert (info["idmp-duration"], info["idmp-maxsize"]) == (100, 100)
        assert stats(client) == (
            added_before + BATCHES * BATCH,
            dups_before + BATCHES * BATCH,
        )

        # The same batches again through IDMPAUTO: the iid is the content's hash, so a retry
        # whose fields come in another order is still the same message.
        auto_ids: list[bytes] = []
        for batch in range(BATCHES):
            first = send_batch(client, key, batch, auto=True)
            pipe = client.pipeline(transaction=False)
            for msg in range(BATCH):
                reordered = dict(reversed(list(fields_of(batch, msg).items())))
                pipe.xadd(key, reordered, idmpauto="auto-producer")
            assert pipe.execute() == first
            auto_ids.extend(first)
        assert client.xlen(key) == 2 * BATCHES * BATCH
        assert [sid for sid, _ in client.xrange(key)] == ids + auto_ids
        assert idmp_info(client.xinfo_stream(key)) == {
            "pids-tracked": 2,
            "iids-tracked": 2 * BATCH,
            "iids-added": 2 * BATCHES * BATCH,
            "iids-duplicates": 2 * BATCHES * BATCH,
        }
        assert stats(client) == (
            added_before + 2 * BATCHES * BATCH,
            dups_before + 2 * BATCHES * BATCH,
        )
    finally:
        client.delete(key)
        client.close()


def test_retry_after_the_connection_dropped(headwater: ServerProcess) -> None:
    """The first attempt's connection dies before any reply is read; the producer reconnects
    and resends the batch. Whatever the server had applied is not applied twice."""
    key = "idmp:dropped"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        with raw_client(headwater.port) as raw:
            commands = [
                encode_command(
                    "XADD",
                    key,
                    "IDMP",
                    "producer-1",
                    f"batch-0-msg-{msg}",
                    "*",
                    *[x for pair in fields_of(0, msg).items() for x in pair],
                )
                for msg in range(BATCH)
            ]
            raw.send_raw(b"".join(commands))
            raw.read_reply()  # the first command has run; the rest may or may not have
        replies = send_batch(client, key, 0)
        assert client.xlen(key) == BATCH
        entries = client.xrange(key)
        assert [sid for sid, _ in entries] == replies
        assert [fields for _, fields in entries] == expected_entries(1)
        info = idmp_info(client.xinfo_stream(key))
        assert info["iids-added"] == BATCH
        assert info["iids-added"] + info["iids-duplicates"] >= BATCH + 1
    finally:
        client.delete(key)
        client.close()


@pytest.mark.asyncio
async def test_retried_batches_are_added_once_asyncio_resp3(headwater: ServerProcess) -> None:
    key = "idmp:retry:resp3"
    client = aioredis.Redis(port=headwater.port, protocol=3)
    await client.delete(key)
    try:
        ids: list[bytes] = []
        for batch in range(BATCHES):
            replies = []
            for _attempt in range(2):
                pipe = client.pipeline(transaction=False)
                for msg in range(BATCH):
                    pipe.xadd(key, fields_of(batch, msg), idmp=("p", f"batch-{batch}-msg-{msg}"))
                replies.append(await pipe.execute())
            assert replies[1] == replies[0]
            assert len(set(replies[0])) == BATCH
            ids.extend(replies[0])
        assert await client.xlen(key) == BATCHES * BATCH
        entries = await client.xrange(key)
        assert [sid for sid, _ in entries] == ids
        assert [fields for _, fields in entries] == expected_entries(BATCHES)
        info = await client.xinfo_stream(key)
        assert idmp_info(info) == {
            "pids-tracked": 1,
            "iids-tracked": BATCH,
            "iids-added": BATCHES * BATCH,
            "iids-duplicates": BATCHES * BATCH,
        }
        # The seed's spelling of the settings commands; CFGGET is a map in RESP3.
        assert await client.execute_command("XIDMP", "CFGGET", key) == {
            b"duration": 100,
            b"maxsize": 100,
        }
        assert await client.execute_command("XIDMP", "CFGSET", key, "DURATION", 50, "MAXSIZE", 7)
        assert await client.execute_command("XIDMP", "CFGGET", key) == {
            b"duration": 50,
            b"maxsize": 7,
        }
        assert await client.execute_command("XIDMP", "CFGGET", key, "MAXSIZE") == {b"maxsize": 7}
        info = await client.xinfo_stream(key)
        assert (info["idmp-duration"], info["idmp-maxsize"]) == (50, 7)
        assert (info["pids-tracked"], info["iids-tracked"]) == (0, 0)  # a change clears
    finally:
        await client.delete(key)
        await client.aclose()


def test_evicted_iid_is_no_longer_deduplicated(headwater: ServerProcess) -> None:
    key = "idmp:evict"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        client.xadd(key, {"seed": "1"})
        assert client.xcfgset(key, idmp_maxsize=2) == b"OK"
        ids = [client.xadd(key, {"n": str(i)}, idmp=("p", f"i{i}")) for i in (1, 2, 3)]
        # i1 was evicted by i3 (maxsize 2): sending it again adds a new entry.
        again = client.xadd(key, {"n": "1"}, idmp=("p", "i1"))
        assert again not in ids
        assert client.xlen(key) == 5
        # i2 was evicted in turn by that i1; i3 and i1 are still deduplicated.
        assert client.xadd(key, {"n": "3"}, idmp=("p", "i3")) == ids[2]
        assert client.xadd(key, {"n": "1"}, idmp=("p", "i1")) == again
        assert client.xadd(key, {"n": "2"}, idmp=("p", "i2")) not in ids
        assert client.xlen(key) == 6
        assert idmp_info(client.xinfo_stream(key)) == {
            "pids-tracked": 1,
            "iids-tracked": 2,
            "iids-added": 5,
            "iids-duplicates": 2,
        }
        # The same value again keeps the history; another value clears it.
        assert client.execute_command("XCFGSET", key, "IDMP-MAXSIZE", 2)
        assert client.xinfo_stream(key)["iids-tracked"] == 2
        assert client.execute_command("XCFGSET", key, "IDMP-MAXSIZE", 3)
        info = client.xinfo_stream(key)
        assert (info["pids-tracked"], info["iids-tracked"], info["iids-added"]) == (0, 0, 5)
        assert client.xadd(key, {"n": "3"}, idmp=("p", "i3")) != ids[2]
        assert client.xlen(key) == 7
    finally:
        client.delete(key)
        client.close()


def test_duplicates_return_the_original_id_without_trimming(headwater: ServerProcess) -> None:
    key = "idmp:dup-no-trim"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        first = client.xadd(key, {"f": "v"}, idmp=("p", "x"))
        client.xadd(key, {"f": "w"})
        client.xadd(key, {"f": "z"})
        # A duplicate with MAXLEN 1 trims nothing; the fields are not even compared.
        dup = client.xadd(key, {"other": "fields"}, maxlen=1, approximate=False, idmp=("p", "x"))
        assert dup == first
        assert client.xlen(key) == 3
        # Even once the entry is gone, its iid still answers with its ID.
        assert client.xdel(key, first) == 1
        assert client.xadd(key, {"f": "v"}, idmp=("p", "x")) == first
        assert client.xlen(key) == 2
    finally:
        client.delete(key)
        client.close()


def test_producers_are_independent(headwater: ServerProcess) -> None:
    key = "idmp:producers"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        a = [client.xadd(key, {"m": str(i)}, idmp=("A", f"msg-{i}")) for i in range(10)]
        b = [client.xadd(key, {"m": str(i)}, idmp=("B", f"msg-{i}")) for i in range(10)]
        assert not set(a) & set(b)
        assert client.xlen(key) == 20
        assert [client.xadd(key, {"m": "x"}, idmp=("A", f"msg-{i}")) for i in range(10)] == a
        assert [client.xadd(key, {"m": "x"}, idmp=("B", f"msg-{i}")) for i in range(10)] == b
        # IDMPAUTO under two pids: the same content is two messages.
        auto_a = client.xadd(key, {"k": "v"}, idmpauto="A")
        auto_b = client.xadd(key, {"k": "v"}, idmpauto="B")
        assert auto_a != auto_b
        assert client.xadd(key, {"k": "v"}, idmpauto="B") == auto_b
        assert client.xadd(key, {"K": "v"}, idmpauto="B") != auto_b  # field names matter
        assert client.xlen(key) == 23
        assert idmp_info(client.xinfo_stream(key)) == {
            "pids-tracked": 2,
            "iids-tracked": 23,
            "iids-added": 23,
            "iids-duplicates": 21,
        }
    finally:
        client.delete(key)
        client.close()


def test_seed_xidmp_cfgget_cfgset_resp2(headwater: ServerProcess) -> None:
    key = "idmp:seed-syntax"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        client.xadd(key, {"f": "v"}, idmp=("p", "i"))
        assert client.execute_command("XIDMP", "CFGGET", key) == [
            b"duration",
            100,
            b"maxsize",
            100,
        ]
        assert client.execute_command("XIDMP", "CFGSET", key, "DURATION", 100, "MAXSIZE", 100)
        assert client.xinfo_stream(key)["iids-tracked"] == 1  # nothing changed: kept
        assert client.execute_command("XIDMP", "CFGSET", key, "DURATION", 30, "MAXSIZE", 5)
        assert client.execute_command("XIDMP", "CFGGET", key, "DURATION") == [b"duration", 30]
        info = client.xinfo_stream(key)
        assert (info["idmp-duration"], info["idmp-maxsize"], info["iids-tracked"]) == (30, 5, 0)
    finally:
        client.delete(key)
        client.close()


def error_of(client: redis.Redis, *args: Any) -> str:
    with pytest.raises(redis.ResponseError) as caught:
        client.execute_command(*args)
    return str(caught.value)


def test_errors_are_exact(headwater: ServerProcess) -> None:
    key = "idmp:errors"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        only_auto = "syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs"
        assert error_of(client, "XADD", key, "IDMP", "p", "i", "1-1", "f", "v") == only_auto
        assert error_of(client, "XADD", key, "IDMP", "p", "i", "5-*", "f", "v") == only_auto
        assert error_of(client, "XADD", key, "IDMPAUTO", "p", "1-1", "f", "v") == only_auto
        assert (
            error_of(client, "XADD", key, "IDMP", "", "i", "*", "f", "v")
            == "syntax error, IDMP requires a non-empty producer ID"
        )
        assert (
            error_of(client, "XADD", key, "IDMPAUTO", "", "*", "f", "v")
            == "syntax error, IDMPAUTO requires a non-empty producer ID"
        )
        assert (
            error_of(client, "XADD", key, "IDMP", "p", "", "*", "f", "v")
            == "syntax error, IDMP requires a non-empty idempotent ID"
        )
        assert (
            error_of(client, "XADD", key, "IDMP", "p", "i", "IDMPAUTO", "p", "*", "f", "v")
            == "syntax error, IDMP/IDMPAUTO specified multiple times"
        )
        assert client.exists(key) == 0  # parse errors come before the key is touched
        assert error_of(client, "XCFGSET", key, "IDMP-DURATION", 5) == "no such key"
        assert error_of(client, "XCFGSET", key, "IDMP-DURATION", 0) == "no such key"  # key first

        client.xadd(key, {"f": "v"})
        for args, text in [
            (("IDMP-DURATION", 0), "IDMP-DURATION must be between 1 and 86400 seconds"),
            (("IDMP-DURATION", 86401), "IDMP-DURATION must be between 1 and 86400 seconds"),
            (("IDMP-MAXSIZE", 0), "IDMP-MAXSIZE must be between 1 and 10000 entries"),
            (("IDMP-MAXSIZE", 10001), "IDMP-MAXSIZE must be between 1 and 10000 entries"),
            (("IDMP-MAXSIZE", "x"), "value is not an integer or out of range"),
            (
                ("IDMP-DURATION", 5, "IDMP-DURATION", 6),
                "IDMP-DURATION specified multiple times",
            ),
            (("IDMP-MAXSIZE", 5, "IDMP-MAXSIZE", 6), "IDMP-MAXSIZE specified multiple times"),
            ((), "At least one parameter must be specified"),
            (("IDMP-DURATION",), "syntax error"),
            (("BOGUS", 5), "syntax error"),
        ]:
            assert error_of(client, "XCFGSET", key, *args) == text, args
        info = client.xinfo_stream(key)
        assert (info["idmp-duration"], info["idmp-maxsize"]) == (100, 100)  # untouched
        assert client.execute_command("XCFGSET", key, "IDMP-DURATION", 86400)
        assert client.execute_command("XCFGSET", key, "IDMP-MAXSIZE", 10000)
        client.set("idmp:errors:string", "x")
        assert error_of(client, "XCFGSET", "idmp:errors:string", "IDMP-MAXSIZE", 5).startswith(
            "WRONGTYPE"
        )
    finally:
        client.delete(key, "idmp:errors:string")
        client.close()


def test_iids_expire_after_the_duration(headwater: ServerProcess) -> None:
    key = "idmp:expiry"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        client.xadd(key, {"seed": "1"})
        assert client.xcfgset(key, idmp_duration=1) == b"OK"
        first = client.xadd(key, {"f": "v"}, idmp=("p", "once"))
        auto = client.xadd(key, {"f": "v"}, idmpauto="q")
        assert client.xadd(key, {"f": "v"}, idmp=("p", "once")) == first
        assert client.xadd(key, {"f": "v"}, idmpauto="q") == auto
        assert client.xinfo_stream(key)["iids-tracked"] == 2
        time.sleep(2.5)
        info = client.xinfo_stream(key)
        assert idmp_info(info) == {
            "pids-tracked": 0,
            "iids-tracked": 0,
            "iids-added": 2,
            "iids-duplicates": 2,
        }
        again = client.xadd(key, {"f": "v"}, idmp=("p", "once"))
        assert again != first
        assert client.xadd(key, {"f": "v"}, idmpauto="q") != auto
        assert client.xlen(key) == 5
    finally:
        client.delete(key)
        client.close()


def test_any_binary_string_is_a_pid_or_iid(headwater: ServerProcess) -> None:
    key = "idmp:binary"
    client = redis.Redis(port=headwater.port, protocol=2)
    client.delete(key)
    try:
        # ``IDMP p * *``: the iid is "*", then the ID; "-", NULs and 64 KB iids are fine too.
        star = client.execute_command("XADD", key, "IDMP", "p", "*", "*", "f", "v")
        assert client.execute_command("XADD", key, "IDMP", "p", "*", "*", "f", "v") == star
        for iid in (b"-", b"\x00", b"\x00\xff\x00", b"x" * 65536):
            first = client.xadd(key, {"f": "v"}, idmp=("p", iid))
            assert client.xadd(key, {"f": "w"}, idmp=("p", iid)) == first
        binary_pid = client.xadd(key, {"f": "v"}, idmp=("p\x00", "*"))
        assert binary_pid != star
        assert client.xlen(key) == 6
        full = client.xinfo_stream(key, full=True)
        assert idmp_info(full) == {
            "pids-tracked": 2,
            "iids-tracked": 6,
            "iids-added": 6,
            "iids-duplicates": 5,
        }
    finally:
        client.delete(key)
        client.close()


@pytest.mark.asyncio
async def test_a_duplicate_wakes_no_blocked_reader(headwater: ServerProcess) -> None:
    key = "idmp:no-wake"
    reader = aioredis.Redis(port=headwater.port, protocol=3)
    writer = aioredis.Redis(port=headwater.port, protocol=3)
    await writer.delete(key)
    try:
        first = await writer.xadd(key, {"f": "v"}, idmp=("p", "i"))
        task = asyncio.create_task(reader.xread({key: "$"}, block=400))
        for _ in range(100):  # wait until the reader is parked
            if (await writer.info("clients"))["blocked_clients"] >= 1:
                break
            await asyncio.sleep(0.01)
        assert await writer.xadd(key, {"f": "v"}, idmp=("p", "i")) == first
        assert await task == {}  # timed out: nothing was added
        assert await writer.xlen(key) == 1
    finally:
        await writer.delete(key)
        await reader.aclose()
        await writer.aclose()
