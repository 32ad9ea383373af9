"""The replication rows of ``make bench`` (issue 17): Redis replicating to Redis beside
Headwater replicating to Headwater. ``repl-cost`` (XADD c=50 with and without a replica),
``repl-lag`` (lag under paced XADD), ``repl-psync`` (a 5 s cut and a partial resync) and
``repl-fullsync`` (a full sync against a snapshot load). bench.py lists and runs them; the
load tools they use are in repl_load.py.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from harness import (
    CLOCK_TICKS,
    HOST,
    VALUE16,
    CheckError,
    Harness,
    ServerProcess,
    compile_headwater,
    expect_len,
    fill_numbered,
    free_port,
    headwater_argv,
    pipe_load,
    redis_argv,
    redis_benchmark,
)

REPL_BACKLOG = "64mb"  # holds a 5 s cut at the psync row's rate on both servers


@dataclass
class ReplPair:
    """A primary and its replica of one kind (redis or headwater), in fresh directories."""

    kind: str
    primary: ServerProcess
    replica: ServerProcess

    def attach(self, port: int | None = None) -> None:
        """REPLICAOF the primary (or ``port``: a proxy in front of it); returns once the
        link is up and the replica holds everything the primary wrote."""
        self.replica.client().execute_command("REPLICAOF", HOST, port or self.primary.port)
        self.wait_synced()

    def detach(self) -> None:
        self.replica.client().execute_command("REPLICAOF", "NO", "ONE")
        deadline = time.monotonic() + 30
        while info_field(self.primary, "replication", "connected_slaves") != "0":
            if time.monotonic() > deadline:
                raise CheckError(f"{self.kind}: the primary still lists its replica")
            time.sleep(0.05)

    def wait_synced(self, timeout: float = 600.0) -> float:
        """Seconds until the replica's link is up and its offset is the primary's."""
        started = time.monotonic()
        while True:
            replica = info_section(self.replica, "replication")
            primary_offset = info_field(self.primary, "replication", "master_repl_offset")
            if (
                replica.get("master_link_status") == "up"
                and replica.get("master_sync_in_progress", "0") == "0"
                and replica.get("slave_repl_offset") == primary_offset
            ):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise CheckError(f"{self.kind}: the replica did not catch up: {replica}")
            time.sleep(0.02)


def info_section(server: ServerProcess, section: str) -> dict[str, str]:
    return {name: str(value) for name, value in server.client().info(section).items()}


def info_field(server: ServerProcess, section: str, name: str) -> str:
    return info_section(server, section).get(name, "")


def repl_pairs(h: Harness, label: str, cpus: dict[str, str] | None = None) -> list[ReplPair]:
    """(redis, headwater) primary/replica pairs, started, the replicas not attached yet;
    ``cpus``: the CPU list (taskset's) each role is pinned to."""
    pairs = []
    for kind in ("redis", "headwater"):
        servers = []
        for role in ("primary", "replica"):
            data = h.tmp / f"{label}-{kind}-{role}"
            data.mkdir(parents=True, exist_ok=True)
            port = free_port()
            extra = ("--repl-backlog-size", REPL_BACKLOG)
            if kind == "redis":
                # (Redis 7 waits 5 s by default before a diskless full sync, for more replicas)
                extra += ("--repl-diskless-sync-delay", "0")
                argv, env = redis_argv(h.args.redis_server, port, data, *extra), None
            else:
                argv = headwater_argv(h.args.python, port, data, *extra)
                env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
            if cpus is not None:
                argv = ["taskset", "-c", cpus[role], *argv]
            name = f"{kind}-{role}"
            servers.append(ServerProcess(name, argv, port, h.tmp / f"{label}-{name}.log", env))
        for server in servers:
            server.start()
        pairs.append(ReplPair(kind, servers[0], servers[1]))
    return pairs


def stop_pairs(pairs: Sequence[ReplPair]) -> None:
    for pair in pairs:
        pair.replica.stop()
        pair.primary.stop()


#: The pinned layout of ``repl-cost``: the primary alone on one CPU, its replica and the load
#: on the other. A replica normally runs on another machine; on a two-CPU box sharing the
#: cores, what a replica costs the primary is mixed with what the replica's own process
#: takes from the primary's core (and the cache and migrations that go with it).
PINNED = {"primary": "0", "replica": "1", "load": "1"}


def table_repl_cost(h: Harness) -> list[str]:
    """XADD c=50 on a primary alone, then with one replica attached (turns alternate): the
    three processes sharing the CPUs, then (with two CPUs or more) the primary pinned to a
    CPU of its own; the target is judged in each."""
    layouts: list[tuple[str, dict[str, str] | None]] = [("shared CPUs", None)]
    if (os.cpu_count() or 1) >= 2:
        layouts.append(("primary on its own CPU", PINNED))
    lines = [
        "Replication's cost on XADD, 50 clients (redis-benchmark; median of "
        f"{h.args.repeat} runs each way; target: Headwater's cost <= 15%, Redis's is the "
        f"anchor; {PINNED_NOTE}; 'primary CPU': the primary's own CPU time per request, "
        "from /proc. Judged on the rps cost in each layout: on two CPUs neither isolates "
        "the primary's cost (shared, the replica takes the primary's CPU; pinned, it takes "
        "redis-benchmark's, and a slower load makes each of the primary's turns smaller):",
        "",
        "| layout | server | alone rps | with a replica rps | rps cost "
        "| primary CPU µs/req alone | with a replica | CPU cost | target |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for layout, cpus in layouts:
        lines += _repl_cost_rows(h, layout, cpus)
    return lines


PINNED_NOTE = (
    "'primary on its own CPU': the primary on CPU 0, its replica and redis-benchmark on CPU 1, "
    "as a replica on another machine"
)


def _repl_cost_rows(h: Harness, layout: str, cpus: dict[str, str] | None) -> list[str]:
    pairs = repl_pairs(h, "repl-cost", cpus)
    n = h.n(100_000)
    command = ["XADD", "bench:repl", "*", "f", "__rand_int__"]
    load_cpus = cpus["load"] if cpus is not None else None
    rows = []
    try:
        for pair in pairs:
            alone, attached = [], []
            cpu_alone, cpu_attached = [], []
            for _ in range(h.args.repeat):
                for with_replica in (False, True):
                    if with_replica:
                        pair.attach()
                    pair.primary.client().delete("bench:repl")
                    ticks = pair.primary.cpu_ticks()
                    rps = redis_benchmark(
                        h, pair.primary.port, command, clients=50, n=n, cpus=load_cpus
                    )
                    us = (pair.primary.cpu_ticks() - ticks) / CLOCK_TICKS / n * 1e6
                    if with_replica:
                        pair.wait_synced()
                        expect_len(pair.replica, "bench:repl", n)
                        pair.detach()
                    (attached if with_replica else alone).append(rps)
                    (cpu_attached if with_replica else cpu_alone).append(us)
                    print(f"  {layout}: {pair.kind} "
                          f"{'with replica' if with_replica else 'alone'}: {rps:,.0f} rps, "
                          f"primary {us:.1f} us/req", flush=True)  # fmt: skip
            a, r = statistics.median(alone), statistics.median(attached)
            ca, cr = statistics.median(cpu_alone), statistics.median(cpu_attached)
            cost, cpu_cost = 1 - r / a, cr / ca - 1
            if pair.kind == "redis":
                target = "anchor"
            else:
                target = "<= 15%" + (" (met)" if cost <= 0.15 else " (**not met**)")
            rows.append(
                f"| {layout} | {pair.kind} | {a:,.0f} | {r:,.0f} | {cost:.0%} "
                f"| {ca:.1f} | {cr:.1f} | {cpu_cost:.0%} | {target} |"
            )
    finally:
        stop_pairs(pairs)
    return rows


def table_repl_lag(h: Harness) -> list[str]:
    """Replication lag under sustained XADD at half of Headwater's top rate with a replica:
    a probe entry every 20 ms, timed from the primary's reply to the replica's XREAD."""
    from repl_load import LagProbe, paced_xadd

    pairs = repl_pairs(h, "repl-lag")
    seconds = 3.0 if h.args.quick else 10.0
    try:
        for pair in pairs:
            pair.attach()
        top = redis_benchmark(
            h, pairs[1].primary.port, ["XADD", "bench:top", "*", "f", "__rand_int__"],
            clients=50, n=h.n(50_000),
        )  # fmt: skip
        rate = top / 2
        lines = [
            f"Replication lag under XADD at {rate:,.0f}/s for {seconds:.0f} s (half of "
            f"Headwater's {top:,.0f} rps with a replica, 50 clients), probe every 20 ms "
            "(target: Headwater's p99 < 100 ms):",
            "",
            "| server | probes | p50 ms | p99 ms | max ms | target |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for pair in pairs:
            with LagProbe(pair.primary.port, pair.replica.port) as probe:
                sent = paced_xadd(pair.primary.port, "bench:lag", rate, seconds)
                pair.wait_synced()
            stats = probe.summary()
            expect_len(pair.replica, "bench:lag", sent)
            met = stats["p99"] < 100
            target = "anchor" if pair.kind == "redis" else ("met" if met else "**not met**")
            lines.append(
                f"| {pair.kind} | {stats['probes']:.0f} | {stats['p50']:.1f} | "
                f"{stats['p99']:.1f} | {stats['max']:.1f} | {target} |"
            )
            print(f"  {pair.kind}: {stats}", flush=True)
    finally:
        stop_pairs(pairs)
    return lines


def table_repl_psync(h: Harness) -> list[str]:
    """A replica cut off its primary for 5 s while XADDs go on, then let back: it must come
    back with a partial resync that moves what the backlog gained, not the data set."""
    from repl_load import LinkProxy, paced_xadd

    pairs = repl_pairs(h, "repl-psync")
    preload, rate, cut = h.n(200_000), 5_000, 5.0
    lines = [
        f"Partial resync after a {cut:.0f} s cut ({preload:,} entries before, XADD at "
        f"{rate:,}/s during the cut; the link goes through a proxy that counts the bytes the "
        "primary sends after the cut):",
        "",
        "| server | full syncs | partial syncs | backlog gained (bytes) | bytes sent after the cut "
        "| catch-up s | only the backlog |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    proxies: list[LinkProxy] = []
    try:
        for pair in pairs:
            fill_numbered(pair.primary, "bench:psync", preload)
            proxy = LinkProxy(pair.primary.port)
            proxies.append(proxy)
            pair.attach(proxy.port)
            before = info_section(pair.primary, "stats")
            offset0 = int(info_field(pair.primary, "replication", "master_repl_offset"))
            proxy.cut(cut)
            paced_xadd(pair.primary.port, "bench:psync", rate, cut - 1.0)
            gained = int(info_field(pair.primary, "replication", "master_repl_offset")) - offset0
            sent0 = proxy.downstream_bytes
            time.sleep(max(proxy.refusing_until - time.monotonic(), 0))
            started = time.monotonic()
            pair.wait_synced()
            catch_up = time.monotonic() - started
            moved = proxy.downstream_bytes - sent0
            after = info_section(pair.primary, "stats")
            full = int(after["sync_full"]) - int(before["sync_full"])
            partial = int(after["sync_partial_ok"]) - int(before["sync_partial_ok"])
            only = full == 0 and partial == 1 and moved < gained + 64 * 1024
            lines.append(
                f"| {pair.kind} | {full} | {partial} | {gained:,} | {moved:,} | {catch_up:.2f} "
                f"| {'yes' if only else '**no**'} |"
            )
            print(f"  {pair.kind}: full {full}, partial {partial}, gained {gained:,}, "
                  f"moved {moved:,}", flush=True)  # fmt: skip
    finally:
        for proxy in proxies:
            proxy.close()
        stop_pairs(pairs)
    return lines


def table_repl_fullsync(h: Harness) -> list[str]:
    """A replica's full sync of N entries (REPLICAOF to caught up), against the same
    primary's restart from its snapshot of them (spawn to first PONG)."""
    entries = h.n(5_000_000)
    compile_headwater(h.args.python)
    pairs = repl_pairs(h, "repl-fullsync")
    lines = [
        f"Full sync of {entries:,} entries (REPLICAOF until the replica's offset is the "
        f"primary's) against a restart from a snapshot of them (median of {h.args.repeat}; "
        "target: Headwater's full sync <= 2x its snapshot load):",
        "",
        "| server | snapshot load s | full sync s | ratio | target |",
        "|---|---:|---:|---:|---|",
    ]
    try:
        for pair in pairs:
            seconds = pipe_load(pair.primary.port, ["XADD", "s", "*", "f", VALUE16], entries)
            h.note(f"repl-fullsync: loaded the {pair.kind} primary in {seconds:.1f} s")
            pair.primary.client(timeout=None).save()
            loads, syncs = [], []
            for _ in range(h.args.repeat):
                pair.primary.stop()
                loads.append(pair.primary.start(poll=0.005))
                expect_len(pair.primary, "s", entries)
                fulls = int(info_field(pair.primary, "stats", "sync_full"))
                started = time.monotonic()
                pair.attach()
                syncs.append(time.monotonic() - started)
                if int(info_field(pair.primary, "stats", "sync_full")) != fulls + 1:
                    raise CheckError(f"{pair.kind}: the attach was not one full sync")
                expect_len(pair.replica, "s", entries)
                pair.detach()
            load, sync = statistics.median(loads), statistics.median(syncs)
            ratio = sync / load
            met = "anchor" if pair.kind == "redis" else ("met" if ratio <= 2 else "**not met**")
            lines.append(f"| {pair.kind} | {load:.2f} | {sync:.2f} | {ratio:.2f}x | {met} |")
    finally:
        stop_pairs(pairs)
    return lines
