"""Issue #36's cluster figures, side by side in one run (``make bench BENCH_ARGS="--rows
cluster"``):

* aggregate XADD throughput of a 2-primary cluster (``redis-benchmark --cluster``, 50
  clients, ``XADD bench:{tag} * f <rand>``: each client's key hashes to a slot of the node
  it talks to) for Headwater and for Redis, and of one Headwater node (plain
  ``redis-benchmark``); targets: Headwater's cluster >= 1.5x one Headwater node and >= 0.8x
  Redis's cluster;
* the bus's idle cost: CPU of each node of an idle 6-node cluster (3 primaries, 3 replicas)
  over 20 s (target < 2% of a core), with the bus messages each node sends a second and what
  a message costs, from which a 100-node cluster's bus cost is worked out.
"""

from __future__ import annotations

import csv
import os
import shlex
import statistics
import subprocess
import time
from collections.abc import Sequence

from harness import (
    HOST,
    Harness,
    LoadError,
    ServerProcess,
    free_port,
    headwater_argv,
    redis_argv,
    redis_benchmark,
    running,
)

NODE_TIMEOUT = "5000"
XADD = ["XADD", "bench:{tag}", "*", "f", "__rand_int__"]


def cluster_node(h: Harness, kind: str, label: str) -> ServerProcess:
    port = free_port()
    data = h.tmp / label
    data.mkdir(parents=True, exist_ok=True)
    # (the bus port on its own: port + 10000 may be past 65535)
    extra = ("--cluster-enabled", "yes", "--cluster-node-timeout", NODE_TIMEOUT)
    extra += ("--cluster-port", str(free_port()))
    if kind == "redis":
        argv = redis_argv(h.args.redis_server, port, data, *extra)
        env = None
    else:
        argv = headwater_argv(h.args.python, port, data, *extra)
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    return ServerProcess(kind, argv, port, h.tmp / f"{label}.log", env)


def join(nodes: Sequence[ServerProcess], primaries: int) -> None:
    """Slots split evenly over the first ``primaries`` nodes, everyone met, the rest made
    replicas (by hand: redis-cli --cluster create wants 3 primaries at least)."""
    clients = [n.client(timeout=30) for n in nodes]
    share = 16384 // primaries
    for i in range(primaries):
        last = 16383 if i == primaries - 1 else (i + 1) * share - 1
        clients[i].execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        clients[i].execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
    first = nodes[0]
    bus_port = first.argv[first.argv.index("--cluster-port") + 1]
    for client in clients[1:]:
        client.execute_command("CLUSTER", "MEET", HOST, first.port, bus_port)
    settle(clients, len(nodes))
    for i, client in enumerate(clients[primaries:]):
        master = clients[i % primaries].execute_command("CLUSTER", "MYID").decode()
        client.execute_command("CLUSTER", "REPLICATE", master)
    settle(clients, len(nodes))
    for client in clients:
        client.close()


def settle(clients: Sequence[object], known: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        infos = [c.cluster("INFO") for c in clients]  # type: ignore[attr-defined]
        up = [i["cluster_state"] == "ok" and int(i["cluster_known_nodes"]) == known for i in infos]
        if all(up):
            return
        if time.monotonic() > deadline:
            raise LoadError(f"the cluster did not come up: {infos}")
        time.sleep(0.2)


def cluster_xadd(h: Harness, node: ServerProcess, n: int) -> float:
    """redis-benchmark --cluster's rps (it prints the masters it found before its CSV)."""
    argv = [
        h.args.redis_benchmark, "--cluster", "-h", HOST, "-p", str(node.port), "-c", "50",
        "-n", str(n), "-r", str(h.args.keyspace), "--csv", *XADD,
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    rows = [r for r in csv.reader(done.stdout.splitlines()) if len(r) > 1]
    header = next((i for i, r in enumerate(rows) if r[:2] == ["test", "rps"]), None)
    if done.returncode != 0 or header is None or header + 1 >= len(rows):
        raise LoadError(f"{shlex.join(argv)}: status {done.returncode}\n{done.stdout}{done.stderr}")
    return float(rows[header + 1][1])


def stream_lengths(nodes: Sequence[ServerProcess]) -> int:
    total = 0
    for node in nodes:
        client = node.client()
        for key in client.scan_iter("bench:*"):
            total += int(client.xlen(key))
        client.flushall()
        client.close()
    return total


def table_cluster(h: Harness) -> list[str]:
    n = h.n(300_000)
    print("cluster: 2-primary clusters and one node, XADD, 50 clients", flush=True)
    runs: dict[str, list[float]] = {
        "headwater-cluster": [],
        "redis-cluster": [],
        "one": [],
        "redis-one": [],
    }
    hw = [cluster_node(h, "headwater", f"cluster-hw-{i}") for i in range(2)]
    rd = [cluster_node(h, "redis", f"cluster-redis-{i}") for i in range(2)]
    single = cluster_node(h, "headwater", "cluster-one")
    single.argv = single.argv[: single.argv.index("--cluster-enabled")]
    redis_one = cluster_node(h, "redis", "cluster-redis-one")
    redis_one.argv = redis_one.argv[: redis_one.argv.index("--cluster-enabled")]
    with running([*hw, *rd, single, redis_one]):
        join(hw, 2)
        join(rd, 2)
        for rep in range(h.args.repeat):
            for label, nodes in (("redis-cluster", rd), ("headwater-cluster", hw)):
                rps = cluster_xadd(h, nodes[0], n)
                if stream_lengths(nodes) != n:
                    raise LoadError(f"{label}: entries lost")
                runs[label].append(rps)
                print(f"  {rep + 1}/{h.args.repeat} {label:<18} {rps:>10,.0f} rps", flush=True)
            one = ["XADD", "bench:one", "*", "f", "__rand_int__"]
            for label, server in (("redis-one", redis_one), ("one", single)):
                rps = redis_benchmark(h, server.port, one, clients=50, n=n)
                stream_lengths([server])
                runs[label].append(rps)
                print(f"  {rep + 1}/{h.args.repeat} {label:<18} {rps:>10,.0f} rps", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    scale = med["headwater-cluster"] / med["one"]
    versus = med["headwater-cluster"] / med["redis-cluster"]
    lines = [
        "| 2-primary cluster, XADD c50 | rps (median) | ratio | target | met |",
        "|---|---:|---:|---:|---|",
        f"| redis-server, one node (no cluster) | {med['redis-one']:,.0f} | | | |",
        f"| redis-server cluster vs one redis node (the client's ceiling) "
        f"| {med['redis-cluster']:,.0f} | {med['redis-cluster'] / med['redis-one']:.2f}x | | |",
        f"| headwater, one node (no cluster) | {med['one']:,.0f} | | | |",
        f"| headwater cluster vs one headwater node | {med['headwater-cluster']:,.0f} "
        f"| {scale:.2f}x | >= 1.5x | {'yes' if scale >= 1.5 else '**no**'} |",
        f"| headwater cluster vs redis cluster | {med['headwater-cluster']:,.0f} "
        f"| {versus:.2f}x | >= 0.8x | {'yes' if versus >= 0.8 else '**no**'} |",
    ]
    return [*lines, "", *reshard_speed(h), "", *idle_bus(h)]


def reshard_speed(h: Harness, slots: int = 800) -> list[str]:
    """Seconds ``redis-cli --cluster reshard`` takes to move ``slots`` empty slots from the
    other two primaries of a 3-primary cluster to the first (median of the repeats)."""
    print(f"cluster-reshard: {slots} slots, 3 primaries", flush=True)
    took: dict[str, list[float]] = {"redis": [], "headwater": []}
    for rep in range(h.args.repeat):
        for kind in ("redis", "headwater"):
            nodes = [cluster_node(h, kind, f"reshard-{kind}-{rep}-{i}") for i in range(3)]
            with running(nodes):
                join(nodes, 3)
                target = nodes[0].client().execute_command("CLUSTER", "MYID").decode()
                argv = [
                    "redis-cli", "--cluster", "reshard", f"{HOST}:{nodes[1].port}",
                    "--cluster-from", "all", "--cluster-to", target,
                    "--cluster-slots", str(slots), "--cluster-yes",
                ]  # fmt: skip
                began = time.monotonic()
                done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
                took[kind].append(time.monotonic() - began)
                if done.returncode != 0 or "[ERR]" in done.stdout:
                    raise LoadError(f"reshard failed on {kind}:\n{done.stdout}{done.stderr}")
            h.note(f"reshard {kind}: {took[kind][-1]:.2f} s")
    redis_s, ours = statistics.median(took["redis"]), statistics.median(took["headwater"])
    return [
        f"Reshard of {slots} empty slots (`redis-cli --cluster reshard`, 3 primaries): "
        f"redis {redis_s:.2f} s, headwater {ours:.2f} s, {ours / redis_s:.2f}x Redis's time."
    ]


def idle_bus(h: Harness, seconds: float = 20) -> list[str]:
    print(f"cluster-idle: 6 nodes, {seconds:.0f} s idle", flush=True)
    lines = ["| idle 6-node cluster | CPU per node (mean) | max | bus messages sent /s per node |",
             "|---|---:|---:|---:|"]  # fmt: skip
    for kind in ("redis", "headwater"):
        nodes = [cluster_node(h, kind, f"idle-{kind}-{i}") for i in range(6)]
        with running(nodes):
            join(nodes, 3)
            time.sleep(3)
            ticks, sent = [n.cpu_ticks() for n in nodes], [messages_sent(n) for n in nodes]
            began = time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - began
            hz = os.sysconf("SC_CLK_TCK")
            cpu = [(n.cpu_ticks() - t) / hz / elapsed for n, t in zip(nodes, ticks, strict=True)]
            rate = [(messages_sent(n) - s) / elapsed for n, s in zip(nodes, sent, strict=True)]
        mean_cpu, mean_rate = statistics.mean(cpu), statistics.mean(rate)
        lines.append(f"| {kind} | {mean_cpu:.2%} | {max(cpu):.2%} | {mean_rate:.1f} |")
        h.note(f"idle {kind}: CPU per node {[f'{c:.2%}' for c in cpu]}, messages/s {rate}")
    return lines


def messages_sent(node: ServerProcess) -> int:
    client = node.client()
    try:
        return int(client.cluster("INFO").get("cluster_stats_messages_sent", 0))
    finally:
        client.close()
