"""A server's data, logically: every key of every database by type, as two servers that hold
the same data answer the same (Redis and Headwater across a replication link). Streams
include each group's last-delivered ID, entries-read, pending count, the PEL's IDs, owners
and delivery counts, and the consumers' names and pending counts; idle times and TTLs'
exact milliseconds are left out (each side's clock)."""

from __future__ import annotations

from typing import Any

import redis


def dump(
    r: redis.Redis, databases: int = 16, entries_read: bool = True, skip: bytes | None = None
) -> dict[tuple[int, bytes], Any]:
    """``entries_read=False`` leaves groups' entries-read out: a Redis 7.0 primary does not
    send it (its XREADGROUP propagates XCLAIM … LASTID only; 8.x adds XGROUP SETID …
    ENTRIESREAD), so no replica of it can know it (Redis's own keeps a stale count).
    ``skip``: keys with this prefix are left out (bulk filler compared otherwise)."""
    out: dict[tuple[int, bytes], Any] = {}
    for db in range(databases):
        client = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=db)
        try:
            for key in client.scan_iter(count=1000):
                if skip is None or not key.startswith(skip):
                    out[db, key] = _value(client, key, entries_read)
        finally:
            client.close()
    return out


def _value(r: redis.Redis, key: bytes, entries_read: bool = True) -> Any:
    kind = r.type(key).decode()
    ttl = r.pttl(key)
    expiry = "none" if ttl == -1 else "set"
    if kind == "string":
        return kind, r.get(key), expiry
    if kind == "hash":
        return kind, r.hgetall(key), expiry
    if kind == "list":
        return kind, r.lrange(key, 0, -1), expiry
    if kind == "set":
        return kind, sorted(r.smembers(key)), expiry
    if kind == "zset":
        return kind, r.zrange(key, 0, -1, withscores=True), expiry
    if kind == "stream":
        return kind, _stream(r, key, entries_read), expiry
    return kind, None, expiry


def _stream(r: redis.Redis, key: bytes, entries_read: bool) -> Any:
    entries = r.xrange(key)
    info = r.xinfo_stream(key)
    groups = []
    for group in r.xinfo_groups(key):
        name = group["name"]
        pel = r.xpending_range(key, name, "-", "+", 100_000)
        consumers = sorted((c["name"], c["pending"]) for c in r.xinfo_consumers(key, name))
        groups.append(
            (
                name,
                group["last-delivered-id"],
                group.get("entries-read") if entries_read else None,
                group["pending"],
                [(p["message_id"], p["consumer"], p["times_delivered"]) for p in pel],
                consumers,
            )
        )
    return (
        entries,
        info["last-generated-id"],
        info.get("entries-added"),
        info.get("max-deleted-entry-id"),
        sorted(groups),
    )


def differences(
    ours: dict[tuple[int, bytes], Any], theirs: dict[tuple[int, bytes], Any]
) -> list[str]:
    """What differs, key by key (empty when the data is the same)."""
    out = [f"only on the first: {k}" for k in ours.keys() - theirs.keys()]
    out += [f"only on the second: {k}" for k in theirs.keys() - ours.keys()]
    for k in ours.keys() & theirs.keys():
        if ours[k] != theirs[k]:
            out.append(f"{k}: {ours[k]!r:.300} != {theirs[k]!r:.300}")
    return sorted(out)
