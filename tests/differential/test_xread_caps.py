"""MAXCOUNT / MAXSIZE (Redis 8.10) against redis-server 7.0, which does not have them.

Where a cap means something 7.0 can say another way, the reply bytes must be the same: on one
stream ``MAXCOUNT m`` is ``COUNT m``; ``MAXSIZE`` stops after the first entry whose RESP bytes
(cut out of 7.0's own reply, the key's included) reach the budget; caps that cannot bind
change nothing. For XREADGROUP the group state read back afterwards must agree too.
"""

from __future__ import annotations

import random

import hiredis
import pytest

from tests.differential.harness import run
from tests.helpers import ServerProcess


def _streams(rng: random.Random) -> list[str]:
    """XADDs with explicit IDs and values of varied length over keys a, b, c."""
    commands = []
    for key in "abc":
        for n in range(1, rng.randint(1, 12)):
            fields = " ".join(f"f{i} {'x' * rng.randint(0, 30)}" for i in range(rng.randint(1, 3)))
            commands.append(f"XADD {key} {n}-{rng.randint(0, 3)} {fields}")
    return commands


def _entry_sizes(reply: bytes) -> list[int]:
    """The byte length of each entry in a one-stream RESP2 XREAD reply, cut from the bytes."""
    reader = hiredis.Reader()
    reader.feed(reply)
    entries = reader.gets()[0][1]
    sizes = []
    for sid, fields in entries:
        size = len(b"*2\r\n$%d\r\n%s\r\n*%d\r\n" % (len(sid), sid, len(fields)))
        size += sum(len(b"$%d\r\n%s\r\n" % (len(f), f)) for f in fields)
        sizes.append(size)
    assert sum(sizes) + len(b"*1\r\n*2\r\n$1\r\na\r\n*%d\r\n" % len(sizes)) == len(reply)
    return sizes


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("resp", [2, 3])
def test_xread_caps_agree_with_redis_7(
    headwater: ServerProcess, redis_server: ServerProcess, seed: int, resp: int
) -> None:
    rng = random.Random(seed)
    setup = _streams(rng)
    ours_cmds, theirs_cmds = list(setup), list(setup)
    for _ in range(8):
        key, after, m = rng.choice("abc"), f"{rng.randint(0, 6)}-0", rng.randint(1, 5)
        ours_cmds.append(f"XREAD MAXCOUNT {m} STREAMS {key} {after}")
        theirs_cmds.append(f"XREAD COUNT {m} STREAMS {key} {after}")
        c = rng.randint(1, m)
        ours_cmds.append(f"XREAD COUNT {c} MAXCOUNT 1000 MAXSIZE 1000000 STREAMS a b c {after} 0 0")
        theirs_cmds.append(f"XREAD COUNT {c} STREAMS a b c {after} 0 0")
    ours = run(headwater, ours_cmds, resp)
    theirs = run(redis_server, theirs_cmds, resp)
    for command, got, want in zip(ours_cmds, ours, theirs, strict=True):
        assert got == want, f"RESP{resp} {command!r}: headwater {got!r} != redis {want!r}"


@pytest.mark.parametrize("seed", range(4))
def test_xread_maxsize_cuts_where_redis_bytes_say(
    headwater: ServerProcess, redis_server: ServerProcess, seed: int
) -> None:
    rng = random.Random(100 + seed)
    setup = _streams(rng)
    full = run(redis_server, [*setup, "XREAD STREAMS a 0"], 2)[-1]
    sizes = _entry_sizes(full)
    sizes[0] += len(b"*2\r\n$1\r\na\r\n")  # the key goes in with the first entry
    checks: list[tuple[int, int]] = []  # (MAXSIZE, entries expected)
    for budget in {1, sizes[0], sum(sizes[:2]), sum(sizes[:2]) + 1, sum(sizes) + 5}:
        sent, total = 0, 0
        while sent < len(sizes) and (sent == 0 or total < budget):
            total += sizes[sent]
            sent += 1
        checks.append((budget, sent))
    ours_cmds = [*setup] + [f"XREAD MAXSIZE {budget} STREAMS a 0" for budget, _ in checks]
    theirs_cmds = [*setup] + [f"XREAD COUNT {sent} STREAMS a 0" for _, sent in checks]
    ours = run(headwater, ours_cmds, 2)[len(setup) :]
    theirs = run(redis_server, theirs_cmds, 2)[len(setup) :]
    assert ours == theirs, checks


@pytest.mark.parametrize("resp", [2, 3])
def test_xreadgroup_maxcount_is_count_on_one_stream(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    setup = [*_streams(random.Random(7)), "XGROUP CREATE a g 0", "XGROUP CREATE a g2 0"]
    reads = [(2, "c1", ">"), (1, "c2", ">"), (3, "c1", "0"), (2, "c1", ">"), (5, "c2", "0")]
    # group position, entries-read, lag and pending counts (7.0 has the same XINFO GROUPS)
    after = ["XPENDING a g", "XPENDING a g2", "XINFO GROUPS a"]
    ours_cmds, theirs_cmds = list(setup), list(setup)
    for m, consumer, sid in reads:
        ours_cmds.append(f"XREADGROUP GROUP g {consumer} MAXCOUNT {m} STREAMS a {sid}")
        theirs_cmds.append(f"XREADGROUP GROUP g {consumer} COUNT {m} STREAMS a {sid}")
        ours_cmds.append(f"XREADGROUP GROUP g2 x NOACK MAXCOUNT {m} STREAMS a >")
        theirs_cmds.append(f"XREADGROUP GROUP g2 x NOACK COUNT {m} STREAMS a >")
        ours_cmds += after
        theirs_cmds += after
    ours = run(headwater, ours_cmds, resp)
    theirs = run(redis_server, theirs_cmds, resp)
    for command, got, want in zip(ours_cmds, ours, theirs, strict=True):
        assert got == want, f"RESP{resp} {command!r}: headwater {got!r} != redis {want!r}"
    # the group position, entries-read and pending counts agree at the end
    tail = ["XINFO GROUPS a", "XPENDING a g", "XPENDING a g2"]
    assert (
        run(headwater, [*ours_cmds, *tail], resp)[-3:]
        == run(redis_server, [*theirs_cmds, *tail], resp)[-3:]
    )
