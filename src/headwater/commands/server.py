"""Server commands: INFO, CONFIG, TIME, DEBUG, SHUTDOWN, LASTSAVE."""

from __future__ import annotations

import os
import platform
import resource
import sys
import time

from headwater import REDIS_COMPAT_VERSION, __version__
from headwater._build import build_kind
from headwater.acl.users import DENIED_AUTH, DENIED_CHANNEL, DENIED_CMD, DENIED_KEY
from headwater.commands import regions
from headwater.commands.args import parse_float
from headwater.commands.context import (
    Client,
    CommandSpec,
    Persistence,
    help_handler,
    reject_subcommand,
    spec,
)
from headwater.commands.latency import histogram_of, percentile
from headwater.config import InvalidConfig, UnknownConfig, print_percentile
from headwater.errors import SYNTAX, err, subcommand_syntax, wrong_arity
from headwater.ops.digest import value_digest
from headwater.resp.types import OK, Raw, Reply, Status, Verbatim

# ---------------------------------------------------------------------------------------------
# INFO

DEFAULT_SECTIONS = (
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "errorstats",
    "cluster",
    "keyspace",
)
ALL_SECTIONS = (
    *DEFAULT_SECTIONS[:7],
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
)


#: ``compiled`` (hot modules built by mypyc) or ``pure``; fixed once the modules are imported.
_BUILD = build_kind()


def _section_server(c: Client) -> list[str]:
    info = c.server.info
    uptime_s = int((c.server.clock.monotonic_ms() - info.start_mono_ms) // 1000)
    return [
        f"redis_version:{REDIS_COMPAT_VERSION}",
        "redis_git_sha1:00000000",
        "redis_git_dirty:0",
        f"redis_mode:{'standalone' if c.server.cluster is None else 'cluster'}",
        "server_name:headwater",
        f"headwater_version:{__version__}",
        f"headwater_build:{_BUILD}",
        f"os:{platform.system()} {platform.release()} {platform.machine()}",
        f"arch_bits:{64 if sys.maxsize > 2**32 else 32}",
        f"multiplexing_api:{info.event_loop}",
        f"python_version:{platform.python_version()}",
        f"process_id:{info.pid}",
        f"run_id:{info.run_id}",
        f"tcp_port:{info.port}",
        f"server_time_usec:{time.time_ns() // 1000}",
        f"uptime_in_seconds:{uptime_s}",
        f"uptime_in_days:{uptime_s // 86400}",
        f"hz:{c.server.config['hz']}",
        f"executable:{info.executable}",
        f"config_file:{info.config_file}",
    ]


def _section_clients(c: Client) -> list[str]:
    return [
        f"connected_clients:{len(c.server.clients)}",
        f"maxclients:{c.server.config['maxclients']}",
        f"blocked_clients:{c.server.blocked_count}",
        f"total_blocking_keys:{c.server.blocking_keys_count()}",
        f"total_blocking_keys_on_nokey:{c.server.blocking_keys_on_nokey_count()}",
        f"watching_clients:{sum(1 for x in c.server.clients.values() if x.watched)}",
        f"pubsub_clients:{sum(1 for x in c.server.clients.values() if x.subscribed())}",
        f"tracking_clients:{c.server.tracking.tracking_clients}",
    ]


def _human(n: int) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n}B"


def _section_memory(c: Client) -> list[str]:
    server = c.server
    used = server.used_memory()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    maxmemory = c.server.config["maxmemory"]
    # (used_memory: the resident set, or with maxmemory set what it counts: see
    # engine/eviction.py)
    return [
        f"used_memory:{used}",
        f"used_memory_human:{_human(used)}",
        f"used_memory_rss:{server.rss_memory()}",
        f"used_memory_peak:{peak_kb * 1024}",
        f"used_memory_peak_human:{_human(peak_kb * 1024)}",
        f"maxmemory:{maxmemory}",
        f"maxmemory_human:{_human(maxmemory)}",
        f"maxmemory_policy:{c.server.config['maxmemory-policy']}",
        f"mem_not_counted_for_evict:{server.memory_not_counted_for_evict()}",
        *c.server.scripting_memory(),
        "mem_allocator:pymalloc",
        "lazyfree_pending_objects:0",  # (freed at once: see ops/lazyfree.py)
        f"lazyfreed_objects:{c.server.stats.lazyfreed_objects}",
    ]


def _section_persistence(c: Client) -> list[str]:
    server = c.server
    info = server.info
    loading = info.loading
    now_s = time.monotonic()
    bgsave_s = int(now_s - info.rdb_bgsave_started_s) if info.rdb_bgsave_in_progress else -1
    rewrite_s = int(now_s - info.aof_rewrite_started_s) if info.aof_rewrite_in_progress else -1
    lines = [
        f"loading:{int(loading.active)}",
        "async_loading:0",
        # (fork copy-on-write figures Redis reads from /proc: not measured here)
        "current_cow_peak:0",
        "current_cow_size:0",
        "current_cow_size_age:0",
        "current_fork_perc:0.00",
        "current_save_keys_processed:0",
        "current_save_keys_total:0",
        f"rdb_changes_since_last_save:{server.dirty - server.dirty_at_last_save}",
        f"rdb_bgsave_in_progress:{int(info.rdb_bgsave_in_progress)}",
        f"rdb_last_save_time:{server.last_save_time}",
        f"rdb_last_bgsave_status:{info.rdb_last_bgsave_status}",
        f"rdb_last_bgsave_time_sec:{info.rdb_last_bgsave_time_sec}",
        f"rdb_current_bgsave_time_sec:{bgsave_s}",
        f"rdb_saves:{info.rdb_saves}",
        "rdb_last_cow_size:0",
        "rdb_last_load_keys_expired:0",
        f"rdb_last_load_keys_loaded:{info.last_snapshot_keys}",
        f"aof_enabled:{int(info.aof_enabled)}",
        f"aof_rewrite_in_progress:{int(info.aof_rewrite_in_progress)}",
        f"aof_rewrite_scheduled:{int(info.aof_rewrite_scheduled)}",
        f"aof_last_rewrite_time_sec:{info.aof_last_rewrite_time_sec}",
        f"aof_current_rewrite_time_sec:{rewrite_s}",
        f"aof_last_bgrewrite_status:{info.aof_last_bgrewrite_status}",
        f"aof_rewrites:{info.aof_rewrites}",
        f"aof_rewrites_consecutive_failures:{info.aof_rewrites_consecutive_failures}",
        f"aof_last_write_status:{info.aof_last_write_status}",
        "aof_last_cow_size:0",
        "module_fork_in_progress:0",
        "module_fork_last_cow_size:0",
        f"snapshot_lazy_nodes:{info.snapshot_lazy_nodes}",  # Headwater's own (see snapshot.py)
    ]
    if info.aof_enabled:
        lines += [
            f"aof_current_size:{info.aof_current_size}",
            f"aof_base_size:{info.aof_base_size}",
            f"aof_pending_rewrite:{int(info.aof_rewrite_scheduled)}",
            f"aof_buffer_length:{info.aof_buffer_length}",
            f"aof_pending_bio_fsync:{info.aof_pending_bio_fsync}",
            "aof_delayed_fsync:0",
        ]
    if loading.active:
        wall_s = server.clock.now_ms() / 1000
        lines += [
            f"loading_start_time:{int(loading.started_s)}",
            f"loading_total_bytes:{loading.total}",
            "loading_rdb_used_mem:0",  # (Headwater's snapshots do not record it)
            f"loading_loaded_bytes:{loading.done}",
            f"loading_loaded_perc:{loading.percent():.2f}",
            f"loading_eta_seconds:{loading.eta_s(wall_s)}",
        ]
    return lines


def _section_stats(c: Client) -> list[str]:
    s = c.server.stats
    denied = c.server.acl.log.denied
    return [
        f"total_connections_received:{s.total_connections_received}",
        f"total_commands_processed:{s.total_commands_processed}",
        f"instantaneous_ops_per_sec:{s.ops_rate.value()}",
        f"total_net_input_bytes:{s.net_input_bytes}",
        f"total_net_output_bytes:{s.net_output_bytes}",
        f"instantaneous_input_kbps:{s.input_rate.value() / 1024:.2f}",
        f"instantaneous_output_kbps:{s.output_rate.value() / 1024:.2f}",
        f"rejected_connections:{s.rejected_connections}",
        f"sync_full:{s.sync_full}",
        f"sync_partial_ok:{s.sync_partial_ok}",
        f"sync_partial_err:{s.sync_partial_err}",
        f"expired_keys:{s.expired_keys}",
        f"expired_subkeys:{s.expired_subkeys}",
        f"evicted_keys:{s.evicted_keys}",
        f"evicted_clients:{s.evicted_clients}",
        f"evicted_scripts:{s.evicted_scripts}",
        f"keyspace_hits:{s.keyspace_hits}",
        f"keyspace_misses:{s.keyspace_misses}",
        f"pubsub_channels:{len(c.server.pubsub.channels)}",
        f"pubsub_patterns:{len(c.server.pubsub.patterns)}",
        f"pubsubshard_channels:{len(c.server.pubsub.shard_channels)}",
        f"migrate_cached_sockets:{len(c.server.migrate_sockets.cached)}",
        *c.server.tracking.info_lines(),
        f"total_error_replies:{s.total_error_replies}",
        f"unexpected_error_replies:{s.unexpected_error_replies}",
        "dump_payload_sanitizations:0",  # (every RESTORE payload is checked whole)
        f"total_reads_processed:{s.total_reads_processed}",
        f"total_writes_processed:{s.total_writes_processed}",
        "io_threaded_reads_processed:0",
        "io_threaded_writes_processed:0",
        f"total_blocking_timeouts:{s.total_blocking_timeouts}",
        f"client_query_buffer_limit_disconnections:{s.client_query_buffer_limit_disconnections}",
        f"client_output_buffer_limit_disconnections:{s.client_output_buffer_limit_disconnections}",
        f"acl_access_denied_auth:{denied[DENIED_AUTH]}",
        f"acl_access_denied_cmd:{denied[DENIED_CMD]}",
        f"acl_access_denied_key:{denied[DENIED_KEY]}",
        f"acl_access_denied_channel:{denied[DENIED_CHANNEL]}",
        f"stream_idmp_iids_added:{s.stream_idmp_iids_added}",
        f"stream_idmp_iids_duplicates:{s.stream_idmp_iids_duplicates}",
    ]


def _section_replication(c: Client) -> list[str]:
    if c.server.replication is not None:
        return c.server.replication.info_lines()
    return [
        "role:master",
        "connected_slaves:0",
        f"master_replid:{c.server.info.run_id}",
        "master_replid2:0000000000000000000000000000000000000000",
        "master_repl_offset:0",
        "second_repl_offset:-1",
        "repl_backlog_active:0",
    ]


def _section_cpu(c: Client) -> list[str]:
    self_usage = resource.getrusage(resource.RUSAGE_SELF)
    return [
        f"used_cpu_sys:{self_usage.ru_stime:.6f}",
        f"used_cpu_user:{self_usage.ru_utime:.6f}",
    ]


def _section_commandstats(c: Client) -> list[str]:
    lines = []
    for row in _all_rows(c):
        if row.calls or row.rejected_calls or row.failed_calls:
            per_call = row.usec / row.calls if row.calls else 0.0
            lines.append(
                f"cmdstat_{row.name}:calls={row.calls},usec={int(row.usec)},"
                f"usec_per_call={per_call:.2f},rejected_calls={row.rejected_calls},"
                f"failed_calls={row.failed_calls}"
            )
    return lines


def _section_latencystats(c: Client) -> list[str]:
    """Each command's latency percentiles (``latency-tracking-info-percentiles``), from
    its histogram (commands/latency.py), in µs as Redis prints them."""
    wanted = c.server.config["latency-tracking-info-percentiles"]
    lines = []
    for row in _all_rows(c):
        counts = histogram_of(row)
        if not counts:
            continue
        figures = ",".join(
            f"p{print_percentile(p)}={percentile(counts, p) / 1000:.3f}" for p in wanted
        )
        lines.append(f"latency_percentiles_usec_{row.name}:{figures}")
    return lines


def _all_rows(c: Client) -> list[CommandSpec]:
    rows: list[CommandSpec] = []
    for row in c.server.table.values():
        rows.append(row)
        rows.extend(row.subcommands.values())
    return rows


def _section_errorstats(c: Client) -> list[str]:
    return [f"errorstat_{code}:count={n}" for code, n in c.server.stats.errorstats.items()]


def _section_keyspace(c: Client) -> list[str]:
    lines = []
    for db in c.server.keyspace.dbs:
        if len(db):
            lines.append(f"db{db.index}:keys={len(db)},expires={len(db.expires)},avg_ttl=0")
    return lines


def _section_cluster(c: Client) -> list[str]:
    return [f"cluster_enabled:{0 if c.server.cluster is None else 1}"]


def _section_active_active(c: Client) -> list[str]:
    """Only when asked by name (not in ``default`` or ``all``, as Redis's modules' sections)."""
    return regions.info_lines(c)


SECTIONS = {
    "server": _section_server,
    "clients": _section_clients,
    "memory": _section_memory,
    "persistence": _section_persistence,
    "stats": _section_stats,
    "replication": _section_replication,
    "cpu": _section_cpu,
    "commandstats": _section_commandstats,
    "errorstats": _section_errorstats,
    "latencystats": _section_latencystats,
    "cluster": _section_cluster,
    "keyspace": _section_keyspace,
    "active-active": _section_active_active,
}


def render_info(c: Client, names: list[str]) -> bytes:
    chunks = []
    for name in names:
        title = name.capitalize() if name != "cpu" else "CPU"
        if name == "active-active":
            title = "Active-active"
        lines = SECTIONS[name](c)
        chunks.append("# " + title + "\r\n" + "".join(line + "\r\n" for line in lines))
    return "\r\n".join(chunks).encode()


def cmd_info(c: Client, argv: list[bytes]) -> Reply:
    """INFO [section [section ...]]"""
    wanted: list[str] = []
    for raw in argv[1:] or [b"default"]:
        name = raw.decode("utf-8", "replace").lower()
        if name == "default":
            wanted.extend(DEFAULT_SECTIONS)
        elif name in ("all", "everything"):
            wanted.extend(ALL_SECTIONS)
        elif name in SECTIONS:
            wanted.append(name)
    seen = list(dict.fromkeys(wanted))
    return Verbatim(render_info(c, seen))


# ---------------------------------------------------------------------------------------------
# CONFIG


def cmd_config_get(c: Client, argv: list[bytes]) -> Reply:
    return c.server.config.get_matching(argv[2:])


def cmd_config_set(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) % 2:
        raise SYNTAX
    pairs = [
        (argv[i].decode("utf-8", "replace"), argv[i + 1].decode("utf-8", "replace"))
        for i in range(2, len(argv), 2)
    ]
    try:
        c.server.config.set_many(pairs, allows_protected_action(c, "enable-protected-configs"))
    except UnknownConfig as exc:
        raise err(f"Unknown option or number of arguments for CONFIG SET - '{exc.name}'") from None
    except InvalidConfig as exc:
        raise err(
            f"CONFIG SET failed (possibly related to argument '{exc.name}') - {exc.message}"
        ) from None
    return OK


def cmd_config_resetstat(c: Client, argv: list[bytes]) -> Reply:
    c.server.stats.reset()
    for row in _all_rows(c):
        row.calls = row.rejected_calls = row.failed_calls = 0
        row.usec = 0.0
        row.reset_latency()
    return OK


def cmd_config_rewrite(c: Client, argv: list[bytes]) -> Reply:
    path = c.server.config.file
    if not path:
        raise err("The server is running without a config file")
    lines = c.server.config.rewrite_lines()
    if not c.server.config["aclfile"]:  # the users live in the configuration (Redis's rule)
        acl = c.server.acl
        lines += [f"user {_text(name)} {acl.users[name].describe()}" for name in acl.names()]
    try:
        rewrite_config_file(path, lines)
    except OSError as exc:
        raise err(f"Rewriting config file: {exc.strerror}") from None
    return OK


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


REWRITE_MARK = "# Generated by CONFIG REWRITE"


def rewrite_config_file(path: str, lines: list[str]) -> None:
    """Keep the user's lines (minus directives we rewrite), then our block; atomic rename."""
    names = {line.split(" ", 1)[0] for line in lines}
    kept: list[str] = []
    try:
        with open(path, encoding="utf-8") as f:
            for raw in f.read().splitlines():
                if raw.strip() == REWRITE_MARK:
                    break
                words = raw.split()
                if words and not raw.lstrip().startswith("#") and words[0].lower() in names:
                    continue
                kept.append(raw)
    except FileNotFoundError:
        pass
    body = "\n".join([*kept, REWRITE_MARK, *lines]) + "\n"
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


CONFIG_HELP = [
    b"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"GET <pattern> [<pattern> ...] -- Return parameters matching the glob-like patterns.",
    b"SET <directive> <value> [<directive> <value> ...] -- Set parameters at runtime.",
    b"RESETSTAT -- Reset the statistics reported by INFO.",
    b"REWRITE -- Write the current configuration to the config file.",
    b"HELP -- Print this help.",
]


cmd_config_help = help_handler(CONFIG_HELP)


# ---------------------------------------------------------------------------------------------
# TIME, LASTSAVE, SHUTDOWN, DEBUG


def cmd_time(c: Client, argv: list[bytes]) -> Reply:
    now_us = time.time_ns() // 1000
    return [b"%d" % (now_us // 1_000_000), b"%d" % (now_us % 1_000_000)]


def cmd_lastsave(c: Client, argv: list[bytes]) -> Reply:
    return c.server.last_save_time


def cmd_shutdown(c: Client, argv: list[bytes]) -> Reply:
    """SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]"""
    save: bool | None = None
    now = force = abort = False
    for raw in argv[1:]:
        token = raw.upper()
        if token == b"NOSAVE" and save is None:
            save = False
        elif token == b"SAVE" and save is None:
            save = True
        elif token == b"NOW":
            now = True
        elif token == b"FORCE":
            force = True
        elif token == b"ABORT":
            abort = True
        else:
            raise SYNTAX
    if abort:
        if len(argv) > 2:
            raise SYNTAX
        raise err("No shutdown in progress.")
    busy = c.server.busy_reply
    if c.server.info.loading.active:
        save = False  # (as Redis: part of the data must not overwrite the whole)
    elif busy is not None and save is not False:  # a busy script: only SHUTDOWN NOSAVE
        raise busy
    c.server.request_shutdown(save, now, force)
    c.close_after_reply = True
    return _NO_REPLY  # the connection just closes, as in Redis


_NO_REPLY = Raw(b"")


DEBUG_NOT_ALLOWED = err(
    'DEBUG command not allowed. If the enable-debug-command option is set to "local", you '
    "can run it from a local connection, otherwise you need to set this option in the "
    "configuration file, and then restart the server."
)


def allows_protected_action(c: Client, setting: str) -> bool:
    """Redis's allowProtectedAction: ``yes``, or ``local`` and a local connection."""
    mode = c.server.config[setting]
    return bool(mode == "yes" or (mode == "local" and c.is_local))


def cmd_debug(c: Client, argv: list[bytes]) -> Reply:
    """DEBUG SLEEP <seconds> | DEBUG LOG <message> | DEBUG DIGEST-VALUE <key>... |
    DEBUG RELOAD | DEBUG LOADAOF | DEBUG HELP"""
    if not allows_protected_action(c, "enable-debug-command"):
        raise DEBUG_NOT_ALLOWED
    sub = argv[1].upper()
    if sub == b"SLEEP" and len(argv) == 3:
        # Redis blocks the whole server here too: that is what the command is for.
        time.sleep(max(parse_float(argv[2]), 0.0))
        return OK
    if sub == b"LOG" and len(argv) == 3:
        c.server.log("warning", "DEBUG LOG: " + argv[2].decode("utf-8", "replace"))
        return OK
    if sub == b"DIGEST-VALUE":
        # (the stored values, even logically expired ones, as Redis reads them here)
        db = c.db
        return [Status(value_digest(db.data.get(key), key in db.expires)) for key in argv[2:]]
    persistence = c.server.persistence
    if persistence is not None and sub in (b"RELOAD", b"LOADAOF"):
        return _debug_persistence(persistence, sub, argv)
    if sub == b"HELP" and len(argv) == 2:
        return [
            Status(b"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
            Status(b"SLEEP <seconds> -- Stop the server for <seconds> (a float)."),
            Status(b"LOG <message> -- Write <message> to the server log."),
            Status(b"DIGEST-VALUE <key> [<key> ...] -- A digest of each key's value."),
            Status(b"RELOAD -- Save the snapshot, empty the dataset and load it again."),
            Status(b"LOADAOF -- Write the AOF, empty the dataset and load it again from the AOF."),
            Status(b"HELP -- Print this help."),
        ]
    raise subcommand_syntax(argv[1], "DEBUG")


_ADMIN = "admin noscript loading stale"


def _debug_persistence(persistence: Persistence, sub: bytes, argv: list[bytes]) -> Reply:
    """DEBUG RELOAD (its options are ignored) and DEBUG LOADAOF."""
    if sub == b"RELOAD":
        persistence.debug_reload()
        return OK
    if len(argv) != 2:
        raise wrong_arity("debug|loadaof")
    persistence.debug_loadaof()
    return OK


def _persistence(c: Client, unavailable: str) -> Persistence:
    """The server layer's persistence; ``unavailable`` in an engine without one."""
    persistence = c.server.persistence
    if persistence is None:
        raise err(unavailable)
    return persistence


_NO_SAVING = "Saving is not available in this process"


def cmd_save(c: Client, argv: list[bytes]) -> Reply:
    _persistence(c, _NO_SAVING).save()
    return OK


def cmd_bgsave(c: Client, argv: list[bytes]) -> Reply:
    """BGSAVE [SCHEDULE]"""
    persistence = _persistence(c, _NO_SAVING)
    if len(argv) > 2 or (len(argv) == 2 and argv[1].upper() != b"SCHEDULE"):
        raise err("syntax error")
    return persistence.bgsave(schedule=len(argv) == 2)


def cmd_bgrewriteaof(c: Client, argv: list[bytes]) -> Reply:
    return _persistence(c, "Append only file is not enabled").bgrewriteaof()


SPECS = (
    spec("info", -1, "loading stale", handler=cmd_info),
    spec("bgrewriteaof", 1, "admin noscript no_async_loading", handler=cmd_bgrewriteaof),
    spec("save", 1, "admin noscript no_async_loading no_multi", handler=cmd_save),
    spec("bgsave", -1, "admin noscript no_async_loading", handler=cmd_bgsave),
    spec(
        "config",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("config|get", -3, _ADMIN, handler=cmd_config_get),
            spec("config|set", -4, _ADMIN, handler=cmd_config_set),
            spec("config|resetstat", 2, _ADMIN, handler=cmd_config_resetstat),
            spec("config|rewrite", 2, _ADMIN, handler=cmd_config_rewrite),
            spec("config|help", 2, "loading stale", handler=cmd_config_help),
        ),
    ),
    spec("time", 1, "loading stale fast", handler=cmd_time),
    spec("lastsave", 1, "loading stale fast", handler=cmd_lastsave),
    spec("shutdown", -1, "admin noscript loading stale no_multi allow_busy", handler=cmd_shutdown),
    spec("debug", -2, "admin noscript loading stale", handler=cmd_debug),
)
