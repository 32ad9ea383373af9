"""The cost of a full state transfer (issue 18), in-process.

    PYTHONPATH=src python benchmarks/activeactive_transfer.py [N]

A donor region with one stream of N entries (and a group): the size of its state, the time
to make it (``persist.dump_state``, on the donor's event loop) and to adopt it
(``transfer.adopt_state``, on the receiver's; the receiver then also writes its new state as
one ``AARESTORE`` line, about one more dump).
"""

from __future__ import annotations

import argparse
import time

from headwater.activeactive.persist import dump_state
from headwater.activeactive.region import Region
from headwater.activeactive.transfer import adopt_state


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", nargs="?", type=int, default=100_000, help="entries (100,000)")
    n = parser.parse_args().n
    donor = Region(1, [1, 2])
    for i in range(n):
        donor.xadd(b"x", b"*", [b"field", b"value-%d" % i], 1_700_000_000_000 + i // 10)
    donor.xgroup_create(b"x", b"g", b"0")
    t0 = time.perf_counter()
    state = dump_state(donor)
    t1 = time.perf_counter()
    receiver = Region(2, [1, 2])
    adopt_state(receiver, state)
    t2 = time.perf_counter()
    print(
        f"{n} entries: state {len(state) / 1e6:.1f} MB ({len(state) / n:.0f} B/entry), "
        f"dump {1000 * (t1 - t0):.0f} ms, adopt {1000 * (t2 - t1):.0f} ms"
    )


if __name__ == "__main__":
    main()
