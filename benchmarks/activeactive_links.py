"""Active-active regions over TCP on loopback (issue 18): the three measured targets.

    PYTHONPATH=src python benchmarks/activeactive_links.py [--writes 10000] [--quick]

1. The cost of active-active on XADD: ``redis-benchmark -c 50 XADD s * f v`` against a server
   without ``region-id`` and a region without peers (target: within 20%).
2. Convergence after a partition: two regions, links cut, ``--writes`` XADDs on each side
   (pipelined), then the links heal; the time until both dumps are equal (target: <= 2 s for
   10,000 per side; the issue says a 10 s partition, the writes here take what they take).
3. Steady-state lag: one region writes at a fixed rate, a reader blocked on XREAD in another
   region takes each entry's age (the strict-mode ID's milliseconds are the writer's clock,
   the same machine's) when it arrives; p50/p99 (target p99 < 100 ms at half the maximum
   write rate; ``--rate`` sets it).

Starts its own servers on free ports in temporary directories, kills them at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
HEADWATER = [sys.executable, "-m", "headwater.cli", "server"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, *args: str, port: int = 0) -> None:
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="hw-aa-bench-")
        cmd = [*HEADWATER, "--port", str(self.port), "--dir", self.dir, *args]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=60)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def xadd_rate(server: Server, requests: int) -> float:
    command = ["redis-benchmark", "-p", str(server.port), "-c", "50", "-n", str(requests)]
    out = subprocess.run(
        [*command, "-q", "XADD", "s", "*", "f", "v"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.findall(r"([\d.]+) requests per second", out)
    return float(found[-1])


def cost(requests: int) -> None:
    rates: dict[str, list[float]] = {"plain": [], "region": []}
    for _ in range(2):  # alternate, twice: the machine is shared
        for name, args in (("plain", ()), ("region", ("--region-id", "1"))):
            server = Server(*args)
            try:
                rates[name].append(xadd_rate(server, requests))
            finally:
                server.stop()
    plain, region = max(rates["plain"]), max(rates["region"])
    print(
        f"XADD c=50: plain {plain:,.0f}/s, region {region:,.0f}/s: "
        f"the region costs {100 * (1 - region / plain):.0f}% (target <= 20%)"
    )


def mesh(n: int, *extra: str) -> list[Server]:
    ports = [free_port() for _ in range(n)]
    servers = []
    for r in range(1, n + 1):
        peers = ",".join(f"127.0.0.1:{p}" for i, p in enumerate(ports, 1) if i != r)
        server = Server.__new__(Server)
        server.port = ports[r - 1]
        server.dir = tempfile.mkdtemp(prefix="hw-aa-bench-")
        cmd = [*HEADWATER, "--port", str(server.port), "--dir", server.dir]
        cmd += ["--region-id", str(r), "--peers", peers, *extra]
        server.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        servers.append(server)
    for server in servers:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", server.port), 0.2),
            ):
                break
            time.sleep(0.05)
    for server in servers:
        while info(server).count(b"state=connected") < n - 1:
            time.sleep(0.05)
    return servers


def info(server: Server) -> bytes:
    """INFO active-active as the server wrote it (redis-py would parse it)."""
    with socket.create_connection(("127.0.0.1", server.port), 5) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$13\r\nactive-active\r\n")
        data = b""
        while b"\r\n" not in data:
            data += s.recv(65536)
        head, _, rest = data.partition(b"\r\n")
        size = int(head[1:])
        while len(rest) < size + 2:
            rest += s.recv(65536)
        return rest[:size]


def vector(server: Server) -> bytes:
    """The applied vector INFO active-active shows."""
    found = re.search(rb"vector:(\S+)", info(server))
    return found.group(1) if found else b""


def convergence(writes: int) -> None:
    servers = mesh(2)
    try:
        a, b = servers[0].client(), servers[1].client()
        a.execute_command("AALINK", "PAUSE", "*")
        b.execute_command("AALINK", "PAUSE", "*")
        started = time.monotonic()

        def write(c: redis.Redis) -> None:
            for _ in range(0, writes, 500):
                pipe = c.pipeline(transaction=False)
                for _ in range(500):
                    pipe.xadd("x", {"f": "v"})
                pipe.execute()

        threads = [threading.Thread(target=write, args=(c,)) for c in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wrote = time.monotonic() - started
        healed = time.monotonic()
        a.execute_command("AALINK", "RESUME", "*")
        b.execute_command("AALINK", "RESUME", "*")
        # (the vectors first, from INFO: AADUMP walks every entry on the server's loop, and
        # polling it every 20 ms slowed the very catch-up it timed; the dumps decide)
        while True:
            if vector(servers[0]) == vector(servers[1]) and (
                a.execute_command("AADUMP") == b.execute_command("AADUMP")
            ):
                break
            time.sleep(0.005)
        took = time.monotonic() - healed
        print(
            f"convergence: {writes:,} writes per side in {wrote:.1f} s while cut; "
            f"equal dumps {took:.2f} s after healing (target <= 2 s)"
        )
    finally:
        for server in servers:
            server.stop()


def lag(rate: int, seconds: float) -> None:
    servers = mesh(2)
    try:
        writer, reader = servers[0].client(), servers[1].client()
        ages: list[float] = []
        stop = time.monotonic() + seconds

        def read() -> None:
            last = "$"
            while time.monotonic() < stop + 1:
                got = reader.xread({"x": last}, block=500)
                now_ms = time.time() * 1000
                for _, entries in got or []:
                    for sid, _ in entries:
                        ages.append(now_ms - int(sid.split(b"-")[0]))
                        last = sid

        thread = threading.Thread(target=read)
        thread.start()
        time.sleep(0.2)
        n = 0
        begin = time.monotonic()
        while time.monotonic() < stop:
            writer.xadd("x", {"f": "v"})
            n += 1
            pause = begin + n / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        thread.join()
        ages.sort()
        if not ages:
            print("lag: nothing arrived")
            return
        p50, p99 = ages[len(ages) // 2], ages[int(len(ages) * 0.99)]
        print(
            f"lag at {rate}/s for {seconds:.0f} s: {len(ages)} entries, p50 {p50:.1f} ms, "
            f"p99 {p99:.1f} ms, max {ages[-1]:.1f} ms (target p99 < 100 ms)"
        )
    finally:
        for server in servers:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    requests = 20_000 if args.quick else 100_000
    cost(requests)
    convergence(args.writes // 5 if args.quick else args.writes)
    lag(args.rate, 3.0 if args.quick else 10.0)


if __name__ == "__main__":
    main()
