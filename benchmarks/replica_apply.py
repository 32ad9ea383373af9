"""A replica's apply of a captured replication stream, in process: what one applied XADD
costs the replica, without sockets or the event loop.

    PYTHONPATH=src python benchmarks/replica_apply.py [N]

Builds N ``XADD bench:x <ms>-<seq> f <12 digits>`` commands as a primary's stream carries
them, feeds them 300 at a time to the link's parser and applies them with the link's own
path (``Replayer.apply_link_run`` then ``end_of_chunk``), and prints the microseconds per
XADD. For instruction counts, which a loaded machine does not move, run it under callgrind
(compiled build)::

    valgrind --tool=callgrind \\
        --toggle-collect='CPyPy_replay___Replayer___apply_link_run' \\
        --toggle-collect='CPyPy_replay___Replayer___end_of_chunk' \\
        python benchmarks/replica_apply.py 5000
"""

from __future__ import annotations

import argparse
import time

from headwater.engine.core import Engine
from headwater.engine.replay import Replayer
from headwater.errors import ReplyError
from headwater.resp.split import new_splitter

CHUNK = 300
FIRST_MS = 1764200000000


def stream_chunks(n: int) -> list[bytes]:
    """n XADDs with explicit IDs (seven to a millisecond), as RESP, CHUNK to a chunk."""
    commands = []
    for i in range(n):
        sid = b"%d-%d" % (FIRST_MS + i // 7, i % 7)
        value = b"%012d" % (i * 7919 % 1000000)
        commands.append(
            b"*5\r\n$4\r\nXADD\r\n$7\r\nbench:x\r\n$%d\r\n%s\r\n$1\r\nf\r\n$12\r\n%s\r\n"
            % (len(sid), sid, value)
        )
    return [b"".join(commands[i : i + CHUNK]) for i in range(0, n, CHUNK)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", nargs="?", type=int, default=20000, help="XADDs to apply")
    n = parser.parse_args().n
    replayer = Replayer(Engine())
    replayer.client.is_master = True
    reader = new_splitter()
    failures: list[tuple[list[bytes], ReplyError]] = []
    reader.feed(b"*5\r\n$4\r\nXADD\r\n$7\r\nbench:x\r\n$3\r\n1-0\r\n$1\r\nf\r\n$1\r\nv\r\n")
    replayer.apply_link_run(reader, failures)  # (creates the stream)
    replayer.end_of_chunk()
    chunks = stream_chunks(n)
    started = time.perf_counter()
    for chunk in chunks:
        reader.feed(chunk)
        replayer.apply_link_run(reader, failures)
        replayer.end_of_chunk()
    seconds = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{len(failures)} commands failed: {failures[0][1].msg}")
    print(f"{seconds / n * 1e6:.2f} us per applied XADD ({n} XADDs)")


if __name__ == "__main__":
    main()
