"""The command table agrees with Redis's own metadata (captured in command_docs.json)."""

from __future__ import annotations

from headwater.commands.context import CommandSpec
from headwater.commands.introspection import _captured_info
from headwater.commands.table import build_table
from headwater.engine.core import Engine


def _rows() -> list[CommandSpec]:
    """The engine's rows: the families' table and the scripting commands the engine adds."""
    rows: list[CommandSpec] = []
    for row in Engine().table.values():
        rows.append(row)
        rows.extend(row.subcommands.values())
    return rows


# Rows whose metadata changed after the captured Redis (7.0): Headwater follows the newer one.
# WAIT lost "noscript" in 7.2 (scripts may call it; it never blocks there).
_CHANGED_SINCE_CAPTURE = {"wait": (3, ["blocking"], 0, 0, 0)}


def test_arity_flags_and_keys_match_redis() -> None:
    mismatches = []
    for row in _rows():
        tree = _captured_info(row)
        if tree is None:
            continue
        _name, arity, flags, first, last, step = tree["a"][:6]
        theirs = (arity, sorted(f["+"] for f in flags["s"]), first, last, step)
        ours = (
            row.arity,
            sorted(f for f in row.flags if not f.startswith("x_")),
            row.first_key,
            row.last_key,
            row.step,
        )
        if row.name in _CHANGED_SINCE_CAPTURE:
            theirs = _CHANGED_SINCE_CAPTURE[row.name]
        if ours != theirs:
            mismatches.append(f"{row.name}: ours {ours} redis {theirs}")
    assert not mismatches, "\n".join(mismatches)


def test_every_row_has_a_handler_and_unique_name() -> None:
    table = build_table()
    for row in _rows():
        assert row.handler is not None, row.name
    assert len(table) == len({row.name for row in table.values()})


def test_left_out_commands_are_unknown() -> None:
    table = build_table()
    for name in (b"MODULE", b"DPING"):
        assert name not in table


def test_container_info_lists_every_implemented_subcommand() -> None:
    from tests.unit.conftest import Harness

    h = Harness()
    c = h.client()
    info = h.call(c, "COMMAND", "INFO", "client")[0]
    names = {sub[0] for sub in info[9]}
    assert {b"client|setinfo", b"client|no-touch", b"client|list"} <= names
    docs = h.call(c, "COMMAND", "DOCS", "client")
    sub_docs = dict(zip(docs[1][0::2], docs[1][1::2], strict=True))[b"subcommands"]
    assert b"client|setinfo" in sub_docs[0::2]


def test_docs_of_commands_after_7_0_say_when_and_where() -> None:
    """COMMAND DOCS of the commands Redis 7.0 lacks: Redis's summary, since, group and
    complexity (not a made-up "since 8.6.0" in "generic")."""
    from tests.unit.conftest import Harness

    h = Harness()
    c = h.client()

    def docs(name: str) -> dict[bytes, object]:
        reply = h.call(c, "COMMAND", "DOCS", name)
        return dict(zip(reply[1][0::2], reply[1][1::2], strict=True))

    hexpire = docs("hexpire")
    assert (hexpire[b"since"], hexpire[b"group"]) == (b"7.4.0", b"hash")
    assert hexpire[b"complexity"] == b"O(N) where N is the number of specified fields"
    assert (docs("xdelex")[b"since"], docs("xdelex")[b"group"]) == (b"8.2.0", b"stream")
    assert (docs("waitaof")[b"since"], docs("waitaof")[b"group"]) == (b"7.2.0", b"generic")
    caching = docs("client|caching")
    assert (caching[b"since"], caching[b"group"]) == (b"6.0.0", b"connection")
