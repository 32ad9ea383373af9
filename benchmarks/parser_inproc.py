"""µs per command of the request parser alone, in process: ``feed`` then ``next`` until it
returns None, as a connection does with each read; ``XADD s * f v`` one command a read
(c=50 traffic) and 16 a read (pipelined).

    PYTHONPATH=src python benchmarks/parser_inproc.py [--reads N]

Best of 3 runs of N reads each. The figures are in PROFILE-transport.md ("the client's
requests split in C").
"""

from __future__ import annotations

import argparse
import time

from headwater.resp.encoder import encode_command
from headwater.resp.parser import RequestParser

COMMAND = encode_command([b"XADD", b"s", b"*", b"f", b"v"])


def per_command_us(per_read: int, reads: int) -> float:
    data = COMMAND * per_read
    parser = RequestParser()
    feed, nxt = parser.feed, parser.next
    started = time.perf_counter()
    for _ in range(reads):
        feed(data)
        while nxt() is not None:
            pass
    return (time.perf_counter() - started) / (reads * per_read) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=20_000, help="reads per run (20000)")
    args = parser.parse_args()
    for per_read in (1, 16):
        best = min(per_command_us(per_read, args.reads) for _ in range(3))
        print(f"{per_read:>2} commands a read: {best:.2f} us a command")


if __name__ == "__main__":
    main()
