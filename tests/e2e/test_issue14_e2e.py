"""Issue #14's defects over TCP, on real server processes (see also
``tests/unit/test_issue14_defects.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headwater.persistence.aof import encode_command
from tests.e2e.test_durability import AOF_DIR, AOF_FILE, Node

pytestmark = pytest.mark.e2e

Nodes = Callable[..., Node]


@pytest.fixture
def nodes() -> Iterator[Nodes]:
    """Kills every node a test made, whatever happens to the test."""
    made: list[Node] = []

    def make(tmp_path: Path, *args: str) -> Node:
        made.append(Node(tmp_path, *args))
        return made[-1]

    yield make
    for node in made:
        node.kill()


def test_an_approximate_trim_with_limit_survives_loadaof_and_restart(
    tmp_path: Path, nodes: Nodes
) -> None:
    """Defect 1, as reported: the acknowledged XADD and its trim were lost on reload."""
    node = nodes(tmp_path, "--stream-node-max-entries", "10")
    node.start()
    r = node.client()
    for i in range(100):
        r.xadd("s", {"n": i})
    acked = r.execute_command("XADD", "s", "MAXLEN", "~", "55", "LIMIT", "30", "*", "f", "v")
    r.execute_command("XTRIM", "s", "MINID", "~", acked, "LIMIT", "20")
    before = r.xrange("s")
    assert before[-1][0] == acked and len(before) == 51
    assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
    assert r.xrange("s") == before
    info = r.info("persistence")
    assert info["rdb_changes_since_last_save"] >= 0  # defect 4: it went negative here
    r.xadd("s", {"after": "reload"})
    assert r.info("persistence")["rdb_changes_since_last_save"] == 1
    node.kill()
    node.start()
    assert node.client().xrange("s")[:-1] == before
    assert "failed" not in node.log_text()


def test_a_line_that_fails_on_load_stops_startup(tmp_path: Path, nodes: Nodes) -> None:
    node = nodes(tmp_path)
    node.start()
    node.client().xadd("s", {"f": "v"}, id="5-0")
    node.kill()
    with open(node.dir / AOF_DIR / AOF_FILE, "ab") as f:  # a line the server never writes
        f.write(encode_command([b"XADD", b"s", b"3-0", b"f", b"old"]))
    assert node.run_expecting_exit() != 0
    log = node.log_text()
    assert "the command at offset" in log and "failed while loading" in log, log
    assert "equal or smaller than the target stream top item" in log
