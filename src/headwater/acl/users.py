"""ACL users and their rules (Redis 7.2+ ``acl.c`` semantics).

Theory of operation
-------------------
A ``User`` has flags (on/off, nopass, sanitize-payload), SHA-256 password hashes and a list
of ``Selector``: the root one (rules given outside parentheses) and any added with
``(...)``. A command is allowed when one selector allows it: the command (or its container,
or a first argument named with ``+cmd|arg``), every key it names with the access it needs
(``%R~`` read, ``%W~`` write, ``~`` both), and every channel it publishes or subscribes to.

Command rules are kept as Redis 7.2 keeps them: the set of allowed full names ("get",
"config|get") plus the rules as typed (``+@read -keys``), each new rule dropping an older one
of the same command or category, so that ACL LIST shows what was typed, in order. Whether
the selector also allows commands not known yet (the "future" bit Redis sets with ``+@all``)
decides whether the description starts with ``+@all`` or ``-@all``.

A rule that cannot apply raises ``RuleError`` with Redis's reason; ``apply_rules`` applies a
whole SETUSER to a copy and keeps the copy only when every rule applied.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from headwater.errors import require
from headwater.glob import compile_glob, glob_match

#: Redis's category table, in its order (ACL CAT, COMMAND INFO)
CATEGORIES: Final = (
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
)
_CATEGORY_SET: Final = frozenset(CATEGORIES)

#: key pattern permissions (Redis's ACL_READ_PERMISSION, ACL_WRITE_PERMISSION)
READ: Final = 1
WRITE: Final = 2
READ_WRITE: Final = 3

#: why a command was refused, in Redis's order of relevance (ACL_DENIED_*)
DENIED_CMD: Final = 1
DENIED_KEY: Final = 2
DENIED_AUTH: Final = 3
DENIED_CHANNEL: Final = 4

_SPACES = frozenset(b" \t\n\v\f\r\x00")

#: RuleError reasons (Redis's errno values in ACLSetUser) and their text
REASONS: Final = {
    "ENOENT": "Unknown command or category name in ACL",
    "EINVAL": "Syntax error",
    "EEXIST": "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and "
    "does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
    "EISDIR": "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid "
    "and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
    "ENODEV": "The password you are trying to remove from the user does not exist",
    "EBADMSG": "The password hash must be exactly 64 characters and contain only lowercase "
    "hexadecimal characters",
    "EALREADY": "Duplicate user found. A user can only be defined once in config files",
    "ECHILD": "Allowing first-arg of a subcommand is not supported",
}


class RuleError(Exception):
    """A rule that cannot apply; ``reason`` is one of ``REASONS``' keys."""

    def __init__(self, reason: str) -> None:
        super().__init__(REASONS.get(reason, "Wrong format"))
        self.reason = reason


@dataclass(frozen=True)
class CommandRef:
    """What a rule can name: a command or a subcommand, by its full name ("config|get")."""

    name: str
    categories: frozenset[str]
    subcommands: tuple[str, ...] = ()
    parent: str | None = None


class Catalog:
    """The commands rules may name, in the table's order (subcommands after their
    container)."""

    def __init__(self, refs: Iterable[CommandRef]) -> None:
        self.refs: dict[str, CommandRef] = {ref.name: ref for ref in refs}

    def lookup(self, name: str) -> CommandRef | None:
        """Redis's strict lookup: "cmd" or "container|sub", any case; None otherwise (a
        first argument such as "select|0" is not a command)."""
        parts = name.lower().split("|")
        if len(parts) > 2:
            return None
        base = self.refs.get(parts[0])
        if base is None or len(parts) == 1:
            return base
        if not base.subcommands:
            return None
        return self.refs.get(name.lower())

    def in_category(self, category: str) -> list[CommandRef]:
        return [ref for ref in self.refs.values() if category in ref.categories]


def hash_password(password: bytes) -> str:
    return hashlib.sha256(password).hexdigest()


def _valid_hash(text: bytes) -> bool:
    return len(text) == 64 and all(48 <= ch <= 57 or 97 <= ch <= 102 for ch in text)


def has_spaces(text: bytes) -> bool:
    """Redis's ACLStringHasSpaces: a space, a control blank or a NUL."""
    return any(ch in _SPACES for ch in text)


@dataclass
class KeyPattern:
    pattern: bytes
    flags: int

    def __post_init__(self) -> None:
        self.matches = compile_glob(self.pattern)

    def render(self) -> str:
        prefix = {READ_WRITE: "~", READ: "%R~", WRITE: "%W~"}[self.flags]
        return prefix + self.pattern.decode("utf-8", "surrogateescape")


@dataclass
class Selector:
    """One set of permissions (Redis's aclSelector)."""

    root: bool = False
    allowed: set[str] = field(default_factory=set)
    #: Redis's SELECTOR_FLAG_ALLCOMMANDS: every command, no check needed
    all_commands: bool = False
    #: the reserved bit +@all sets: commands added later are allowed too
    future: bool = False
    firstargs: dict[str, list[bytes]] = field(default_factory=dict)
    keys: list[KeyPattern] = field(default_factory=list)
    all_keys: bool = False
    channels: list[bytes] = field(default_factory=list)
    all_channels: bool = False
    rules: list[str] = field(default_factory=list)

    def copy(self) -> Selector:
        return Selector(
            self.root,
            set(self.allowed),
            self.all_commands,
            self.future,
            {name: list(args) for name, args in self.firstargs.items()},
            [KeyPattern(k.pattern, k.flags) for k in self.keys],
            self.all_keys,
            list(self.channels),
            self.all_channels,
            list(self.rules),
        )

    # -- rules ---------------------------------------------------------------------------

    def apply(self, op: bytes, catalog: Catalog) -> None:
        """One selector rule (Redis's ACLSetSelector); raises RuleError."""
        word = op.lower()
        if word in (b"allkeys", b"~*"):
            self.all_keys = True
            self.keys.clear()
        elif word == b"resetkeys":
            self.all_keys = False
            self.keys.clear()
        elif word in (b"allchannels", b"&*"):
            self.all_channels = True
            self.channels.clear()
        elif word == b"resetchannels":
            self.all_channels = False
            self.channels.clear()
        elif word in (b"allcommands", b"+@all"):
            self.allowed = set(catalog.refs)
            self.all_commands = self.future = True
            self.rules.clear()
            self.firstargs.clear()
        elif word in (b"nocommands", b"-@all"):
            self.allowed = set()
            self.all_commands = self.future = False
            self.rules.clear()
            self.firstargs.clear()
        elif op[:1] in (b"~", b"%"):
            self._add_key_pattern(op)
        elif op[:1] == b"&":
            self._add_channel(op[1:])
        elif op[:1] == b"+" and op[1:2] != b"@":
            self._allow(op[1:].decode("latin-1"), catalog)
        elif op[:1] == b"-" and op[1:2] != b"@":
            ref = catalog.lookup(op[1:].decode("latin-1"))
            if ref is None:
                raise RuleError("ENOENT")
            self._change(ref, False, catalog)
            self._update_rules(ref.name, False)
        elif op[:1] in (b"+", b"-"):
            self._category(op[2:].decode("latin-1").lower(), op[:1] == b"+", catalog)
        else:
            raise RuleError("EINVAL")

    def _add_key_pattern(self, op: bytes) -> None:
        if self.all_keys:
            raise RuleError("EEXIST")
        flags, offset = READ_WRITE, 1
        if op[:1] == b"%":
            flags, offset = _permission_prefix(op)
        pattern = op[offset:]
        if has_spaces(pattern):
            raise RuleError("EINVAL")
        for existing in self.keys:
            if existing.pattern == pattern:
                existing.flags |= flags
                break
        else:
            self.keys.append(KeyPattern(pattern, flags))
        self.all_keys = False

    def _add_channel(self, pattern: bytes) -> None:
        if self.all_channels:
            raise RuleError("EISDIR")
        if has_spaces(pattern):
            raise RuleError("EINVAL")
        if pattern not in self.channels:
            self.channels.append(pattern)

    def _allow(self, name: str, catalog: Catalog) -> None:
        if "|" not in name:
            ref = catalog.lookup(name)
            if ref is None:
                raise RuleError("ENOENT")
            self._change(ref, True, catalog)
            self._update_rules(ref.name, True)
            return
        base_name, _, first = name.rpartition("|")
        base = catalog.lookup(base_name)
        if base is None:
            raise RuleError("ENOENT")
        if base.parent is not None:
            raise RuleError("ECHILD")
        if not first:
            raise RuleError("EINVAL")
        if base.subcommands:
            sub = catalog.lookup(name)
            if sub is None:
                raise RuleError("ENOENT")
            self._change(sub, True, catalog)
        else:  # a first argument of a command without subcommands (+select|0)
            allowed = self.firstargs.setdefault(base.name, [])
            if all(arg.lower() != first.lower().encode("latin-1") for arg in allowed):
                allowed.append(first.encode("latin-1"))
        self._update_rules(name, True)

    def _change(self, ref: CommandRef, allow: bool, catalog: Catalog) -> None:
        """Redis's ACLChangeSelectorPerm: the command and its subcommands."""
        self._set_bit(ref.name, allow)
        self.firstargs.pop(ref.name, None)
        for sub in ref.subcommands:
            self._set_bit(sub, allow)

    def _set_bit(self, name: str, allow: bool) -> None:
        if allow:
            self.allowed.add(name)
        else:
            self.allowed.discard(name)
            self.all_commands = False

    def _category(self, category: str, allow: bool, catalog: Catalog) -> None:
        if category not in _CATEGORY_SET:
            raise RuleError("ENOENT")
        self._update_rules("@" + category, allow)
        for ref in catalog.in_category(category):
            self._change(ref, allow, catalog)

    def _update_rules(self, rule: str, allow: bool) -> None:
        """Redis's ACLUpdateCommandRules: drop the older rules of the same command (its
        subcommands' too) or category, then append this one."""
        rule = rule.lower()
        self.rules = [r for r in self.rules if not (r[1:] == rule or r[1:].startswith(rule + "|"))]
        self.rules.append(("+" if allow else "-") + rule)

    # -- description ---------------------------------------------------------------------

    def command_rules(self) -> str:
        start = "+@all" if self.future else "-@all"
        return " ".join([start, *self.rules])

    def keys_text(self) -> str:
        return "~*" if self.all_keys else " ".join(k.render() for k in self.keys)

    def channels_text(self) -> str:
        if self.all_channels:
            return "&*"
        return " ".join("&" + ch.decode("utf-8", "surrogateescape") for ch in self.channels)

    def describe(self) -> str:
        """Redis's ACLDescribeSelector: keys, channels, then the command rules."""
        parts: list[str] = []
        if self.all_keys:
            parts.append("~*")
        else:
            parts.extend(k.render() for k in self.keys)
        if self.all_channels:
            parts.append("&*")
        else:
            parts.append("resetchannels")
            parts.extend("&" + ch.decode("utf-8", "surrogateescape") for ch in self.channels)
        parts.append(self.command_rules())
        return " ".join(parts)

    def check_invariants(self, catalog: Catalog) -> None:
        """The rules as shown give back the same permissions (Redis checks this before
        describing a selector), and the patterns are consistent."""
        replayed = Selector()
        replayed.apply(b"+@all" if self.future else b"-@all", catalog)
        for rule in self.rules:
            replayed.apply(rule.encode("latin-1"), catalog)
        same = replayed.allowed == self.allowed and _folded(replayed) == _folded(self)
        require(same, f"rules {self.command_rules()!r} do not give the selector")
        require(
            not self.all_commands or self.allowed == set(catalog.refs),
            "allcommands without every command",
        )
        patterns = [k.pattern for k in self.keys]
        require(len(set(patterns)) == len(patterns), f"key patterns twice: {self.keys!r}")
        require(not (self.all_keys and self.keys), "allkeys with key patterns")
        flags_ok = all(k.flags in (READ, WRITE, READ_WRITE) for k in self.keys)
        require(flags_ok, f"key pattern flags {self.keys!r}")
        require(len(set(self.channels)) == len(self.channels), "channel patterns twice")
        require(not (self.all_channels and self.channels), "allchannels with channel patterns")

    # -- checks --------------------------------------------------------------------------

    def allows_command(self, name: str, argv: Sequence[bytes], first_at: int) -> bool:
        if self.all_commands or name in self.allowed:
            return True
        allowed = self.firstargs.get(name)
        if allowed is None or len(argv) <= first_at:
            return False
        wanted = argv[first_at].lower()
        return any(arg.lower() == wanted for arg in allowed)

    def allows_key(self, key: bytes, needs: int) -> bool:
        if self.all_keys:
            return True
        return any(p.flags & needs == needs and p.matches(key) for p in self.keys)

    def allows_every_key(self, needs: int) -> bool:
        """Any key at all with this access: allkeys, or a ``*`` pattern granting it (Redis's
        ACLSelectorHasUnrestrictedKeyAccess)."""
        if self.all_keys:
            return True
        return any(p.flags & needs == needs and p.pattern == b"*" for p in self.keys)

    def allows_channel(self, channel: bytes, is_pattern: bool) -> bool:
        if self.all_channels:
            return True
        if is_pattern:  # a PSUBSCRIBE pattern must be one of the patterns, literally
            return channel in self.channels
        return any(glob_match(pattern, channel) for pattern in self.channels)


def _folded(selector: Selector) -> dict[str, set[bytes]]:
    """Its first arguments, compared as Redis compares them (case-insensitively)."""
    return {name: {a.lower() for a in args} for name, args in selector.firstargs.items()}


def _permission_prefix(op: bytes) -> tuple[int, int]:
    """The flags of ``%R~``, ``%W~``, ``%RW~`` and the pattern's offset (Redis accepts a
    missing ``~``: the pattern is then empty)."""
    flags = 0
    offset = 1
    while offset < len(op):
        ch = op[offset : offset + 1].upper()
        if ch == b"R" and not flags & READ:
            flags |= READ
        elif ch == b"W" and not flags & WRITE:
            flags |= WRITE
        elif ch == b"~":
            offset += 1
            break
        else:
            raise RuleError("EINVAL")
        offset += 1
    if not flags:
        raise RuleError("EINVAL")
    return flags, offset


@dataclass
class User:
    name: bytes
    enabled: bool = False
    nopass: bool = False
    sanitize_payload: bool = True
    skip_sanitize_payload: bool = False
    passwords: list[str] = field(default_factory=list)
    selectors: list[Selector] = field(default_factory=lambda: [Selector(root=True)])
    #: the root selector may run anything on any key and channel: no check at all
    unrestricted: bool = False
    #: decisions already made, by (command, its first argument) for the commands whose
    #: verdict depends on no other argument (commands/acl.py); emptied by any change
    verdicts: dict[tuple[str, bytes], tuple[int, int]] = field(default_factory=dict)

    @property
    def root(self) -> Selector:
        return self.selectors[0]

    def copy_from(self, other: User) -> None:
        """Take ``other``'s rules, keeping the name (Redis's ACLCopyUser): clients that hold
        this object see the new rules at once."""
        self.enabled = other.enabled
        self.nopass = other.nopass
        self.sanitize_payload = other.sanitize_payload
        self.skip_sanitize_payload = other.skip_sanitize_payload
        self.passwords = list(other.passwords)
        self.selectors = [s.copy() for s in other.selectors]
        self.refresh()

    def clone(self) -> User:
        twin = User(self.name)
        twin.copy_from(self)
        return twin

    def refresh(self) -> None:
        self.verdicts = {}
        root = self.root
        self.unrestricted = root.all_commands and root.all_keys and root.all_channels

    def apply(self, op: bytes, catalog: Catalog, pubsub_default: bool) -> None:
        """One SETUSER rule (Redis's ACLSetUser); raises RuleError. ``pubsub_default``:
        acl-pubsub-default is allchannels."""
        if not op:
            return
        word = op.lower()
        if word == b"on":
            self.enabled = True
        elif word == b"off":
            self.enabled = False
        elif word == b"skip-sanitize-payload":
            self.skip_sanitize_payload, self.sanitize_payload = True, False
        elif word == b"sanitize-payload":
            self.skip_sanitize_payload, self.sanitize_payload = False, True
        elif word == b"nopass":
            self.nopass = True
            self.passwords.clear()
        elif word == b"resetpass":
            self.nopass = False
            self.passwords.clear()
        elif op[:1] in (b">", b"#"):
            self._add_password(op)
        elif op[:1] in (b"<", b"!"):
            self._remove_password(op)
        elif op[:1] == b"(" and op[-1:] == b")":
            self.selectors.append(selector_from(op, catalog, pubsub_default))
        elif word == b"clearselectors":
            del self.selectors[1:]
        elif word == b"reset":
            self.reset(catalog, pubsub_default)
        else:
            self.root.apply(op, catalog)

    def reset(self, catalog: Catalog, pubsub_default: bool) -> None:
        for rule in (b"resetpass", b"resetkeys", b"resetchannels"):
            self.apply(rule, catalog, pubsub_default)
        if pubsub_default:
            self.apply(b"allchannels", catalog, pubsub_default)
        for rule in (b"off", b"sanitize-payload", b"clearselectors", b"-@all"):
            self.apply(rule, catalog, pubsub_default)

    def _add_password(self, op: bytes) -> None:
        if op[:1] == b">":
            digest = hash_password(op[1:])
        elif not _valid_hash(op[1:]):
            raise RuleError("EBADMSG")
        else:
            digest = op[1:].decode()
        if digest not in self.passwords:
            self.passwords.append(digest)
        self.nopass = False

    def _remove_password(self, op: bytes) -> None:
        if op[:1] == b"<":
            digest = hash_password(op[1:])
        elif not _valid_hash(op[1:]):
            raise RuleError("EBADMSG")
        else:
            digest = op[1:].decode()
        if digest not in self.passwords:
            raise RuleError("ENODEV")
        self.passwords.remove(digest)

    def flags(self) -> list[str]:
        """In Redis's order (ACLUserFlags)."""
        shown = [
            ("on", self.enabled),
            ("off", not self.enabled),
            ("nopass", self.nopass),
            ("skip-sanitize-payload", self.skip_sanitize_payload),
            ("sanitize-payload", self.sanitize_payload),
        ]
        return [name for name, on in shown if on]

    def describe(self) -> str:
        """Redis's ACLDescribeUser (ACL LIST without "user <name> ")."""
        parts = [*self.flags(), *("#" + p for p in self.passwords), self.root.describe()]
        text = " ".join(parts)
        for selector in self.selectors[1:]:
            text += f" ({selector.describe()})"
        return text

    def check_invariants(self, catalog: Catalog) -> None:
        roots = [s.root for s in self.selectors]
        require(roots[0] and not any(roots[1:]), "the root selector must come first, once")
        require(not (self.nopass and self.passwords), "nopass with passwords")
        require(len(set(self.passwords)) == len(self.passwords), "a password twice")
        hashes_ok = all(_valid_hash(p.encode()) for p in self.passwords)
        require(hashes_ok, f"password hashes {self.passwords!r}")
        require(
            self.sanitize_payload != self.skip_sanitize_payload,
            "sanitize-payload and skip-sanitize-payload together",
        )
        root = self.root
        open_root = root.all_commands and root.all_keys and root.all_channels
        require(self.unrestricted == open_root, "unrestricted does not follow the root selector")
        for selector in self.selectors:
            selector.check_invariants(catalog)

    def check_password(self, password: bytes) -> bool:
        if not self.enabled:
            return False
        if self.nopass:
            return True
        digest = hash_password(password)
        # every stored hash is compared, in constant time each
        matches = [hmac.compare_digest(digest, stored) for stored in self.passwords]
        return any(matches)


def selector_from(op: bytes, catalog: Catalog, pubsub_default: bool) -> Selector:
    """A ``(rule rule ...)`` selector (Redis's aclCreateSelectorFromOpSet)."""
    selector = Selector(all_channels=pubsub_default)
    for rule in split_words(op[1:-1]):
        selector.apply(rule, catalog)
    return selector


def split_words(text: bytes) -> list[bytes]:
    """Words split on blanks (sdssplitargs without quotes, which rules never need)."""
    return text.split()


def merge_selectors(ops: Sequence[bytes]) -> list[bytes] | int:
    """Redis's ACLMergeSelectorArguments: a selector spread over several arguments
    ("(~a" "+get)") joined into one; an unclosed one gives the index where it opened."""
    merged: list[bytes] = []
    opened = -1
    current = b""
    for index, op in enumerate(ops):
        if opened < 0 and op[:1] == b"(" and op[-1:] != b")":
            current, opened = op, index
            continue
        if opened >= 0:
            current += b" " + op
            if op[-1:] == b")":
                merged.append(current)
                opened = -1
            continue
        merged.append(op)
    return opened if opened >= 0 else merged


def new_user(name: bytes, pubsub_default: bool) -> User:
    """A user as ACL SETUSER creates it: off, no password, no commands, no keys."""
    user = User(name)
    user.root.all_channels = pubsub_default
    user.refresh()
    return user


def default_user(catalog: Catalog) -> User:
    user = new_user(b"default", False)
    for rule in (b"+@all", b"~*", b"&*", b"on", b"nopass"):
        user.apply(rule, catalog, False)
    user.refresh()
    return user
