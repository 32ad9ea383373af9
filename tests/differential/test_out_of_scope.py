"""Commands Headwater leaves out answer exactly as Redis answers a command it
does not know (issue #14 §3), alone and inside MULTI (the transaction is then aborted).

The reference is a real redis-server with those commands disabled (``rename-command X ""``),
which makes each of them an unknown command there too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.differential.harness import assert_same
from tests.helpers import ServerProcess, start_redis

# Commands Headwater leaves out (README: cluster, modules, MIGRATE).
OUT_OF_SCOPE = ["MODULE"]


@pytest.fixture(scope="module")
def redis_without_them() -> Iterator[ServerProcess]:
    renames = [arg for name in OUT_OF_SCOPE for arg in ("--rename-command", name, "")]
    server = start_redis(*renames)
    yield server
    server.stop()


def _scenario(name: str) -> list[object]:
    return [
        f"{name} k a b",
        f"{name.lower()} k",
        f"{name} " + " ".join(f"arg{i}" for i in range(40)),  # the 128-byte cut of the args
        "MULTI",
        "XADD s 1-1 f v",
        f"{name} k 1 2",
        "XADD s 2-1 f v",
        "EXEC",
        "EXISTS s",
        "MULTI",
        f"{name}",
        "EXEC",
    ]


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", OUT_OF_SCOPE)
def test_out_of_scope_commands_are_unknown_as_in_redis(
    headwater: ServerProcess, redis_without_them: ServerProcess, name: str, resp: int
) -> None:
    assert_same(headwater, redis_without_them, _scenario(name), resp)  # type: ignore[arg-type]
