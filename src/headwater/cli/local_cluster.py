"""``headwater local-cluster``: a Redis Cluster of Headwater nodes on this machine, one
process per node (one core each), joined as ``redis-cli --cluster create`` joins them, and
stopped together with Ctrl-C. ``make cluster`` runs it."""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import hiredis

SLOTS = 16384


class Conn:
    """A minimal synchronous client (the tool needs no client library of its own)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.reader = hiredis.Reader()

    def call(self, *args: object) -> bytes:
        """One command; its reply (every reply this tool reads is a bulk or a status)."""
        words = tuple(a.decode() if isinstance(a, bytes) else str(a) for a in args)
        self.sock.sendall(hiredis.pack_command(words))  # type: ignore[arg-type]
        while True:
            reply = self.reader.gets()
            if reply is not False:
                if isinstance(reply, hiredis.ReplyError):
                    raise RuntimeError(f"{args[:3]}: {reply}")
                return reply if isinstance(reply, bytes) else str(reply).encode()
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the node closed the connection")
            self.reader.feed(data)

    def close(self) -> None:
        self.sock.close()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="headwater local-cluster",
        description="Start a Redis Cluster of Headwater nodes on this machine (one process "
        "per node), join it, and run until Ctrl-C stops every node.",
    )
    parser.add_argument("--nodes", type=int, default=6, help="nodes to start (default 6)")
    parser.add_argument("--replicas", type=int, default=1, help="replicas per primary (1)")
    parser.add_argument("--base-port", type=int, default=7000, help="first client port (7000)")
    parser.add_argument("--dir", default="./cluster", help="data directory root (./cluster)")
    parser.add_argument(
        "--node-timeout", type=int, default=5000, help="cluster-node-timeout in ms (5000)"
    )
    args = parser.parse_args(argv)
    if args.replicas < 0 or args.nodes // (args.replicas + 1) < 1:
        parser.error("--nodes must leave at least one primary after the replicas")
    if not 0 < args.base_port <= 65535 - args.nodes - 10000:
        parser.error("--base-port leaves no room for the bus ports (port + 10000)")
    return args


def start(args: argparse.Namespace, nodes: list[tuple[int, subprocess.Popen[bytes]]]) -> None:
    """Start every node (appended to ``nodes`` as it starts: stopped by the caller even if a
    later one fails)."""
    for i in range(args.nodes):
        port = args.base_port + i
        data = Path(args.dir) / str(port)
        data.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", "headwater.cli", "server", "--port", str(port),
            "--dir", str(data), "--cluster-enabled", "yes",
            "--cluster-node-timeout", str(args.node_timeout), "--logfile", str(data / "log"),
        ]  # fmt: skip
        nodes.append((port, subprocess.Popen(argv)))
    for port, proc in nodes:
        wait_for(port, proc)


def wait_for(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the node on port {port} exited ({proc.returncode})")
        try:
            Conn(port).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the node on port {port} does not answer") from None
            time.sleep(0.1)


def join(ports: list[int], replicas: int) -> None:
    """Slots split over the primaries, distinct config epochs, everyone met, then each
    replica told its primary (what redis-cli --cluster create sends)."""
    conns = [Conn(port) for port in ports]
    primaries = len(ports) // (replicas + 1)
    info = conns[0].call("CLUSTER", "INFO")
    if b"cluster_slots_assigned:0\r" not in info:
        print("the nodes already form a cluster (restarted from their nodes.conf)")
        return
    share = SLOTS // primaries
    for i in range(primaries):
        last = SLOTS - 1 if i == primaries - 1 else (i + 1) * share - 1
        conns[i].call("CLUSTER", "ADDSLOTSRANGE", i * share, last)
    for epoch, conn in enumerate(conns, 1):
        conn.call("CLUSTER", "SET-CONFIG-EPOCH", epoch)
    for conn in conns[1:]:
        conn.call("CLUSTER", "MEET", "127.0.0.1", ports[0])
    settle(conns, len(ports), need_ok=False)
    for i, conn in enumerate(conns[primaries:]):
        master = conns[i % primaries].call("CLUSTER", "MYID")
        conn.call("CLUSTER", "REPLICATE", master)
    settle(conns, len(ports), need_ok=True)
    for conn in conns:
        conn.close()


def settle(conns: list[Conn], known: int, need_ok: bool, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        infos = [c.call("CLUSTER", "INFO") for c in conns]
        counted = all(f"cluster_known_nodes:{known}\r".encode() in i for i in infos)
        if counted and (not need_ok or all(b"cluster_state:ok" in i for i in infos)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the nodes did not form a cluster in time")
        time.sleep(0.2)


def main(argv: list[str]) -> int:
    args = parse(argv)
    nodes: list[tuple[int, subprocess.Popen[bytes]]] = []
    try:
        start(args, nodes)
        ports = [port for port, _ in nodes]
        join(ports, args.replicas)
        # (blocked only now: the nodes must not inherit a mask that holds back SIGTERM)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        print(f"cluster up: {len(ports)} nodes on ports {ports[0]}-{ports[-1]}, data in "
              f"{args.dir}; try: redis-cli -c -p {ports[0]} (Ctrl-C stops every node)")  # fmt: skip
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except (RuntimeError, OSError, KeyboardInterrupt) as exc:
        if not isinstance(exc, KeyboardInterrupt):
            print(f"headwater local-cluster: {exc}", file=sys.stderr)
            return 1
    finally:
        for _, proc in nodes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in nodes:
            proc.wait(30)
    return 0
