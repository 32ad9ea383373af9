"""MEMORY USAGE, MALLOC-STATS, PURGE, STATS and HELP (Redis ``object.c``'s memoryCommand).

USAGE answers Redis's own estimate of what a key costs (``ops/memory.py`` says how), not
Headwater's Python memory. Headwater does not run on jemalloc, so MALLOC-STATS answers what a
Redis built without it answers; PURGE returns glibc's free pages to the system
(``allocator.py``), as Redis's asks jemalloc to. STATS reports
the process's figures in Redis's shape: memory is the resident set (``used_memory``), the
dataset is what is left after the startup memory and the overheads Headwater can name.
DOCTOR is Redis's report on the figures Headwater has (``doctor_report``).
"""

from __future__ import annotations

from itertools import islice

from headwater.allocator import release_free_memory
from headwater.commands.args import parse_int
from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.errors import SYNTAX
from headwater.ops.memory import DEFAULT_SAMPLES, key_usage
from headwater.resp.types import OK, Reply, Verbatim

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
    release_free_memory()
    return OK


_EMPTY = 5 * 1024 * 1024
DOCTOR_FINE = (
    "Hi Sam, I can't find any memory issue in your instance. I can only account for what "
    "occurs on this base.\n"
)
DOCTOR_EMPTY = (
    "Hi Sam, this instance is empty or is using very little memory, my issues detector can't "
    "be used in these conditions. Please, leave for your mission on Earth and fill it with "
    "some data. The new Sam and I will be back to our programming as soon as I finished "
    "rebooting.\n"
)
_DOCTOR_ISSUES = {
    "peak": " * Peak memory: In the past this instance used more than 150% the memory that is "
    "currently using. The allocator is normally not able to release memory after a peak, so "
    "you can expect to see a big fragmentation ratio, however this is actually harmless and "
    "is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is "
    "currently bigger than expected, the memory will be used as soon as you fill the Redis "
    "instance with more data. If the memory peak was only occasional and you want to try to "
    "reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is "
    "to shutdown and restart the instance.\n\n",
    "replicas": " * Big replica buffers: The replica output buffers in this instance are "
    "greater than 10MB for each replica (on average). This likely means that there is some "
    "replica instance that is struggling receiving data, either because it is too slow or "
    "because of networking issues. As a result, data piles on the master output buffers. "
    "Please try to identify what replica is not receiving data correctly and why. You can "
    "use the INFO output in order to check the replicas delays and the CLIENT LIST command "
    "to check the output buffers of each replica.\n\n",
    "clients": " * Big client buffers: The clients output buffers in this instance are "
    "greater than 200K per client (on average). This may result from different causes, like "
    "Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data "
    "piles on the Redis instance output buffer, or clients sending commands with large "
    "replies or very large sequences of commands in the same pipeline. Please use the CLIENT "
    "LIST command in order to investigate the issue if it causes problems in your instance, "
    "or to understand better why certain clients are using a big amount of memory.\n\n",
    "scripts": " * Many scripts: There seem to be many cached scripts in this instance (more "
    "than 1000). This may be because scripts are generated and `EVAL`ed, instead of being "
    "parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT "
    "FLUSH` is called periodically, the scripts' caches may end up consuming most of your "
    "memory.\n\n",
}


def doctor_report(c: Client) -> str:
    """Redis's getMemoryDoctorReport, on what Headwater can measure: the memory its data
    takes as Redis would size it (MEMORY USAGE's estimate: the process's own size, which
    does not shrink when keys go, says nothing of the dataset), the peak of the resident
    set, the clients' and replicas' output, the cached scripts. (The allocator's
    fragmentation checks need jemalloc's figures: they never fire here.)"""
    server = c.server
    if _dataset_estimate(c) < _EMPTY:
        return DOCTOR_EMPTY
    used = server.rss_memory()
    peak = server.info.peak_memory = max(server.info.peak_memory, used)
    issues = []
    if peak / used > 1.5:
        issues.append("peak")
    clients = [x for x in server.clients.values() if not x.is_replica]
    replicas = [x for x in server.clients.values() if x.is_replica]
    if clients and sum(x.out_bytes for x in clients) / len(clients) > 200 * 1024:
        issues.append("clients")
    if replicas and sum(x.out_bytes for x in replicas) / len(replicas) > 10 * 1024 * 1024:
        issues.append("replicas")
    if _cached_scripts(c) > 1000:
        issues.append("scripts")
    if not issues:
        return DOCTOR_FINE
    order = ("peak", "replicas", "clients", "scripts")
    body = "".join(_DOCTOR_ISSUES[name] for name in order if name in issues)
    return (
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n"
        + body
        + "I'm here to keep you safe, Sam. I want to help you.\n"
    )


def _dataset_estimate(c: Client) -> int:
    """The data's size by MEMORY USAGE's estimate: every key of a small database, else the
    first 1,000 keys' average times the number of keys."""
    total = 0
    node_bytes = c.server.config["stream-node-max-bytes"]
    for db in c.server.keyspace.dbs:
        data = db.data
        if not data:
            continue
        sample = list(islice(data.items(), 1000))
        sized = sum(key_usage(key, value, DEFAULT_SAMPLES, node_bytes) for key, value in sample)
        total += sized * len(data) // len(sample)
    return total


def _cached_scripts(c: Client) -> int:
    for line in c.server.scripting_memory():
        name, _, value = line.partition(":")
        if name == "number_of_cached_scripts":
            return int(value)
    return 0


def cmd_memory_doctor(c: Client, argv: list[bytes]) -> Reply:
    return Verbatim(doctor_report(c).encode())


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
            spec("memory|doctor", 2, "", handler=cmd_memory_doctor),
            spec("memory|malloc-stats", 2, "", handler=cmd_memory_malloc_stats),
            spec("memory|purge", 2, "", handler=cmd_memory_purge),
            spec("memory|help", 2, "loading stale", handler=cmd_memory_help),
        ),
    ),
)
