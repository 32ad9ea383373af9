"""A region's local consumer-group state in its log: ``AALOCAL`` lines.

Consumers, PELs, delivery cursors, a group's last-delivered-id and entries-read are local to
a region (spec/ACTIVE-ACTIVE.md): they make no effect and are never shipped to peers. Yet a
restart must find them as they were, so the server writes them to its own AOF as *state*, not
as commands: after a command changed a group locally, one line gives the new value of
everything it touched (``RegionGroup.touched``, ``touched_consumers``) and the group's
cursors and counters::

    AALOCAL <key> <group> <last-id> <entries-read> <n> (<sub> <id>) * n <m> item * m

    item:  P <sub> <id> <consumer> <delivery-ms> <count>   the pending entry is this
           A <sub> <id>                                    no such pending entry
           N <sub> <id> <count>                            nacked (XNACK): nobody's, at
                                                           the tail of the NACK zone
           U <name> <seen-ms> <active-ms>                  the consumer, with its times
           X <name>                                        no such consumer

The N items come last, in the zone's order: every nacked entry the line touched was nacked
after every untouched one, so appending them in that order rebuilds the zone's order.
Replaying assigns those values (``apply_local``), so the rules that decided them live only in
the commands that ran live (as Redis logs XCLAIM … FORCE rather than XREADGROUP). A line
for a group that no longer exists when it is replayed changes nothing; nor can one arrive
before its group (the log is in application order).
"""

from __future__ import annotations

from collections.abc import Iterator

from headwater.activeactive.envelope import BAD_EFFECT
from headwater.activeactive.rstream import RegionGroup, RegionStream
from headwater.stream.ids import StreamID, format_id, parse_id


def local_line(key: bytes, group: RegionGroup) -> list[bytes]:
    """The group's local changes since the last line (which this one drains)."""
    line = [b"AALOCAL", key, group.name, format_id(group.last_id), b"%d" % group.entries_read]
    line.append(b"%d" % len(group.cursors))
    for sub, sid in sorted(group.cursors.items()):
        line += [b"%d" % sub, format_id(sid)]
    items: list[bytes] = []
    count = 0
    for name in sorted(group.touched_consumers):
        times = group.times.get(name)
        if times is None:
            items += [b"X", name]
        else:
            items += [b"U", name, b"%d" % times[0], b"%d" % times[1]]
        count += 1
    for sid, sub in sorted(group.touched):
        pending = group.pel.get((sid, sub))
        if pending is None:
            items += [b"A", b"%d" % sub, format_id(sid)]
        elif pending.consumer is None:
            continue  # nacked: below, in the zone's order
        else:
            items += [b"P", b"%d" % sub, format_id(sid), pending.consumer]
            items += [b"%d" % pending.delivery_ms, b"%d" % pending.count]
        count += 1
    for tag in group.nacked:
        if tag in group.touched:
            items += [b"N", b"%d" % tag[1], format_id(tag[0]), b"%d" % group.pel[tag].count]
            count += 1
    group.touched.clear()
    group.touched_consumers.clear()
    return [*line, b"%d" % count, *items]


def _int(word: bytes) -> int:
    text = word[1:] if word[:1] == b"-" else word
    if not text.isdigit():
        raise BAD_EFFECT
    return int(word)


def apply_local(streams: dict[bytes, RegionStream], line: list[bytes]) -> None:
    """Replay an ``AALOCAL`` line; raises BAD_EFFECT on a malformed one."""
    if len(line) < 7:
        raise BAD_EFFECT
    words = iter(line[1:])
    key, name = next(words), next(words)
    last_id, entries_read = parse_id(next(words)), _int(next(words))
    cursors: dict[int, StreamID] = {}
    try:
        for _ in range(_int(next(words))):
            sub = _int(next(words))
            cursors[sub] = parse_id(next(words))
        items = [_item(words) for _ in range(_int(next(words)))]
    except StopIteration:
        raise BAD_EFFECT from None
    if next(words, None) is not None:
        raise BAD_EFFECT
    record = streams.get(key)
    group = None if record is None else record.groups.get(name)
    if group is None:
        return
    group.last_id, group.entries_read, group.cursors = last_id, entries_read, cursors
    for item in items:
        kind = item[0]
        if kind == b"U":
            group.consumer(item[1])
            group.times[item[1]] = [_int(item[2]), _int(item[3])]
        elif kind == b"X":
            group.delete_consumer(item[1])
        else:
            tag = (parse_id(item[2]), _int(item[1]))
            if kind == b"A":
                if tag in group.pel:
                    group.forget(tag)
            elif kind == b"N":
                group.release(tag, _int(item[3]))
            else:
                group.claim(tag, item[3], _int(item[4]), _int(item[5]))
    group.touched.clear()
    group.touched_consumers.clear()


def _item(words: Iterator[bytes]) -> list[bytes]:
    kind = next(words)
    size = {b"P": 5, b"A": 2, b"N": 3, b"U": 3, b"X": 1}.get(kind)
    if size is None:
        raise BAD_EFFECT
    item = [kind]
    for _ in range(size):
        item.append(next(words))
    return item
