"""MkDocs hook (mkdocs.yml): the reference pages, made from the server's own tables at each
build, so they cannot drift from the code: every configuration setting (``config.PARAMS``)
and every command (the command table), each marked where Headwater differs from Redis."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

import headwater.engine  # noqa: F401  (first, as the server imports it: the tables need it)
from headwater.commands.introspection import LEFT_OUT, captured, command_docs
from headwater.commands.table import build_table
from headwater.config import PARAMS
from headwater.scripting.commands import SPECS as SCRIPTING_SPECS
from headwater.scripting.function_commands import SPECS as FUNCTION_SPECS


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "reference/configuration.md", content=configuration()))
    files.append(File.generated(config, "reference/commands.md", content=commands()))
    return files


def configuration() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Every setting, with its default. Set one in a configuration file (`name value`), on",
        "the command line (`--name value`), or at run time with `CONFIG SET` where it says so.",
        "",
        "| Setting | Default | At run time |",
        "|---|---|---|",
    ]
    for param in sorted(PARAMS, key=lambda p: p.name):
        default = f"`{param.default}`" if param.default else "(empty)"
        runtime = "CONFIG SET" if param.mutable else "fixed at start"
        names = ", ".join(f"`{name}`" for name in (param.name, *param.aliases))
        lines.append(f"| {names} | {default} | {runtime} |")
    return "\n".join(lines) + "\n"


def commands() -> str:
    table = build_table((*SCRIPTING_SPECS, *FUNCTION_SPECS))
    lines = [
        "# Command reference",
        "",
        "Every command Headwater answers. *Redis* says where it comes from: *7.0* for Redis",
        "7.0's commands, which answer as Redis answers them (the tests compare the bytes with",
        "a real redis-server); *later* for newer Redis commands (the 7.2 to 8.x stream",
        "commands among them), checked against Redis's reference; *Headwater* for Headwater's",
        "own. The commands Headwater leaves out are listed at the end.",
        "",
        "| Command | Redis | Since | Group | Summary |",
        "|---|---|---|---|---|",
    ]
    redis_70 = captured()
    for key in sorted(table):
        row = table[key]
        docs = command_docs(row)
        assert isinstance(docs, dict)
        summary = (docs.get(b"summary") or b"").decode()
        since = docs.get(b"since", b"").decode()
        group = docs.get(b"group", b"").decode()
        if not summary:
            summary = _first_line(getattr(row.handler, "__doc__", None)) or "(Headwater)"
        mark = _origin(row.name in redis_70, since)
        lines.append(f"| `{row.name.upper()}` | {mark} | {since} | {group} | {_cell(summary)} |")
        for sub in sorted(row.subcommands.values(), key=lambda s: s.name):
            sub_docs = command_docs(sub)
            assert isinstance(sub_docs, dict)
            text = (sub_docs.get(b"summary") or b"").decode()
            text = text or _first_line(getattr(sub.handler, "__doc__", None))
            name = sub.name.upper().replace("|", " ")
            since = sub_docs.get(b"since", b"").decode()
            lines.append(f"| `{name}` | | {since} | | {_cell(text)} |")
    lines += [
        "",
        "## Left out",
        "",
        "These Redis 7.0 commands answer exactly as Redis answers a command it does not know",
        "(`-ERR unknown command …`), inside MULTI too:",
        "",
        "| Command | What it belongs to |",
        "|---|---|",
    ]
    for name, reason in LEFT_OUT.items():
        if "|" not in name:
            lines.append(f"| `{name.upper()}` | {reason} |")
    return "\n".join(lines) + "\n"


def _origin(captured: bool, since: str) -> str:
    """7.0 for Redis 7.0's commands (by their "since"), later for newer Redis commands,
    Headwater for those with no Redis history."""
    if not since:
        return "7.0" if captured else "Headwater"
    parts = tuple(int(p) for p in since.split(".")[:2] if p.isdigit())
    return "7.0" if parts <= (7, 0) else "later"


def _first_line(text: str | None) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
