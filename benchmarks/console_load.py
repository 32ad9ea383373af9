"""How long each page of the web console takes to show its data (issue 34's target: under
1 s with 10,000 streams and a 1M-entry stream), in Debian's headless Chromium.

A Headwater server with ``--admin-port`` gets 10,000 streams of 3 entries, one stream of
1,000,000 entries (redis-benchmark, pipelined), a group on it with 1,000 entries pending;
then each page is opened fresh, and the time from navigation until the page has drawn its
data (its ``data-loaded`` mark, or its cards) is taken, best and median of ``--repeat``.

    .venv/bin/python benchmarks/console_load.py [--streams 10000] [--entries 1000000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import free_port, start_headwater  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
TARGET_S = 1.0
LOADED = "document.getElementById('page').dataset.loaded === '{}'"
#: page -> (its URL fragment, what shows it is drawn)
PAGES = {
    "overview": ("#/", "document.querySelector('[data-field=keys]')"),
    "streams": ("#/streams", LOADED.format("streams")),
    "stream browser (1M)": ("#/stream/big", LOADED.format("stream")),
    "groups (1M, 1k pending)": (
        "#/groups/big",
        "document.querySelectorAll('table.pending tbody tr').length === 100",
    ),
    "live tail": (
        "#/tail/big",
        "document.getElementById('tail-state').textContent.startsWith('Waiting')",
    ),
    "replication": ("#/replication", LOADED.format("replication")),
    "slowlog & events": ("#/diagnostics", LOADED.format("diagnostics")),
}


def fill(port: int, streams: int, entries: int) -> None:
    r = redis.Redis(port=port)
    pipe = r.pipeline(transaction=False)
    for i in range(streams):
        for j in range(3):
            pipe.xadd(f"stream:{i:05d}", {"n": str(j), "payload": "x" * 40})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(entries), "-P", "100", "-c", "4", "-q",
         "XADD", "big", "*", "field", "value-of-sixteen"],
        check=True, capture_output=True,
    )  # fmt: skip
    if r.xlen("big") != entries:
        raise RuntimeError(f"the big stream has {r.xlen('big')} entries, not {entries}")
    r.xgroup_create("big", "workers", id="0")
    r.xreadgroup("workers", "w1", {"big": ">"}, count=1000)
    r.close()


def measure(admin: int, repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {name: [] for name in PAGES}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for _ in range(repeat):
            for name, (fragment, drawn) in PAGES.items():
                context = browser.new_context()
                page = context.new_page()
                started = time.perf_counter()
                page.goto(f"http://127.0.0.1:{admin}/console/{fragment}")
                page.wait_for_function(drawn, timeout=60_000, polling=10)
                times[name].append(time.perf_counter() - started)
                context.close()
        browser.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=10_000, help="small streams to create")
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries of the big one")
    parser.add_argument("--repeat", type=int, default=5, help="loads of each page")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print("needs Debian's chromium: make browser", file=sys.stderr)
        return 2
    admin = free_port()
    server = start_headwater("--admin-port", str(admin), "--appendonly", "no", "--save", "")
    try:
        started = time.perf_counter()
        fill(server.port, args.streams, args.entries)
        print(f"filled in {time.perf_counter() - started:.1f} s: {args.streams:,} streams and "
              f"one of {args.entries:,} entries")  # fmt: skip
        times = measure(admin, args.repeat)
    finally:
        server.stop()
    print("\n| page | best (s) | median (s) | target |\n|---|---:|---:|---:|")
    missed = 0
    for name, runs in times.items():
        median = statistics.median(runs)
        missed += median >= TARGET_S
        print(f"| {name} | {min(runs):.3f} | {median:.3f} | < {TARGET_S:.0f} s |")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
