"""What a command handler sees: the calling ``Client``, the ``ServerAPI`` it may use, and the
``CommandSpec`` row that routed it.

Handlers have the signature ``handler(c, argv) -> Reply`` (argv[0] is the command name as
typed). They raise ``ReplyError`` for errors and change data only through the keyspace (the
operations of ``headwater.ops``). A handler that changed data returns ``Written(reply,
change)``: the engine alone counts the change and propagates its effects (``ops.change``).
A handler that must wait returns ``Block`` (or ``Written(Block(...), change)``); the engine
parks the client and runs the same command again when a key it waits on becomes ready (Redis 7
semantics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from headwater.clock import Clock
from headwater.commands.gate import ReplyGate
from headwater.config import Config
from headwater.errors import ReplyError, unknown_subcommand
from headwater.keyspace import Database, Keyspace, WatchedKey
from headwater.resp.types import Reply, Status
from headwater.structures.progress import Progress
from headwater.structures.rates import InstantMetric

if TYPE_CHECKING:
    from headwater.acl.access import AccessControl
    from headwater.acl.users import User
    from headwater.cluster.bus import ClusterBus
    from headwater.cluster.state import Cluster
    from headwater.commands.latency import LatencyMonitor
    from headwater.commands.migrate import MigrateSockets
    from headwater.commands.pubsub import PubSub
    from headwater.commands.region_keyspace import RegionKeyspace
    from headwater.commands.slowlog import SlowLog
    from headwater.commands.store import StreamStore
    from headwater.commands.tracking import Tracking
    from headwater.structures.histogram import Histograms

Handler = Callable[["Client", list[bytes]], Any]
#: the durations (whole µs) a command's histogram counts one by one
LATENCY_SMALL_US: Final = 64


@dataclass(eq=False)
class CommandSpec:
    """One row of the command table (Redis's ``redisCommand``)."""

    name: str  # lowercase; subcommands as "container|sub"
    arity: int  # as Redis: n = exactly n args incl. the name; -n = at least n
    flags: frozenset[str]
    first_key: int = 0
    last_key: int = 0
    step: int = 0
    handler: Handler | None = None
    subcommands: dict[bytes, CommandSpec] = field(default_factory=dict)
    #: the spec of the container, for subcommands
    parent: CommandSpec | None = None
    #: the index of a key count the keys follow (EVAL, FCALL: movable keys); 0 = none
    numkeys_at: int = 0

    def __post_init__(self) -> None:
        self.is_write = "write" in self.flags
        #: its keys are remembered for a tracking client (commands/tracking.py)
        self.readonly = "readonly" in self.flags
        #: held by CLIENT PAUSE WRITE (Redis: CMD_WRITE or CMD_MAY_REPLICATE; the latter is
        #: ``x_may_replicate`` here, as Redis 7.0's COMMAND INFO does not show it)
        self.may_replicate = self.is_write or "x_may_replicate" in self.flags
        #: its reply may show data (Redis's read-only or write flag): with ``appendfsync
        #: always`` it waits until the effects it could have seen are on disk
        self.sees_data = self.is_write or "readonly" in self.flags or "x_sees_data" in self.flags
        self.no_auth = "no_auth" in self.flags
        self.no_multi = "no_multi" in self.flags
        self.admin = "admin" in self.flags
        self.upper = self.name.upper().encode()
        self.name_bytes = self.name.encode()
        #: executed at once even inside MULTI (Redis: EXEC, DISCARD, MULTI, WATCH, QUIT, RESET)
        self.immediate = "x_immediate" in self.flags
        self.calls = 0
        self.usec = 0.0
        self.rejected_calls = 0
        self.failed_calls = 0
        #: its calls' durations (commands/latency.py): calls by whole µs below
        #: LATENCY_SMALL_US (most calls: one list increment), the rest in HDR buckets
        self.latency_small = [0] * LATENCY_SMALL_US
        self.latency_counts: dict[int, int] = {}
        #: the argument besides the command that a restricted user's verdict depends on,
        #: when no other does (-1: several do; -2: not worked out yet): commands/acl.py
        self.acl_at = -2

    def reset_latency(self) -> None:
        self.latency_small = [0] * LATENCY_SMALL_US
        self.latency_counts = {}

    def fresh(self, parent: CommandSpec | None = None) -> CommandSpec:
        """A copy with zeroed statistics: each engine owns its table (the SPECS rows are
        module-level templates)."""
        row = CommandSpec(
            self.name,
            self.arity,
            self.flags,
            self.first_key,
            self.last_key,
            self.step,
            self.handler,
            parent=parent,
            numkeys_at=self.numkeys_at,
        )
        row.subcommands = {name: sub.fresh(row) for name, sub in self.subcommands.items()}
        return row

    def arity_ok(self, argc: int) -> bool:
        return argc == self.arity if self.arity >= 0 else argc >= -self.arity

    def key_positions(self, argv: list[bytes]) -> list[int]:
        """The keys' indexes in ``argv`` (ValueError: a key count that is not one)."""
        if self.numkeys_at:
            count = int(argv[self.numkeys_at])
            start = self.numkeys_at + 1
            if count < 0 or start + count > len(argv):
                raise ValueError("bad key count")
            return list(range(start, start + count))
        if self.first_key <= 0:
            return []
        last = self.last_key if self.last_key >= 0 else len(argv) + self.last_key
        return list(range(self.first_key, last + 1, self.step or 1))


def spec(
    name: str,
    arity: int,
    flags: str,
    keys: tuple[int, int, int] = (0, 0, 0),
    handler: Handler | None = None,
    subcommands: tuple[CommandSpec, ...] = (),
) -> CommandSpec:
    """Compact constructor used by the ``SPECS`` tables: ``flags`` is space-separated."""
    row = CommandSpec(name, arity, frozenset(flags.split()), *keys, handler=handler)
    for sub in subcommands:
        sub.parent = row
        row.subcommands[sub.name.split("|", 1)[1].encode()] = sub
    return row


def reject_subcommand(c: Client, argv: list[bytes]) -> Any:
    """Handler of a container (CLIENT, CONFIG, …) itself. The engine already answers an
    unknown subcommand before dispatch; this only keeps every row callable."""
    raise unknown_subcommand(argv[1] if len(argv) > 1 else b"", argv[0].upper().decode())


def help_handler(lines: list[bytes]) -> Handler:
    """A ``… HELP`` subcommand: the lines as simple strings (built once)."""
    reply = [Status(line) for line in lines]

    def cmd_help(c: Client, argv: list[bytes]) -> Reply:
        return reply

    return cmd_help


@dataclass
class Block:
    """A handler's answer meaning "wait on these keys until ready or timeout".

    ``deadline_ms`` is absolute (monotonic ms) or 0 for no timeout; ``timeout_reply`` is sent if
    the wait ends without the command completing. ``wakes_on`` is the type of value a ready key
    must hold for the command to run again (None: any change, even deletion, as XREADGROUP
    needs to answer NOGROUP or WRONGTYPE)."""

    keys: list[bytes]
    deadline_ms: float
    timeout_reply: Reply = None
    wakes_on: type | None = None
    #: also run the command again at this monotonic time (XREADGROUP … CLAIM: when the oldest
    #: pending entry becomes claimable); 0 = only when a key is ready
    retry_at_ms: float = 0
    #: where the client may not wait (MULTI/EXEC, a script) the reply is a null bulk string
    #: rather than ``timeout_reply`` (BLMOVE and BRPOPLPUSH: ``$-1`` there, ``*-1`` on timeout)
    null_if_denied: bool = False

    def reply_if_denied(self) -> Reply:
        """The reply when the client may not wait (Redis: CLIENT_DENY_BLOCKING)."""
        return None if self.null_if_denied else self.timeout_reply


class ServerInfo:
    """Facts about the running process, filled in by the server layer."""

    def __init__(self) -> None:
        self.aof_enabled = False
        self.aof_last_write_status = "ok"
        self.aof_last_bgrewrite_status = "ok"
        self.aof_rewrite_in_progress = False
        self.aof_rewrite_scheduled = False
        self.rdb_bgsave_in_progress = False
        self.rdb_last_bgsave_status = "ok"
        self.last_snapshot_keys = 0
        #: successful saves, and BGSAVE's: when the one running started (monotonic s), how
        #: long the last took (-1: none yet), as INFO persistence shows them
        self.rdb_saves = 0
        self.rdb_bgsave_started_s = 0.0
        self.rdb_last_bgsave_time_sec = -1
        #: the same of the AOF's rewrites, and how many failed in a row
        self.aof_rewrites = 0
        self.aof_rewrites_consecutive_failures = 0
        self.aof_rewrite_started_s = 0.0
        self.aof_last_rewrite_time_sec = -1
        self.aof_base_size = 0
        #: a background fdatasync is running (Redis: bio jobs pending)
        self.aof_pending_bio_fsync = 0
        #: stream nodes loaded lazily whose buffers are still in the snapshot file
        self.snapshot_lazy_nodes = 0
        self.aof_current_size = 0
        self.aof_buffer_length = 0
        self.port = 0
        self.pid = 0
        self.run_id = "0" * 40
        self.executable = ""
        self.config_file = ""
        self.start_time_ms = 0
        self.start_mono_ms = 0.0
        self.event_loop = "asyncio"
        #: the start's load of the data, while it runs (INFO's loading fields)
        self.loading = Progress()
        #: the process's memory when the engine started, and the highest seen (MEMORY STATS)
        self.startup_memory = 0
        self.peak_memory = 0


class Stats:
    def __init__(self) -> None:
        self.reset()
        self.total_connections_received = 0
        self.rejected_connections = 0

    def count_error(self, code: str) -> None:
        """An error reply (INFO errorstats), by its code."""
        self.total_error_replies += 1
        self.errorstats[code] = self.errorstats.get(code, 0) + 1

    def reset(self) -> None:
        self.total_commands_processed = 0
        #: INFO's instantaneous rates (read every 100 ms by the engine's cron)
        self.ops_rate = InstantMetric()
        self.input_rate = InstantMetric()
        self.output_rate = InstantMetric()
        self.total_error_replies = 0
        self.errorstats: dict[str, int] = {}
        self.expired_keys = 0
        self.expired_subkeys = 0  # hash fields deleted by expiry (Redis 7.4)
        self.keyspace_hits = 0
        self.keyspace_misses = 0
        self.net_input_bytes = 0
        self.net_output_bytes = 0
        self.total_reads_processed = 0  # a client's reads from its socket
        self.total_writes_processed = 0  # writes of replies to a client's socket
        self.unexpected_error_replies = 0
        self.client_query_buffer_limit_disconnections = 0
        self.client_output_buffer_limit_disconnections = 0
        self.total_blocking_timeouts = 0
        self.stream_idmp_iids_added = 0
        self.stream_idmp_iids_duplicates = 0
        self.evicted_scripts = 0
        #: maxmemory's evictions (engine/eviction.py)
        self.evicted_keys = 0
        self.evicted_clients = 0
        #: the values Redis would have freed in the background (ops/lazyfree.py)
        self.lazyfreed_objects = 0
        #: full syncs served, partial resyncs accepted and refused (a primary's)
        self.sync_full = 0
        self.sync_partial_ok = 0
        self.sync_partial_err = 0


class Persistence(Protocol):
    """What SAVE, BGSAVE, BGREWRITEAOF and DEBUG RELOAD/LOADAOF call: the server layer's
    persistence (``engine.persistence``; None in an engine without one). Each raises
    ``ReplyError`` to refuse."""

    def save(self) -> None: ...
    def bgsave(self, schedule: bool) -> Reply: ...
    def bgrewriteaof(self) -> Reply: ...
    def debug_reload(self) -> None: ...
    def debug_loadaof(self) -> None: ...
    def save_after_flushall(self) -> bool:
        """FLUSHALL: with save rules, save the emptied dataset now; whether it did."""
        ...


class Replication(Protocol):
    """What REPLICAOF, REPLCONF, PSYNC, ROLE, WAIT and INFO replication call: the server
    layer's replication (``engine.replication``; None in an engine without one). Each raises
    ``ReplyError`` to refuse."""

    def replicaof(self, c: Client, target: tuple[str, int] | None) -> Reply: ...
    def replconf(self, c: Client, args: list[bytes]) -> Reply: ...
    def psync(
        self, c: Client, replid: str, offset: int | None, failover: bool = False
    ) -> Reply: ...
    def failover_command(
        self, target: tuple[str, int] | None, timeout_ms: int, force: bool, abort: bool
    ) -> Reply: ...
    def role(self) -> Reply: ...
    def wait(self, c: Client, replicas: int, timeout_ms: int) -> Reply | Block: ...
    def waitaof(self, c: Client, local: int, replicas: int, timeout_ms: int) -> Reply | Block: ...
    def info_lines(self) -> list[str]: ...
    def is_replica(self) -> bool: ...
    @property
    def offset(self) -> int:
        """master_repl_offset (a replica: what it has processed of its primary's stream)."""
        ...

    def backlog_size(self) -> int:
        """The replication backlog's bytes (0 before the first replica)."""
        ...


class ServerAPI:
    """The part of the engine that handlers may use. A base class of the engine, not a
    Protocol: compiled, ``c.server.keyspace`` is then a field read, where a Protocol's
    attribute is a generic lookup by name (several per command on the hot path)."""

    keyspace: Keyspace
    config: Config
    clock: Clock
    stats: Stats
    info: ServerInfo
    clients: dict[int, Client]
    table: dict[bytes, CommandSpec]
    dirty_at_last_save: int
    #: changes so far (INFO); handlers return theirs, the engine counts them
    dirty: int
    #: snapshots and the AOF, if the layer above provides them
    persistence: Persistence | None
    #: primary/replica replication, if the layer above provides it
    replication: Replication | None
    #: set by replication: writes refused (-READONLY on a replica, -NOREPLICAS)
    replication_refusal: ReplyError | None
    #: set by replication: -MASTERDOWN (a replica's link down, replica-serve-stale-data no)
    stale_refusal: ReplyError | None
    #: a script is busy (past busy-reply-threshold): what other commands are answered
    busy_reply: ReplyError | None
    #: channels, patterns and monitors (commands/pubsub.py)
    pubsub: PubSub
    #: ACL users and log (acl/access.py)
    acl: AccessControl
    #: SLOWLOG (commands/slowlog.py) and LATENCY's events (commands/latency.py)
    slowlog: SlowLog
    latency: LatencyMonitor
    #: /metrics' histograms (structures/histogram.py)
    histograms: Histograms
    #: the active-active region (``region-id``; commands/regions.py), None on a plain server
    region: RegionKeyspace | None
    #: the cluster state (``cluster-enabled yes``; headwater/cluster/), else None
    cluster: Cluster | None
    #: the cluster bus's rules (MEET, FORGET...), set by the server layer in cluster mode
    cluster_bus: ClusterBus | None
    #: MIGRATE's cached connections to its targets
    migrate_sockets: MigrateSockets
    #: keyspace events the running command fired, (event, key, db), in order: the engine
    #: publishes them after the command's change (commands/notify.py)
    events: list[tuple[bytes, bytes, int]]
    #: the stream store the stream and group handlers call (commands/store.py): plain, or
    #: the region's
    streams: StreamStore[Any, Any]
    #: client-side caching: the keys tracking clients read, their prefixes (tracking.py)
    tracking: Tracking
    #: effects handed to the AOF so far, and whether replies wait until those they may
    #: show are on disk (appendfsync always): Pub/Sub messages wait like replies
    effect_seq: int
    replies_wait_for_disk: bool
    last_save_time: int

    @property
    def blocked_count(self) -> int:
        raise NotImplementedError

    @property
    def propagating(self) -> bool:
        """Whether effects are consumed now: a handler may skip building one otherwise."""
        raise NotImplementedError

    def exec_queued(self, client: Client, queued: list[tuple[CommandSpec, list[bytes]]]) -> Reply:
        raise NotImplementedError

    def exec_refusal(self, client: Client) -> ReplyError | None:
        raise NotImplementedError

    def kill_client(self, client: Client) -> None:
        raise NotImplementedError

    def unblock_client(self, client: Client, error: bool) -> bool:
        raise NotImplementedError

    def in_transaction(self) -> bool:
        """Whether EXEC is running its queued commands now."""
        raise NotImplementedError

    def pause_clients(self, timeout_ms: int, mode: int) -> None:
        """CLIENT PAUSE (engine/pause.py: mode 1 WRITE, 2 ALL)."""
        raise NotImplementedError

    def unpause_clients(self) -> None:
        raise NotImplementedError

    def request_shutdown(self, save: bool | None, now: bool, force: bool) -> None:
        raise NotImplementedError

    def blocking_keys_count(self) -> int:
        raise NotImplementedError

    def blocking_keys_on_nokey_count(self) -> int:
        """Keys a waiter is on that wakes it on deletion too (XREADGROUP)."""
        raise NotImplementedError

    def used_memory(self) -> int:
        raise NotImplementedError

    def rss_memory(self) -> int:
        """The process's resident set size."""
        raise NotImplementedError

    def memory_not_counted_for_evict(self) -> int:
        """What used_memory holds that maxmemory does not count (the replication backlog)."""
        raise NotImplementedError

    def scripting_memory(self) -> list[str]:
        """INFO memory's lines on scripts and functions."""
        raise NotImplementedError

    def log(self, level: str, message: str) -> None:
        raise NotImplementedError


class Client:
    """State of one connection (Redis's ``client``). The transport owns the socket; the
    engine writes encoded replies into ``out`` and the transport flushes it."""

    def __init__(
        self,
        server: ServerAPI,
        client_id: int,
        addr: str = "",
        laddr: str = "",
        gate: ReplyGate | None = None,
    ) -> None:
        self.server = server
        self.id = client_id
        self.addr = addr
        self.laddr = laddr
        self.fd = -1
        self.name = b""
        self.lib_name = b""
        self.lib_ver = b""
        self.resp = 2
        self.db: Database = server.keyspace.dbs[0]
        #: its ACL user (None: the primary's link and the AOF, which may run anything) and
        #: whether it logged in, or needed not (Redis's clientSetDefaultAuth)
        self.user: User | None = server.acl.default
        self.authenticated = not server.acl.auth_required()
        self.created_ms = server.clock.monotonic_ms()
        self.last_interaction_ms = self.created_ms
        #: the query buffer: bytes held (an unfinished command), the size of the big
        #: argument being received, the size and the last second's peak Redis's buffer
        #: would have (server/querybuf.py)
        self.qbuf_len = 0
        self.qbuf_bulk = 0
        self.qbuf_alloc = 0
        self.qbuf_peak = 0
        self.last_cmd = b"NULL"
        # cluster mode: ASKING (for its next command), READONLY, and the slot of the running
        # command's keys (-1: none; a script's calls must keep to it)
        self.asking = False
        self.readonly_cluster = False
        self.slot = -1
        # MULTI/EXEC
        self.in_multi = False
        self.multi_error = False  # a queued command was rejected: EXEC aborts
        self.dirty_cas = False  # a WATCHed key changed: EXEC fails
        self.queued: list[tuple[CommandSpec, list[bytes]]] = []
        self.watched: list[WatchedKey] = []
        # reply control: CLIENT REPLY ON|OFF|SKIP
        self.reply_on = True
        self.skip_next_reply = False
        self.no_evict = False
        self.no_touch = False
        #: blocked, paused, may reply, resume: the line to the transport (see commands/gate.py)
        self.gate = gate if gate is not None else ReplyGate()
        #: replaying an AOF or obeying a primary: commands carry concrete values (XADD IDMP
        #: with an explicit ID) and are applied, not judged
        self.replaying = False
        #: the client scripts call commands through (Redis's CLIENT_SCRIPT)
        self.is_script = False
        #: a replica attached to this server (after SYNC/PSYNC), or this server's primary
        self.is_replica = False
        self.is_master = False
        #: the engine's effect counter after this client's last write (see Engine.effect_seq)
        self.effect_seq = 0
        #: the engine's effect counter when this client last ran a command that shows data
        #: (kept only while ``Engine.replies_wait_for_disk``)
        self.seen_seq = 0
        # output
        self.out: list[bytes] = []
        self.out_bytes = 0
        self.reply_pending = False  # in the engine's PendingReplies
        self.close_after_reply = False
        self.closed = False
        # Pub/Sub and MONITOR (commands/pubsub.py, commands/monitor.py)
        self.channels: dict[bytes, None] = {}
        self.patterns: dict[bytes, None] = {}
        self.shard_channels: dict[bytes, None] = {}
        self.monitor = False
        #: CLIENT TRACKING (commands/tracking.py): its flags, the client its messages go to
        #: (0: itself) and its BCAST prefixes
        self.tracking_flags = 0
        self.tracking_redirect = 0
        self.tracking_prefixes: dict[bytes, None] = {}
        #: its commands take the engine's slow path (``pubsub.hooked_call``): it is a RESP2
        #: subscriber or a monitor (which may run only some commands), or a monitor is open
        #: (which sees every command)
        self.hooked = bool(server.pubsub.monitors)
        self.is_local = laddr.startswith(("127.", "[::1]", "::1")) or laddr.startswith("unix")

    def select(self, index: int) -> None:
        self.db = self.server.keyspace.dbs[index]

    def subscribed(self) -> bool:
        """Whether it has a channel, pattern or shard channel (Redis's CLIENT_PUBSUB)."""
        return bool(self.channels or self.patterns or self.shard_channels)

    def update_hooked(self) -> None:
        """After its subscriptions, its protocol or the set of monitors changed."""
        restricted = self.monitor or (self.resp == 2 and self.subscribed())
        self.hooked = restricted or bool(self.server.pubsub.monitors)

    def output_class(self) -> str:
        """Its class in ``client-output-buffer-limit`` (Redis: getClientType; a monitor is
        a normal client there)."""
        if self.is_replica:
            return "slave"
        return "pubsub" if self.subscribed() else "normal"

    def flags_string(self) -> str:
        flags = "O" if self.monitor else ""
        if self.is_replica:
            flags += "S"
        if self.is_master:
            flags += "M"
        if self.subscribed():
            flags += "P"
        if self.in_multi:
            flags += "x"
        if self.gate.blocked is not None:
            flags += "b"
        tracking = self.tracking_flags
        if tracking:  # (Redis's t, R and B: tracking, broken redirect, BCAST)
            flags += "".join(letter for bit, letter in _TRACKING_LETTERS if tracking & bit)
        if self.dirty_cas:
            flags += "d"
        if self.close_after_reply:
            flags += "c"
        if self.no_evict:
            flags += "e"
        if self.no_touch:
            flags += "T"
        return flags or "N"


#: CLIENT LIST's letters for tracking flags (commands/tracking.py's TRACKING, BROKEN_REDIR,
#: BCAST), in Redis's order
_TRACKING_LETTERS = ((1, "t"), (64, "R"), (2, "B"))


class PendingReplies:
    """The clients with output to send at the end of this loop turn, in the order they got
    it. A list and a flag on each client rather than a dict: a dict emptied every turn
    grows its table again every turn, and the table of 50 clients is a large allocation,
    which makes glibc consolidate its free lists (seen under FCALL load, 50 clients)."""

    def __init__(self) -> None:
        self.clients: list[Client] = []

    def add(self, c: Client) -> None:
        if not c.reply_pending:
            c.reply_pending = True
            self.clients.append(c)

    def add_all(self, clients: Iterable[Client]) -> None:
        for c in clients:
            if not c.reply_pending:
                c.reply_pending = True
                self.clients.append(c)

    def discard(self, c: Client) -> None:
        if c.reply_pending:
            c.reply_pending = False
            self.clients.remove(c)

    def take(self) -> list[Client]:
        """Every pending client, in order; none is pending any more."""
        batch = self.clients
        self.clients = []
        for c in batch:
            c.reply_pending = False
        return batch

    def __len__(self) -> int:
        return len(self.clients)

    def __bool__(self) -> bool:
        return bool(self.clients)

    def __iter__(self) -> Iterator[Client]:
        return iter(self.clients)
