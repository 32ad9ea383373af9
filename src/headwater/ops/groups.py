"""Consumer-group write operations shared by the command handlers and AOF replay (the
``XCLAIM … JUSTID LASTID`` effects every delivery produces). Each returns the changes it made;
the effect lines are the caller's (handlers build them; replay applies them)."""

from __future__ import annotations

from headwater.stream.groups import Consumer, Group
from headwater.stream.ids import StreamID


def touch_consumer(group: Group, name: bytes, now_ms: int) -> tuple[Consumer, int]:
    """The named consumer with its seen time set to now, and the changes: creating it on
    first use counts as one."""
    consumer, created = group.consumer(name, now_ms)
    consumer.seen_time = now_ms
    return consumer, int(created)


def move_last_id(group: Group, last_id: StreamID) -> bool:
    """XCLAIM's LASTID: the group's position moves forward only."""
    if last_id > group.last_id:
        group.last_id = last_id
        return True
    return False


def claim_entry(
    group: Group, key: int, consumer: Consumer, delivery_ms: int, count: int, now_ms: int
) -> int:
    """Make a pending entry (or a new one, for FORCE) the consumer's; returns the changes."""
    group.transfer(key, consumer, delivery_ms, count)
    consumer.active_time = now_ms
    return 1


def forget_entry(group: Group, key: int) -> int:
    """The entry is gone from the stream: so is its NACK (if any); returns the changes."""
    return int(group.ack(key))
