"""The pure active-active core against a plain stream (issue 18), in-process.

    PYTHONPATH=src python benchmarks/activeactive_core.py [N]

Prints the cost of one XADD in a region (ID rule, effect, apply) against ``Stream.append``,
the rate a peer applies those effects, and a merged XRANGE against one sub-log's. Indicative
only: the server-level targets (XADD c=50 within 20% of a server without peers) are for the
wired server.
"""

from __future__ import annotations

import argparse
import time

from headwater.activeactive.region import Region
from headwater.stream.ids import MAX_ID, MIN_ID
from headwater.stream.stream import Stream


def main(n: int) -> None:
    pairs = [b"field", b"value"]
    region = Region(1, [1, 2, 3])
    shipped = []
    start = time.perf_counter()
    for i in range(n):
        region.xadd(b"k", b"*", pairs, 1000 + i // 10)
        if len(region.outbox) >= 100:
            shipped += region.take_outbox()
    xadd = (time.perf_counter() - start) / n
    shipped += region.take_outbox()
    plain = Stream()
    start = time.perf_counter()
    for i in range(n):
        plain.append((1000 + i // 10, i), pairs, 4096, 100)
    append = (time.perf_counter() - start) / n
    peer = Region(2, [1, 2, 3])
    start = time.perf_counter()
    for effect in shipped:
        peer.receive(effect)
    receive = (time.perf_counter() - start) / n
    peer.xadd(b"k", b"*", pairs, 10**9)  # a second sub-log to merge
    start = time.perf_counter()
    merged = peer.xrange(b"k", MIN_ID, MAX_ID)
    merged_s = time.perf_counter() - start
    start = time.perf_counter()
    one = peer.streams[b"k"].subs[1].range(MIN_ID, MAX_ID)
    one_s = time.perf_counter() - start
    print(f"region XADD      {xadd * 1e6:6.2f} us   (Stream.append {append * 1e6:.2f} us)")
    print(f"peer applies     {receive * 1e6:6.2f} us an effect")
    print(f"merged XRANGE    {merged_s * 1e3:6.1f} ms for {len(merged)} entries")
    print(f"one sub-log      {one_s * 1e3:6.1f} ms for {len(one)} entries")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", nargs="?", type=int, default=100_000, help="entries (100,000)")
    main(parser.parse_args().n)
