"""Server configuration: one table of parameters, shared by the command line, the config file,
CONFIG GET/SET/REWRITE and INFO.

Each ``Param`` knows how to parse a value (with Redis's error texts), how to print it back, and
whether CONFIG SET may change it at runtime. Values live in ``Config.values`` under the
canonical name; aliases (``slaveof`` style) map to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from headwater.glob import glob_match
from headwater.keyevents import flags_string, parse_flags

Parser = Callable[[str], Any]
Printer = Callable[[Any], str]


class ConfigError(Exception):
    """An invalid value; the message is Redis's explanation (after ``… - ``)."""


_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1024,
    "m": 1000**2,
    "mb": 1024**2,
    "g": 1000**3,
    "gb": 1024**3,
}


def parse_memory(text: str) -> int:
    match = re.fullmatch(r"(-?\d+)([a-zA-Z]*)", text)
    if not match or match.group(2).lower() not in _MEMORY_UNITS:
        raise ConfigError("argument must be a memory value")
    return int(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()]


def _int_parser(lo: int, hi: int, memory: bool = False, size_t: bool = False) -> Parser:
    """``size_t``: an unsigned memory setting (Redis's createSizeTConfig), where a minus
    sign is not a memory value at all."""

    def parse(text: str) -> int:
        if size_t and text.startswith("-"):
            raise ConfigError("argument must be a memory value")
        if memory:
            value = parse_memory(text)
        else:
            try:
                if not re.fullmatch(r"-?\d+", text):
                    raise ValueError
                value = int(text)
            except ValueError:
                raise ConfigError("argument couldn't be parsed into an integer") from None
        if not lo <= value <= hi:
            raise ConfigError(f"argument must be between {lo} and {hi} inclusive")
        return value

    return parse


def _memory_or_percent(text: str) -> int:
    """``maxmemory-clients``: bytes, or a percentage of maxmemory kept negative (as Redis
    keeps it: ``10%`` is -10)."""
    if text.endswith("%"):
        digits = text[:-1]
        if not re.fullmatch(r"\d+", digits):
            raise ConfigError("argument must be a memory or percent value")
        if int(digits) > 100:
            raise ConfigError("percentage argument must be less or equal to 100")
        return -int(digits)
    try:
        value = parse_memory(text)
    except ConfigError:
        value = -1
    if value < 0:
        raise ConfigError("argument must be a memory or percent value")
    return value


def _print_memory_or_percent(value: int) -> str:
    return f"{-value}%" if value < 0 else str(value)


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("yes", "no"):
        raise ConfigError("argument must be 'yes' or 'no'")
    return lowered == "yes"


def _enum(*choices: str) -> Parser:
    def parse(text: str) -> str:
        if text.lower() not in choices:
            raise ConfigError(f"argument(s) must be one of the following: {', '.join(choices)}")
        return text.lower()

    return parse


def _string(text: str) -> str:
    return text


def _notify_flags(text: str) -> int:
    try:
        return parse_flags(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _save(text: str) -> list[tuple[int, int]]:
    parts = text.split()
    if len(parts) % 2:
        raise ConfigError("Invalid save parameters")
    rules = []
    for i in range(0, len(parts), 2):
        seconds, changes = parts[i], parts[i + 1]
        if not (seconds.isdigit() and changes.isdigit()):
            raise ConfigError("Invalid save parameters")
        rules.append((int(seconds), int(changes)))
    return rules


def _percentiles(text: str) -> list[float]:
    """``latency-tracking-info-percentiles``: numbers in [0, 100], space-separated."""
    values = []
    for part in text.split():
        try:
            value = float(part)
        except ValueError:
            value = float("nan")
        if value != value:  # (Redis's string2d refuses nan as it refuses a non-number)
            raise ConfigError("Invalid latency-tracking-info-percentiles parameters")
        if not 0.0 <= value <= 100.0:
            raise ConfigError(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
            )
        values.append(value)
    return values


def print_percentile(value: float) -> str:
    """A percentile as Redis prints it (``%f``, trailing zeros trimmed)."""
    return f"{value:f}".rstrip("0").rstrip(".")


def _print_percentiles(values: list[float]) -> str:
    return " ".join(print_percentile(v) for v in values)


def _print_save(rules: list[tuple[int, int]]) -> str:
    return " ".join(f"{s} {c}" for s, c in rules)


_BUFFER_CLASSES = ("normal", "slave", "replica", "pubsub")


def _output_limits(text: str) -> dict[str, tuple[int, int, int]]:
    parts = text.split()
    if not parts or len(parts) % 4:
        raise ConfigError("Wrong number of arguments in buffer limit configuration.")
    limits = {}
    for i in range(0, len(parts), 4):
        kind = parts[i].lower()
        if kind not in _BUFFER_CLASSES:
            raise ConfigError("Invalid client class specified in buffer limit configuration.")
        try:
            hard, soft = parse_memory(parts[i + 1]), parse_memory(parts[i + 2])
            seconds = int(parts[i + 3])
        except (ConfigError, ValueError):
            raise ConfigError(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
            ) from None
        if hard < 0 or soft < 0 or seconds < 0:
            raise ConfigError(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
            )
        limits["slave" if kind == "replica" else kind] = (hard, soft, seconds)
    return limits


def _print_output_limits(limits: dict[str, tuple[int, int, int]]) -> str:
    return " ".join(f"{k} {h} {s} {t}" for k, (h, s, t) in limits.items())


@dataclass(frozen=True)
class Param:
    name: str
    parse: Parser
    default: str
    mutable: bool = True
    printer: Printer = str
    aliases: tuple[str, ...] = ()
    protected: bool = False  # Redis's PROTECTED_CONFIG: not settable at runtime by default
    variadic: bool = False  # takes several words (bind, save, client-output-buffer-limit)
    merge: bool = False  # repeated file/CLI occurrences accumulate
    hidden: bool = False  # Redis's HIDDEN_CONFIG: CONFIG GET shows it only by its name
    #: Headwater's own settings fixed for the life of the process (regions): immutable, but
    #: CONFIG SET to the value they have is a no-op, so that writing back what CONFIG GET *
    #: showed works (Redis's own immutable configs refuse even that, as Redis does)
    fixed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _merge(old: Any, new: Any) -> Any:
    if isinstance(old, dict):
        return {**old, **new}
    return old + new


def _replicaof(text: str) -> tuple[str, int] | None:
    """``replicaof <host> <port>`` (``no one``: a primary)."""
    parts = text.split()
    if len(parts) != 2:
        raise ConfigError("wrong number of arguments")
    if parts[0].lower() == "no" and parts[1].lower() == "one":
        return None
    if not parts[1].isdigit() or not 0 < int(parts[1]) < 65536:
        raise ConfigError("Invalid master port")
    return parts[0], int(parts[1])


def _print_replicaof(value: tuple[str, int] | None) -> str:
    return "" if value is None else f"{value[0]} {value[1]}"


def _yn(value: Any) -> str:
    return "yes" if value else "no"


#: regions 1..REGION_CAPACITY (activeactive.idmode.DEFAULT_CAPACITY; spec: N <= 16)
REGION_CAPACITY = 16


def _region_id(text: str) -> int:
    """``region-id``: 0 (the default) is a plain server; 1..16 makes it an active-active
    region."""
    if not re.fullmatch(r"\d+", text.strip()):
        raise ConfigError(
            f"region-id must be an integer between 0 (off) and {REGION_CAPACITY}, got '{text}'"
        )
    value = int(text)
    if value > REGION_CAPACITY:
        raise ConfigError(
            f"region-id must be between 0 (off) and {REGION_CAPACITY} "
            f"(the region capacity), got {value}"
        )
    return value


def _peers(text: str) -> list[tuple[str, int]]:
    """``peers host:port,host:port…`` (commas or spaces between them; empty: none)."""
    peers: list[tuple[str, int]] = []
    for word in re.split(r"[,\s]+", text.strip()):
        if not word:
            continue
        host, sep, port = word.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"peers must be host:port pairs separated by commas (port 1..65535), got '{word}'"
            )
        if (host, int(port)) in peers:
            raise ConfigError(f"peers names '{word}' twice")
        peers.append((host, int(port)))
    return peers


def _print_peers(peers: list[tuple[str, int]]) -> str:
    return ",".join(f"{host}:{port}" for host, port in peers)


INT64_MAX = 2**63 - 1
UINT32_MAX = 2**32 - 1

PARAMS: tuple[Param, ...] = (
    Param("port", _int_parser(0, 65535), "6379"),
    Param("bind", str.split, "127.0.0.1", printer=" ".join, variadic=True),
    Param("dir", _string, "./data", protected=True),
    Param("dbfilename", _string, "dump.hwsnap", protected=True),
    Param("pidfile", _string, "", mutable=False),
    Param("logfile", _string, "", mutable=False),
    Param("loglevel", _enum("debug", "verbose", "notice", "warning"), "notice"),
    Param("daemonize", _bool, "no", mutable=False, printer=_yn),
    Param("databases", _int_parser(1, INT64_MAX), "16", mutable=False),
    Param("requirepass", _string, ""),
    Param("aclfile", _string, "", mutable=False),
    # TLS (server/tls.py): Redis's names and defaults; any change builds new contexts
    Param("tls-port", _int_parser(0, 65535), "0"),
    *(
        Param(name, _string, "")
        for name in (
            "tls-cert-file",
            "tls-key-file",
            "tls-key-file-pass",
            "tls-client-cert-file",
            "tls-client-key-file",
            "tls-client-key-file-pass",
            "tls-dh-params-file",
            "tls-ca-cert-file",
            "tls-ca-cert-dir",
            "tls-protocols",
            "tls-ciphers",
            "tls-ciphersuites",
        )
    ),
    Param("tls-auth-clients", _enum("yes", "no", "optional"), "yes"),
    Param("tls-prefer-server-ciphers", _bool, "no", printer=_yn),
    Param("tls-session-caching", _bool, "yes", printer=_yn),
    Param("tls-session-cache-size", _int_parser(0, 2**31 - 1), "20480"),
    Param("tls-session-cache-timeout", _int_parser(0, 2**31 - 1), "300"),
    Param("tls-replication", _bool, "no", printer=_yn),
    Param("tls-cluster", _bool, "no", printer=_yn),
    # Headwater's own: the links between active-active regions use TLS (the peers' TLS ports)
    Param("peers-tls", _bool, "no", mutable=False, printer=_yn, fixed=True),
    # Headwater's own: the admin HTTP port (server/admin.py: /metrics), off at 0
    Param("admin-port", _int_parser(0, 65535), "0", mutable=False, fixed=True),
    Param("admin-bind", _string, "127.0.0.1", mutable=False, fixed=True),
    # the streams /metrics describes one by one (the longest first): a million keys must not
    # make a million series
    Param("metrics-max-streams", _int_parser(0, 1_000_000), "1000"),
    Param("acllog-max-len", _int_parser(0, 2**63 - 1), "128"),
    Param("acl-pubsub-default", _enum("allchannels", "resetchannels"), "resetchannels"),
    Param("maxclients", _int_parser(1, UINT32_MAX), "10000"),
    Param("timeout", _int_parser(0, INT64_MAX), "0"),
    Param("tcp-keepalive", _int_parser(0, INT64_MAX), "300"),
    Param("tcp-backlog", _int_parser(0, INT64_MAX), "511", mutable=False),
    Param("hz", _int_parser(0, INT64_MAX), "10"),
    Param("protected-mode", _bool, "yes", printer=_yn),
    Param("enable-debug-command", _enum("no", "yes", "local"), "local", mutable=False),
    Param("enable-protected-configs", _enum("no", "yes", "local"), "no", mutable=False),
    Param("proto-max-bulk-len", _int_parser(1024 * 1024, INT64_MAX, memory=True), "536870912"),
    Param(
        "client-query-buffer-limit",
        _int_parser(1024 * 1024, INT64_MAX, memory=True),
        "1073741824",
    ),
    Param(
        "client-output-buffer-limit",
        _output_limits,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        printer=_print_output_limits,
        variadic=True,
        merge=True,
    ),
    Param("maxmemory", _int_parser(0, INT64_MAX, memory=True), "0"),
    # (accepted and reported, not applied yet: eviction comes with maxmemory's enforcement)
    Param("maxmemory-samples", _int_parser(1, 2**31 - 1), "5"),
    Param("maxmemory-eviction-tenacity", _int_parser(0, 100), "10"),
    Param("maxmemory-clients", _memory_or_percent, "0", printer=_print_memory_or_percent),
    Param(
        "maxmemory-policy",
        _enum(
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ),
        "noeviction",
    ),
    Param("lfu-log-factor", _int_parser(0, 2**31 - 1), "10"),
    Param("lfu-decay-time", _int_parser(0, 2**31 - 1), "1"),
    Param("tracking-table-max-keys", _int_parser(0, INT64_MAX), "1000000"),
    Param("appendonly", _bool, "yes", printer=_yn),
    Param("appendfsync", _enum("everysec", "always", "no"), "everysec"),
    Param("appendfilename", _string, "appendonly.aof", mutable=False),
    Param("appenddirname", _string, "appendonlydir", mutable=False),
    Param("aof-load-truncated", _bool, "yes", printer=_yn),
    Param("aof-use-rdb-preamble", _bool, "yes", printer=_yn),
    Param("auto-aof-rewrite-percentage", _int_parser(0, 2**31 - 1), "100"),
    Param("auto-aof-rewrite-min-size", _int_parser(0, INT64_MAX, memory=True), "67108864"),
    # Headwater: how long (ms) an AOF write error may last before the effects not on disk are
    # dropped and their clients answered -MISCONF (0: at once)
    Param("aof-write-error-timeout", _int_parser(0, INT64_MAX), "2000"),
    Param(
        "save",
        _save,
        "3600 1 300 100 60 10000",
        printer=_print_save,
        variadic=True,
        merge=True,
    ),
    Param("stop-writes-on-bgsave-error", _bool, "yes", printer=_yn),
    Param("rdbcompression", _bool, "yes", printer=_yn),
    Param("rdbchecksum", _bool, "yes", printer=_yn, mutable=False),
    Param(
        "hash-max-listpack-entries",
        _int_parser(0, INT64_MAX),
        "512",
        aliases=("hash-max-ziplist-entries",),
    ),
    Param(
        "hash-max-listpack-value",
        _int_parser(0, INT64_MAX),
        "64",
        aliases=("hash-max-ziplist-value",),
    ),
    Param("hll-sparse-max-bytes", _int_parser(0, INT64_MAX, memory=True, size_t=True), "3000"),
    Param("set-max-intset-entries", _int_parser(0, INT64_MAX), "512"),
    Param("set-max-listpack-entries", _int_parser(0, INT64_MAX), "128"),
    Param("set-max-listpack-value", _int_parser(0, INT64_MAX), "64"),
    Param(
        "zset-max-listpack-entries",
        _int_parser(0, INT64_MAX),
        "128",
        aliases=("zset-max-ziplist-entries",),
    ),
    Param(
        "zset-max-listpack-value",
        _int_parser(0, INT64_MAX),
        "64",
        aliases=("zset-max-ziplist-value",),
    ),
    Param(
        "list-max-listpack-size",
        _int_parser(-(2**31), 2**31 - 1),
        "-2",
        aliases=("list-max-ziplist-size",),
    ),
    # (accepted and kept, not applied: interior nodes are never LZF-compressed here)
    Param("list-compress-depth", _int_parser(0, 2**31 - 1), "0"),
    Param("stream-node-max-bytes", _int_parser(0, INT64_MAX, memory=True), "4096"),
    Param("stream-node-max-entries", _int_parser(0, INT64_MAX), "100"),
    Param("stream-idmp-duration", _int_parser(1, 86400), "100"),
    Param("stream-idmp-maxsize", _int_parser(1, 10000), "100"),
    Param("stream-consumer-idle-reclaim-ms", _int_parser(0, INT64_MAX), "0"),
    Param("notify-keyspace-events", _notify_flags, "", printer=flags_string),
    Param(
        "busy-reply-threshold",
        _int_parser(0, INT64_MAX),
        "5000",
        aliases=("lua-time-limit",),
    ),
    Param("slowlog-log-slower-than", _int_parser(-1, INT64_MAX), "10000"),
    Param("slowlog-max-len", _int_parser(0, INT64_MAX), "128"),
    Param("latency-monitor-threshold", _int_parser(0, INT64_MAX), "0"),
    Param("latency-tracking", _bool, "yes", printer=_yn),
    Param(
        "latency-tracking-info-percentiles",
        _percentiles,
        "50 99 99.9",
        printer=_print_percentiles,
        variadic=True,
    ),
    Param("lazyfree-lazy-user-del", _bool, "no", printer=_yn),
    #: SCRIPT FLUSH and FUNCTION FLUSH without SYNC|ASYNC free in the background
    Param("lazyfree-lazy-user-flush", _bool, "no", printer=_yn),
    # Redis's test hook: microseconds of sleep per key loaded (negative: a busy loop of that
    # many iterations per key); accepted and reported, loading does not apply it
    Param("key-load-delay", _int_parser(-(2**31), 2**31 - 1), "0", hidden=True),
    # and microseconds a background save spends per key (a negative busy loop: none here)
    Param("rdb-key-save-delay", _int_parser(-(2**31), 2**31 - 1), "0", hidden=True),
    #: a deletion the server decides (SPOP of all, RESTORE of an expired key) propagates as
    #: UNLINK rather than DEL (the freeing itself is the same here)
    Param("lazyfree-lazy-server-del", _bool, "no", printer=_yn),
    Param("lazyfree-lazy-eviction", _bool, "no", printer=_yn),
    Param("io-threads", _int_parser(1, 128), "1", mutable=False),
    Param("appendfsync-group-commit", _bool, "yes", printer=_yn),
    # replication (server/replication.py, server/replica_link.py)
    Param(
        "replicaof",
        _replicaof,
        "no one",
        mutable=False,
        printer=_print_replicaof,
        aliases=("slaveof",),
        variadic=True,
    ),
    Param("masterauth", _string, ""),
    Param("masteruser", _string, ""),
    Param("replica-read-only", _bool, "yes", printer=_yn, aliases=("slave-read-only",)),
    Param(
        "replica-serve-stale-data", _bool, "yes", printer=_yn, aliases=("slave-serve-stale-data",)
    ),
    Param("replica-priority", _int_parser(0, 2**31 - 1), "100", aliases=("slave-priority",)),
    Param("repl-backlog-size", _int_parser(1, INT64_MAX, memory=True), "1048576"),
    Param("repl-ping-replica-period", _int_parser(1, 2**31 - 1), "10"),
    Param("repl-timeout", _int_parser(1, 2**31 - 1), "60"),
    # Headwater's: the stream waits up to this long to go out with the next turns' effects
    # (replication/hold.py; 0: every loop turn, as Redis)
    Param("repl-stream-hold-us", _int_parser(0, 5_000_000), "1000"),
    # the snapshot goes to a replica while the child writes it (server/repl_sync.py), and a
    # replica loads it from the link as it arrives, beside its data until the load succeeds
    # (swapdb: the default here, where Redis's is disabled; server/replica_link.py)
    Param("repl-diskless-sync", _bool, "yes", printer=_yn),
    Param("repl-diskless-load", _enum("disabled", "on-empty-db", "swapdb"), "swapdb"),
    Param(
        "min-replicas-to-write", _int_parser(0, 2**31 - 1), "0", aliases=("min-slaves-to-write",)
    ),
    Param("min-replicas-max-lag", _int_parser(0, 2**31 - 1), "10", aliases=("min-slaves-max-lag",)),
    # Redis Cluster (headwater/cluster/): Redis 7.0's names, defaults and mutability
    Param("cluster-enabled", _bool, "no", mutable=False, printer=_yn),
    Param("cluster-config-file", _string, "nodes.conf", mutable=False),
    Param("cluster-port", _int_parser(0, 65535), "0", mutable=False),
    Param("cluster-node-timeout", _int_parser(0, INT64_MAX), "15000"),
    Param("cluster-announce-ip", _string, ""),
    Param("cluster-announce-hostname", _string, ""),
    Param("cluster-announce-port", _int_parser(0, 65535), "0"),
    Param("cluster-announce-bus-port", _int_parser(0, 65535), "0"),
    Param("cluster-announce-tls-port", _int_parser(0, 65535), "0"),
    Param("cluster-require-full-coverage", _bool, "yes", printer=_yn),
    Param("cluster-allow-reads-when-down", _bool, "no", printer=_yn),
    Param("cluster-allow-pubsubshard-when-down", _bool, "yes", printer=_yn),
    Param("cluster-allow-replica-migration", _bool, "yes", printer=_yn),
    Param("cluster-migration-barrier", _int_parser(0, 2**31 - 1), "1"),
    Param(
        "cluster-replica-validity-factor",
        _int_parser(0, 2**31 - 1),
        "10",
        aliases=("cluster-slave-validity-factor",),
    ),
    Param(
        "cluster-replica-no-failover",
        _bool,
        "no",
        printer=_yn,
        aliases=("cluster-slave-no-failover",),
    ),
    Param("cluster-link-sendbuf-limit", _int_parser(0, INT64_MAX, memory=True), "0"),
    Param("cluster-preferred-endpoint-type", _enum("ip", "hostname", "unknown-endpoint"), "ip"),
    # active-active regions (docs/design/active-active.md): fixed for the life of the process
    Param("region-id", _region_id, "0", mutable=False, fixed=True),
    Param("peers", _peers, "", mutable=False, printer=_print_peers, variadic=True, fixed=True),
    Param(
        "active-active-id-mode",
        _enum("strict", "semi-strict", "liberal"),
        "strict",
        mutable=False,
        fixed=True,
    ),
    # at most this many own effects kept for peers that lag (0: every one a peer has not
    # acknowledged); a peer that needs older ones gets a full state transfer
    Param("active-active-keep-effects", _int_parser(0, INT64_MAX), "0"),
    # a region cut off from a peer asks another peer to relay that peer's effects
    Param("active-active-relay", _bool, "yes", printer=_yn),
)


class Config:
    """Current values by canonical name, plus the table that validates changes."""

    def __init__(self, params: Iterable[Param] = PARAMS) -> None:
        self.params: dict[str, Param] = {}
        self.names: dict[str, str] = {}  # any accepted name (lowercase) -> canonical
        for param in params:
            self.params[param.name] = param
            self.names[param.name] = param.name
            for alias in param.aliases:
                self.names[alias] = param.name
        self.values: dict[str, Any] = {p.name: p.parse(p.default) for p in self.params.values()}
        self.file: str | None = None
        #: the ``user`` directives, each ``[name, rule, ...]`` (loaded by the engine's ACL)
        self.user_lines: list[list[bytes]] = []
        self._seen_in_load: set[str] = set()
        self.listeners: list[Callable[[str, Any], None]] = []
        #: what a CONFIG SET of that parameter must do to take effect, which may fail (the
        #: listener's bind): it raises ConfigError, and the whole CONFIG SET is undone
        #: (Redis's apply functions)
        self.appliers: dict[str, Callable[[Any], None]] = {}

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def lookup(self, name: str) -> Param | None:
        canonical = self.names.get(name.lower())
        return None if canonical is None else self.params[canonical]

    def load_value(self, name: str, args: list[str]) -> None:
        """Apply one directive from the command line or config file (raises ConfigError)."""
        if name.lower() == "user" and args:
            self.user_lines.append([arg.encode("utf-8", "surrogateescape") for arg in args])
            return
        param = self.lookup(name)
        if param is None or (len(args) != 1 and not param.variadic):
            raise ConfigError("Bad directive or wrong number of arguments")
        value = param.parse(" ".join(args))
        if param.merge and param.name in self._seen_in_load:
            value = _merge(self.values[param.name], value)
        self.values[param.name] = value
        self._seen_in_load.add(param.name)

    def set_many(self, pairs: list[tuple[str, str]], allow_protected: bool = False) -> None:
        """CONFIG SET semantics: validate all, then apply all; raises (name, message).
        ``allow_protected``: enable-protected-configs lets this client set ``dir`` and
        ``dbfilename``."""
        staged: dict[str, Any] = {}
        for name, text in pairs:
            param = self.lookup(name)
            if param is None:
                raise UnknownConfig(name)
            if param.name in staged:
                raise InvalidConfig(name, "duplicate parameter")
            if not param.mutable and not param.fixed:
                raise InvalidConfig(name, "can't set immutable config")
            if param.protected and not allow_protected:
                raise InvalidConfig(name, "can't set protected config")
            if param.fixed and text != self.render(param.name):
                raise InvalidConfig(name, "can't set immutable config")
            try:
                value = param.parse(text)
            except ConfigError as exc:
                raise InvalidConfig(name, str(exc)) from None
            if param.merge and isinstance(value, dict):
                value = _merge(self.values[param.name], value)
            staged[param.name] = value
        old = {name: self.values[name] for name in staged}
        self.values.update(staged)
        self._apply(staged, old)
        for name, value in staged.items():
            for listener in self.listeners:
                listener(name, value)

    def _apply(self, staged: dict[str, Any], old: dict[str, Any]) -> None:
        """Run the appliers of the staged values that changed (every staged value already in
        place: one applier may read another's new value). When one fails, the old values
        come back, those already applied are applied again with them (Redis's CONFIG SET
        rollback), and the failure is raised."""
        applied: list[str] = []
        for name, value in staged.items():
            applier = self.appliers.get(name)
            if applier is None or value == old[name]:
                continue
            try:
                applier(value)
            except ConfigError as exc:
                self.values.update(old)
                for done in reversed(applied):
                    self._undo(done)
                raise InvalidConfig(name, str(exc)) from None
            applied.append(name)

    def _undo(self, name: str) -> None:
        try:
            self.appliers[name](self.values[name])
        except ConfigError:  # the old setting cannot come back either: keep what is there
            pass

    def get_matching(self, patterns: list[bytes]) -> dict[bytes, bytes]:
        result: dict[bytes, bytes] = {}
        for raw in patterns:
            pattern = raw.decode("utf-8", "replace").lower().encode()
            has_glob = any(ch in pattern for ch in b"*?[")
            if not has_glob:
                canonical = self.names.get(pattern.decode())
                if canonical is not None:
                    result[pattern] = self.render(canonical).encode()
                continue
            for name in self.names:
                if self.params[self.names[name]].hidden:
                    continue
                if glob_match(pattern, name.encode(), nocase=True):
                    result[name.encode()] = self.render(self.names[name]).encode()
        return result

    def render(self, name: str) -> str:
        param = self.params[name]
        return param.printer(self.values[name])

    def rewrite_lines(self) -> list[str]:
        """Lines for CONFIG REWRITE: every parameter that differs from its default."""
        lines = []
        for param in self.params.values():
            current = self.render(param.name)
            if current != param.printer(param.parse(param.default)):
                lines.append(f"{param.name} {quote(current)}")
        return lines


class UnknownConfig(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class InvalidConfig(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def quote(value: str) -> str:
    if value and re.fullmatch(r"[A-Za-z0-9_./:@*,+-]+", value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
