"""Command dispatch (Redis ``processCommand`` + ``call``).

Rules
-----
* ``execute(client, argv)`` is the only way a command runs, for network clients, EXEC and
  (later) AOF replay and replicas. Order of checks, as in Redis: unknown command, arity,
  authentication, then MULTI queueing, then the handler.
* Replies are encoded into ``client.out`` and the client is added to ``pending``; the transport
  flushes all pending clients once per event-loop iteration.
* A write handler that changed data returns ``Written(reply, change)`` (``ops.change``).
  ``call`` is the one place that applies a change: it adds ``change.dirty`` to ``dirty`` and
  sends its effect lines (the argv as given when ``lines`` is None) to every sink in
  ``effect_sinks`` in execution order; the lines of one command, a transaction's or a
  script's are wrapped in MULTI/EXEC when there are several (one goes alone, as in Redis 7).
  Keys deleted by expiry propagate as DEL, before what deleted them.
* After each top-level command, keys that became ready wake their blocked clients.
"""

from __future__ import annotations

import logging
import resource
import sys
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

import hiredis

from headwater.acl.access import AccessControl
from headwater.clock import Clock, SystemClock
from headwater.cluster.bus import ClusterBus
from headwater.cluster.slot_index import SlotIndex
from headwater.cluster.state import Cluster
from headwater.commands import acl as acl_checks
from headwater.commands.acl import check as acl_check
from headwater.commands.cluster import attach_cluster
from headwater.commands.cluster_gate import ClusterGate
from headwater.commands.context import (
    LATENCY_SMALL_US,
    Block,
    Client,
    CommandSpec,
    PendingReplies,
    Persistence,
    Replication,
    ServerInfo,
    Stats,
)
from headwater.commands.gate import ReplyGate
from headwater.commands.latency import LatencyMonitor, record
from headwater.commands.migrate import MigrateSockets
from headwater.commands.notify import publish_event
from headwater.commands.plain_store import PlainStreams
from headwater.commands.pubsub import PUSH_REPLIES, PubSub, hooked_call
from headwater.commands.region_keyspace import RegionKeyspace, attach_region
from headwater.commands.region_store import RegionStreams
from headwater.commands.regions import overlay
from headwater.commands.slowlog import SlowLog
from headwater.commands.store import StreamStore
from headwater.commands.table import build_table
from headwater.commands.tracking import Tracking
from headwater.commands.transactions import discard
from headwater.config import Config, ConfigError
from headwater.engine.blocking import BlockingRegistry, Waiter
from headwater.engine.eviction import Evictor
from headwater.engine.pause import (
    INT64_MAX,
    PAUSE_OFF,
    PAUSE_WRITE,
    Held,
    Pause,
    covers,
    pause_end,
)
from headwater.errors import (
    NOAUTH,
    OOM,
    UNBLOCKED,
    ReplyError,
    c_string,
    err,
    unknown_subcommand,
    wrong_arity,
)
from headwater.keyevents import EXPIRED, GENERIC, HASH
from headwater.keyspace import Database, Keyspace
from headwater.ops.change import NO_DB, Change, ForReplicas, Line, Written
from headwater.ops.hashttl import active_expire_fields
from headwater.resp.encoder import encode_into
from headwater.resp.types import QUEUED, Raw, Reply
from headwater.scripting.commands import SPECS as SCRIPTING_SPECS
from headwater.scripting.function_commands import SPECS as FUNCTION_SPECS
from headwater.scripting.runtime import ScriptHost, Scripting
from headwater.structures.histogram import Histograms

#: (a Final module name is a C static once compiled: no module attribute read per call)
_perf_counter: Final = time.perf_counter
log = logging.getLogger("headwater")

EffectSink = Callable[[int, Line], None]
_MULTI: Final = [b"MULTI"]
_EXEC: Final = [b"EXEC"]
_NOT_IN_MULTI = err("Command not allowed inside a transaction")
_INFINITY: Final = float("inf")
_INTERNAL = err("internal error while executing the command; see the server log")


class Scheduler(Protocol):
    """What the engine needs from an event loop: timers (asyncio's loop fits)."""

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any: ...


class Engine(ScriptHost):
    """Runs commands: dispatch, the one choke point of effects, blocking, transactions."""

    def __init__(
        self,
        config: Config | None = None,
        clock: Clock | None = None,
        scheduler: Scheduler | None = None,
        extra_commands: tuple[CommandSpec, ...] = (),
    ) -> None:
        self.config = config or Config()
        self.evicting = False  # (maxmemory: set with the evictor below)
        self.clock: Clock = clock or SystemClock()
        self.scheduler = scheduler
        self.keyspace = Keyspace(self.config["databases"])
        self.table = build_table((*SCRIPTING_SPECS, *FUNCTION_SPECS, *extra_commands))
        #: an active-active region (``region-id``): its stream rows replace the plain ones;
        #: None on a plain server, whose table is untouched
        self.region: RegionKeyspace | None = attach_region(self.config, self.keyspace)
        self.streams: StreamStore[Any, Any] = PlainStreams()
        if self.region is not None:
            overlay(self.table)
            self.streams = RegionStreams(self.region)
        #: cluster mode (``cluster-enabled yes``): the state, and the gate every client
        #: command passes (None on a plain server: the one test a command pays)
        self.cluster: Cluster | None = attach_cluster(self.config, int(self.clock.now_ms()))
        self.cluster_gate: ClusterGate | None = None
        #: the bus's rules (the server layer sets them: they need its sockets)
        self.cluster_bus: ClusterBus | None = None
        self.migrate_sockets = MigrateSockets()
        if self.cluster is not None:
            self.cluster_gate = ClusterGate(self, self.cluster)
            self.keyspace.dbs[0].slots = SlotIndex()
        #: ACL users (the default one until the configuration names others) and their log
        self.acl = AccessControl(acl_checks.build_catalog(self.table))
        if self.config["requirepass"]:  # (then the users of the configuration, as Redis)
            self.acl.set_default_password(self.config["requirepass"])
        self._load_users()
        # The names clients actually send (SET, set): one dict probe, no upper() per command.
        self.lookup = {**self.table, **{name.lower(): row for name, row in self.table.items()}}
        self.stats = Stats()
        self.info = ServerInfo()
        self.info.start_time_ms = self.clock.now_ms()
        self.info.start_mono_ms = self.clock.monotonic_ms()
        self.info.startup_memory = self.info.peak_memory = self.used_memory()
        self.clients: dict[int, Client] = {}
        self.next_client_id = 1
        self.dirty = 0
        self.events: list[tuple[bytes, bytes, int]] = []
        self.dirty_at_last_save = 0
        self.last_save_time = self.info.start_time_ms // 1000
        self.blocking = BlockingRegistry()
        #: CLIENT PAUSE: the mode in force (engine/pause.py; 0: none, the one test a command
        #: pays), and the pause's end and held clients
        self.pause_mode = PAUSE_OFF
        self.pause = Pause()
        #: a FAILOVER holds writes until it ends (server/replication.py), whatever CLIENT
        #: PAUSE and UNPAUSE do meanwhile
        self.failover_paused = False
        self.pending = PendingReplies()  # clients with output to flush, in order
        self.pubsub = PubSub(self.pending)
        #: client-side caching (CLIENT TRACKING): the keyspace tells it of every change
        self.tracking = Tracking(self.keyspace, self.clients, self.pending, self.config)
        self.keyspace.notify_flags = self.config["notify-keyspace-events"]
        self.keyspace.on_new_key = self._new_key
        #: SLOWLOG, and the duration (µs) from which a call goes into it (infinite: off)
        self.slowlog = SlowLog()
        self.slowlog_floor = self.slowlog.floor
        #: LATENCY: the monitor's events, the duration (µs) from which a call is one
        #: (infinite: off), and whether calls go into their command's histogram
        self.latency = LatencyMonitor()
        #: what /metrics shows as histograms (AOF writes and fsyncs, script runs)
        self.histograms = Histograms()
        self.latency_floor = _INFINITY
        self.latency_tracking = True
        #: maxmemory (engine/eviction.py): the meter, evictions, client evictions; whether it
        #: is on (the one test a command pays without it), and whether the data was over the
        #: limit with nothing to evict when the running command started (a script's writes)
        self.evictor = Evictor(self)
        self.pre_command_oom = False
        for name in (
            "maxmemory-policy",
            "lfu-log-factor",
            "lfu-decay-time",
            "slowlog-log-slower-than",
            "slowlog-max-len",
            "latency-monitor-threshold",
            "latency-tracking",
            "acllog-max-len",
            "maxmemory",
        ):
            self._config_changed(name, self.config[name])
        self.config.listeners.append(self._config_changed)
        self.effect_sinks: list[EffectSink] = []
        self.shutdown_requested: tuple[bool | None, bool, bool] | None = None
        self.on_kill: Callable[[Client], None] = lambda c: None
        self._last_reclaim_ms = 0
        self._last_second_ms = 0
        #: snapshots and the AOF: the server layer sets it (SAVE, BGSAVE... call it)
        self.persistence: Persistence | None = None
        #: effects handed to the sinks so far; a client's ``effect_seq`` is the last one its
        #: commands produced, and its replies leave only once the AOF has that one
        self.effect_seq = 0
        #: every reply that may show data waits until all effects made before it are on
        #: disk, not only the client's own (``appendfsync always`` with a sync that runs
        #: beside the loop: a reader must not see an entry a crash would undo)
        self.replies_wait_for_disk = False
        #: set while writes cannot be made durable (-MISCONF): write commands are refused
        self.refuse_writes: ReplyError | None = None
        #: set by replication: a read-only replica (-READONLY), too few good replicas
        #: (-NOREPLICAS); the primary's own link is exempt
        self.replication_refusal: ReplyError | None = None
        #: set by replication on a replica whose link is down with replica-serve-stale-data
        #: no: -MASTERDOWN for the commands not flagged ``stale``
        self.stale_refusal: ReplyError | None = None
        #: primary/replica replication (the server layer sets it)
        self.replication: Replication | None = None
        self._in_exec = False
        self._tx_effects: list[tuple[int, Line]] | None = None
        #: Lua scripts and functions (their commands run through ``call`` like any other)
        self.scripting = Scripting(self)
        #: set while a script runs past busy-reply-threshold: other commands get it
        self.busy_reply: ReplyError | None = None
        #: what gets through while ``busy_reply`` is set (a script's, or the load's rule)
        self.busy_allows: Callable[[CommandSpec], bool] = allowed_while_busy
        #: reads and answers other clients while a script is busy (the server layer sets it)
        self.busy_poller: Callable[[Client], None] = lambda running: None

    # -- clients ---------------------------------------------------------------------------

    def new_client(self, addr: str = "", laddr: str = "", gate: ReplyGate | None = None) -> Client:
        """A client; ``gate`` is its line to a transport (none: replay, tests)."""
        client = Client(self, self.next_client_id, addr, laddr, gate)
        self.next_client_id += 1
        self.clients[client.id] = client
        self.stats.total_connections_received += 1
        return client

    def client_closed(self, c: Client) -> None:
        waiter = c.gate.blocked
        if type(waiter) is Held:
            self.pause.held.remove(waiter)
            c.gate.blocked = None
        elif waiter is not None:
            self.blocking.remove(waiter)
        discard(c)
        if c.monitor or c.subscribed():
            self.pubsub.forget(c)
        if c.tracking_flags:
            self.tracking.disable(c)
        c.closed = True
        self.clients.pop(c.id, None)
        self.pending.discard(c)

    def _config_changed(self, name: str, value: Any) -> None:
        if name == "notify-keyspace-events":
            self.keyspace.notify_flags = value
        elif name == "maxmemory-policy":
            self.keyspace.lfu = value.endswith("-lfu")
            self.evictor.configure()
        elif name == "lfu-log-factor":
            self.keyspace.lfu_log_factor = value
        elif name == "lfu-decay-time":
            self.keyspace.lfu_decay_time = value
        elif name == "slowlog-log-slower-than":
            self.slowlog.set_threshold(value)
            self.slowlog_floor = self.slowlog.floor
            self.slowlog.trim()
        elif name == "slowlog-max-len":
            self.slowlog.max_len = value
            self.slowlog.trim()
        elif name == "latency-monitor-threshold":
            self.latency.threshold_ms = value
            self.latency_floor = value * 1000.0 if value else _INFINITY
        elif name == "latency-tracking":
            self.latency_tracking = value
        elif name == "requirepass":
            self.acl.set_default_password(value)
        elif name in (
            "maxmemory",
            "maxmemory-policy",
            "lazyfree-lazy-eviction",
            "maxmemory-samples",
            "maxmemory-eviction-tenacity",
        ):
            self.evictor.configure()
            self.evicting = self.evictor.active
            self.pre_command_oom = self.pre_command_oom and self.evicting
        elif name == "acllog-max-len":
            self.acl.log.trim(value)
        elif name == "acl-pubsub-default":
            self.acl.pubsub_default = value == "allchannels"

    def _load_users(self) -> None:
        """The users of the configuration's ``user`` lines or of its ``aclfile`` (not both,
        as Redis); ConfigError when they cannot all load."""
        config = self.config
        self.acl.pubsub_default = config["acl-pubsub-default"] == "allchannels"
        lines = config.user_lines
        if lines and config["aclfile"]:
            raise ConfigError(
                "Configuring Headwater with users defined in the configuration and an ACL "
                "file at the same time is invalid: define either an ACL file or the users "
                "in the configuration, not both."
            )
        problem = self.acl.load_lines(lines)
        if problem is None and config["aclfile"]:
            loaded = self.acl.read_file(config["aclfile"])
            if isinstance(loaded, str):
                problem = f"Aborting startup because of ACL errors: {loaded}"
            else:
                self.acl.replace_users(loaded)
        if problem is not None:
            raise ConfigError(problem)

    def _new_key(self, db: int, key: bytes) -> None:
        """The ``new`` keyspace event (the keyspace calls it only while class n is on)."""
        self.events.append((b"new", key, db))

    def kill_client(self, client: Client) -> None:
        self.on_kill(client)

    @property
    def blocked_count(self) -> int:
        return self.blocking.count + len(self.pause.held)

    def blocking_keys_count(self) -> int:
        return BlockingRegistry.keys_count(self.keyspace.dbs)

    def blocking_keys_on_nokey_count(self) -> int:
        return BlockingRegistry.keys_on_nokey_count(self.keyspace.dbs)

    # -- dispatch --------------------------------------------------------------------------

    def execute(self, c: Client, argv: list[bytes]) -> None:
        """Run one command from a client and queue its reply."""
        if self.keyspace.tracking_on and self.tracking.current is None:
            # (client-side caching: the one test it costs; inside, ``current`` is set)
            self._execute_tracked(c, argv)
            return
        self.keyspace.now_ms = self.clock.now_ms()
        row = self.lookup.get(argv[0]) or self.table.get(argv[0].upper())
        if row is not None and row.subcommands and len(argv) > 1:
            sub = row.subcommands.get(argv[1].lower())
            if sub is None:
                self._reject(c, None, unknown_subcommand(argv[1], row.name.upper()))
                return
            row = sub
        if row is None:
            if argv[0].lower() in (b"host:", b"post"):
                # Redis frees such a client at once: replies already queued are dropped.
                self.log("warning", "Possible SECURITY ATTACK detected: HTTP sent to the port")
                c.out.clear()
                c.close_after_reply = True
                self.pending.add(c)
                return
            self._reject(c, None, unknown_command(argv))
            return
        c.last_cmd = row.name_bytes
        if not row.arity_ok(len(argv)):
            self._reject(c, row, wrong_arity(row.name))
            return
        if not c.authenticated and not row.no_auth and self.acl.auth_required():
            self._reject(c, row, NOAUTH)
            return
        user = c.user
        if user is not None and not user.unrestricted and not (c.in_multi and row.no_multi):
            verdict: tuple[int, int] | None = None
            at = row.acl_at
            if at >= 0:  # (a verdict the user keeps: one probe)
                verdict = user.verdicts.get((row.name, argv[at] if at < len(argv) else b""))
            if verdict is None:
                verdict = acl_check(user, row, argv)
            if verdict[0]:
                context = "multi" if c.in_multi else "toplevel"
                denied = acl_checks.refused(c, row, argv, verdict, context)
                self._reject(c, row, ReplyError("NOPERM", denied))
                return
        gate = self.cluster_gate
        if (
            gate is not None
            and not c.replaying
            and not c.is_master
            and self._misrouted(gate, c, row, argv)
        ):
            return
        if self.evicting and not c.replaying:
            oom = self.pre_command_oom = self.evictor.make_room()
            if oom and _refused_on_oom(c, row):
                self._reject(c, row, OOM)
                return
        if self.busy_reply is not None and not self.busy_allows(row):
            self._reject(c, row, self.busy_reply)
            return
        if self.refuse_writes is not None and row.is_write and not c.replaying:
            self._reject(c, row, self.refuse_writes)
            return
        if self.replication_refusal is not None and row.is_write and not c.replaying:
            self._reject(c, row, self.replication_refusal)
            return
        if self.stale_refusal is not None and "stale" not in row.flags and not c.replaying:
            self._reject(c, row, self.stale_refusal)
            return
        if self.pause_mode and self._postpone(c, row, argv):
            return
        if c.in_multi and not row.immediate:
            if row.no_multi:
                self._reject(c, row, _NOT_IN_MULTI)
                return
            c.queued.append((row, argv))
            self._reply(c, QUEUED)
            return
        out = c.out
        sent = len(out)
        # (Pub/Sub and MONITOR: the one test a plain command pays for them)
        reply = hooked_call(self, c, row, argv) if c.hooked else self.call(c, row, argv)
        if isinstance(reply, Block):
            self._block(c, row, argv, reply)
        elif len(out) > sent and row.name not in PUSH_REPLIES:
            self._reply_before_pushes(c, sent, reply)
        else:
            self._reply(c, reply)
        if self.keyspace.expired:
            self._propagate_expired()
        if self.keyspace.ready_dbs:
            self._serve_ready()

    def _misrouted(self, gate: ClusterGate, c: Client, row: CommandSpec, argv: list[bytes]) -> bool:
        """Cluster mode: answer a command this node does not serve (MOVED, ASK, CROSSSLOT,
        CLUSTERDOWN...); a refused EXEC discards its transaction (Redis gives the
        redirection itself, not EXECABORT). ASKING holds for one command only."""
        asking = c.asking
        if not c.in_multi and row.name != "asking":
            c.asking = False
        refusal = gate.refusal(c, row, argv, asking)
        if refusal is None:
            return False
        row.rejected_calls += 1
        if row.name == "exec":
            discard(c)
        elif c.in_multi:
            c.multi_error = True
        self._reply(c, self._error(refusal))
        return True

    def _execute_tracked(self, c: Client, argv: list[bytes]) -> None:
        """``execute`` while tracking is on: c is the current client, and invalidations of
        keys it changed itself are sent after its reply."""
        tracking = self.tracking
        tracking.begin(c)
        try:
            self.execute(c, argv)
        finally:
            tracking.end(c)

    def apply(self, c: Client, argv: list[bytes]) -> ReplyError | None:
        """Run a command whose reply nobody reads (AOF replay): the handler alone, without
        reply encoding, statistics or blocking; returns its error, if any. Transactions and
        anything unusual take the full ``execute`` path."""
        row = self.lookup.get(argv[0]) or self.table.get(argv[0].upper())
        if row is None or row.subcommands or c.in_multi or row.immediate or row.no_multi:
            self.execute(c, argv)
            reply = b"".join(c.out)
            c.out.clear()
            self.pending.discard(c)
            return _first_error(reply)
        return self.apply_row(c, row, argv)

    def apply_row(self, c: Client, row: CommandSpec, argv: list[bytes]) -> ReplyError | None:
        """``apply`` once the row is known (a subcommand's too): the handler alone."""
        if not row.arity_ok(len(argv)):
            return wrong_arity(row.name)
        self.keyspace.now_ms = self.clock.now_ms()
        try:
            result = row.handler(c, argv)  # type: ignore[misc]
        except ReplyError as exc:
            return exc
        except Exception as exc:  # a malformed command (say, a nested array) from a file
            return err(f"{type(exc).__name__}: {exc}")
        finally:
            if self.keyspace.expired:
                self._propagate_expired()
        if type(result) is Written:
            self.apply_change(c.db.index, argv, result.change)
        if self.events:
            self._publish_events()
        return None

    def _reject(self, c: Client, row: CommandSpec | None, error: ReplyError) -> None:
        """Refuse a command before running it (Redis: rejectCommand): inside MULTI this
        also dooms the transaction."""
        if row is not None:
            row.rejected_calls += 1
            if row.name == "exec":  # (Redis: execCommandAbort, in or out of MULTI)
                discard(c)
                error = _exec_abort(error)
        if c.in_multi:
            c.multi_error = True
        self._reply(c, self._error(error))

    def call(self, c: Client, row: CommandSpec, argv: list[bytes]) -> Reply | Block:
        """Run the handler; returns its reply (errors as ReplyError values) and propagates."""
        if c.no_touch and self.keyspace.touch and row.name != "touch":
            return self._call_untouched(c, row, argv)
        self.stats.total_commands_processed += 1
        started = _perf_counter()
        effects_before = self.effect_seq
        tracking_on = self.keyspace.tracking_on
        if tracking_on:
            self.tracking.modifier = c  # (the author of its changes, for BCAST's NOLOOP)
        try:
            reply = row.handler(c, argv)  # type: ignore[misc]
        except ReplyError as exc:
            row.failed_calls += 1
            reply = self._error(exc)
        except Exception:
            log.exception("unexpected error executing %r", argv[:8])
            row.failed_calls += 1
            reply = self._error(_INTERNAL)
        elapsed_us = (_perf_counter() - started) * 1e6
        row.calls += 1
        row.usec += elapsed_us
        if type(reply) is not Block:  # (a blocked call counts once served, as in Redis)
            if self.latency_tracking:
                us = int(elapsed_us)
                if us < LATENCY_SMALL_US:
                    row.latency_small[us] += 1
                else:
                    record(row.latency_counts, elapsed_us)
            if elapsed_us >= self.slowlog_floor:
                self._log_slow(c, row, argv, elapsed_us)
            if elapsed_us >= self.latency_floor:
                event = "fast-command" if "fast" in row.flags else "command"
                self.latency.sample(event, elapsed_us / 1000)
        if tracking_on and row.readonly:
            self.tracking.remember(row, argv, c)
        if self.evicting and row.is_write:
            self.evictor.meter.written(c.db.index, row, argv)
        if type(reply) is Written:
            written: Written = reply
            reply = written.reply
            if self.effect_sinks or self._tx_effects is not None:
                self.apply_change(c.db.index, argv, written.change)
            else:  # nothing listens for effects: only the count (XADD's hot path, no AOF)
                self.dirty += written.change.dirty
        if self.events:
            self._publish_events()
        if self.effect_seq != effects_before:
            c.effect_seq = self.effect_seq  # its replies wait until these effects are durable
        elif self.replies_wait_for_disk and row.sees_data:
            c.seen_seq = self.effect_seq  # it may have read effects not yet on disk
        return reply  # type: ignore[no-any-return]

    def _log_slow(self, c: Client, row: CommandSpec, argv: list[bytes], elapsed_us: float) -> None:
        """A call at or over the SLOWLOG threshold (not EXEC: its commands are logged; not
        the AOF's replay)."""
        if "skip_slowlog" not in row.flags and not c.replaying:
            self.slowlog.push(argv, elapsed_us, c.addr, c.name)

    def _call_untouched(self, c: Client, row: CommandSpec, argv: list[bytes]) -> Reply | Block:
        """``call`` for a CLIENT NO-TOUCH client: its lookups leave the keys' access times
        and LFU counters alone (TOUCH excepted, as in Redis 7.2)."""
        keyspace = self.keyspace
        keyspace.touch = False
        try:
            return self.call(c, row, argv)
        finally:
            keyspace.touch = True

    def _error(self, exc: ReplyError) -> ReplyError:
        if exc.counted:  # (a script's result: the error of a command it ran, counted then)
            return exc
        self.stats.total_error_replies += 1
        errorstats = self.stats.errorstats
        errorstats[exc.code] = errorstats.get(exc.code, 0) + 1
        return exc

    def _reply_before_pushes(self, c: Client, start: int, reply: Reply) -> None:
        """The command sent messages to its own client (it published to, or changed a key
        notified on, a channel the client listens to; from EXEC or a script too): they
        follow its reply (Redis 7.2: pending_push_messages, joined after the command)."""
        out = c.out
        pushed = out[start:]
        del out[start:]
        self._reply(c, reply)
        out.extend(pushed)

    def _reply(self, c: Client, reply: Reply) -> None:
        if not c.reply_on or c.closed:
            return
        if c.skip_next_reply and c.last_cmd != b"client|reply":
            c.skip_next_reply = False
            return
        encode_into(c.out, reply, c.resp)
        self.pending.add(c)

    # -- transactions and effects ----------------------------------------------------------

    def exec_queued(self, c: Client, queued: list[tuple[CommandSpec, list[bytes]]]) -> Reply:
        """EXEC: the queued commands, their effects collected and sent as one transaction
        (EXEC is not a write command: its own argv is never propagated)."""
        replies: list[Reply] = []
        self._in_exec = True
        self._tx_effects = []
        try:
            out = c.out
            for row, argv in queued:
                sent = len(out)
                user = c.user
                if user is not None and not user.unrestricted:
                    denied = acl_checks.exec_refusal(c, row, argv)
                    if denied is not None:
                        replies.append(self._error(denied))
                        continue
                if c.hooked:
                    reply = hooked_call(self, c, row, argv, queued=True)
                else:
                    reply = self.call(c, row, argv)
                if isinstance(reply, Block):
                    reply = reply.reply_if_denied()
                if len(out) > sent and row.name in PUSH_REPLIES:
                    # (SUBSCRIBE's confirmations are its reply: inside EXEC's array; other
                    # messages to itself wait in ``out`` until EXEC's reply is written)
                    reply = _after_pushes(out, sent, reply, c.resp)
                replies.append(reply)
            if self.keyspace.expired:  # (keys its last lookups expired belong to it too)
                self._propagate_expired()
        finally:
            self._in_exec = False
            effects, self._tx_effects = self._tx_effects, None
        self._emit_transaction(effects)
        return replies

    def exec_refusal(self, c: Client) -> ReplyError | None:
        """What refuses EXEC now, though its commands were accepted when queued (the server's
        state changed since): MISCONF, READONLY or NOREPLICAS when one of them writes,
        MASTERDOWN when one of them may not run on a stale replica (Redis: processCommand
        takes EXEC for a write when its queue holds one). The primary's link and the AOF
        replay are obeyed, as every command of theirs."""
        if c.replaying:
            return None
        queued = c.queued
        writes = any(row.is_write for row, _ in queued)
        if writes and self.refuse_writes is not None:
            return self.refuse_writes
        if writes and self.replication_refusal is not None:
            return self.replication_refusal
        if self.stale_refusal is not None and any("stale" not in r.flags for r, _ in queued):
            return self.stale_refusal
        return None

    def _emit_transaction(self, effects: list[tuple[int, Line]]) -> None:
        """What one transaction or script changed: one effect alone as it is (it is atomic
        already), several wrapped in MULTI … EXEC (Redis 7: propagatePendingCommands)."""
        if len(effects) == 1:
            self._emit(*effects[0])
        elif effects:
            self._emit(NO_DB, _MULTI)
            for db, argv in effects:
                self._emit(db, argv)
            self._emit(NO_DB, _EXEC)

    def in_transaction(self) -> bool:
        return self._in_exec

    def start_collecting(self) -> bool:
        """Before a script runs: the effects of the commands it calls are collected, to be
        sent as one transaction by ``finish_collecting``, as EXEC does. False when nothing
        is collected: inside EXEC (EXEC's transaction holds them), or nobody reads effects."""
        if self._tx_effects is not None or not self.effect_sinks:
            return False
        self._tx_effects = []
        return True

    def finish_collecting(self) -> None:
        """After the script (whatever its end): what it changed, sent."""
        effects, self._tx_effects = self._tx_effects, None
        if effects is not None:
            self._emit_transaction(effects)

    def effects_mark(self) -> int:
        """Where the effects a transaction or script collects stand now (0: none collected),
        for ``drop_effects_since``."""
        return len(self._tx_effects) if self._tx_effects is not None else 0

    def drop_effects_since(self, mark: int) -> None:
        """The one way effects are taken back: those collected since ``mark`` (a script's
        writes after ``redis.set_repl(redis.REPL_NONE)``, or all of a script stopped by
        SHUTDOWN NOSAVE). Nothing was sent of them yet: they wait for the transaction's end."""
        if self._tx_effects is not None:
            del self._tx_effects[mark:]

    def poll_while_busy(self, running: Client) -> None:
        self.busy_poller(running)

    def apply_change(self, db: int, argv: list[bytes], change: Change) -> None:
        """The one place a change takes effect: the dirty counter, then the effect lines
        (the argv as given when ``lines`` is None, if anything changed)."""
        self.dirty += change.dirty
        lines = change.lines
        if lines is None:
            if change.dirty:
                self._emit(db, argv)
        elif len(lines) == 1:
            self._emit(db, lines[0])
        elif lines:
            self._send_atomically(db, lines)

    def _send_atomically(self, db: int, lines: list[Line]) -> None:
        """Several effects of one command, wrapped in MULTI … EXEC, so that a log cut by a
        crash (a torn tail is cut back to a whole transaction) or a replica never applies
        part of them (an XREADGROUP's XCLAIMs without the group's new entries-read, say),
        as Redis wraps what one command propagates. (Inside EXEC, its MULTI wraps them.)"""
        if self._tx_effects is not None or not self.effect_sinks:
            for line in lines:
                self._emit(db, line)
            return
        if self.keyspace.expired:  # (expired keys first, outside the transaction)
            self._propagate_expired()
        self._emit(NO_DB, _MULTI)
        for line in lines:
            self._emit(db, line)
        self._emit(NO_DB, _EXEC)

    def _publish_events(self) -> None:
        """The keyspace events the command fired, once its effects went out: with
        appendfsync always their receivers wait for exactly those (``effect_seq``). Inside
        EXEC or a script the effects go out at its end, as one transaction: the events then
        wait for its first line (its lines are written and synced together, one write per
        loop turn: that is the whole)."""
        events, self.events = self.events, []
        hold = 0
        if self.replies_wait_for_disk:
            hold = self.effect_seq if self._tx_effects is None else self.effect_seq + 1
        flags = self.keyspace.notify_flags
        for event, key, db in events:
            publish_event(self.pubsub, flags, event, key, db, hold)

    @property
    def propagating(self) -> bool:
        """Whether effects are consumed now (a sink, or a transaction collecting them); a
        handler may skip building an effect otherwise."""
        return bool(self.effect_sinks) or self._tx_effects is not None

    def _emit(self, db: int, argv: Line) -> None:
        if not self.effect_sinks and self._tx_effects is None:
            return
        if self.keyspace.expired:  # keys a lookup expired come first (Redis: propagateDeletion)
            self._propagate_expired()
        if self._tx_effects is not None:
            self._tx_effects.append((db, argv))
            return
        if not isinstance(argv, ForReplicas):  # (no reply waits for the disk for those)
            self.effect_seq += 1
        for sink in self.effect_sinks:
            sink(db, argv)

    def _propagate_expired(self) -> None:
        """Keys and hash fields deleted by expiry: ``DEL key`` for a key, ``HDEL key field``
        for each field (Redis 7.4's propagateHashFieldDeletion), after their events (with
        appendfsync always, each event waits for the effect emitted just after it)."""
        expired, self.keyspace.expired = self.keyspace.expired, []
        flags = self.keyspace.notify_flags
        for db, key, fields, _emptied in expired:
            hold = self.effect_seq + 1 if self.replies_wait_for_disk else 0
            if fields is None:
                self.stats.expired_keys += 1
                if flags & EXPIRED:
                    publish_event(self.pubsub, flags, b"expired", key, db, hold)
                self._emit(db, [b"DEL", key])
                continue
            self.stats.expired_subkeys += len(fields)  # (their events fired at deletion)
            for field in fields:
                self._emit(db, [b"HDEL", key, field])

    # -- blocking --------------------------------------------------------------------------

    def _uncount(self, row: CommandSpec) -> None:
        """A run that blocked is not a call: the command counts once, when it is served,
        times out or is unblocked (Redis: updateStatsOnUnblock)."""
        row.calls -= 1
        self.stats.total_commands_processed -= 1

    def _count_unblocked(self, row: CommandSpec, failed: bool) -> None:
        row.calls += 1
        self.stats.total_commands_processed += 1
        if failed:
            row.failed_calls += 1

    def _block(self, c: Client, row: CommandSpec, argv: list[bytes], blk: Block) -> None:
        self._uncount(row)
        waiter = Waiter(c, row, argv, blk.keys, blk.timeout_reply, blk.wakes_on)
        self.blocking.add(waiter)
        if blk.deadline_ms and self.scheduler is not None:
            delay = max(blk.deadline_ms - self.clock.monotonic_ms(), 0.0) / 1000.0
            waiter.timer = self.scheduler.call_later(delay, lambda: self._timeout(waiter))
        self._schedule_retry(waiter, blk)

    def _schedule_retry(self, waiter: Waiter, blk: Block) -> None:
        if not blk.retry_at_ms or self.scheduler is None:
            return
        delay = max(blk.retry_at_ms - self.clock.monotonic_ms(), 0.0) / 1000.0
        waiter.retry_timer = self.scheduler.call_later(delay, lambda: self._retry_later(waiter))

    def _retry_later(self, waiter: Waiter) -> None:
        waiter.retry_timer = None
        self._retry(waiter)
        if self.keyspace.ready_dbs:
            self._serve_ready()

    def _timeout(self, waiter: Waiter) -> None:
        if waiter.client.gate.blocked is not waiter:
            return
        waiter.timer = None
        self.stats.total_blocking_timeouts += 1
        self._count_unblocked(waiter.row, failed=False)
        self._finish_wait(waiter, waiter.timeout_reply)

    def end_wait(self, client: Client, reply: Reply) -> bool:
        """End a wait that is not on keys (WAIT: the replication layer decides when) with
        ``reply``; False if the client is not waiting."""
        waiter = client.gate.blocked
        if type(waiter) is not Waiter:  # (a client held by a pause is not waiting)
            return False
        self._count_unblocked(waiter.row, failed=False)
        self._finish_wait(waiter, reply)
        return True

    def serve_ready(self) -> None:
        """Wake the clients whose keys commands applied outside ``execute`` made ready (a
        replica's link applies its primary's stream with ``apply``)."""
        if self.keyspace.ready_dbs:
            self._serve_ready()

    def unblock_client(self, client: Client, error: bool) -> bool:
        waiter = client.gate.blocked
        if type(waiter) is not Waiter:  # held by a pause: only its end releases it
            return False
        self._count_unblocked(waiter.row, failed=error)
        self._finish_wait(waiter, self._error(UNBLOCKED) if error else waiter.timeout_reply)
        return True

    def _finish_wait(self, waiter: Waiter, reply: Reply) -> None:
        self.blocking.remove(waiter)
        client = waiter.client
        self._reply(client, reply)
        client.gate.resume()

    def _serve_ready(self) -> None:
        """Re-run the commands of clients blocked on keys that became ready, FIFO per key."""
        ready_dbs = self.keyspace.ready_dbs
        while ready_dbs:
            db = ready_dbs.pop(0)
            ready, db.ready = db.ready, []
            for key in ready:
                value = db.data.get(key)
                for waiter in self.blocking.waiters_for(db, key):
                    if waiter.wakes_on is None or isinstance(value, waiter.wakes_on):
                        self._retry(waiter)

    def _retry(self, waiter: Waiter) -> None:
        if waiter.client.gate.blocked is not waiter:
            return
        if self.keyspace.tracking_on:
            self._retry_tracked(waiter)
        else:
            self._rerun(waiter)

    def _retry_tracked(self, waiter: Waiter) -> None:
        """``_retry`` while tracking is on: the woken client runs as the current one, its
        own invalidations after its reply (Redis 7.4's unblockClientOnKey)."""
        tracking = self.tracking
        tracking.send_pending()  # (the waker's: its reply is already out)
        outer, outer_executing = tracking.current, tracking.executing
        tracking.current, tracking.executing = waiter.client, True
        try:
            self._rerun(waiter)
            tracking.send_pending()
        finally:
            tracking.current, tracking.executing = outer, outer_executing

    def _rerun(self, waiter: Waiter) -> None:
        c = waiter.client
        self.keyspace.now_ms = self.clock.now_ms()
        reply = self.call(c, waiter.row, waiter.argv)
        if isinstance(reply, Block):
            # still not satisfiable: keep the place in the queue (and the deadline)
            self._uncount(waiter.row)
            if waiter.retry_timer is None:
                self._schedule_retry(waiter, reply)
            return
        self._finish_wait(waiter, reply)

    # -- client pause (engine/pause.py) -----------------------------------------------------

    def _postpone(self, c: Client, row: CommandSpec, argv: list[bytes]) -> bool:
        """Hold the command if the pause in force covers it (True: held, nothing replied)."""
        if self.keyspace.now_ms > self.pause.end_ms:
            self.unpause_clients()  # over, though its timer has not fired yet
            return False
        if not covers(self, c, row, argv):
            return False
        held = Held(c, argv)
        c.gate.blocked = held
        self.pause.held.append(held)
        return True

    def pause_clients(self, timeout_ms: int, mode: int) -> None:
        """CLIENT PAUSE: merged with a pause in force, the stricter mode and the later end."""
        now = self.clock.now_ms()
        end = pause_end(now, timeout_ms)
        pause = self.pause
        if self.pause_mode:
            end = max(end, pause.end_ms)
            mode = max(mode, self.pause_mode)
        if end < now:
            return  # over before it began (a timeout of 0, or one that overflowed)
        pause.end_ms = end
        self.pause_mode = mode
        self.keyspace.expiry_paused = True
        if pause.timer is not None:
            pause.timer.cancel()
            pause.timer = None
        if self.scheduler is not None:
            delay = (end - now + 1) / 1000.0
            pause.timer = self.scheduler.call_later(delay, self._pause_timer)

    def _pause_timer(self) -> None:
        self.pause.timer = None
        if not self.pause_mode:
            return
        now = self.clock.now_ms()
        if now > self.pause.end_ms:
            self.unpause_clients()
        elif self.scheduler is not None:  # (the clock has not reached the end yet)
            delay = (self.pause.end_ms - now + 1) / 1000.0
            self.pause.timer = self.scheduler.call_later(delay, self._pause_timer)

    def unpause_clients(self) -> None:
        """CLIENT UNPAUSE, or the pause's end: the held clients run again, in order, after
        the current loop callback (at once in an engine without a loop)."""
        pause = self.pause
        self.pause_mode = PAUSE_OFF
        pause.end_ms = 0
        self.keyspace.expiry_paused = False
        if pause.timer is not None:
            pause.timer.cancel()
            pause.timer = None
        if self.failover_paused:  # (a FAILOVER's hold of writes outlives CLIENT UNPAUSE)
            self.pause_mode = PAUSE_WRITE
            pause.end_ms = INT64_MAX
            self.keyspace.expiry_paused = True
        if not pause.held or pause.release_scheduled:
            return
        if self.scheduler is None:
            self._release_held()
            return
        pause.release_scheduled = True
        self.scheduler.call_later(0, self._release_held)

    def _release_held(self) -> None:
        """Each held client's command, then what it pipelined, before the next client's (a
        newer pause may hold them again)."""
        self.pause.release_scheduled = False
        held, self.pause.held = self.pause.held, []
        for entry in held:
            c = entry.client
            if c.closed or c.gate.blocked is not entry:
                continue
            c.gate.blocked = None
            self.execute(c, entry.argv)
            if c.gate.blocked is None:
                c.gate.run_pipelined()

    # -- server-level requests -------------------------------------------------------------

    def request_shutdown(self, save: bool | None, now: bool, force: bool) -> None:
        self.shutdown_requested = (save, now, force)

    def emit_eviction(self, db: int, line: list[bytes]) -> None:
        """An evicted key's DEL (or UNLINK), to the AOF and the replicas."""
        self._emit(db, line)

    def used_memory(self) -> int:
        """With maxmemory set, what Redis would count (engine/eviction.py) and the
        replication backlog; else the process's resident set size."""
        if self.evicting:
            return self.evictor.used() + self.memory_not_counted_for_evict()
        return self.rss_memory()

    def memory_not_counted_for_evict(self) -> int:
        if not self.evicting or self.replication is None:
            return 0
        return self.replication.backlog_size()

    def rss_memory(self) -> int:
        # A cheap, honest approximation of the process: its resident set size.
        try:
            with open("/proc/self/statm", "rb") as f:
                pages = int(f.read().split()[1])
            return pages * resource.getpagesize()
        except OSError:
            return sys.getsizeof(self.keyspace)

    def scripting_memory(self) -> list[str]:
        return self.scripting.memory_lines()

    def log(self, level: str, message: str) -> None:
        log.log(logging.getLevelName(level.upper()) if level != "notice" else logging.INFO, message)

    def cron(self) -> None:
        """Periodic work (``hz`` times a second): active expiry."""
        self.keyspace.now_ms = self.clock.now_ms()
        budget = 200
        keyspace = self.keyspace
        expire = not keyspace.replica and not keyspace.expiry_paused
        started = _perf_counter()
        for db in keyspace.dbs:
            if db.field_deadlines and expire:
                self._expire_hash_fields(db, budget)
            if db.expires and expire:
                db.active_expire(budget)
        if self.keyspace.expired:
            self._propagate_expired()
        if self.latency.threshold_ms:
            self.latency.sample("expire-cycle", (_perf_counter() - started) * 1000)
        now = self.keyspace.now_ms
        if now - self._last_second_ms >= 1000 and expire:
            # (a replica forgets IDMP iids only with its primary, as it expires keys: by its
            # own clock it would refuse the primary's later retry of an iid it dropped)
            self._last_second_ms = now
            self.streams.expire_idmp(self.keyspace.dbs, now, self.config["stream-idmp-duration"])
        self._reclaim_idle_consumers()
        if self.migrate_sockets.cached:
            self.migrate_sockets.close_idle(now)
        if keyspace.tracking_on:
            self.tracking.limit_used_slots()
            self.tracking.broadcast()  # (the keys it expired, to BCAST clients)
        if self.evicting:
            self.evictor.make_room()  # (what a command's time budget left over)
        self.evictor.evict_clients()
        self._track_rates()

    def _track_rates(self) -> None:
        stats = self.stats
        now = int(self.clock.monotonic_ms())
        if stats.ops_rate.due(now):
            stats.ops_rate.track(now, stats.total_commands_processed)
            stats.input_rate.track(now, stats.net_input_bytes)
            stats.output_rate.track(now, stats.net_output_bytes)

    def broadcast_invalidations(self) -> None:
        """Once per loop turn, before replies are sent: BCAST clients hear of the keys
        changed under their prefixes (Redis's beforeSleep)."""
        if self.tracking.to_broadcast:
            self.tracking.broadcast()

    def _expire_hash_fields(self, db: Database, budget: int) -> None:
        """Due hash fields (Redis's activeSubexpiresCycle, before keys): ``hexpired`` for
        each hash touched (``del`` for one that went with its last field), then their
        HDELs."""
        flags = self.keyspace.notify_flags
        for key, emptied in active_expire_fields(db, budget):
            hold = self.effect_seq + 1 if self.replies_wait_for_disk else 0
            if flags & HASH:
                publish_event(self.pubsub, flags, b"hexpired", key, db.index, hold)
            if emptied and flags & GENERIC:
                publish_event(self.pubsub, flags, b"del", key, db.index, hold)
        if self.keyspace.expired:
            self._propagate_expired()

    def _reclaim_idle_consumers(self) -> None:
        """Once a second while ``stream-consumer-idle-reclaim-ms`` is set (its own clock, so
        that turning it on takes effect at the next cron)."""
        idle_ms = self.config["stream-consumer-idle-reclaim-ms"]
        now = self.keyspace.now_ms
        if self.keyspace.replica or self.pause_mode:
            return  # its primary reclaims, and the stream brings the effects (or paused)
        if not idle_ms or now - self._last_reclaim_ms < 1000:
            return
        self._last_reclaim_ms = now
        for db in self.keyspace.dbs:
            for change in self.streams.reclaim_idle(db, now, idle_ms):
                self.apply_change(db.index, [], change)


def _refused_on_oom(c: Client, row: CommandSpec) -> bool:
    """Out of memory, what is refused (Redis's processCommand): a denyoom command, EXEC of
    a transaction holding one, and in MULTI anything but EXEC, DISCARD, QUIT and RESET
    (queuing takes memory too)."""
    if row.name == "exec":
        return any("denyoom" in queued.flags for queued, _ in c.queued)
    if c.in_multi and row.name not in ("discard", "quit", "reset"):
        return True
    return "denyoom" in row.flags


def allowed_while_busy(row: CommandSpec) -> bool:
    """What a busy script lets through (Redis: CMD_ALLOW_BUSY), except EXEC, which would run
    its queue in the middle of the script."""
    return "allow_busy" in row.flags and row.name != "exec"


def _exec_abort(error: ReplyError) -> ReplyError:
    """A refused EXEC ends the transaction with the refusal in its error. Redis keeps the code
    of a fixed error (``BUSY``, ``NOAUTH``) but has none for a formatted one (wrong arity),
    which is always an ERR here."""
    cause = error.msg if error.code == "ERR" else error.line().decode("utf-8", "surrogateescape")
    return ReplyError("EXECABORT", f"Transaction discarded because of: {cause}")


def _after_pushes(out: list[bytes], start: int, reply: Reply, resp: int) -> Reply:
    """A transaction's (P|S)(UN)SUBSCRIBE wrote its confirmations to ``out``: they are its
    reply, so they leave ``out`` and take its place inside EXEC's array."""
    pushed = out[start:]
    del out[start:]
    encoded: list[bytes] = []
    encode_into(encoded, reply, resp)
    return Raw(b"".join(pushed) + b"".join(encoded))


def _first_error(reply: bytes) -> ReplyError | None:
    """The first error in an encoded reply, nested ones included (EXEC's replies)."""
    if b"-" not in reply:
        return None
    reader = hiredis.Reader()
    reader.feed(reply)
    pending: list[object] = []
    while (item := reader.gets()) is not False:
        pending.append(item)
    while pending:
        item = pending.pop(0)
        if isinstance(item, hiredis.ReplyError):
            code, _, msg = str(item).partition(" ")
            return ReplyError(code, msg)
        if isinstance(item, list):
            pending[:0] = item
    return None


def unknown_command(argv: list[bytes]) -> ReplyError:
    """Redis's text, byte for byte: ``'%.128s'`` of the name and each argument quoted until
    128 bytes of arguments are shown (raw bytes, not decoded text)."""
    args = b""
    for arg in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + c_string(arg)[: 128 - len(args)] + b"' "
    name = c_string(argv[0])[:128]
    text = b"unknown command '" + name + b"', with args beginning with: " + args
    return err(text.decode("utf-8", "surrogateescape"))
