"""The ACL file: one ``user <name> <rule> ...`` line per user (Redis's ACLLoadFromFile and
ACLSaveToFile). Loading is all or nothing: any bad line leaves the users as they were, and
the error names every problem found, line by line, as Redis's does."""

from __future__ import annotations

import os

from headwater.acl.users import (
    Catalog,
    RuleError,
    User,
    default_user,
    has_spaces,
    merge_selectors,
    new_user,
)


def parse_users(
    text: bytes, filename: str, catalog: Catalog, pubsub_default: bool
) -> dict[bytes, User] | str:
    """The users the file defines (``default`` made if it has none), or the error text."""
    users: dict[bytes, User] = {}
    errors = ""
    for number, raw in enumerate(text.split(b"\n"), 1):
        line = raw.strip(b" \t\r\n")
        if not line:
            continue
        words = line.split(b" ")
        if words[0] != b"user" or len(words) < 2:
            errors += (
                f"{filename}:{number} should start with user keyword followed by the username. "
            )
            continue
        name = words[1]
        if has_spaces(name):
            errors += (
                f"'{filename}:{number}: username '{_text(name)}' contains invalid characters. "
            )
            continue
        if name in users:
            errors += f"WARNING: Duplicate user '{_text(name)}' found on line {number}. "
            continue
        user = users[name] = new_user(name, pubsub_default)
        errors += _apply_line(user, words[2:], f"{filename}:{number}", catalog, pubsub_default)
    if errors:
        return (
            errors + "WARNING: ACL errors detected, no change to the previously active ACL "
            "rules was performed"
        )
    if b"default" not in users:
        users[b"default"] = default_user(catalog)
    return users


def _apply_line(
    user: User, ops: list[bytes], where: str, catalog: Catalog, pubsub_default: bool
) -> str:
    merged = merge_selectors(ops)
    if isinstance(merged, int):
        return f"{where}: Unmatched parenthesis in selector definition."
    errors = ""
    syntax_error = False
    for op in merged:
        op = op.strip(b"\t\r\n")
        try:
            user.apply(op, catalog, pubsub_default)
        except RuleError as exc:
            if exc.reason == "ENOENT":
                errors += f"{where}: Error in applying operation '{_text(op)}': {exc}. "
            elif not syntax_error:
                errors += f"{where}: {exc}. "
                syntax_error = True
    user.refresh()
    return errors


def read_users(filename: str, catalog: Catalog, pubsub_default: bool) -> dict[bytes, User] | str:
    try:
        with open(filename, "rb") as f:
            text = f.read()
    except OSError as exc:
        return f"Error loading ACLs, opening file '{filename}': {os.strerror(exc.errno or 0)}"
    return parse_users(text, filename, catalog, pubsub_default)


def render_users(users: dict[bytes, User]) -> bytes:
    return b"".join(
        b"user " + name + b" " + users[name].describe().encode("utf-8", "surrogateescape") + b"\n"
        for name in sorted(users)
    )


def write_users(filename: str, users: dict[bytes, User]) -> None:
    """Write the file anew (a temporary file, fsync, rename, fsync of the directory);
    raises OSError."""
    temporary = f"{filename}.tmp-{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            f.write(render_users(users))
            f.flush()
            os.fsync(f.fileno())
        os.rename(temporary, filename)
        directory = os.open(os.path.dirname(os.path.abspath(filename)), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
