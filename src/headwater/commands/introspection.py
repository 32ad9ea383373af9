"""COMMAND and its subcommands, served from the command table.

Redis's own metadata (ACL categories, key specs, argument docs) for each command is kept in
``command_docs.json``, captured from a real server by ``tools/capture_command_docs.py`` as a
typed reply tree, so COMMAND INFO/DOCS replies match Redis byte for byte in RESP2 and RESP3.
Commands missing from that file get an entry built from their ``CommandSpec``.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from headwater.acl.users import CATEGORIES
from headwater.commands.context import Client, CommandSpec, help_handler, spec
from headwater.commands.getkeys import KeyRef, KeySpec, command_keys, has_keys, key_specs
from headwater.commands.later_docs import LATER_DOCS
from headwater.errors import err, unknown_subcommand
from headwater.glob import glob_match
from headwater.resp.types import Reply, RSet, Status


def _tree_to_reply(node: Any) -> Reply:
    if node is None or isinstance(node, int):
        return node
    ((kind, value),) = node.items()
    if kind == "b":
        return str(value).encode()
    if kind == "+":
        return Status(str(value).encode())
    if kind == "a":
        return [_tree_to_reply(item) for item in value]
    if kind == "s":
        return RSet(_tree_to_reply(item) for item in value)
    if kind == "m":
        return {_tree_to_reply(k): _tree_to_reply(v) for k, v in value}
    raise ValueError(f"bad tree node {kind!r}")


#: the Redis 7.0 commands Headwater leaves out (COMMAND LIST's names, patterns) and why;
#: they answer as Redis answers a command it does not know
LEFT_OUT = {
    "module": "modules",
    "module|*": "modules",
}


@cache
def captured() -> dict[str, Any]:
    text = resources.files("headwater.commands").joinpath("command_docs.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _captured_info(row: CommandSpec) -> Any:
    if row.parent is None:
        entry = captured().get(row.name)
        return None if entry is None else entry["info"]
    parent = _captured_info(row.parent)
    if parent is None:
        return None
    for sub in parent["a"][9]["a"]:
        if sub["a"][0]["b"] == row.name:
            return sub
    return None


#: the categories Redis's command files give the commands Redis 7.0 does not have (the rest
#: follows from their flags, as Redis's setImplicitACLCategories does)
_NEWER_CATEGORIES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        (
            "hexpire",
            "hpexpire",
            "hexpireat",
            "hpexpireat",
            "httl",
            "hpttl",
            "hexpiretime",
            "hpexpiretime",
            "hpersist",
        ),
        ("hash",),
    ),
    **dict.fromkeys(
        ("xdelex", "xackdel", "xcfgset", "xidmprecord", "xidmp|cfgget", "xidmp|cfgset"),
        ("stream",),
    ),
    **dict.fromkeys(
        (
            "client|setinfo",
            "client|no-touch",
            "client|tracking",
            "client|caching",
            "client|getredir",
            "client|trackinginfo",
            "waitaof",
        ),
        ("connection",),
    ),
}


def categories_of(row: CommandSpec) -> frozenset[str]:
    """The command's ACL categories: as Redis 7.0 shows them in COMMAND INFO, or as Redis
    derives them for a newer command (its file's categories plus those its flags imply)."""
    tree = _captured_info(row)
    if tree is not None:
        return frozenset(item["+"][1:] for item in tree["a"][6]["s"])
    flags = row.flags
    found = set(_NEWER_CATEGORIES.get(row.name, ()))
    implied = {"write": "write", "admin": "admin", "pubsub": "pubsub", "fast": "fast"}
    found.update(category for flag, category in implied.items() if flag in flags)
    found.update(("blocking",) if "blocking" in flags else ())
    if "readonly" in flags and "scripting" not in found:
        found.add("read")
    if "admin" in flags:
        found.add("dangerous")
    if "fast" not in found:
        found.add("slow")
    return frozenset(found)


def key_specs_of(row: CommandSpec) -> list[KeySpec]:
    """The command's key specs, as COMMAND INFO shows them (client tracking reads its
    keys with them)."""
    return key_specs(row, _captured_info(row))


def _captured_docs(row: CommandSpec) -> Any:
    if row.parent is None:
        entry = captured().get(row.name)
        return None if entry is None else entry["docs"]
    parent = _captured_docs(row.parent)
    for key, value in parent["m"] if parent is not None else ():
        if key["b"] == "subcommands":
            for name, docs in value["m"]:
                if name["b"] == row.name:
                    return docs
    return None


def command_info(row: CommandSpec) -> Reply:
    tree = _captured_info(row)
    if tree is not None:
        info = _tree_to_reply(tree)
        assert isinstance(info, list)
        known = {sub[0] for sub in info[9]}
        info[9] += [  # subcommands newer than the Redis the capture came from
            command_info(sub) for sub in row.subcommands.values() if sub.name.encode() not in known
        ]
        return info
    flags = RSet(Status(f.encode()) for f in sorted(row.flags) if not f.startswith("x_"))
    return [
        row.name.encode(),
        row.arity,
        flags,
        row.first_key,
        row.last_key,
        row.step,
        RSet(Status(b"@" + name.encode()) for name in _in_redis_order(categories_of(row))),
        RSet(),
        [],
        [command_info(sub) for sub in row.subcommands.values()],
    ]


def _in_redis_order(categories: frozenset[str]) -> list[str]:
    return [name for name in CATEGORIES if name in categories]


def command_docs(row: CommandSpec) -> Reply:
    tree = _captured_docs(row)
    if tree is not None:
        docs = _tree_to_reply(tree)
        assert isinstance(docs, dict)
        subs = docs.get(b"subcommands")
        if isinstance(subs, dict):
            for sub in row.subcommands.values():
                subs.setdefault(sub.name.encode(), command_docs(sub))
        return docs
    later = LATER_DOCS.get(row.name)
    if later is not None:
        summary, since, group, complexity = later
        made: dict[bytes, Reply] = {
            b"summary": summary.encode(),
            b"since": since.encode(),
            b"group": group.encode(),
            b"complexity": complexity.encode(),
        }
    else:  # (Headwater's own: XIDMP's draft syntax)
        made = {b"summary": b"", b"since": b"8.6.0", b"group": b"generic"}
    if row.subcommands:
        made[b"subcommands"] = {
            sub.name.encode(): command_docs(sub) for sub in row.subcommands.values()
        }
    return made


def lookup(c: Client, name: bytes) -> CommandSpec | None:
    container, _, sub = name.partition(b"|")
    row = c.server.table.get(container.upper())
    if row is not None and sub:
        return row.subcommands.get(sub.lower())
    return row


def cmd_command(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) > 1:
        raise unknown_subcommand(argv[1], "COMMAND")
    return [command_info(row) for row in c.server.table.values()]


def cmd_command_count(c: Client, argv: list[bytes]) -> Reply:
    return len(c.server.table)


def cmd_command_info(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) == 2:
        return [command_info(row) for row in c.server.table.values()]
    out: list[Reply] = []
    for name in argv[2:]:
        row = lookup(c, name)
        out.append(None if row is None else command_info(row))
    return out


def cmd_command_docs(c: Client, argv: list[bytes]) -> Reply:
    rows = list(c.server.table.values()) if len(argv) == 2 else []
    for name in argv[2:]:
        row = lookup(c, name)
        if row is not None:
            rows.append(row)
    return {row.name.encode(): command_docs(row) for row in rows}


def _all_names(c: Client) -> list[CommandSpec]:
    rows: list[CommandSpec] = []
    for row in c.server.table.values():
        rows.append(row)
        rows.extend(row.subcommands.values())
    return rows


def cmd_command_list(c: Client, argv: list[bytes]) -> Reply:
    """COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]"""
    rows = _all_names(c)
    if len(argv) == 2:
        return [row.name.encode() for row in rows]
    if len(argv) != 5 or argv[2].upper() != b"FILTERBY":
        raise err("syntax error")
    kind, value = argv[3].upper(), argv[4]
    if kind == b"PATTERN":
        return [row.name.encode() for row in rows if glob_match(value, row.name.encode(), True)]
    if kind == b"MODULE":
        return []
    if kind == b"ACLCAT":
        return [row.name.encode() for row in rows if _in_category(row, value.lower())]
    raise err("syntax error")


def _in_category(row: CommandSpec, category: bytes) -> bool:
    return category.decode("latin-1") in categories_of(row)


def _keys_of(c: Client, argv: list[bytes]) -> tuple[list[bytes], list[KeyRef]]:
    """COMMAND GETKEYS[ANDFLAGS] <full-command>: its argv and its keys (Redis's
    getKeysSubcommandImpl: the command, whether it has keys, its arity, then the keys)."""
    args = argv[2:]
    row = c.server.table.get(args[0].upper())
    if row is not None and row.subcommands and len(args) > 1:
        row = row.subcommands.get(args[1].lower())
    if row is None:
        raise err("Invalid command specified")
    specs = key_specs(row, _captured_info(row))
    if not has_keys(row, specs):
        raise err("The command has no key arguments")
    if not row.arity_ok(len(args)):
        raise err("Invalid number of arguments specified for command")
    keys = command_keys(row, specs, args)
    if not keys and "no_mandatory_keys" not in row.flags:
        raise err("Invalid arguments specified for command")
    return args, keys


def cmd_command_getkeys(c: Client, argv: list[bytes]) -> Reply:
    """COMMAND GETKEYS <full-command>"""
    args, keys = _keys_of(c, argv)
    return [args[i] for i, _ in keys]


def cmd_command_getkeysandflags(c: Client, argv: list[bytes]) -> Reply:
    """COMMAND GETKEYSANDFLAGS <full-command>: each key with its key-spec flags."""
    args, keys = _keys_of(c, argv)
    return [[args[i], RSet(Status(f.encode()) for f in flags)] for i, flags in keys]


COMMAND_HELP = [
    b"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"(no subcommand) -- Return details about all commands.",
    b"COUNT -- Return the total number of commands.",
    b"INFO [<command-name> ...] -- Return details about the named (or all) commands.",
    b"DOCS [<command-name> ...] -- Return documentation about the named (or all) commands.",
    b"LIST [FILTERBY (MODULE <name>|ACLCAT <cat>|PATTERN <glob>)] -- List command names.",
    b"GETKEYS <full-command> -- Return the keys of a full command.",
    b"GETKEYSANDFLAGS <full-command> -- Return the keys and the access flags of a full command.",
    b"HELP -- Print this help.",
]


cmd_command_help = help_handler(COMMAND_HELP)


_INTRO = "loading stale"

SPECS = (
    spec(
        "command",
        -1,
        _INTRO,
        handler=cmd_command,
        subcommands=(
            spec("command|count", 2, _INTRO, handler=cmd_command_count),
            spec("command|info", -2, _INTRO, handler=cmd_command_info),
            spec("command|docs", -2, _INTRO, handler=cmd_command_docs),
            spec("command|list", -2, _INTRO, handler=cmd_command_list),
            spec("command|getkeys", -4, _INTRO, handler=cmd_command_getkeys),
            spec("command|getkeysandflags", -4, _INTRO, handler=cmd_command_getkeysandflags),
            spec("command|help", 2, _INTRO, handler=cmd_command_help),
        ),
    ),
)
