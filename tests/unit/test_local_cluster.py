"""``headwater local-cluster``: options that cannot make a cluster are refused before any
node starts, each with its message."""

from __future__ import annotations

import pytest

from headwater.cli.local_cluster import parse


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "--nodes must leave at least one primary after the replicas"),
        (["--nodes", "3", "--replicas", "3"], "--nodes must leave at least one primary"),
        (["--replicas", "-1"], "--nodes must leave at least one primary"),
        (["--base-port", "60000"], "--base-port leaves no room for the bus ports"),
        (["--nodes", "x"], "invalid int value: 'x'"),
    ],
)
def test_bad_options_are_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        parse(argv)
    assert done.value.code == 2
    assert message in capsys.readouterr().err


def test_the_defaults_make_six_nodes_on_7000() -> None:
    args = parse([])
    assert (args.nodes, args.replicas, args.base_port, args.dir) == (6, 1, 7000, "./cluster")
