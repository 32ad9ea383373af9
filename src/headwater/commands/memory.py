"""MEMORY USAGE, MALLOC-STATS, PURGE, STATS and HELP (Redis ``object.c``'s memoryCommand).

USAGE answers Redis's own estimate of what a key costs (``ops/memory.py`` says how), not
Headwater's Python memory. Headwater does not run on jemalloc, so MALLOC-STATS answers what a
Redis built without it answers, and PURGE is a no-op that says OK, as there. STATS reports
the process's figures in Redis's shape: memory is the resident set (``used_memory``), the
dataset is what is left after the startup memory and the overheads Headwater can name.
MEMORY DOCTOR comes later with the other operability commands (issue #19's exclusions).
"""

from __future__ import annotations

from headwater.commands.args import parse_int
from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.errors import SYNTAX
from headwater.ops.memory import DEFAULT_SAMPLES, key_usage
from headwater.resp.types import OK, Reply

_ALL = 2**63 - 1


def cmd_memory_usage(c: Client, argv: list[bytes]) -> Reply:
    """MEMORY USAGE key [SAMPLES count]: bytes (0 samples: every element)."""
    samples = DEFAULT_SAMPLES
    i = 3
    while i < len(argv):
        if argv[i].upper() == b"SAMPLES" and i + 1 < len(argv):
            samples = parse_int(argv[i + 1])
            if samples < 0:
                raise SYNTAX
            samples = samples or _ALL
            i += 2
        else:
            raise SYNTAX
    key = argv[2]
    value = c.db.data.get(key)  # (Redis's dictFind: no expiry check, no access, no stats)
    if value is None:
        return None
    return key_usage(key, value, samples, c.server.config["stream-node-max-bytes"])


def cmd_memory_malloc_stats(c: Client, argv: list[bytes]) -> Reply:
    return b"Stats not supported for the current allocator"


def cmd_memory_purge(c: Client, argv: list[bytes]) -> Reply:
    return OK


def cmd_memory_stats(c: Client, argv: list[bytes]) -> Reply:
    """MEMORY STATS: Redis's fields, from the process's figures (module doc)."""
    server = c.server
    used = server.used_memory()
    startup = min(server.info.startup_memory or used, used)
    peak = server.info.peak_memory = max(server.info.peak_memory, used)
    out: dict[Reply, Reply] = {
        b"peak.allocated": peak,
        b"total.allocated": used,
        b"startup.allocated": startup,
        b"replication.backlog": 0,
        b"clients.slaves": 0,
        b"clients.normal": sum(client.out_bytes for client in server.clients.values()),
        b"cluster.links": 0,
        b"aof.buffer": server.info.aof_buffer_length,
        b"lua.caches": 0,
        b"functions.caches": 0,
    }
    overhead = startup
    keys = 0
    for db in server.keyspace.dbs:
        if not db.data:
            continue
        keys += len(db.data)
        main = len(db.data) * (24 + 8 + 16)
        expires = len(db.expires) * (24 + 8)
        overhead += main + expires
        out[b"db.%d" % db.index] = {
            b"overhead.hashtable.main": main,
            b"overhead.hashtable.expires": expires,
            b"overhead.hashtable.slot-to-keys": 0,
        }
    net = max(used - startup, 1)
    dataset = max(used - overhead, 0)
    out.update(
        {
            b"overhead.total": overhead,
            b"keys.count": keys,
            b"keys.bytes-per-key": net // keys if keys else 0,
            b"dataset.bytes": dataset,
            b"dataset.percentage": dataset * 100 / net,
            b"peak.percentage": used * 100 / peak,
            b"allocator.allocated": used,
            b"allocator.active": used,
            b"allocator.resident": used,
            b"allocator-fragmentation.ratio": 1.0,
            b"allocator-fragmentation.bytes": 0,
            b"allocator-rss.ratio": 1.0,
            b"allocator-rss.bytes": 0,
            b"rss-overhead.ratio": 1.0,
            b"rss-overhead.bytes": 0,
            b"fragmentation": 1.0,
            b"fragmentation.bytes": 0,
        }
    )
    return out


MEMORY_HELP = [
    b"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"DOCTOR",
    b"    Return memory problems reports.",
    b"MALLOC-STATS",
    b"    Return internal statistics report from the memory allocator.",
    b"PURGE",
    b"    Attempt to purge dirty pages for reclamation by the allocator.",
    b"STATS",
    b"    Return information about the memory usage of the server.",
    b"USAGE <key> [SAMPLES <count>]",
    b"    Return memory in bytes used by <key> and its value. Nested values are",
    b"    sampled up to <count> times (default: 5, 0 means sample all).",
    b"HELP",
    b"    Prints this help.",
]

cmd_memory_help = help_handler(MEMORY_HELP)


SPECS = (
    spec(
        "memory",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("memory|usage", -3, "readonly", (2, 2, 1), cmd_memory_usage),
            spec("memory|stats", 2, "", handler=cmd_memory_stats),
            spec("memory|malloc-stats", 2, "", handler=cmd_memory_malloc_stats),
            spec("memory|purge", 2, "", handler=cmd_memory_purge),
            spec("memory|help", 2, "loading stale", handler=cmd_memory_help),
        ),
    ),
)
