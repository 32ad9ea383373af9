"""The server's CPU per ``XADD s * f v`` (c=50): a plain server against a region without peers.

    PYTHONPATH=src python benchmarks/activeactive_cpu.py [server options, e.g. --appendonly no]

Three runs each way, servers taking turns: 20,000 requests of warm-up, then utime + stime of
the server process (``/proc/<pid>/stat``) over 100,000. Steadier than a throughput ratio on a
shared machine, where the two servers of ``activeactive_links.py``'s cost row see different
loads.
"""

from __future__ import annotations

import os
import subprocess
import sys

from activeactive_links import Server

REQUESTS = 100_000


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def xadd(port: int, requests: int) -> None:
    command = ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests), "-q"]
    subprocess.run([*command, "XADD", "s", "*", "f", "v"], capture_output=True, check=True)


def main() -> None:
    extra = tuple(sys.argv[1:])
    found: dict[str, list[float]] = {"plain": [], "region": []}
    for _ in range(3):
        for name, args in (("plain", extra), ("region", ("--region-id", "1", *extra))):
            server = Server(*args)
            try:
                xadd(server.port, 20_000)
                before = cpu_seconds(server.proc.pid)
                xadd(server.port, REQUESTS)
                found[name].append((cpu_seconds(server.proc.pid) - before) / REQUESTS * 1e6)
            finally:
                server.stop()
    for name, values in found.items():
        print(f"{name}: " + ", ".join(f"{v:.1f}" for v in values) + " µs CPU per XADD")


if __name__ == "__main__":
    main()
