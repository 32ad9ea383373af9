"""ACL: the command, and the check the engine makes before a restricted user's command.

The rules themselves live in ``headwater.acl`` (users, selectors, the log, the file); here
they meet the command table: each command's categories (``introspection.categories_of``),
the keys it names and the access it needs on each (the key specs COMMAND GETKEYS uses), and
the channels it publishes or subscribes to.
"""

from __future__ import annotations

import logging
import secrets
from typing import Final

from headwater.acl import aclfile
from headwater.acl.access import AccessControl, SetUserError
from headwater.acl.log import REASON_NAMES
from headwater.acl.users import (
    CATEGORIES,
    DENIED_AUTH,
    DENIED_CHANNEL,
    DENIED_CMD,
    DENIED_KEY,
    READ,
    WRITE,
    Catalog,
    CommandRef,
    Selector,
    User,
    has_spaces,
)
from headwater.commands.args import parse_int
from headwater.commands.connection import client_info_line
from headwater.commands.context import Client, CommandSpec, help_handler, reject_subcommand, spec
from headwater.commands.getkeys import KeySpec, command_keys, fixed_single_key, has_keys
from headwater.commands.introspection import categories_of, key_specs_of
from headwater.errors import ReplyError, err, subcommand_syntax, wrong_arity
from headwater.resp.types import OK, Reply, RSet

log = logging.getLogger("headwater.acl")


def build_catalog(table: dict[bytes, CommandSpec]) -> Catalog:
    refs: list[CommandRef] = []
    for row in table.values():
        subs = tuple(sub.name for sub in row.subcommands.values())
        refs.append(CommandRef(row.name, categories_of(row), subs))
        for sub in row.subcommands.values():
            refs.append(CommandRef(sub.name, categories_of(sub), (), row.name))
    return Catalog(refs)


# -- the check -------------------------------------------------------------------------------


class _KeyPlan:
    """How to find a command's keys and the access each needs, worked out once per
    command: ``single`` is (index, access) when the command names one key at a fixed
    place (most commands: no key-spec walk per call)."""

    __slots__ = ("has_keys", "single", "specs", "verdict_at")

    def __init__(self, row: CommandSpec) -> None:
        self.specs: list[KeySpec] = key_specs_of(row)
        self.has_keys = has_keys(row, self.specs)
        single = fixed_single_key(self.specs)
        self.single = None if single is None else (single[0], needed_access(single[1]))
        #: the one argument the verdict depends on besides the command (its first argument,
        #: which may be its key), when that is all: the user keeps such verdicts; else -1
        first_at = 2 if row.parent is not None else 1
        self.verdict_at = -1
        keys_ok = not self.has_keys or (self.single is not None and self.single[0] == first_at)
        if keys_ok and row.name not in _CHANNEL_COMMANDS:
            self.verdict_at = first_at


_PLANS: dict[str, _KeyPlan] = {}


def needed_access(flags: tuple[str, ...]) -> int:
    """The permissions a key with these key-spec flags needs (Redis's
    ACLSelectorCheckKey): read to access it, write to insert, delete or update."""
    needs = READ if "access" in flags else 0
    if "insert" in flags or "delete" in flags or "update" in flags:
        needs |= WRITE
    return needs


def _keys(row: CommandSpec, plan: _KeyPlan, argv: list[bytes]) -> list[tuple[int, int]]:
    single = plan.single
    if single is not None:
        return [single] if single[0] < len(argv) else []
    return [(pos, needed_access(flags)) for pos, flags in command_keys(row, plan.specs, argv)]


#: the commands that publish to or subscribe to channels, and whether they name patterns
_CHANNEL_COMMANDS: Final = {
    "publish": (1, False),
    "spublish": (1, False),
    "subscribe": (-1, False),
    "ssubscribe": (-1, False),
    "psubscribe": (-1, True),
}


def _channels(row: CommandSpec, argv: list[bytes]) -> list[tuple[int, bool]]:
    shape = _CHANNEL_COMMANDS.get(row.name)
    if shape is None:
        return []
    count, is_pattern = shape
    last = len(argv) if count < 0 else min(len(argv), 1 + count)
    return [(pos, is_pattern) for pos in range(1, last)]


def _check_selector(
    selector: Selector, row: CommandSpec, argv: list[bytes], keys: list[tuple[int, int]] | None
) -> tuple[int, int]:
    if not row.no_auth:
        first_at = 2 if row.parent is not None else 1
        if not selector.allows_command(row.name, argv, first_at):
            return DENIED_CMD, 0
    if not selector.all_keys and keys:
        for pos, needs in keys:
            if not selector.allows_key(argv[pos], needs):
                return DENIED_KEY, pos
    if not selector.all_channels:
        for pos, is_pattern in _channels(row, argv):
            if not selector.allows_channel(argv[pos], is_pattern):
                return DENIED_CHANNEL, pos
    return 0, 0


#: how many verdicts a user keeps (then it starts again: keys vary without end)
_VERDICTS_KEPT: Final = 4096


def check(user: User, row: CommandSpec, argv: list[bytes]) -> tuple[int, int]:
    """(0, 0) when one of the user's selectors allows the command; else the reason and the
    argument at fault, picked as Redis picks them (ACLCheckAllUserCommandPerm)."""
    plan = _plan(row)
    at = row.acl_at = plan.verdict_at
    if at < 0:
        return _check(user, row, argv, plan)
    memo = (row.name, argv[at] if at < len(argv) else b"")
    verdicts = user.verdicts
    verdict = verdicts.get(memo)
    if verdict is None:
        verdict = _check(user, row, argv, plan)
        if len(verdicts) >= _VERDICTS_KEPT:
            verdicts.clear()
        verdicts[memo] = verdict
    return verdict


def _plan(row: CommandSpec) -> _KeyPlan:
    plan = _PLANS.get(row.name)
    if plan is None:
        plan = _PLANS[row.name] = _KeyPlan(row)
    return plan


def _check(user: User, row: CommandSpec, argv: list[bytes], plan: _KeyPlan) -> tuple[int, int]:
    keys = _keys(row, plan, argv) if plan.has_keys else None
    relevant, last = DENIED_CMD, 0
    for selector in user.selectors:
        reason, pos = _check_selector(selector, row, argv, keys)
        if not reason:
            return 0, 0
        if reason > relevant or (reason == relevant and pos > last):
            relevant, last = reason, pos
    return relevant, last


def full_key_access(c: Client, row: CommandSpec, argv: list[bytes]) -> bool:
    """One selector of the client's user allows this command and reads any key (Redis's
    ACLUserCheckCmdWithUnrestrictedKeyAccess): SORT's BY and GET name keys no key spec
    shows, so they need it."""
    user = c.user
    if user is None or user.unrestricted:
        return True
    plan = _plan(row)
    keys = _keys(row, plan, argv) if plan.has_keys else None
    return any(
        selector.allows_every_key(READ) and not _check_selector(selector, row, argv, keys)[0]
        for selector in user.selectors
    )


def denial_text(reason: int, user: User, row: CommandSpec, argv: list[bytes], pos: int) -> str:
    """Redis's getAclErrorMessage, not verbose (the NOPERM of a refused command)."""
    if reason == DENIED_CMD:
        return f"User {_text(user.name)} has no permissions to run the '{row.name}' command"
    if reason == DENIED_KEY:
        return "No permissions to access a key"
    return "No permissions to access a channel"


def _verbose_denial(reason: int, user: User, row: CommandSpec, argv: list[bytes], pos: int) -> str:
    """getAclErrorMessage, verbose (ACL DRYRUN)."""
    if reason == DENIED_KEY:
        what = "key"
    elif reason == DENIED_CHANNEL:
        what = "channel"
    else:
        return denial_text(reason, user, row, argv, pos)
    return f"User {_text(user.name)} has no permissions to access the '{_text(argv[pos])}' {what}"


def log_denial(
    c: Client,
    reason: int,
    context: str,
    obj: bytes,
    username: bytes | None = None,
) -> None:
    """An ACL LOG entry (Redis's addACLLogEntry); ``c`` is the client that sent the command
    (a script's caller)."""
    server = c.server
    name = username if username is not None else (c.user.name if c.user else b"")
    info = client_info_line(c).rstrip("\n")
    now = server.clock.now_ms()
    server.acl.log.add(reason, context, obj, name, info, now, server.config["acllog-max-len"])


def refusal(c: Client, row: CommandSpec, argv: list[bytes], context: str) -> str | None:
    """The NOPERM text when ``c``'s user may not run this command (logged), else None."""
    user = c.user
    if user is None or user.unrestricted:
        return None
    verdict = check(user, row, argv)
    return refused(c, row, argv, verdict, context) if verdict[0] else None


def refused(
    c: Client, row: CommandSpec, argv: list[bytes], verdict: tuple[int, int], context: str
) -> str:
    """A refusal ``check`` decided: logged, and its NOPERM text."""
    reason, pos = verdict
    obj = row.name_bytes if reason == DENIED_CMD else argv[pos]
    log_denial(c, reason, context, obj)
    return denial_text(reason, c.user, row, argv, pos)  # type: ignore[arg-type]


_EXEC_REASONS: Final = {
    DENIED_CMD: "no permission to execute the command or subcommand",
    DENIED_KEY: "no permission to touch the specified keys",
    DENIED_CHANNEL: "no permission to access one of the channels used as arguments",
}


def exec_refusal(c: Client, row: CommandSpec, argv: list[bytes]) -> ReplyError | None:
    """EXEC checks each queued command again: the rules may have changed since."""
    user = c.user
    if user is None or user.unrestricted:
        return None
    reason, pos = check(user, row, argv)
    if not reason:
        return None
    log_denial(c, reason, "multi", row.name_bytes if reason == DENIED_CMD else argv[pos])
    return ReplyError(
        "NOPERM",
        "ACLs rules changed between the moment the transaction was accumulated and the EXEC "
        f"call. This command is no longer allowed for the following reason: "
        f"{_EXEC_REASONS[reason]}",
    )


# -- clients that lose their rights -----------------------------------------------------------


def deauthenticate_and_close(c: Client, victim: Client) -> None:
    """Redis's deauthenticateAndCloseClient: the connection goes back to the default user,
    unauthenticated, and is closed (the running client after its reply)."""
    victim.user = c.server.acl.default
    victim.authenticated = False
    if victim is c:
        c.close_after_reply = True
    else:
        c.server.kill_client(victim)


def _upcoming_channels(new: User, original: User) -> list[bytes] | None:
    """The channels the new rules allow when they allow less than before (Redis's
    getUpcomingChannelList); None when they allow at least as much."""
    if any(s.all_channels for s in new.selectors):
        return None
    upcoming = [ch for s in new.selectors for ch in s.channels]
    for selector in original.selectors:
        if selector.all_channels or any(ch not in upcoming for ch in selector.channels):
            return upcoming
    return None


def _loses_subscriptions(victim: Client, upcoming: list[bytes]) -> bool:
    allowed = Selector(channels=upcoming)
    if any(not allowed.allows_channel(p, True) for p in victim.patterns):
        return True
    subscribed = [*victim.channels, *victim.shard_channels]
    return any(not allowed.allows_channel(ch, False) for ch in subscribed)


def _has_subscribers(c: Client) -> bool:
    pubsub = c.server.pubsub
    return bool(pubsub.channels or pubsub.patterns or pubsub.shard_channels)


def kill_revoked_subscribers(c: Client, original: User, new: User) -> None:
    """Subscribers of ``original`` whose channels the new rules no longer allow are
    disconnected (Redis's ACLKillPubsubClientsIfNeeded)."""
    if not _has_subscribers(c):
        return
    upcoming = _upcoming_channels(new, original)
    if upcoming is None:
        return
    for victim in list(c.server.clients.values()):
        revoked = victim.user is original and victim.subscribed()
        if revoked and _loses_subscriptions(victim, upcoming):
            deauthenticate_and_close(c, victim)


# -- the ACL command ---------------------------------------------------------------------------


def cmd_acl_setuser(c: Client, argv: list[bytes]) -> Reply:
    name = argv[2]
    if has_spaces(name):
        raise err("Usernames can't contain spaces or null characters")
    acl = c.server.acl
    try:
        current, staged = acl.staged(name, argv[3:])
    except SetUserError as exc:
        raise err(str(exc).replace("\r", " ").replace("\n", " ")) from None
    if current is not None:
        kill_revoked_subscribers(c, current, staged)
    acl.commit(current, staged)
    return OK


def cmd_acl_deluser(c: Client, argv: list[bytes]) -> Reply:
    if b"default" in argv[2:]:
        raise err("The 'default' user cannot be removed")
    acl = c.server.acl
    deleted = 0
    for name in argv[2:]:
        user = acl.delete(name)
        if user is None:
            continue
        deleted += 1
        for victim in list(c.server.clients.values()):
            if victim.user is user:
                deauthenticate_and_close(c, victim)
    return deleted


def _describe_selector(selector: Selector) -> dict[bytes, Reply]:
    return {
        b"commands": selector.command_rules().encode(),
        b"keys": selector.keys_text().encode("utf-8", "surrogateescape"),
        b"channels": selector.channels_text().encode("utf-8", "surrogateescape"),
    }


def cmd_acl_getuser(c: Client, argv: list[bytes]) -> Reply:
    user = c.server.acl.get(argv[2])
    if user is None:
        return None
    reply: dict[bytes, Reply] = {
        b"flags": RSet(flag.encode() for flag in user.flags()),
        b"passwords": [p.encode() for p in user.passwords],
    }
    reply.update(_describe_selector(user.root))
    reply[b"selectors"] = [_describe_selector(s) for s in user.selectors[1:]]
    return reply


def cmd_acl_list(c: Client, argv: list[bytes]) -> Reply:
    acl = c.server.acl
    return [
        b"user " + name + b" " + acl.users[name].describe().encode("utf-8", "surrogateescape")
        for name in acl.names()
    ]


def cmd_acl_users(c: Client, argv: list[bytes]) -> Reply:
    return c.server.acl.names()


def cmd_acl_whoami(c: Client, argv: list[bytes]) -> Reply:
    return c.user.name if c.user is not None else None


NO_ACL_FILE: Final = err(
    "This Redis instance is not configured to use an ACL file. You may want to specify users "
    "via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis "
    "configuration file set) in order to store users in the Redis configuration."
)


def cmd_acl_load(c: Client, argv: list[bytes]) -> Reply:
    filename = c.server.config["aclfile"]
    if not filename:
        raise NO_ACL_FILE
    acl = c.server.acl
    loaded = acl.read_file(filename)
    if isinstance(loaded, str):
        raise err(loaded)
    old = acl.replace_users(loaded)
    _move_clients(c, acl, old)
    return OK


def _move_clients(c: Client, acl: AccessControl, old: dict[bytes, User]) -> None:
    """After ACL LOAD: each client takes its user's new object; a client whose user is gone,
    or whose subscriptions the new rules refuse, is disconnected."""
    upcoming: dict[bytes, list[bytes] | None] = {}
    subscribers = _has_subscribers(c)
    for victim in list(c.server.clients.values()):
        if victim.user is None:
            continue
        name = victim.user.name
        new = acl.users.get(name)
        if new is None:
            deauthenticate_and_close(c, victim)
            continue
        if subscribers and victim.subscribed():
            if name not in upcoming:
                upcoming[name] = _upcoming_channels(new, old.get(name, victim.user))
            channels = upcoming[name]
            if channels is not None and _loses_subscriptions(victim, channels):
                deauthenticate_and_close(c, victim)
                continue
        victim.user = new


def cmd_acl_save(c: Client, argv: list[bytes]) -> Reply:
    filename = c.server.config["aclfile"]
    if not filename:
        raise NO_ACL_FILE
    try:
        aclfile.write_users(filename, c.server.acl.users)
    except OSError as exc:
        c.server.log("warning", f"Writing ACL file for ACL SAVE: {exc.strerror}")
        raise err(
            "There was an error trying to save the ACLs. Please check the server logs for "
            "more information"
        ) from None
    return OK


def cmd_acl_cat(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) == 2:
        return [name.encode() for name in CATEGORIES]
    if len(argv) > 3:
        raise subcommand_syntax(argv[1], "ACL")
    category = argv[2].decode("latin-1").lower()
    if category not in CATEGORIES:
        raise err(f"Unknown category '{_text(argv[2][:128])}'")
    return [ref.name.encode() for ref in c.server.acl.catalog.in_category(category)]


GENPASS_MAX_BITS: Final = 4096


def cmd_acl_genpass(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise subcommand_syntax(argv[1], "ACL")
    bits = parse_int(argv[2]) if len(argv) == 3 else 256
    if bits <= 0 or bits > GENPASS_MAX_BITS:
        raise err(
            "ACL GENPASS argument must be the number of bits for the output password, a "
            f"positive number up to {GENPASS_MAX_BITS}"
        )
    chars = (bits + 3) // 4
    return secrets.token_hex((chars + 1) // 2)[:chars].encode()


def cmd_acl_log(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise subcommand_syntax(argv[1], "ACL")
    log_ = c.server.acl.log
    count = 10
    if len(argv) == 3:
        if argv[2].lower() == b"reset":
            log_.reset()
            return OK
        count = max(parse_int(argv[2]), 0)
    now = c.server.clock.now_ms()
    return [
        {
            b"count": entry.count,
            b"reason": REASON_NAMES[entry.reason].encode(),
            b"context": entry.context.encode(),
            b"object": entry.object,
            b"username": entry.username,
            b"age-seconds": (now - entry.updated_ms) / 1000,
            b"client-info": entry.client_info.encode("utf-8", "surrogateescape"),
            b"entry-id": entry.entry_id,
            b"timestamp-created": entry.created_ms,
            b"timestamp-last-updated": entry.updated_ms,
        }
        for entry in log_.entries[:count]
    ]


def cmd_acl_dryrun(c: Client, argv: list[bytes]) -> Reply:
    user = c.server.acl.get(argv[2])
    if user is None:
        raise err(f"User '{_text(argv[2])}' not found")
    args = argv[3:]
    row = c.server.table.get(args[0].upper())
    if row is not None and row.subcommands and len(args) > 1:
        row = row.subcommands.get(args[1].lower())
    if row is None:
        raise err(f"Command '{_text(args[0])}' not found")
    if not row.arity_ok(len(args)):
        raise wrong_arity(row.name)
    reason, pos = check(user, row, args)
    if reason:
        return _verbose_denial(reason, user, row, args, pos).encode("utf-8", "surrogateescape")
    return OK


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


_HELP = [
    b"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"CAT [<category>]",
    b"    List all commands that belong to <category>, or all command categories",
    b"    when no category is specified.",
    b"DELUSER <username> [<username> ...]",
    b"    Delete a list of users.",
    b"DRYRUN <username> <command> [<arg> ...]",
    b"    Returns whether the user can execute the given command without executing the command.",
    b"GETUSER <username>",
    b"    Get the user's details.",
    b"GENPASS [<bits>]",
    b"    Generate a secure 256-bit user password. The optional `bits` argument can",
    b"    be used to specify a different size.",
    b"LIST",
    b"    Show users details in config file format.",
    b"LOAD",
    b"    Reload users from the ACL file.",
    b"LOG [<count> | RESET]",
    b"    Show the ACL log entries.",
    b"SAVE",
    b"    Save the current config to the ACL file.",
    b"SETUSER <username> <attribute> [<attribute> ...]",
    b"    Create or modify a user with the specified attributes.",
    b"USERS",
    b"    List all the registered usernames.",
    b"WHOAMI",
    b"    Return the current connection username.",
    b"HELP",
    b"    Print this help.",
]

_ADMIN = "admin noscript loading stale"
SPECS = [
    spec(
        "acl",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("acl|cat", -2, "noscript loading stale", handler=cmd_acl_cat),
            spec("acl|deluser", -3, _ADMIN, handler=cmd_acl_deluser),
            spec("acl|dryrun", -4, _ADMIN, handler=cmd_acl_dryrun),
            spec("acl|genpass", -2, "noscript loading stale", handler=cmd_acl_genpass),
            spec("acl|getuser", 3, _ADMIN, handler=cmd_acl_getuser),
            spec("acl|help", 2, "loading stale", handler=help_handler(_HELP)),
            spec("acl|list", 2, _ADMIN, handler=cmd_acl_list),
            spec("acl|load", 2, _ADMIN, handler=cmd_acl_load),
            spec("acl|log", -2, _ADMIN, handler=cmd_acl_log),
            spec("acl|save", 2, _ADMIN, handler=cmd_acl_save),
            spec("acl|setuser", -3, _ADMIN, handler=cmd_acl_setuser),
            spec("acl|users", 2, _ADMIN, handler=cmd_acl_users),
            spec("acl|whoami", 2, "noscript loading stale", handler=cmd_acl_whoami),
        ),
    ),
]

__all__ = ["DENIED_AUTH", "SPECS", "build_catalog", "check", "exec_refusal", "refusal"]
