"""FCALL, FCALL_RO and FUNCTION (Redis ``functions.c``).

FUNCTION LOAD, DELETE, FLUSH and RESTORE are write commands: their effect is the command
itself (LOAD as ``FUNCTION LOAD REPLACE <code>``, so that a replay over libraries that are
already there, a snapshot's, cannot fail), logged and replayed through the same handlers.
"""

from __future__ import annotations

import time

from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.commands.monitor import show_command
from headwater.errors import err, subcommand_syntax
from headwater.glob import glob_match
from headwater.ops.change import Written, as_given, one_line
from headwater.ops.lazyfree import LAZYFREE_THRESHOLD
from headwater.resp.types import OK, Reply, RSet, Status
from headwater.scripting.commands import (
    check_cluster_flag,
    check_may_write,
    flush_lazily,
    parse_numkeys,
    scripting_of,
    with_numkeys,
)
from headwater.scripting.functions import Library, dump_payload, read_payload
from headwater.scripting.runtime import FLAG_NO_WRITES, Scripting

_BAD_NUMKEYS = err("Bad number of keys provided")
_RO_WITH_WRITE_FLAG = err("Can not execute a script with write flag using *_ro command.")


def _fcall(c: Client, argv: list[bytes], read_only_command: bool) -> Reply:
    scripting = scripting_of(c)
    function = scripting.registry.function(argv[1])
    if function is None:
        raise err("Function not found")
    numkeys = parse_numkeys(argv, _BAD_NUMKEYS)
    check_cluster_flag(c, function.flags)
    read_only = FLAG_NO_WRITES in function.flags
    if not read_only:
        check_may_write(c, read_only_command)
    pubsub = c.server.pubsub
    if pubsub.monitors:  # before the commands its function runs
        show_command(pubsub, c, argv)
    cross_slot = "allow-cross-slot-keys" in function.flags
    return scripting.run_script(
        c,
        function.callback,
        function.slot,
        function.name,
        argv,
        numkeys,
        False,
        read_only,
        argv,
        cross_slot,
    )


def declared_write(c: Client, argv: list[bytes]) -> bool | None:
    """Whether this FCALL/FCALL_RO call may write by its function's flags (Redis's
    fcallGetCommandFlags); None for an unknown function (the command's flags decide)."""
    function = scripting_of(c).registry.function(argv[1])
    if function is None:
        return None
    return FLAG_NO_WRITES not in function.flags


def cmd_fcall(c: Client, argv: list[bytes]) -> Reply:
    return _fcall(c, argv, False)


def cmd_fcall_ro(c: Client, argv: list[bytes]) -> Reply:
    return _fcall(c, argv, True)


def _load(scripting: Scripting, code: bytes, replace: bool) -> Library:
    library = scripting.create_library(code, replace)
    scripting.registry.check_add(library, replace)
    scripting.registry.add(library, replace)
    return library


def cmd_function_load(c: Client, argv: list[bytes]) -> Written:
    replace = False
    for arg in argv[2:-1]:
        if arg.upper() != b"REPLACE":
            raise err(f"Unknown option given: {arg.decode('utf-8', 'replace')}")
        replace = True
    code = argv[-1]
    library = _load(scripting_of(c), code, replace)
    return Written(library.name, one_line(1, [b"FUNCTION", b"LOAD", b"REPLACE", code]))


def cmd_function_delete(c: Client, argv: list[bytes]) -> Written:
    scripting_of(c).registry.delete(argv[2])
    return Written(OK, as_given(1))


def _flush_async(c: Client, argv: list[bytes]) -> bool:
    if len(argv) > 3:
        raise subcommand_syntax(argv[1], "FUNCTION")
    if len(argv) == 3 and argv[2].upper() not in (b"SYNC", b"ASYNC"):
        raise err("FUNCTION FLUSH only supports SYNC|ASYNC option")
    return flush_lazily(c, argv[2] if len(argv) == 3 else None)


def cmd_function_flush(c: Client, argv: list[bytes]) -> Written:
    lazily = _flush_async(c, argv)
    functions = scripting_of(c).flush_functions()
    if lazily and functions > LAZYFREE_THRESHOLD:
        # (Redis frees the library context in the background past the threshold, and counts
        # its functions and the context itself)
        c.server.stats.lazyfreed_objects += functions + 1
    return Written(OK, as_given(1))


def cmd_function_dump(c: Client, argv: list[bytes]) -> Reply:
    return dump_payload(list(scripting_of(c).registry.libraries.values()))


def cmd_function_restore(c: Client, argv: list[bytes]) -> Written:
    policy = b"APPEND"
    if len(argv) > 4:
        raise subcommand_syntax(argv[1], "FUNCTION")
    if len(argv) == 4:
        policy = argv[3].upper()
        if policy not in (b"FLUSH", b"APPEND", b"REPLACE"):
            raise err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
            )
    codes = read_payload(argv[2])
    scripting = scripting_of(c)
    libraries = [scripting.create_library(code) for code in codes]
    registry = scripting.registry
    if policy == b"FLUSH":
        registry.flush()
    replace = policy == b"REPLACE"
    names = [library.name for library in libraries]
    if len(set(names)) != len(names):
        raise err("Library names in the payload repeat")
    for library in libraries:  # all checked before any is added: all or nothing
        registry.check_add(library, replace, restoring=True)
    for library in libraries:
        registry.add(library, replace)
    return Written(OK, as_given(1))


def cmd_function_list(c: Client, argv: list[bytes]) -> Reply:
    pattern: bytes | None = None
    with_code = False
    i = 2
    while i < len(argv):
        arg = argv[i].upper()
        if arg == b"WITHCODE" and not with_code:
            with_code = True
        elif arg == b"LIBRARYNAME" and pattern is None:
            if i + 1 >= len(argv):
                raise err("library name argument was not given")
            pattern = argv[i + 1]
            i += 1
        else:
            raise err(f"Unknown argument {argv[i].decode('utf-8', 'replace')}")
        i += 1
    reply = []
    for library in scripting_of(c).registry.libraries.values():
        if pattern is not None and not glob_match(pattern, library.name, nocase=True):
            continue
        reply.append(_library_reply(library, with_code))
    return reply


def _library_reply(library: Library, with_code: bool) -> dict[bytes, Reply]:
    functions = [
        {
            b"name": f.name,
            b"description": f.description,
            b"flags": RSet(Status(flag.encode()) for flag in f.flags),
        }
        for f in library.functions.values()
    ]
    out: dict[bytes, Reply] = {
        b"library_name": library.name,
        b"engine": b"LUA",
        b"functions": functions,
    }
    if with_code:
        out[b"library_code"] = library.code
    return out


def cmd_function_stats(c: Client, argv: list[bytes]) -> Reply:
    scripting = scripting_of(c)
    run = scripting.run
    running: Reply = None
    if run is not None and not run.is_eval:
        running = {
            b"name": run.name,
            b"command": run.command,
            b"duration_ms": int((time.monotonic() - run.started) * 1000),
        }
    registry = scripting.registry
    engine = {
        b"libraries_count": len(registry.libraries),
        b"functions_count": len(registry.functions),
    }
    return {b"running_script": running, b"engines": {b"LUA": engine}}


def cmd_function_kill(c: Client, argv: list[bytes]) -> Reply:
    scripting_of(c).kill(is_eval=False)
    return OK


_FUNCTION_HELP = [
    b"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"LOAD [REPLACE] <FUNCTION CODE>",
    b"    Create a new library with the given library name and code.",
    b"DELETE <LIBRARY NAME>",
    b"    Delete the given library.",
    b"LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    b"    Return general information on all the libraries:",
    b"    * Library name",
    b"    * The engine used to run the Library",
    b"    * Library description",
    b"    * Functions list",
    b"    * Library code (if WITHCODE is given)",
    b"    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    b"STATS",
    b"    Return information about the current function running:",
    b"    * Function name",
    b"    * Command used to run the function",
    b"    * Duration in MS that the function is running",
    b"    If no function is running, return nil",
    b"    In addition, returns a list of available engines.",
    b"KILL",
    b"    Kill the current running function.",
    b"FLUSH [ASYNC|SYNC]",
    b"    Delete all the libraries.",
    b"    When called without the optional mode argument, the behavior is determined by the",
    b"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    b"    * ASYNC: Asynchronously flush the libraries.",
    b"    * SYNC: Synchronously flush the libraries.",
    b"DUMP",
    b"    Return a serialized payload representing the current libraries, can be restored using "
    b"FUNCTION RESTORE command",
    b"RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    b"    Restore the libraries represented by the given payload, it is possible to give a "
    b"restore policy to",
    b"    control how to handle existing libraries (default APPEND):",
    b"    * FLUSH: delete all existing libraries.",
    b"    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    b"    * REPLACE: appends the restored libraries to the existing libraries, On collision, "
    b"replace the old",
    b"      libraries with the new libraries (notice that even on this option there is a "
    b"chance of failure",
    b"      in case of functions name collision with another library).",
    b"HELP",
    b"    Prints this help.",
]

_FCALL = "noscript stale skip_monitor no_mandatory_keys movablekeys x_sees_data"

SPECS = (
    with_numkeys(spec("fcall", -3, _FCALL + " x_may_replicate", handler=cmd_fcall)),
    with_numkeys(spec("fcall_ro", -3, "readonly " + _FCALL, handler=cmd_fcall_ro)),
    spec(
        "function",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("function|load", -3, "write denyoom noscript", handler=cmd_function_load),
            spec("function|delete", 3, "write noscript", handler=cmd_function_delete),
            spec("function|flush", -2, "write noscript", handler=cmd_function_flush),
            spec("function|restore", -3, "write denyoom noscript", handler=cmd_function_restore),
            spec("function|dump", 2, "noscript", handler=cmd_function_dump),
            spec("function|list", -2, "noscript", handler=cmd_function_list),
            spec("function|stats", 2, "noscript allow_busy", handler=cmd_function_stats),
            spec("function|kill", 2, "noscript allow_busy", handler=cmd_function_kill),
            spec("function|help", 2, "loading stale", handler=help_handler(_FUNCTION_HELP)),
        ),
    ),
)
