"""CONFIG SET appendonly and BGREWRITEAOF against a real redis-server (7.0): the replies and
INFO persistence fields right after each step, sent as one pipeline so that each step runs in
one event-loop turn on both servers (a child's end is noticed by the cron, later)."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.helpers import RawClient, ServerProcess, encode_command, start_headwater, start_redis

FIELDS = (
    "aof_enabled",
    "aof_rewrite_in_progress",
    "aof_rewrite_scheduled",
    "aof_last_bgrewrite_status",
)
Step = tuple[tuple[str, ...], ...]
APPENDONLY_YES = ("CONFIG", "SET", "appendonly", "yes")
APPENDONLY_NO = ("CONFIG", "SET", "appendonly", "no")
INFO = ("INFO", "persistence")
BGREWRITEAOF = ("BGREWRITEAOF",)
BGSAVE = ("BGSAVE",)

STEPS: tuple[Step, ...] = (
    # on: the rewrite starts inside CONFIG SET; a second one is refused, a second "yes" is OK
    (APPENDONLY_YES, INFO, BGREWRITEAOF, APPENDONLY_YES),
    # off: BGREWRITEAOF still works (a base alone)
    (APPENDONLY_NO, BGREWRITEAOF, INFO, BGREWRITEAOF),
    # behind a BGSAVE: scheduled
    (BGSAVE, BGREWRITEAOF, INFO, BGREWRITEAOF),
    (BGSAVE, APPENDONLY_YES, INFO),
    # off while a rewrite runs: the child is killed
    (BGREWRITEAOF, APPENDONLY_NO, INFO),
    # on while a rewrite of the AOF-off kind runs: replaced by the enabling one
    (APPENDONLY_NO, BGREWRITEAOF, APPENDONLY_YES, INFO),
    (APPENDONLY_YES, APPENDONLY_NO, INFO),
)


def persistence_fields(reply: bytes) -> dict[str, str]:
    lines = reply.decode().split("\r\n")
    pairs = (line.split(":", 1) for line in lines if ":" in line)
    return {name: value for name, value in pairs if name in FIELDS}


def run_step(client: RawClient, step: Step) -> list[object]:
    client.send_raw(b"".join(encode_command(*argv) for argv in step))
    replies = [client.read_reply() for _ in step]
    return [
        persistence_fields(reply) if argv == INFO else reply
        for argv, reply in zip(step, replies, strict=True)
    ]


def settle(client: RawClient) -> dict[str, str]:
    """Wait until no child runs and nothing is scheduled; the fields then."""
    deadline = time.monotonic() + 30
    while True:
        info = client.call(*INFO)
        fields = persistence_fields(info)
        idle = fields["aof_rewrite_in_progress"] == fields["aof_rewrite_scheduled"] == "0"
        if idle and b"rdb_bgsave_in_progress:0" in info:
            return fields
        assert time.monotonic() < deadline, info
        time.sleep(0.05)


def scenario(start: Callable[..., ServerProcess]) -> list[object]:
    server = start("--appendonly", "no", "--save", "")
    try:
        client = RawClient(server.port)
        client.send_raw(b"".join(encode_command("XADD", "s", "*", "n", i) for i in range(2000)))
        for _ in range(2000):
            client.read_reply()
        seen: list[object] = []
        for step in STEPS:
            seen.append(run_step(client, step))
            seen.append(settle(client))
        return seen
    finally:
        server.stop()


def test_appendonly_and_bgrewriteaof_replies_and_info_match_redis() -> None:
    expected = scenario(start_redis)
    got = scenario(start_headwater)
    for n, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, f"step {n // 2} ({STEPS[n // 2]}): redis {want!r}, headwater {have!r}"
