"""``check_invariants()`` raises ``InvariantViolation``, with ``python -O`` too (where an
``assert`` would check nothing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.errors import InvariantViolation
from headwater.stream.groups import Group
from headwater.stream.idmp import IdmpState
from headwater.stream.ids import MIN_ID
from headwater.stream.sortedkeys import SortedKeys
from headwater.stream.stream import Stream

ROOT = Path(__file__).resolve().parents[2]


def _stream() -> Stream:
    stream = Stream()
    for ms in (1, 2, 3):
        stream.append((ms, 0), [b"f", b"v"], 4096, 100)
    return stream


def broken_stream() -> Callable[[], None]:
    stream = _stream()
    stream.length += 1
    return stream.check_invariants


def broken_node() -> Callable[[], None]:
    node = _stream().nodes[0]
    node.deleted += 1
    return node.check_invariants


def broken_sorted_keys() -> Callable[[], None]:
    keys = SortedKeys([1, 2, 3])
    keys.size += 1
    return keys.check_invariants


def broken_idmp() -> Callable[[], None]:
    state = IdmpState()
    state.record(b"p", b"i", (1, 0), 10)
    state.tracked += 1
    return lambda: state.check_invariants(10)


def broken_group() -> Callable[[], None]:
    group = Group(b"g", MIN_ID)
    group.entries_read = -5
    return group.check_invariants


#: each broken structure and a word of the violation it must report
BROKEN: dict[str, tuple[Callable[[], Callable[[], None]], str]] = {
    "stream": (broken_stream, "live entries"),
    "node": (broken_node, "live + deleted"),
    "sorted keys": (broken_sorted_keys, "size out of step"),
    "idmp": (broken_idmp, "tracked count"),
    "group": (broken_group, "entries_read"),
}


def violations() -> dict[str, str]:
    """What each broken structure's check raised (its type and message)."""
    found: dict[str, str] = {}
    for name, (make, _) in BROKEN.items():
        check = make()
        try:
            check()
        except Exception as exc:
            found[name] = f"{type(exc).__name__}: {exc}"
        else:
            found[name] = "nothing"
    return found


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_structure_raises_the_named_exception(name: str) -> None:
    make, words = BROKEN[name]
    with pytest.raises(InvariantViolation, match=re.escape(words)):
        make()()


def test_the_intact_structures_pass() -> None:
    stream = _stream()
    stream.check_invariants()
    stream.nodes[0].check_invariants()
    SortedKeys([1, 2, 3]).check_invariants()
    Group(b"g", MIN_ID).check_invariants()
    state = IdmpState()
    state.record(b"p", b"i", (1, 0), 10)
    state.check_invariants(10)


def test_the_checks_run_under_python_dash_o() -> None:
    script = (
        "import sys; from tests.unit.test_invariants import violations\n"
        "assert False, 'asserts are on'\n"  # -O drops it: proves the flag took effect
        "print(sys.flags.optimize); [print(n, v, sep='|') for n, v in violations().items()]\n"
    )
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(
        [sys.executable, "-O", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    optimize, *lines = result.stdout.splitlines()
    assert optimize == "1"
    found = dict(line.split("|", 1) for line in lines)
    assert set(found) == set(BROKEN)
    for name, (_, words) in BROKEN.items():
        assert found[name].startswith("InvariantViolation: "), (name, found[name])
        assert words in found[name], (name, found[name])
