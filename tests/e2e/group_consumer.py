"""A consumer-group worker run as its own OS process by tests/e2e/test_groups_e2e.py.

It is the example consumer of the consumer-groups design document (seed 001): first process this
consumer's own pending history (XREADGROUP … 0, useful after a restart), then loop on `>` and, from
time to time, claim the stale pending entries of dead consumers (XAUTOCLAIM, or XPENDING + XCLAIM
as in the document). Every step is recorded, one line each, in a line-buffered log so that the
records survive a SIGKILL:

    S                     started (history processed, about to read new entries)
    P <id> <n> <source>   processed entry <id> whose field n is <n>; source: history|new|claim
    A <id> <reply>        XACK of <id> replied <reply> (1 = this call acknowledged it)
    K <id> …              about to SIGKILL itself; these IDs were read but not acknowledged
    E <reason>            gave up (deadline); exit status 2

The worker stops once the producer has set the done key, a `>` read returns nothing, and the
group's XPENDING summary reports 0 pending entries.

    python -m tests.e2e.group_consumer PORT KEY GROUP NAME LOG --done-key KEY [options]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

import redis

Entry = tuple[bytes, dict[bytes, bytes] | None]


def entries_of(reply: Any, key: str) -> list[Entry]:
    """The entries of one stream in a parsed XREADGROUP reply, RESP2 or RESP3."""
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3: {key: [entries]}
        (entries,) = reply[key.encode()]
        return list(entries)
    ((name, entries),) = reply  # RESP2: [[key, entries]]
    assert name == key.encode(), reply
    return list(entries)


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.r = redis.Redis(port=args.port, protocol=args.protocol, socket_timeout=15)
        self.log = open(args.log, "a", buffering=1)  # noqa: SIM115 - one line per write() call
        self.read_total = 0

    def record(self, line: str) -> None:
        self.log.write(line + "\n")

    def process(self, entries: list[Entry], source: str) -> None:
        """PROCESS(body) each entry, then XACK each ID on its own so every reply is attributable."""
        if not entries:
            return
        for sid, fields in entries:
            n = fields[b"n"].decode() if fields else "-"
            self.record(f"P {sid.decode()} {n} {source}")
        pipe = self.r.pipeline(transaction=False)
        for sid, _ in entries:
            pipe.xack(self.args.key, self.args.group, sid)
        for (sid, _), acked in zip(entries, pipe.execute(), strict=True):
            self.record(f"A {sid.decode()} {acked}")

    def read(self, last_id: str, block: int | None) -> list[Entry]:
        reply = self.r.xreadgroup(
            self.args.group,
            self.args.name,
            {self.args.key: last_id},
            count=self.args.count,
            block=block,
        )
        return entries_of(reply, self.args.key)

    def process_own_history(self) -> None:
        last = "0"
        while entries := self.read(last, None):
            self.process(entries, "history")
            last = entries[-1][0].decode()

    def claim_stale(self) -> None:
        a = self.args
        if a.claim_with == "xautoclaim":
            cursor: bytes | str = "0-0"
            while True:
                cursor, claimed, _deleted = self.r.xautoclaim(
                    a.key, a.group, a.name, a.min_idle, start_id=cursor, count=a.count
                )
                self.process(claimed, "claim")
                if cursor in (b"0-0", "0-0"):
                    return
        else:  # the design document's way: inspect the PEL, claim the old ones one call each
            old = self.r.xpending_range(a.key, a.group, "-", "+", a.count, idle=a.min_idle)
            for pending in old:
                if pending["time_since_delivered"] < a.min_idle:
                    continue
                claimed = self.r.xclaim(a.key, a.group, a.name, a.min_idle, [pending["message_id"]])
                self.process(claimed, "claim")

    def die_mid_batch(self, entries: list[Entry]) -> None:
        """Process half the batch, acknowledge nothing, and SIGKILL ourselves."""
        half = len(entries) // 2
        for sid, fields in entries[:half]:
            assert fields is not None
            self.record(f"P {sid.decode()} {fields[b'n'].decode()} new")
        self.record("K " + " ".join(sid.decode() for sid, _ in entries))
        self.log.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def run(self) -> int:
        a = self.args
        try:
            self.r.xgroup_create(a.key, a.group, id="0", mkstream=True)
        except redis.ResponseError as e:
            if not str(e).startswith("BUSYGROUP"):
                raise
        self.process_own_history()
        self.record("S")
        deadline = time.monotonic() + a.deadline
        next_claim = 0.0
        while time.monotonic() < deadline:
            done = bool(self.r.exists(a.done_key))  # read before the `>` read: see the docstring
            entries = self.read(">", a.block)
            if entries:
                self.read_total += len(entries)
                if a.die_after and self.read_total >= a.die_after and len(entries) >= 2:
                    self.die_mid_batch(entries)
                self.process(entries, "new")
            now = time.monotonic()
            if a.min_idle >= 0 and now >= next_claim:
                next_claim = now + a.claim_every
                self.claim_stale()
            if not entries and done and self.r.xpending(a.key, a.group)["pending"] == 0:
                return 0
        self.record(f"E deadline of {a.deadline}s passed")
        return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("port", type=int)
    p.add_argument("key")
    p.add_argument("group")
    p.add_argument("name")
    p.add_argument("log")
    p.add_argument("--done-key", required=True)
    p.add_argument("--protocol", type=int, default=2, choices=[2, 3])
    p.add_argument("--count", type=int, default=20, help="COUNT of each read and claim")
    p.add_argument("--block", type=int, default=100, help="BLOCK ms of each `>` read")
    p.add_argument("--min-idle", type=int, default=500, help="ms; negative: never claim")
    p.add_argument("--claim-every", type=float, default=0.1, help="seconds between claim rounds")
    p.add_argument("--claim-with", choices=["xautoclaim", "xclaim"], default="xautoclaim")
    p.add_argument("--die-after", type=int, default=0, help="SIGKILL self once this many read")
    p.add_argument("--deadline", type=float, default=40.0, help="seconds before giving up")
    return Worker(p.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
