"""XINFO STREAM [FULL], GROUPS, CONSUMERS and HELP (STREAMS-REFERENCE §8, Redis 8.8 shapes).

Replies are maps (RESP3) or flat arrays (RESP2) whose field order is Redis's. Groups and
consumers are listed in name order, as Redis's radix trees keep them.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from headwater.commands.args import parse_int
from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.commands.groups import nogroup_for_key
from headwater.errors import NO_SUCH_KEY, subcommand_syntax
from headwater.resp.types import Reply
from headwater.stream.groups import UNKNOWN, Consumer, Group, key_id, lag
from headwater.stream.ids import format_id
from headwater.stream.stream import Stream


def _existing_stream(c: Client, key: bytes) -> Any:
    stream = c.server.streams.stream(c, key)
    if stream is None:
        raise NO_SUCH_KEY
    return stream


def _entries_read(group: Group) -> int | None:
    return None if group.entries_read == UNKNOWN else group.entries_read


# ---------------------------------------------------------------------------------------------
# XINFO STREAM


def _stream_head(stream: Stream) -> dict[bytes, Reply]:
    idmp = stream.idmp
    return {
        b"length": stream.length,
        b"radix-tree-keys": len(stream.nodes),
        b"radix-tree-nodes": max(len(stream.nodes) * 2, 1) if stream.nodes else 1,
        b"last-generated-id": format_id(stream.last_id),
        b"max-deleted-entry-id": format_id(stream.max_deleted_id),
        b"entries-added": stream.entries_added,
        b"recorded-first-entry-id": format_id(stream.first_id),
        b"idmp-duration": stream.idmp_duration,
        b"idmp-maxsize": stream.idmp_maxsize,
        b"pids-tracked": len(idmp.producers) if idmp is not None else 0,
        b"iids-tracked": idmp.tracked if idmp is not None else 0,
        b"iids-added": idmp.added if idmp is not None else 0,
        b"iids-duplicates": idmp.duplicates if idmp is not None else 0,
    }


def parse_xinfo_stream(argv: list[bytes]) -> tuple[bool, int]:
    """XINFO STREAM key [FULL [COUNT count]]: (FULL given, count; 10 by default or when
    negative, 0 for all), for a region's XINFO STREAM too."""
    full, count = False, 10
    if len(argv) > 3:
        if argv[3].upper() != b"FULL" or len(argv) not in (4, 6):
            raise subcommand_syntax(argv[1], "XINFO")
        if len(argv) == 6:
            if argv[4].upper() != b"COUNT":
                raise subcommand_syntax(argv[1], "XINFO")
            count = parse_int(argv[5])
            if count < 0:
                count = 10
        full = True
    return full, count


def cmd_xinfo_stream(c: Client, argv: list[bytes]) -> Reply:
    """XINFO STREAM key [FULL [COUNT count]]"""
    stream = _existing_stream(c, argv[2])
    full, count = parse_xinfo_stream(argv)
    return c.server.streams.info_stream(c, stream, full, count)


def _by_name(stream: Stream) -> list[Group]:
    return [stream.groups[name] for name in sorted(stream.groups)]


def _full_group(stream: Stream, group: Group, count: int) -> dict[bytes, Reply]:
    pel = group.pel
    keys = islice(group.order, count) if count else group.order
    pending: list[Reply] = []
    for key in keys:
        delivery_ms, delivered, owner = pel[key]
        name = b"" if owner is None else owner  # nacked: nobody's, delivery time 0
        pending.append([format_id(key_id(key)), name, delivery_ms, delivered])
    consumers = [_full_consumer(group, group.consumers[n], count) for n in sorted(group.consumers)]
    return {
        b"name": group.name,
        b"last-delivered-id": format_id(group.last_id),
        b"entries-read": _entries_read(group),
        b"lag": lag(stream, group),
        b"pel-count": len(pel),
        b"nacked-count": len(group.nacked),
        b"pending": pending,
        b"consumers": consumers,
    }


def _full_consumer(group: Group, consumer: Consumer, count: int) -> dict[bytes, Reply]:
    keys = islice(consumer.pel, count) if count else consumer.pel
    pending: list[Reply] = []
    for key in keys:
        delivery_ms, delivered, _ = group.pel[key]
        pending.append([format_id(key_id(key)), delivery_ms, delivered])
    return {
        b"name": consumer.name,
        b"seen-time": consumer.seen_time,
        b"active-time": consumer.active_time,
        b"pel-count": len(consumer.pel),
        b"pending": pending,
    }


# ---------------------------------------------------------------------------------------------
# XINFO GROUPS / CONSUMERS


def cmd_xinfo_groups(c: Client, argv: list[bytes]) -> Reply:
    """XINFO GROUPS key"""
    return c.server.streams.info_groups(c, _existing_stream(c, argv[2]))


def cmd_xinfo_consumers(c: Client, argv: list[bytes]) -> Reply:
    """XINFO CONSUMERS key group"""
    store = c.server.streams
    stream = _existing_stream(c, argv[2])
    group = store.group(stream, argv[3])
    if group is None:
        raise nogroup_for_key(argv[2], argv[3])
    return store.info_consumers(c, stream, group)


XINFO_HELP = [
    b"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"CONSUMERS <key> <groupname>",
    b"    Show consumers of <groupname>.",
    b"GROUPS <key>",
    b"    Show the stream consumer groups.",
    b"STREAM <key> [FULL [COUNT <count>]",
    b"    Show information about the stream.",
    b"HELP",
    b"    Print this help.",
]


SPECS = (
    spec(
        "xinfo",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("xinfo|stream", -3, "readonly", (2, 2, 1), cmd_xinfo_stream),
            spec("xinfo|groups", 3, "readonly", (2, 2, 1), cmd_xinfo_groups),
            spec("xinfo|consumers", 4, "readonly", (2, 2, 1), cmd_xinfo_consumers),
            spec("xinfo|help", 2, "loading stale", handler=help_handler(XINFO_HELP)),
        ),
    ),
)
