"""EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (Redis ``eval.c``)."""

from __future__ import annotations

import hashlib
from typing import cast

from headwater.commands.args import parse_int
from headwater.commands.context import (
    Client,
    CommandSpec,
    help_handler,
    reject_subcommand,
    spec,
)
from headwater.commands.monitor import show_command
from headwater.errors import NOT_INTEGER, ReplyError, err
from headwater.ops.lazyfree import LAZYFREE_THRESHOLD
from headwater.resp.types import OK, Reply
from headwater.scripting.runtime import (
    FLAG_NO_WRITES,
    Script,
    ScriptHost,
    Scripting,
    parse_shebang,
)

NOSCRIPT = ReplyError("NOSCRIPT", "No matching script. Please use EVAL.")
_RO_WITH_WRITE_FLAG = err("Can not execute a script with write flag using *_ro command.")


def scripting_of(c: Client) -> Scripting:
    """The engine's scripting (the engine implements ``ScriptHost``)."""
    return cast(ScriptHost, c.server).scripting


def parse_numkeys(argv: list[bytes], bad: ReplyError = NOT_INTEGER) -> int:
    """EVAL's and FCALL's numkeys (``argv[2]``), as Redis's string2ll reads it (no sign
    but '-', no spaces, no underscores: Python's ``int()`` takes all three)."""
    numkeys = parse_int(argv[2], bad)
    if numkeys > len(argv) - 3:
        raise err("Number of keys can't be greater than number of args")
    if numkeys < 0:
        raise err("Number of keys can't be negative")
    return numkeys


def check_cluster_flag(c: Client, flags: tuple[str, ...]) -> None:
    """A script or function flagged ``no-cluster`` does not run on a cluster node."""
    if "no-cluster" in flags and c.server.cluster is not None:
        raise err("Can not run script on cluster, 'no-cluster' flag is set.")


def check_may_write(c: Client, read_only_command: bool) -> None:
    """A script or function that declares it may write, refused before it runs as Redis's
    scriptPrepareForRun does: on a read-only replica or without enough good replicas, then
    by a *_RO command."""
    refusal = c.server.replication_refusal
    if refusal is not None:
        raise refusal
    if read_only_command:
        raise _RO_WITH_WRITE_FLAG


def _run(
    c: Client, argv: list[bytes], numkeys: int, script: Script, read_only_command: bool
) -> Reply:
    flags = script.flags
    read_only = read_only_command
    if flags is not None:  # a shebang: the script declares whether it writes
        check_cluster_flag(c, flags)
        if FLAG_NO_WRITES in flags:
            read_only = True
        else:
            check_may_write(c, read_only_command)
    scripting = scripting_of(c)
    # (a script without a shebang may, as before 7.0)
    cross_slot = flags is None or "allow-cross-slot-keys" in flags
    reply = scripting.run_script(
        c,
        script.function,
        script.slot,
        script.sha,
        argv,
        numkeys,
        True,
        read_only,
        None,
        cross_slot,
    )
    scripting.ran(script)
    return reply


def _eval(c: Client, argv: list[bytes], read_only: bool) -> Reply:
    pubsub = c.server.pubsub
    if pubsub.monitors:  # first, whatever follows (Redis's evalCommand)
        show_command(pubsub, c, argv)
    numkeys = parse_numkeys(argv)
    script = scripting_of(c).script_for(argv[1], from_eval=True)
    return _run(c, argv, numkeys, script, read_only)


def _evalsha(c: Client, argv: list[bytes], read_only: bool) -> Reply:
    pubsub = c.server.pubsub
    if pubsub.monitors:  # first, whatever follows (Redis's evalCommand)
        show_command(pubsub, c, argv)
    numkeys = parse_numkeys(argv)
    scripts = scripting_of(c).scripts
    script = scripts.get(argv[1]) or scripts.get(argv[1].lower())
    if script is None:
        raise NOSCRIPT
    return _run(c, argv, numkeys, script, read_only)


def declared_write(c: Client, argv: list[bytes]) -> bool | None:
    """Whether this EVAL/EVALSHA (or _RO) call may write by the flags its script declares
    (Redis's evalGetCommandFlags: a cached script's flags, else the shebang of EVAL's body);
    None when it declares none (no shebang, an unknown SHA, a bad shebang): the command's own
    flags decide."""
    scripts = scripting_of(c).scripts
    body = argv[1]
    if argv[0].lower().startswith(b"evalsha"):
        if len(body) != 40:
            return None
        script = scripts.get(body.lower())
        flags = None if script is None else script.flags
    else:
        script = scripts.get(hashlib.sha1(body).hexdigest().encode())
        if script is not None:
            flags = script.flags
        else:
            try:
                flags = parse_shebang(body)[0]
            except ReplyError:
                return None
    if flags is None:
        return None
    return FLAG_NO_WRITES not in flags


def cmd_eval(c: Client, argv: list[bytes]) -> Reply:
    return _eval(c, argv, False)


def cmd_eval_ro(c: Client, argv: list[bytes]) -> Reply:
    return _eval(c, argv, True)


def cmd_evalsha(c: Client, argv: list[bytes]) -> Reply:
    return _evalsha(c, argv, False)


def cmd_evalsha_ro(c: Client, argv: list[bytes]) -> Reply:
    return _evalsha(c, argv, True)


def cmd_script_load(c: Client, argv: list[bytes]) -> Reply:
    return scripting_of(c).script_for(argv[2]).sha


def cmd_script_exists(c: Client, argv: list[bytes]) -> Reply:
    scripts = scripting_of(c).scripts
    return [int(sha.lower() in scripts) for sha in argv[2:]]


def flush_lazily(c: Client, mode: bytes | None) -> bool:
    """Whether SCRIPT FLUSH or FUNCTION FLUSH frees in the background: ASYNC, or no mode
    under ``lazyfree-lazy-user-flush`` (the mode already checked)."""
    if mode is None:
        return bool(c.server.config["lazyfree-lazy-user-flush"])
    return mode.upper() == b"ASYNC"


def cmd_script_flush(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) > 3 or (len(argv) == 3 and argv[2].upper() not in (b"SYNC", b"ASYNC")):
        raise err("SCRIPT FLUSH only support SYNC|ASYNC option")
    lazily = flush_lazily(c, argv[2] if len(argv) == 3 else None)
    scripting = scripting_of(c)
    scripts = len(scripting.scripts)
    scripting.flush()
    if lazily and scripts > LAZYFREE_THRESHOLD:  # (Redis frees them in the background)
        c.server.stats.lazyfreed_objects += scripts
    return OK


_DEBUG_IN_PIPELINE = err("SCRIPT DEBUG must be called outside a pipeline")
_DEBUG_USAGE = err("Use SCRIPT DEBUG YES/SYNC/NO")
#: Redis's LDB is an interactive debugger (redis-cli --ldb) that Headwater does not have
DEBUGGER_NOT_SUPPORTED = err(
    "SCRIPT DEBUG YES and SYNC are not supported: Headwater has no Lua debugger "
    "(SCRIPT DEBUG NO is accepted)"
)


def cmd_script_debug(c: Client, argv: list[bytes]) -> Reply:
    """SCRIPT DEBUG YES|SYNC|NO: NO (debugging off, which it always is here) answers +OK;
    YES and SYNC, which would start Redis's interactive Lua debugger, are refused with a
    clear error. Like Redis, refused while replies are pending (a pipeline, a transaction)."""
    if c.out or c.server.in_transaction():
        raise _DEBUG_IN_PIPELINE
    mode = argv[2].upper()
    if mode == b"NO":
        return OK
    if mode in (b"YES", b"SYNC"):
        raise DEBUGGER_NOT_SUPPORTED
    raise _DEBUG_USAGE


def cmd_script_kill(c: Client, argv: list[bytes]) -> Reply:
    scripting_of(c).kill(is_eval=True)
    return OK


_SCRIPT_HELP = [
    b"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"DEBUG (YES|SYNC|NO)",
    b"    Set the debug mode for subsequent scripts executed.",
    b"EXISTS <sha1> [<sha1> ...]",
    b"    Return information about the existence of the scripts in the script cache.",
    b"FLUSH [ASYNC|SYNC]",
    b"    Flush the Lua scripts cache. Very dangerous on replicas.",
    b"    When called without the optional mode argument, the behavior is determined by the",
    b"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    b"    * ASYNC: Asynchronously flush the scripts cache.",
    b"    * SYNC: Synchronously flush the scripts cache.",
    b"KILL",
    b"    Kill the currently executing Lua script.",
    b"LOAD <script>",
    b"    Load a script into the scripts cache without executing it.",
    b"HELP",
    b"    Prints this help.",
]

_EVAL = "noscript stale skip_monitor no_mandatory_keys movablekeys x_sees_data"
_SCRIPT = "noscript"


def with_numkeys(row: CommandSpec) -> CommandSpec:
    """Keys counted by the argument after the script (COMMAND GETKEYS)."""
    row.numkeys_at = 2
    return row


SPECS = (
    with_numkeys(spec("eval", -3, _EVAL + " x_may_replicate", handler=cmd_eval)),
    with_numkeys(spec("evalsha", -3, _EVAL + " x_may_replicate", handler=cmd_evalsha)),
    with_numkeys(spec("eval_ro", -3, "readonly " + _EVAL, handler=cmd_eval_ro)),
    with_numkeys(spec("evalsha_ro", -3, "readonly " + _EVAL, handler=cmd_evalsha_ro)),
    spec(
        "script",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("script|debug", 3, _SCRIPT, handler=cmd_script_debug),
            spec("script|load", 3, _SCRIPT + " stale", handler=cmd_script_load),
            spec("script|exists", -3, _SCRIPT, handler=cmd_script_exists),
            spec("script|flush", -2, _SCRIPT, handler=cmd_script_flush),
            spec("script|kill", 2, _SCRIPT + " allow_busy", handler=cmd_script_kill),
            spec("script|help", 2, "loading stale", handler=help_handler(_SCRIPT_HELP)),
        ),
    ),
)
