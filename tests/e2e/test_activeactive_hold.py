"""A region writes to its peers at most once per ``repl-stream-hold-us``, as a primary writes
to its replicas (replication/hold.py). A 2 s hold makes "held" observable: an idle region's
lone effect goes at once, the next one within the hold waits for the timer, and with
``CONFIG SET repl-stream-hold-us 0`` every effect goes in its own turn again."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.region_mesh import TcpMesh

pytestmark = pytest.mark.e2e

HOLD_S = 2.0


@pytest.fixture
def held_mesh() -> Iterator[TcpMesh]:
    mesh = TcpMesh(2, "strict", extra=("--repl-stream-hold-us", str(int(HOLD_S * 1e6))))
    try:
        mesh.linked()
        yield mesh
    finally:
        mesh.close()


def test_a_region_holds_what_it_sends_its_peers(held_mesh: TcpMesh) -> None:
    mesh = held_mesh
    mesh[1].xadd("x", {"n": 1})
    first_sent = time.monotonic()
    mesh.wait(lambda: mesh[2].xlen("x") == 1, timeout=HOLD_S * 0.75)  # (a lone effect)
    mesh[1].xadd("x", {"n": 2})
    time.sleep(HOLD_S / 4)
    assert mesh[2].xlen("x") == 1  # held: the last write is younger than the hold
    mesh.wait(lambda: mesh[2].xlen("x") == 2, timeout=HOLD_S * 2)  # the timer sends it
    assert time.monotonic() - first_sent >= HOLD_S * 0.9
    mesh[1].config_set("repl-stream-hold-us", 0)
    mesh[1].xadd("x", {"n": 3})
    mesh.wait(lambda: mesh[2].xlen("x") == 3, timeout=HOLD_S * 0.75)  # every turn again
    mesh.converge()
