"""Error replies.

A ``ReplyError`` carries its code as a field (``ERR``, ``WRONGTYPE``, ``NOAUTH`` …) and is
encoded on the wire as ``-{code} {msg}``. Handlers raise them; the engine turns them into
replies and counts them per code for ``INFO errorstats``.
"""

from __future__ import annotations


class ReplyError(Exception):
    __slots__ = ("code", "msg")

    #: already counted in INFO errorstats where it arose (a script returning the error reply
    #: of a command it ran): the engine does not count it again
    counted = False

    def __init__(self, code: str, msg: str) -> None:
        super().__init__(f"{code} {msg}")
        self.code = code
        self.msg = msg

    def line(self) -> bytes:
        """The error as one RESP line without the leading ``-``; CR/LF become spaces."""
        text = f"{self.code} {self.msg}" if self.msg else self.code
        if "\r" in text or "\n" in text:
            text = text.replace("\r", " ").replace("\n", " ")
        return text.encode("utf-8", "surrogateescape")


class ScriptReplyError(ReplyError):
    """An error reply whose text is exactly what the script gave (``{err=' '}`` included)."""

    __slots__ = ("counted", "text")

    def __init__(self, text: bytes, counted: bool = False) -> None:
        code, _, msg = text.decode("utf-8", "surrogateescape").partition(" ")
        super().__init__(code, msg)
        self.text = text
        self.counted = counted

    def line(self) -> bytes:
        return self.text.replace(b"\r", b" ").replace(b"\n", b" ")


class InvariantViolation(Exception):
    """A data structure's ``check_invariants()`` found it broken. A plain ``Exception``: raised
    explicitly, so the checks run under ``python -O`` too (an ``assert`` would vanish), and not
    an ``AssertionError`` subclass, which mypyc cannot compile."""


def require(condition: bool, message: str) -> None:
    """One check of a ``check_invariants()``: raises ``InvariantViolation(message)`` unless
    ``condition`` holds."""
    if not condition:
        raise InvariantViolation(message)


def err(msg: str) -> ReplyError:
    """A plain ``-ERR msg`` error."""
    return ReplyError("ERR", msg)


SYNTAX = err("syntax error")
WRONGTYPE = ReplyError("WRONGTYPE", "Operation against a key holding the wrong kind of value")
NO_SUCH_KEY = err("no such key")
NOT_INTEGER = err("value is not an integer or out of range")
NOT_FLOAT = err("value is not a valid float")
OVERFLOW = err("increment or decrement would overflow")
NOAUTH = ReplyError("NOAUTH", "Authentication required.")
#: out of memory with nothing to evict (engine/eviction.py)
OOM = ReplyError("OOM", "command not allowed when used memory > 'maxmemory'.")
WRONGPASS = ReplyError("WRONGPASS", "invalid username-password pair or user is disabled.")
NOPROTO = ReplyError("NOPROTO", "unsupported protocol version")
DB_INDEX_OUT_OF_RANGE = err("DB index is out of range")
INVALID_EXPIRE = "invalid expire time in '{}' command"
EXECABORT = ReplyError("EXECABORT", "Transaction discarded because of previous errors.")
MULTI_NESTED = err("MULTI calls can not be nested")
EXEC_WITHOUT_MULTI = err("EXEC without MULTI")
DISCARD_WITHOUT_MULTI = err("DISCARD without MULTI")
WATCH_IN_MULTI = err("WATCH inside MULTI is not allowed")
MAX_CLIENTS = err("max number of clients reached")
UNBLOCKED = ReplyError("UNBLOCKED", "client unblocked via CLIENT UNBLOCK")


def wrong_arity(name: str) -> ReplyError:
    return err(f"wrong number of arguments for '{name}' command")


def c_string(raw: bytes) -> bytes:
    """What C's ``%s`` prints of an sds: everything before the first NUL."""
    return raw.split(b"\0", 1)[0]


def c_text(raw: bytes, limit: int | None = None) -> str:
    """``c_string`` as text for an error message (``%.128s`` when limit is 128)."""
    return c_string(raw)[:limit].decode("utf-8", "surrogateescape")


def unknown_subcommand(sub: bytes, container: str) -> ReplyError:
    return err(f"unknown subcommand '{c_text(sub, 128)}'. Try {container} HELP.")


def subcommand_syntax(sub: bytes, container: str) -> ReplyError:
    """Redis's addReplySubcommandSyntaxError: a known subcommand with bad arguments."""
    return err(
        f"unknown subcommand or wrong number of arguments for '{c_text(sub, 128)}'. "
        f"Try {container} HELP."
    )
