"""Node boundaries decide what ``~`` trimming removes: compare them with Redis's listpacks.

For several node-size settings and value shapes, the same explicit-ID workload goes to both
servers; XINFO STREAM's radix-tree-keys (the node count) and the results of approximate
trims must agree exactly.
"""

from __future__ import annotations

import random
import zlib

import hiredis
import pytest

from tests.helpers import RawClient, ServerProcess

XINFO_70_FIELDS = (
    b"length",
    b"radix-tree-keys",
    b"last-generated-id",
    b"max-deleted-entry-id",
    b"entries-added",
    b"recorded-first-entry-id",
    b"groups",
    b"first-entry",
    b"last-entry",
)


def _value(rng: random.Random, shape: str) -> bytes:
    if shape == "ints":
        return str(rng.choice([0, 7, 127, 128, -1, 4095, 4096, 70000, 2**31, -(2**40)])).encode()
    if shape == "mixed":
        return rng.choice([b"x" * rng.randint(0, 70), b"12", b"007", b"-0", b"y" * 5000])
    return b"v" * 16


def _workload(seed: int, shape: str, n: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    cmds: list[list[bytes]] = []
    ms = 1
    for i in range(n):
        ms += rng.choice([0, 0, 1, 1000, 2**20])
        fields = [b"f"] if shape != "mixed" or rng.random() < 0.7 else [b"f", b"g%d" % (i % 3)]
        pairs = [x for f in fields for x in (f, _value(rng, shape))]
        cmds.append([b"XADD", b"s", b"%d-%d" % (ms, i), *pairs])
        if rng.random() < 0.1 and i > 5:
            cmds.append([b"XDEL", b"s", b"%d-%d" % (ms, i - rng.randint(0, 3))])
    return cmds


def _xinfo(client: RawClient) -> dict[bytes, object]:
    reader = hiredis.Reader()
    reader.feed(client.call("XINFO", "STREAM", "s"))
    flat = reader.gets()
    info = dict(zip(flat[0::2], flat[1::2], strict=True))
    return {k: info[k] for k in XINFO_70_FIELDS}


def _run(server: ServerProcess, config: tuple[int, int], cmds: list[list[bytes]]) -> list[object]:
    client = RawClient(server.port)
    try:
        client.call("FLUSHALL")
        client.call("CONFIG", "SET", "stream-node-max-entries", config[0])
        client.call("CONFIG", "SET", "stream-node-max-bytes", config[1])
        observed: list[object] = []
        for cmd in cmds:
            client.call(*cmd)
        observed.append(_xinfo(client))
        for trim in ([b"MAXLEN", b"~", b"150"], [b"MAXLEN", b"~", b"60", b"LIMIT", b"30"]):
            observed.append(client.call(b"XTRIM", b"s", *trim))
            observed.append(_xinfo(client))
        observed.append(client.call("XADD", "s", "MAXLEN", "~", "10", "*", "f", "v")[:1])
        observed.append(_xinfo(client)[b"length"])
        return observed
    finally:
        client.call("CONFIG", "SET", "stream-node-max-entries", 100)
        client.call("CONFIG", "SET", "stream-node-max-bytes", 4096)
        client.close()


@pytest.mark.parametrize("config", [(100, 4096), (10, 4096), (0, 300), (7, 0), (50, 1000)])
@pytest.mark.parametrize("shape", ["plain", "ints", "mixed"])
def test_node_boundaries_and_approx_trim_match_redis(
    headwater: ServerProcess, redis_server: ServerProcess, config: tuple[int, int], shape: str
) -> None:
    cmds = _workload(seed=zlib.crc32(repr((config, shape)).encode()), shape=shape, n=400)
    assert _run(headwater, config, cmds) == _run(redis_server, config, cmds)
