"""µs per ``XADD s * f v`` with the engine driven in process (no sockets): a plain server's
engine against a region's (``region-id 1``, no peers), best of 3 runs of 30,000, twice each.

    PYTHONPATH=src python benchmarks/activeactive_inproc.py          # the figures
    PYTHONPATH=src python benchmarks/activeactive_inproc.py --prof   # cProfile of the region

Without the AOF (nothing listens for effects in process), so it shows the region's own work per
XADD: the ID, the effect and its line, the sinks; ``activeactive_links.py`` measures over TCP.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from headwater.config import Config
from headwater.engine import Engine
from headwater.resp.encoder import encode_command
from headwater.resp.parser import RequestParser


def make(region: bool) -> Engine:
    config = Config()
    if region:
        config.load_value("region-id", ["1"])
    return Engine(config)


def run(engine: Engine, n: int = 30_000) -> float:
    client = engine.new_client("127.0.0.1:50000", "127.0.0.1:6379")
    parser = RequestParser(auth_required=False)
    execute, pending, out = engine.execute, engine.pending, client.out
    request = encode_command([b"XADD", b"s", b"*", b"f", b"v"])
    started = time.perf_counter()
    for _ in range(n):
        parser.feed(request)
        while (argv := parser.next()) is not None:
            execute(client, argv)
        b"".join(out)
        out.clear()
        pending.take()
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    from headwater._build import build_kind

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prof", action="store_true", help="cProfile of the region instead")
    if parser.parse_args().prof:
        engine = make(True)
        run(engine, 2_000)
        profile = cProfile.Profile()
        profile.runcall(run, engine)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return
    print(f"build: {build_kind()}")
    for name in ("plain", "region", "plain", "region"):
        engine = make(name == "region")
        run(engine, 3_000)
        print(f"{name}: {min(run(engine) for _ in range(3)):.1f} µs per XADD")


if __name__ == "__main__":
    main()
