"""The server's CPU per ``XADD s * f v`` (c=50): a plain server against a region without peers,
or (``--with-peer``) against a region linked both ways to a second region, which takes every
effect the first one makes (its CPU is not counted: it is the peer's).

    PYTHONPATH=src python benchmarks/activeactive_cpu.py [--with-peer] [server options]

Three runs each way, servers taking turns: 20,000 requests of warm-up, then utime + stime of
the server process (``/proc/<pid>/stat``) over 100,000. Steadier than a throughput ratio on a
shared machine, where the two servers of ``activeactive_links.py``'s cost row see different
loads. (CPU per request is not the server's work alone: a server that outruns
redis-benchmark takes fewer requests a loop turn, so more system calls per request.)
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time

from activeactive_links import Server, free_port

REQUESTS = 100_000


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_seconds() -> float:
    """The whole machine's busy CPU time (every core), from ``/proc/stat``."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_linked(server: Server) -> None:
    """Until the region's link to its peer is up (the peer then asks for its effects)."""
    deadline = time.monotonic() + 30
    while server.client().info("active-active").get("peer0", {}).get("state") != "connected":
        if time.monotonic() > deadline:
            raise RuntimeError("the regions did not link")
        time.sleep(0.1)


def xadd(port: int, requests: int) -> None:
    command = ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests), "-q"]
    subprocess.run([*command, "XADD", "s", "*", "f", "v"], capture_output=True, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Any other argument is a server option, given to both servers.",
    )
    parser.add_argument(
        "--with-peer", action="store_true", help="the region has a peer region, linked"
    )
    known, rest = parser.parse_known_args()
    extra = tuple(rest)
    found: dict[str, list[float]] = {"plain": [], "region": []}
    others: list[float] = []
    for _ in range(3):
        for name in ("plain", "region"):
            peer = None
            if name == "plain":
                server = Server(*extra)
            elif not known.with_peer:
                server = Server("--region-id", "1", *extra)
            else:
                port, peer_port = free_port(), free_port()
                link = ("--peers", f"127.0.0.1:{peer_port}")
                server = Server("--region-id", "1", *link, *extra, port=port)
                back = ("--peers", f"127.0.0.1:{port}")
                peer = Server("--region-id", "2", *back, *extra, port=peer_port)
            try:
                if peer is not None:
                    wait_linked(server)
                xadd(server.port, 20_000)
                before = cpu_seconds(server.proc.pid)
                busy, bench, wall = busy_seconds(), children_seconds(), time.monotonic()
                xadd(server.port, REQUESTS)
                used = cpu_seconds(server.proc.pid) - before
                found[name].append(used / REQUESTS * 1e6)
                # (what the rest of the machine used meanwhile: neither this server nor
                # redis-benchmark; in cores, of the machine's os.cpu_count())
                rest = busy_seconds() - busy - used - (children_seconds() - bench)
                others.append(rest / (time.monotonic() - wall))
            finally:
                server.stop()
                if peer is not None:
                    peer.stop()
    for name, values in found.items():
        print(f"{name}: " + ", ".join(f"{v:.1f}" for v in values) + " µs CPU per XADD")
    print("others' CPU during the runs: " + ", ".join(f"{v:.2f}" for v in others) + " cores")


if __name__ == "__main__":
    main()
