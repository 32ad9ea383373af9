"""The users of a server, by name, with the default user always there (Redis's ``Users``
radix tree and ``DefaultUser``), the security log, and the rules that change them."""

from __future__ import annotations

from collections.abc import Sequence

from headwater.acl import aclfile
from headwater.acl.log import AclLog
from headwater.acl.users import (
    Catalog,
    RuleError,
    User,
    default_user,
    has_spaces,
    merge_selectors,
    new_user,
)


class AccessControl:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.default = default_user(catalog)
        self.users: dict[bytes, User] = {b"default": self.default}
        self.log = AclLog()
        #: acl-pubsub-default is allchannels: new users may use every channel
        self.pubsub_default = False

    def get(self, name: bytes) -> User | None:
        return self.users.get(name)

    def names(self) -> list[bytes]:
        return sorted(self.users)

    def auth_required(self) -> bool:
        """A connection that did not authenticate may not run commands (Redis's
        authRequired): the default user has a password or is off."""
        return not self.default.nopass or not self.default.enabled

    def authenticate(self, name: bytes, password: bytes) -> User | None:
        user = self.users.get(name)
        if user is None or not user.check_password(password):
            return None
        return user

    def staged(self, name: bytes, ops: Sequence[bytes]) -> tuple[User | None, User]:
        """ACL SETUSER's rules applied to a copy of the user (a new one if it does not
        exist): the user as it is and the copy. Raises SetUserError."""
        merged = merge_selectors(ops)
        if isinstance(merged, int):
            raise SetUserError(
                f"Unmatched parenthesis in acl selector starting at '{_text(ops[merged])}'."
            )
        current = self.users.get(name)
        copy = current.clone() if current is not None else new_user(name, self.pubsub_default)
        for op in merged:
            try:
                copy.apply(op, self.catalog, self.pubsub_default)
            except RuleError as exc:
                raise SetUserError(f"Error in ACL SETUSER modifier '{_text(op)}': {exc}") from None
        copy.refresh()
        return current, copy

    def commit(self, current: User | None, copy: User) -> User:
        """Keep a staged user: an existing one takes the copy's rules in place."""
        if current is None:
            self.users[copy.name] = copy
            return copy
        current.copy_from(copy)
        return current

    def delete(self, name: bytes) -> User | None:
        return self.users.pop(name, None)

    def set_default_password(self, password: str) -> None:
        """requirepass: the default user's only password, or none (Redis's
        ACLUpdateDefaultUserPassword)."""
        self.default.apply(b"resetpass", self.catalog, self.pubsub_default)
        rule = b">" + password.encode() if password else b"nopass"
        self.default.apply(rule, self.catalog, self.pubsub_default)
        self.default.refresh()

    def load_lines(self, lines: Sequence[Sequence[bytes]]) -> str | None:
        """The ``user`` lines of the configuration (Redis's ACLLoadConfiguredUsers), each
        ``[name, rule, ...]``: the first error, as Redis words it, or None once every user
        is in."""
        seen: set[bytes] = set()
        for words in lines:
            name, ops = words[0], words[1:]
            if name in seen:
                return _declaration_error(name, RuleError("EALREADY"))
            seen.add(name)
            if has_spaces(name):
                return "Spaces not allowed in ACL usernames"
            merged = merge_selectors(ops)
            if isinstance(merged, int):
                return _declaration_error(ops[merged], RuleError("EINVAL"))
            user = self.users.get(name)
            if user is None:
                user = self.users[name] = new_user(name, self.pubsub_default)
            else:  # the default user, defined again
                user.reset(self.catalog, self.pubsub_default)
            for op in merged:
                try:
                    user.apply(op, self.catalog, self.pubsub_default)
                except RuleError as exc:
                    return _declaration_error(op, exc)
            user.refresh()
        return None

    def replace_users(self, users: dict[bytes, User]) -> dict[bytes, User]:
        """ACL LOAD's new users in force; the default user keeps its object (clients hold
        it). Returns the users as they were (copies for the default user)."""
        old = dict(self.users)
        old[b"default"] = self.default.clone()
        self.default.copy_from(users[b"default"])
        users[b"default"] = self.default
        self.users = users
        return old

    def read_file(self, filename: str) -> dict[bytes, User] | str:
        return aclfile.read_users(filename, self.catalog, self.pubsub_default)


class SetUserError(Exception):
    """An ACL SETUSER that changes nothing; the message is Redis's."""


def _declaration_error(word: bytes, exc: RuleError) -> str:
    return f"Error in user declaration '{_text(word)}': {exc}"


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
