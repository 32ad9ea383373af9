"""What MONITOR and SLOWLOG show of a command's arguments: secrets redacted where Redis
redacts them (its ``redactClientCommandArgument`` calls: AUTH, HELLO … AUTH, CONFIG SET of a
sensitive parameter, ACL SETUSER, GETUSER and DELUSER)."""

from __future__ import annotations

REDACTED = b"(redacted)"
#: the parameters Redis flags SENSITIVE_CONFIG
SENSITIVE_CONFIGS = frozenset(
    (
        b"masteruser",
        b"masterauth",
        b"requirepass",
        b"tls-key-file-pass",
        b"tls-client-key-file-pass",
    )
)
#: the ACL subcommands whose arguments are secrets: every one, GETUSER's one user
_ACL_SECRET = frozenset((b"setuser", b"getuser", b"deluser"))


def redacted(argv: list[bytes]) -> list[bytes]:
    """``argv`` with its secrets replaced by ``(redacted)`` (argv itself when it has none)."""
    name = argv[0].lower()
    if name == b"auth":
        return [argv[0]] + [REDACTED] * (len(argv) - 1)
    if name == b"hello":
        return _hello(argv)
    if name == b"config" and len(argv) > 3 and argv[1].lower() == b"set":
        return _config_set(argv)
    if name == b"acl" and len(argv) > 2 and argv[1].lower() in _ACL_SECRET:
        hidden = 1 if argv[1].lower() == b"getuser" else len(argv) - 2
        return [*argv[:2], *[REDACTED] * hidden, *argv[2 + hidden :]]
    return argv


def _hello(argv: list[bytes]) -> list[bytes]:
    shown = list(argv)
    for i in range(2, len(argv) - 2):
        if argv[i].upper() == b"AUTH":
            shown[i + 1] = shown[i + 2] = REDACTED
            break
    return shown


def _config_set(argv: list[bytes]) -> list[bytes]:
    shown = list(argv)
    for i in range(2, len(argv) - 1, 2):
        if argv[i].lower() in SENSITIVE_CONFIGS:
            shown[i + 1] = REDACTED
    return shown
