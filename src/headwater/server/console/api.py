"""The console's JSON answers, each from the commands a client would run (see __init__)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from headwater.server.local_link import LocalClient, is_error

#: streams described per round trip (the server serves others between two)
CHUNK = 500
#: the sort keys of the streams page, and the default
STREAM_SORTS = ("name", "length", "bytes", "entries_added", "groups", "last_id")
PAGE_SIZES = range(1, 1001)


class ApiError(Exception):
    """An answer that is an error: ``status`` and the text shown to the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def text(raw: Any) -> str:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "backslashreplace")
    return str(raw)


def checked(reply: Any) -> Any:
    """The reply, or the ApiError a refused or failed command makes."""
    if is_error(reply):
        message = str(reply)
        status = 403 if message.startswith(("NOPERM", "NOAUTH", "DENIED")) else 400
        raise ApiError(status, message)
    return reply


def pairs(flat: list[Any]) -> dict[str, Any]:
    """A RESP2 map (name, value, name, value …) as a dict with text names."""
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def info_fields(raw: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text(raw).splitlines():
        if line and not line.startswith("#") and ":" in line:
            name, _, value = line.partition(":")
            fields[name] = value
    return fields


def entry(raw: list[Any]) -> dict[str, Any]:
    """An XRANGE entry: its ID and its fields, in order."""
    flat = raw[1] or []
    return {
        "id": text(raw[0]),
        "fields": [[text(flat[i]), text(flat[i + 1])] for i in range(0, len(flat) - 1, 2)],
    }


def integer(query: dict[str, str] | Any, name: str, default: int, allowed: range) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None
    if value not in allowed:
        raise ApiError(400, f"{name} must be from {allowed.start} to {allowed.stop - 1}")
    return value


def required(query: dict[str, str] | Any, name: str) -> str:
    value = query.get(name)
    if not value:
        raise ApiError(400, f"{name} is required")
    return str(value)


# -- the pages' data ---------------------------------------------------------------------------


async def overview(client: LocalClient) -> dict[str, Any]:
    info = info_fields(checked(await client.call("INFO", "everything")))
    keys = 0
    for name, value in info.items():
        if name.startswith("db") and value.startswith("keys="):
            keys += int(value.split(",")[0][5:])
    fields = (
        "redis_version", "headwater_version", "redis_mode", "role", "uptime_in_seconds",
        "connected_clients", "blocked_clients", "used_memory", "used_memory_human",
        "used_memory_rss", "maxmemory", "instantaneous_ops_per_sec", "total_commands_processed",
        "aof_enabled", "aof_last_write_status", "aof_rewrite_in_progress",
        "aof_last_bgrewrite_status", "rdb_bgsave_in_progress", "rdb_last_bgsave_status",
        "rdb_changes_since_last_save", "loading", "connected_slaves", "master_repl_offset",
        "tcp_port", "executable", "config_file", "aof_current_size", "aof_pending_bio_fsync",
    )  # fmt: skip
    picked = {name: info.get(name, "") for name in fields}
    picked["keys"] = str(keys)
    picked["appendfsync"] = await _config(client, "appendfsync")
    return picked


async def _config(client: LocalClient, name: str) -> str:
    reply = await client.call("CONFIG", "GET", name)
    if is_error(reply) or len(reply) < 2:
        return ""
    return text(reply[1])


async def stream_names(client: LocalClient, pattern: str) -> list[bytes]:
    names: list[bytes] = []
    cursor = b"0"
    while True:
        cursor, found = checked(
            await client.call("SCAN", cursor, "MATCH", pattern, "COUNT", 5000, "TYPE", "stream")
        )
        names.extend(found)
        if cursor == b"0":
            return names


async def streams(client: LocalClient, query: Any) -> dict[str, Any]:
    pattern = query.get("pattern") or "*"
    sort = query.get("sort") or "length"
    if sort not in STREAM_SORTS:
        raise ApiError(400, f"sort must be one of {', '.join(STREAM_SORTS)}")
    descending = (query.get("order") or "desc") != "asc"
    size = integer(query, "size", 50, PAGE_SIZES)
    page = integer(query, "page", 1, range(1, 1 << 31))
    names = sorted(set(await stream_names(client, pattern)))
    rows: list[dict[str, Any]] = []
    for start in range(0, len(names), CHUNK):
        chunk = names[start : start + CHUNK]
        commands: list[tuple[bytes | str, ...]] = []
        for name in chunk:
            commands.append(("XINFO", "STREAM", name))
            commands.append(("MEMORY", "USAGE", name))
        replies = await client.pipeline(commands)
        for i, name in enumerate(chunk):
            described, usage = replies[2 * i], replies[2 * i + 1]
            if is_error(described) or described is None:
                continue  # (gone meanwhile, or a key this user may not read)
            rows.append(_stream_row(name, pairs(described), usage))
    rows.sort(key=_sort_key(sort), reverse=descending)
    first = (page - 1) * size
    return {
        "total": len(rows),
        "page": page,
        "size": size,
        "rows": rows[first : first + size],
    }


def _stream_row(name: bytes, described: dict[str, Any], usage: Any) -> dict[str, Any]:
    return {
        "name": text(name),
        "length": described.get("length", 0),
        "bytes": usage if isinstance(usage, int) else None,
        "entries_added": described.get("entries-added", described.get("length", 0)),
        "groups": described.get("groups", 0),
        "last_id": text(described.get("last-generated-id", b"")),
    }


def _sort_key(sort: str) -> Callable[[dict[str, Any]], Any]:
    if sort == "name":
        return lambda row: row["name"]
    if sort == "last_id":
        return lambda row: tuple(int(part) for part in row["last_id"].split("-"))
    return lambda row: (row[sort] or 0, row["name"])


async def browse(client: LocalClient, query: Any) -> dict[str, Any]:
    """A page of a stream: ``after`` an ID (forward), ``before`` one (backward), ``at`` a
    time in ms (forward from the first entry at or after it), else its newest entries."""
    key = required(query, "key")
    count = integer(query, "count", 50, PAGE_SIZES)
    if query.get("after"):
        reply = await client.call("XRANGE", key, "(" + query["after"], "+", "COUNT", count)
        entries = checked(reply)
    elif query.get("at"):
        at = integer(query, "at", 0, range(0, 1 << 63))
        entries = checked(await client.call("XRANGE", key, at, "+", "COUNT", count))
    elif query.get("before"):
        reply = await client.call("XREVRANGE", key, "(" + query["before"], "-", "COUNT", count)
        entries = list(reversed(checked(reply)))
    else:
        entries = list(
            reversed(checked(await client.call("XREVRANGE", key, "+", "-", "COUNT", count)))
        )
    length = checked(await client.call("XLEN", key))
    first = checked(await client.call("XRANGE", key, "-", "+", "COUNT", 1))
    last = checked(await client.call("XREVRANGE", key, "+", "-", "COUNT", 1))
    return {
        "key": key,
        "length": length,
        "first_id": text(first[0][0]) if first else None,
        "last_id": text(last[0][0]) if last else None,
        "entries": [entry(raw) for raw in entries],
    }


async def groups(client: LocalClient, query: Any) -> dict[str, Any]:
    key = required(query, "key")
    described = []
    for raw in checked(await client.call("XINFO", "GROUPS", key)):
        group = pairs(raw)
        name = group["name"]
        consumers = [pairs(c) for c in checked(await client.call("XINFO", "CONSUMERS", key, name))]
        described.append(
            {
                "name": text(name),
                "pending": group.get("pending", 0),
                "lag": group.get("lag"),
                "entries_read": group.get("entries-read"),
                "last_delivered_id": text(group.get("last-delivered-id", b"")),
                "consumers": [
                    {
                        "name": text(c["name"]),
                        "pending": c.get("pending", 0),
                        "idle_ms": c.get("idle", 0),
                        "inactive_ms": c.get("inactive", -1),
                    }
                    for c in consumers
                ],
            }
        )
    length = checked(await client.call("XLEN", key))
    return {"key": key, "length": length, "groups": described}


async def pending(client: LocalClient, query: Any) -> dict[str, Any]:
    key, group = required(query, "key"), required(query, "group")
    count = integer(query, "count", 100, PAGE_SIZES)
    rows = checked(await client.call("XPENDING", key, group, "-", "+", count))
    return {
        "key": key,
        "group": group,
        "pending": [
            {"id": text(r[0]), "consumer": text(r[1]), "idle_ms": r[2], "deliveries": r[3]}
            for r in rows
        ],
    }


async def replication(client: LocalClient) -> dict[str, Any]:
    info = info_fields(checked(await client.call("INFO", "replication")))
    replicas = []
    for name, value in info.items():
        if name.startswith("slave") and name[5:].isdigit():
            fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
            replicas.append(fields)
    regions = info_fields(checked(await client.call("INFO", "active-active")))
    return {"replication": info, "replicas": replicas, "regions": regions}


async def diagnostics(client: LocalClient) -> dict[str, Any]:
    slow = await client.call("SLOWLOG", "GET", 50)
    latest = await client.call("LATENCY", "LATEST")
    return {
        "slowlog": None if is_error(slow) else [_slow_entry(e) for e in slow],
        "slowlog_error": str(slow) if is_error(slow) else None,
        "latency": None if is_error(latest) else [
            {"event": text(e[0]), "at": e[1], "latest_ms": e[2], "max_ms": e[3]} for e in latest
        ],
        "latency_error": str(latest) if is_error(latest) else None,
        "notify_keyspace_events": await _config(client, "notify-keyspace-events"),
    }  # fmt: skip


def _slow_entry(raw: list[Any]) -> dict[str, Any]:
    return {
        "id": raw[0],
        "at": raw[1],
        "duration_us": raw[2],
        "argv": [text(a) for a in raw[3]],
        "client": text(raw[4]) if len(raw) > 4 else "",
        "name": text(raw[5]) if len(raw) > 5 else "",
    }


# -- actions -----------------------------------------------------------------------------------


def _ids(body: dict[str, Any]) -> list[str]:
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ApiError(400, "ids must be a list of entry IDs")
    return ids


def _field(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise ApiError(400, f"{name} is required")
    return value


async def claim(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    key, group, consumer = _field(body, "key"), _field(body, "group"), _field(body, "consumer")
    reply = checked(await client.call("XCLAIM", key, group, consumer, 0, *_ids(body), "JUSTID"))
    return {"claimed": [text(i) for i in reply]}


async def ack(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    key, group = _field(body, "key"), _field(body, "group")
    return {"acked": checked(await client.call("XACK", key, group, *_ids(body)))}


async def delete_consumer(client: LocalClient, body: dict[str, Any]) -> dict[str, Any]:
    key, group, consumer = _field(body, "key"), _field(body, "group"), _field(body, "consumer")
    reply = await client.call("XGROUP", "DELCONSUMER", key, group, consumer)
    return {"pending_dropped": checked(reply)}


Reader = Callable[[LocalClient, Any], Awaitable[dict[str, Any]]]

READS: dict[str, Reader] = {
    "overview": lambda client, query: overview(client),
    "streams": streams,
    "stream": browse,
    "groups": groups,
    "pending": pending,
    "replication": lambda client, query: replication(client),
    "diagnostics": lambda client, query: diagnostics(client),
}
ACTIONS: dict[str, Reader] = {
    "claim": claim,
    "ack": ack,
    "delconsumer": delete_consumer,
}


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(body), status=status, content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )  # fmt: skip
