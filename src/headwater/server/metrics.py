"""``/metrics`` of the admin port (issue 34): the server in Prometheus's text format.

Theory of operation
-------------------
Where oliver006/redis_exporter has a metric, the same name, type and labels, so that the
dashboards made for it work unchanged: the INFO fields it maps (``redis_connected_clients``,
``redis_memory_used_bytes``, ``redis_commands_processed_total`` …), ``redis_instance_info``,
``redis_db_keys``, ``redis_commands_total`` and ``redis_commands_duration_seconds_total`` by
command, the replicas' offsets, and its stream series (``redis_stream_length``,
``redis_stream_group_lag``, ``redis_stream_group_consumer_idle_seconds`` …). Headwater's own
are under ``headwater_``.

Every figure comes from where the commands get it: INFO's text as INFO renders it, and the
stream store's XINFO answers (``StreamStore.info_*``), asked by a client of our own that no
connection list shows. Nothing is looked up through a command, so scraping counts in no
statistic, touches no key's access time and expires nothing.

The streams are described one by one up to ``metrics-max-streams``, the longest first; the
others are counted in ``headwater_metrics_streams_omitted``, so a million keys do not make
a million series. A scrape goes in steps (``Scrape``: 50,000 keys looked at, or 100 streams
described, a step), the server serving its clients between them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from headwater.activeactive.rstream import RegionStream
from headwater.commands.context import Client
from headwater.commands.server import ALL_SECTIONS, render_info
from headwater.stream.stream import Stream
from headwater.structures.histogram import BYTES, LONG_SECONDS, SECONDS, Histogram, Histograms

if TYPE_CHECKING:
    from headwater.engine.core import Engine

#: INFO field -> redis_exporter's gauge name (its metricMapGauges, the fields Headwater has)
GAUGES = {
    "uptime_in_seconds": "uptime_in_seconds",
    "process_id": "process_id",
    "connected_clients": "connected_clients",
    "instantaneous_ops_per_sec": "instantaneous_ops",
    "instantaneous_input_kbps": "net_instantaneous_input_kbps",
    "instantaneous_output_kbps": "net_instantaneous_output_kbps",
    "blocked_clients": "blocked_clients",
    "tracking_clients": "tracking_clients",
    "client_recent_max_output_buffer": "client_recent_max_output_buffer_bytes",
    "client_recent_max_input_buffer": "client_recent_max_input_buffer_bytes",
    "used_memory": "memory_used_bytes",
    "used_memory_rss": "memory_used_rss_bytes",
    "used_memory_peak": "memory_used_peak_bytes",
    "used_memory_lua": "memory_used_lua_bytes",
    "used_memory_overhead": "memory_used_overhead_bytes",
    "used_memory_startup": "memory_used_startup_bytes",
    "used_memory_dataset": "memory_used_dataset_bytes",
    "used_memory_scripts": "memory_used_scripts_bytes",
    "maxmemory": "memory_max_bytes",
    "mem_fragmentation_ratio": "mem_fragmentation_ratio",
    "mem_not_counted_for_evict": "mem_not_counted_for_eviction_bytes",
    "mem_clients_slaves": "mem_clients_slaves",
    "mem_clients_normal": "mem_clients_normal",
    "lazyfree_pending_objects": "lazyfree_pending_objects",
    "loading": "loading_dump_file",
    "rdb_changes_since_last_save": "rdb_changes_since_last_save",
    "rdb_bgsave_in_progress": "rdb_bgsave_in_progress",
    "rdb_last_save_time": "rdb_last_save_timestamp_seconds",
    "rdb_last_bgsave_time_sec": "rdb_last_bgsave_duration_sec",
    "aof_enabled": "aof_enabled",
    "aof_rewrite_in_progress": "aof_rewrite_in_progress",
    "aof_rewrite_scheduled": "aof_rewrite_scheduled",
    "aof_last_rewrite_time_sec": "aof_last_rewrite_duration_sec",
    "aof_current_size": "aof_current_size_bytes",
    "aof_base_size": "aof_base_size_bytes",
    "aof_pending_bio_fsync": "aof_pending_bio_fsync",
    "aof_delayed_fsync": "aof_delayed_fsync",
    "pubsub_channels": "pubsub_channels",
    "pubsub_patterns": "pubsub_patterns",
    "connected_slaves": "connected_slaves",
    "repl_backlog_size": "replication_backlog_bytes",
    "repl_backlog_active": "repl_backlog_is_active",
    "repl_backlog_first_byte_offset": "repl_backlog_first_byte_offset",
    "repl_backlog_histlen": "repl_backlog_history_bytes",
    "master_repl_offset": "master_repl_offset",
    "second_repl_offset": "second_repl_offset",
    "sync_full": "replica_resyncs_full",
    "sync_partial_ok": "replica_partial_resync_accepted",
    "sync_partial_err": "replica_partial_resync_denied",
}

#: INFO field -> redis_exporter's counter name (its metricMapCounters)
COUNTERS = {
    "total_connections_received": "connections_received_total",
    "total_commands_processed": "commands_processed_total",
    "rejected_connections": "rejected_connections_total",
    "total_net_input_bytes": "net_input_bytes_total",
    "total_net_output_bytes": "net_output_bytes_total",
    "expired_keys": "expired_keys_total",
    "evicted_keys": "evicted_keys_total",
    "keyspace_hits": "keyspace_hits_total",
    "keyspace_misses": "keyspace_misses_total",
    "used_cpu_sys": "cpu_sys_seconds_total",
    "used_cpu_user": "cpu_user_seconds_total",
    "used_cpu_sys_children": "cpu_sys_children_seconds_total",
    "used_cpu_user_children": "cpu_user_children_seconds_total",
}

#: the INFO fields that are not numbers but a status redis_exporter shows as 1 (ok) or 0
STATUSES = {
    "rdb_last_bgsave_status": "rdb_last_bgsave_status",
    "aof_last_bgrewrite_status": "aof_last_bgrewrite_status",
    "aof_last_write_status": "aof_last_write_status",
}

_INSTANCE_LABELS = (
    ("role", "role"),
    ("redis_version", "redis_version"),
    ("redis_build_id", "redis_build_id"),
    ("redis_mode", "redis_mode"),
    ("os", "os"),
    ("maxmemory_policy", "maxmemory_policy"),
    ("tcp_port", "tcp_port"),
    ("run_id", "run_id"),
    ("process_id", "process_id"),
)


class Family:
    """One metric: its HELP and TYPE, and its sample lines."""

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help = help_text
        self.lines: list[str] = []

    def add(self, value: float, labels: str = "") -> None:
        """A sample; ``labels`` as ``label_text`` made them."""
        if labels:
            self.lines.append(f"{self.name}{{{labels}}} {number(value)}")
        else:
            self.lines.append(f"{self.name} {number(value)}")

    def render(self) -> Iterator[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} {self.kind}"
        yield from self.lines


class Exposition:
    """The families of one scrape, in the order they were first named."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def family(self, name: str, kind: str, help_text: str) -> Family:
        found = self.families.get(name)
        if found is None:
            found = self.families[name] = Family(name, kind, help_text)
        return found

    def gauge(self, name: str, help_text: str, value: float, labels: str = "") -> None:
        self.family(name, "gauge", help_text).add(value, labels)

    def counter(self, name: str, help_text: str, value: float, labels: str = "") -> None:
        self.family(name, "counter", help_text).add(value, labels)

    def render(self) -> str:
        lines = [line for family in self.families.values() for line in family.render()]
        return "\n".join(lines) + "\n"


def label_text(**labels: str) -> str:
    """Labels as a sample line carries them (values escaped)."""
    return ",".join(f'{key}="{escape(value)}"' for key, value in labels.items())


def _quoted(value: str) -> str:
    return '"' + escape(value) + '"'


def escape(text: str) -> str:
    """A label value as the text format wants it: backslash, quote and newline escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    if isinstance(value, int) or (math.isfinite(value) and value == int(value)):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def text(raw: bytes) -> str:
    """A key or name as a label value (valid UTF-8, the bytes that are not escaped)."""
    return raw.decode("utf-8", "backslashreplace")


def observer(engine: Engine) -> Client:
    """The client scrapes read through: no connection, in no client list, every permission."""
    return Client(engine, 0)


#: work of one step of a scrape (``Scrape.step``): keys looked at, streams described
KEYS_A_STEP = 50_000
STREAMS_A_STEP = 100


class Scrape:
    """One scrape, in steps: between two, the server serves its clients (a million keys to
    look through and a thousand streams to describe would otherwise hold it for a tenth of
    a second). Each step reads the engine as it is then; a stream deleted or replaced
    between the scan and its description is left out."""

    def __init__(self, engine: Engine, client: Client) -> None:
        self.engine = engine
        self.client = client
        self.out = Exposition()
        info = parse_info(render_info(client, list(ALL_SECTIONS)).decode())
        self.out.gauge("redis_up", "Information about the Redis instance", 1)
        instance = {label: info.get(field, "") for label, field in _INSTANCE_LABELS}
        self.out.gauge(
            "redis_instance_info", "Information about the Redis instance", 1,
            label_text(**instance),
        )  # fmt: skip
        _info_figures(self.out, info)
        _keyspace(self.out, info)
        _commands(self.out, info)
        _replicas(self.out, info)
        _histograms(self.out, engine.histograms)
        if engine.region is not None:
            _region(self.out, parse_info(render_info(client, ["active-active"]).decode()))
        #: (db, its keys as of the scan's start, how many were looked at)
        self._scans = [(db.index, list(db.data), 0) for db in engine.keyspace.dbs if db.data]
        #: (length, db, key) of every stream found
        self._found: list[tuple[int, int, bytes]] = []
        self._chosen: list[tuple[int, int, bytes]] | None = None

    def step(self) -> bool:
        """Some of the work; False once the scrape is complete."""
        if self._scans:
            self._scan_some()
            return True
        if self._chosen is None:
            self._choose()
            return True
        if self._chosen:
            batch, self._chosen = self._chosen[:STREAMS_A_STEP], self._chosen[STREAMS_A_STEP:]
            for _, index, key in batch:
                self._describe(index, key)
            return bool(self._chosen)
        return False

    def steps(self) -> Iterator[None]:
        """Each step, as it is done (the last one done when this ends)."""
        while self.step():
            yield None

    def text(self) -> str:
        return self.out.render()

    def _scan_some(self) -> None:
        index, keys, done = self._scans[0]
        db = self.engine.keyspace.dbs[index]
        data = db.data
        end = done + KEYS_A_STEP
        for key in keys[done:end]:
            value = data.get(key)
            if isinstance(value, (Stream, RegionStream)) and not db.is_expired(key):
                self._found.append((value.length, index, key))
        if end >= len(keys):
            self._scans.pop(0)
        else:
            self._scans[0] = (index, keys, end)

    def _choose(self) -> None:
        limit = self.engine.config["metrics-max-streams"]
        found = sorted(self._found, key=lambda item: (-item[0], item[1], item[2]))
        self.out.gauge("headwater_streams", "Streams in every database", len(found))
        self.out.gauge(
            "headwater_metrics_streams_omitted",
            "Streams not described one by one (past metrics-max-streams, the shortest)",
            max(len(found) - limit, 0),
        )
        self._chosen = found[:limit]

    def _describe(self, index: int, key: bytes) -> None:
        db = self.engine.keyspace.dbs[index]
        stream = db.data.get(key)
        if not isinstance(stream, (Stream, RegionStream)):
            return
        self.client.db = db
        _one_stream(self.out, self.engine.streams, self.client, f"db{index}", text(key), stream)


def render_metrics(engine: Engine, client: Client) -> str:
    """A whole scrape at once."""
    scrape = Scrape(engine, client)
    for _ in scrape.steps():
        pass
    return scrape.text()


def parse_info(rendered: str) -> dict[str, str]:
    fields = {}
    for line in rendered.split("\r\n"):
        if line and not line.startswith("#"):
            name, _, value = line.partition(":")
            fields[name] = value
    return fields


def _as_number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _info_figures(out: Exposition, info: dict[str, str]) -> None:
    for table, kind in ((GAUGES, "gauge"), (COUNTERS, "counter")):
        for field, name in table.items():
            value = _as_number(info.get(field, ""))
            if value is not None:
                out.family("redis_" + name, kind, name + " metric").add(value)
    for field, name in STATUSES.items():
        if field in info:
            out.gauge("redis_" + name, name + " metric", 1 if info[field] == "ok" else 0)


def _fields(value: str) -> dict[str, str]:
    """``a=1,b=2`` (INFO's keyspace, commandstats and replica lines)."""
    return dict(part.partition("=")[::2] for part in value.split(","))


def _keyspace(out: Exposition, info: dict[str, str]) -> None:
    for name, value in info.items():
        if name.startswith("db") and name[2:].isdigit():
            fields = _fields(value)
            out.gauge(
                "redis_db_keys",
                "Total number of keys by DB",
                int(fields["keys"]),
                label_text(db=name),
            )
            out.gauge(
                "redis_db_keys_expiring",
                "Total number of expiring keys by DB",
                int(fields["expires"]),
                label_text(db=name),
            )


def _commands(out: Exposition, info: dict[str, str]) -> None:
    for name, value in info.items():
        if name.startswith("cmdstat_"):
            cmd = name[len("cmdstat_") :]
            fields = _fields(value)
            out.counter(
                "redis_commands_total", "Total number of calls per command",
                int(fields["calls"]), label_text(cmd=cmd),
            )  # fmt: skip
            out.counter(
                "redis_commands_duration_seconds_total",
                "Total amount of time in seconds spent per command",
                int(fields["usec"]) / 1e6, label_text(cmd=cmd),
            )  # fmt: skip


def _replicas(out: Exposition, info: dict[str, str]) -> None:
    primary_offset = _as_number(info.get("master_repl_offset", "")) or 0
    for name, value in info.items():
        if name.startswith("slave") and name[5:].isdigit():
            fields = _fields(value)
            labels = label_text(
                slave_ip=fields.get("ip", ""),
                slave_port=fields.get("port", ""),
                slave_state=fields.get("state", ""),
            )
            offset = int(fields.get("offset", "0"))
            out.gauge(
                "redis_connected_slave_offset_bytes", "Offset of connected slave", offset,
                labels,
            )  # fmt: skip
            out.gauge(
                "redis_connected_slave_lag_seconds", "Lag of connected slave",
                int(fields.get("lag", "0")), labels,
            )  # fmt: skip
            out.gauge(
                "headwater_replica_lag_bytes",
                "How far a replica is behind the primary's replication offset",
                max(primary_offset - offset, 0), labels,
            )  # fmt: skip
    if info.get("role") == "slave":
        labels = label_text(
            master_host=info.get("master_host", ""), master_port=info.get("master_port", "")
        )
        up = 1 if info.get("master_link_status") == "up" else 0
        out.gauge("redis_master_link_up", "Master link status on Redis slave", up, labels)
        replica_offset = _as_number(info.get("slave_repl_offset", ""))
        if replica_offset is not None:
            out.gauge("redis_slave_repl_offset", "Slave replication offset", replica_offset, labels)


def _region(out: Exposition, info: dict[str, str]) -> None:
    """An active-active region: what waits in its queues, and each peer link."""
    own = int(info.get("own_seq", "0"))
    for field, help_text in (
        ("waiting_effects", "Effects received out of order, waiting for the ones before"),
        ("own_effects_kept", "This region's effects kept until every peer has them"),
        ("relay_effects_kept", "Other regions' effects kept to relay to peers"),
    ):
        out.gauge("headwater_region_" + field, help_text, int(info.get(field, "0")))
    for name, value in info.items():
        if not (name.startswith("peer") and name[4:].isdigit()):
            continue
        fields = _fields(value)
        labels = label_text(
            peer_region=fields.get("region", ""), host=fields.get("host", ""),
            port=fields.get("port", ""),
        )  # fmt: skip
        up = 1 if fields.get("state") == "connected" else 0
        out.gauge("headwater_region_link_up", "The link to a peer region is up", up, labels)
        out.gauge(
            "headwater_region_link_lag_effects",
            "Effects the peer has made that this region has not applied yet",
            int(fields.get("lag", "0")), labels,
        )  # fmt: skip
        out.gauge(
            "headwater_region_link_unacked_effects",
            "This region's effects the peer has not acknowledged yet",
            max(own - int(fields.get("acked_by_peer", "0")), 0), labels,
        )  # fmt: skip
        io_ms = int(fields.get("last_io_ms", "-1"))
        if io_ms >= 0:
            out.gauge(
                "headwater_region_link_last_io_seconds", "Seconds since the link last heard",
                io_ms / 1000, labels,
            )  # fmt: skip


#: Headwater's histograms (``engine.histograms``), each shown from the start (empty until its
#: first value): name -> (help, bounds)
HISTOGRAMS = {
    "aof_write_seconds": ("Time of each AOF write (a loop turn's effects at once)", SECONDS),
    "aof_fsync_seconds": ("Time of each AOF fdatasync (appendfsync always or everysec)", SECONDS),
    "aof_write_bytes": ("Bytes of each AOF write: one group commit's batch", BYTES),
    "script_run_seconds": ("Time of each script or function run (EVAL, EVALSHA, FCALL)", SECONDS),
    "snapshot_seconds": ("Time of each snapshot: SAVE, BGSAVE (its child's run)", LONG_SECONDS),
    "aof_rewrite_seconds": ("Time of each AOF rewrite (its child's run)", LONG_SECONDS),
}


def _histograms(out: Exposition, histograms: Histograms) -> None:
    for name, (help_text, bounds) in HISTOGRAMS.items():
        histogram = histograms.by_name.get(name) or Histogram(bounds)
        family = out.family("headwater_" + name, "histogram", help_text)
        for bound, count in histogram.cumulative():
            le = "+Inf" if math.isinf(bound) else repr(bound)
            family.lines.append(f'{family.name}_bucket{{le="{le}"}} {count}')
        family.lines.append(f"{family.name}_sum {number(histogram.sum)}")
        family.lines.append(f"{family.name}_count {histogram.count}")


def _id_ms(raw: object) -> float:
    """A stream ID's milliseconds (redis_exporter's parseStreamItemId), 0 for none."""
    if not isinstance(raw, bytes):
        return 0
    head = raw.split(b"-", 1)[0]
    return float(head) if head.isdigit() else 0


def _entry_id(entry: object) -> bytes | None:
    """The ID of XINFO STREAM's first or last entry (an entry comes encoded already:
    ``*2``, then the ID as a bulk string)."""
    if not isinstance(entry, bytes):
        return None
    parts = entry.split(b"\r\n", 3)
    return parts[2] if len(parts) > 2 else None


def _one_stream(out: Exposition, store: Any, client: Client, db: str, name: str, s: Any) -> None:
    head = store.info_stream(client, s, False, 0)
    labels = label_text(db=db, stream=name)
    out.gauge(
        "redis_stream_length", "The number of elements of the stream", head[b"length"], labels
    )
    out.gauge(
        "redis_stream_radix_tree_keys", "Radix tree keys count", head[b"radix-tree-keys"], labels
    )
    out.gauge(
        "redis_stream_radix_tree_nodes",
        "Radix tree nodes count",
        head[b"radix-tree-nodes"],
        labels,
    )
    out.gauge("redis_stream_groups", "Groups count of stream", head[b"groups"], labels)
    out.gauge(
        "redis_stream_last_generated_id", "The epoch milliseconds of the last generated ID",
        _id_ms(head.get(b"last-generated-id")), labels,
    )  # fmt: skip
    out.gauge(
        "redis_stream_max_deleted_entry_id",
        "The epoch milliseconds of the greatest ID deleted from the stream",
        _id_ms(head.get(b"max-deleted-entry-id")), labels,
    )  # fmt: skip
    out.counter(
        "headwater_stream_entries_added_total", "Entries ever added to the stream",
        head.get(b"entries-added", 0), labels,
    )  # fmt: skip
    out.counter(
        "headwater_idmp_duplicates_total",
        "XADDs with IDMP or IDMPAUTO refused as duplicates (the original's ID answered)",
        head.get(b"iids-duplicates", 0), labels,
    )  # fmt: skip
    out.gauge(
        "redis_stream_first_entry_id", "The epoch milliseconds of the first entry's ID",
        _id_ms(_entry_id(head.get(b"first-entry"))), labels,
    )  # fmt: skip
    out.gauge(
        "redis_stream_last_entry_id", "The epoch milliseconds of the last entry's ID",
        _id_ms(_entry_id(head.get(b"last-entry"))), labels,
    )  # fmt: skip
    for group in store.info_groups(client, s):
        _one_group(out, store, client, s, labels, group)


def _one_group(
    out: Exposition, store: Any, client: Client, s: Any, labels: str, group: Any
) -> None:
    g = labels + ",group=" + _quoted(text(group[b"name"]))
    out.gauge(
        "redis_stream_group_consumers", "Consumers count of stream group", group[b"consumers"], g
    )
    out.gauge(
        "redis_stream_group_messages_pending", "Pending number of messages in that stream group",
        group[b"pending"], g,
    )  # fmt: skip
    out.gauge(
        "redis_stream_group_last_delivered_id",
        "The epoch milliseconds of the group's last delivered ID",
        _id_ms(group[b"last-delivered-id"]), g,
    )  # fmt: skip
    read, lag = group[b"entries-read"], group[b"lag"]
    if read is not None:  # (unknown after some XSETID or XGROUP SETID: no sample)
        out.gauge("redis_stream_group_entries_read", "Entries the group has read", read, g)
    if lag is not None:
        out.gauge(
            "redis_stream_group_lag", "Entries of the stream the group has yet to read", lag,
            g,
        )  # fmt: skip
    for consumer in store.info_consumers(client, s, store.group(s, group[b"name"])):
        c = g + ",consumer=" + _quoted(text(consumer[b"name"]))
        out.gauge(
            "redis_stream_group_consumer_messages_pending",
            "Pending number of messages for this specific consumer", consumer[b"pending"], c,
        )  # fmt: skip
        out.gauge(
            "redis_stream_group_consumer_idle_seconds", "Consumer idle time in seconds",
            consumer[b"idle"] / 1e3, c,
        )  # fmt: skip
