"""IDMP configuration and replay: XCFGSET, XIDMPRECORD (Redis 8.6), and the seed's own
``XIDMP CFGGET`` / ``XIDMP CFGSET`` spelling, which users of the seed document will type.

XADD's IDMP/IDMPAUTO options live with XADD (``streams.py``); the maps in ``stream/idmp.py``.
"""

from __future__ import annotations

from typing import Any

from headwater.commands.args import parse_int
from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.errors import NO_SUCH_KEY, SYNTAX, err
from headwater.keyspace import Database
from headwater.ops.change import Written
from headwater.ops.streams import expire_iids
from headwater.resp.types import Reply
from headwater.stream.idmp import DURATION_RANGE, MAXSIZE_RANGE, IdmpState
from headwater.stream.ids import StreamID, parse_id
from headwater.stream.stream import Stream

NO_SUCH_MESSAGE = err("No such message in stream")


def _existing_stream(c: Client, key: bytes) -> Any:
    stream = c.server.streams.stream(c, key, read=False)
    if stream is None:
        raise NO_SUCH_KEY
    return stream


def parse_idmp_settings(
    argv: list[bytes], start: int, names: tuple[bytes, bytes]
) -> tuple[int | None, int | None]:
    """``[<duration-name> d] [<maxsize-name> m]`` with XCFGSET's rules and errors (which
    name the options as the caller spells them)."""
    duration_name, maxsize_name = (name.decode() for name in names)
    duration: int | None = None
    maxsize: int | None = None
    i = start
    while i < len(argv):
        token = argv[i].upper()
        if i + 1 >= len(argv) or token not in names:
            raise SYNTAX
        value = parse_int(argv[i + 1])
        if token == names[0]:
            if duration is not None:
                raise err(f"{duration_name} specified multiple times")
            if not DURATION_RANGE[0] <= value <= DURATION_RANGE[1]:
                raise err(f"{duration_name} must be between 1 and 86400 seconds")
            duration = value
        else:
            if maxsize is not None:
                raise err(f"{maxsize_name} specified multiple times")
            if not MAXSIZE_RANGE[0] <= value <= MAXSIZE_RANGE[1]:
                raise err(f"{maxsize_name} must be between 1 and 10000 entries")
            maxsize = value
        i += 2
    if duration is None and maxsize is None:
        raise err("At least one parameter must be specified")
    return duration, maxsize


def apply_idmp_settings(
    c: Client, key: bytes, stream: Stream, duration: int | None, maxsize: int | None
) -> bool:
    """Set what differs and then forget every iid; False (nothing changed, nothing
    propagated) when nothing differs."""
    changed = (duration is not None and duration != stream.idmp_duration) or (
        maxsize is not None and maxsize != stream.idmp_maxsize
    )
    if not changed:
        return False
    if duration is not None:
        stream.idmp_duration = duration
    if maxsize is not None:
        stream.idmp_maxsize = maxsize
    if stream.idmp is not None:
        stream.idmp.clear()
    c.db.signal_modified(key)
    return True


def cmd_xcfgset(c: Client, argv: list[bytes]) -> Reply | Written:
    """XCFGSET key [IDMP-DURATION duration] [IDMP-MAXSIZE maxsize]"""
    stream = _existing_stream(c, argv[1])
    duration, maxsize = parse_idmp_settings(argv, 2, (b"IDMP-DURATION", b"IDMP-MAXSIZE"))
    return c.server.streams.configure_idmp(c, argv[1], stream, duration, maxsize)


def parse_xidmprecord(argv: list[bytes]) -> StreamID:
    """XIDMPRECORD key pid iid stream-id: the stream ID, pid and iid checked (a region's
    XIDMPRECORD parses the same)."""
    sid = parse_id(argv[4])
    if not argv[2]:
        raise err("producer ID must be non-empty")
    if not argv[3]:
        raise err("idempotent ID must be non-empty")
    return sid


def recorded(idmp: IdmpState | None, argv: list[bytes], sid: StreamID) -> bool:
    """XIDMPRECORD's pid/iid (argv[2], argv[3]) already recorded for sid (nothing to do); an
    error if recorded for another ID."""
    known = idmp.lookup(argv[2], argv[3]) if idmp is not None else None
    if known is not None and known != sid:
        raise err("IID already exists for this producer with a different stream ID")
    return known is not None


def cmd_xidmprecord(c: Client, argv: list[bytes]) -> Reply | Written:
    """XIDMPRECORD key pid iid stream-id: what an AOF rewrite emits for each tracked iid."""
    sid = parse_xidmprecord(argv)
    stream = _existing_stream(c, argv[1])
    return c.server.streams.record_iid(c, argv, stream, sid)


# ---------------------------------------------------------------------------------------------
# XIDMP CFGGET / CFGSET: the seed's syntax


def parse_cfgget(argv: list[bytes]) -> list[bytes]:
    """XIDMP CFGGET key [DURATION] [MAXSIZE]: the settings asked for, lower case, each once
    (none: both; a region's CFGGET parses the same)."""
    wanted: list[bytes] = []
    for raw in argv[3:]:
        name = raw.upper()
        if name not in (b"DURATION", b"MAXSIZE") or name.lower() in wanted:
            raise SYNTAX
        wanted.append(name.lower())
    return wanted


def cmd_xidmp_cfgget(c: Client, argv: list[bytes]) -> Reply:
    """XIDMP CFGGET key [DURATION] [MAXSIZE] → a map of the asked (default: both) settings."""
    stream = _existing_stream(c, argv[2])
    wanted = parse_cfgget(argv)
    duration, maxsize = c.server.streams.idmp_settings(c, stream)
    values = {b"duration": duration, b"maxsize": maxsize}
    return {name: values[name] for name in (wanted or list(values))}


def cmd_xidmp_cfgset(c: Client, argv: list[bytes]) -> Reply | Written:
    """XIDMP CFGSET key [DURATION duration] [MAXSIZE maxsize]: XCFGSET in the seed's words."""
    stream = _existing_stream(c, argv[2])
    duration, maxsize = parse_idmp_settings(argv, 3, (b"DURATION", b"MAXSIZE"))
    return c.server.streams.configure_idmp(c, argv[2], stream, duration, maxsize)


XIDMP_HELP = [
    b"XIDMP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"CFGGET <key> [DURATION] [MAXSIZE]",
    b"    Show the stream's idempotency settings (all of them by default).",
    b"CFGSET <key> [DURATION <seconds>] [MAXSIZE <iids>]",
    b"    Change them, like XCFGSET; a changed value forgets every tracked iid.",
    b"HELP",
    b"    Print this help.",
]


SPECS = (
    spec("xcfgset", -2, "write fast", (1, 1, 1), cmd_xcfgset),
    spec("xidmprecord", 5, "write denyoom fast", (1, 1, 1), cmd_xidmprecord),
    spec(
        "xidmp",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("xidmp|cfgget", -3, "readonly fast", (2, 2, 1), cmd_xidmp_cfgget),
            spec("xidmp|cfgset", -3, "write fast", (2, 2, 1), cmd_xidmp_cfgset),
            spec("xidmp|help", 2, "loading stale", handler=help_handler(XIDMP_HELP)),
        ),
    ),
)


def expire_idmp(db: Database, now_ms: int) -> int:
    """The once-a-second cron: forget iids older than each stream's idmp-duration, walking
    every producer from its oldest iid. Returns how many were forgotten."""
    expired = 0
    for key in list(db.idmp_keys):
        stream = db.data.get(key)
        if not isinstance(stream, Stream) or stream.idmp is None or not stream.idmp.producers:
            db.idmp_keys.discard(key)
            continue
        expired += expire_iids(stream.idmp, now_ms, stream.idmp_duration)
    return expired
