"""The replication stream of a Redis replica (issue 35): Headwater's stream rewritten for
Redis 7.0 (replication/dialect.py), with the two offsets kept apart.

A Redis replica counts the bytes it received; when a rewrite changed a command's length,
that count is no longer the primary's offset. ``RedisStream`` remembers, chunk by chunk,
the primary's offset that each count of sent bytes stands for, so that the replica's
``REPLCONF ACK`` still tells WAIT (and the failover's catch-up) how far it is, in the
primary's terms. A partial resync is granted to a Redis replica only where the stream it
missed passes unchanged (``continues_unchanged``): otherwise the two offsets would not
meet, and it gets a full sync.
"""

from __future__ import annotations

from collections import deque

import hiredis

from headwater.replication.dialect import for_redis_70
from headwater.resp.encoder import encode_command


class RedisStream:
    def __init__(self, offset: int) -> None:
        """``offset``: the primary's offset where this replica's stream starts (its
        snapshot's, or where its partial resync continues); both counts start there."""
        self._reader = hiredis.Reader()
        self.primary_offset = offset
        self.sent_offset = offset
        #: (sent bytes, the primary's offset they stand for), oldest first
        self._marks: deque[tuple[int, int]] = deque()
        #: commands left out (what Redis 7.0 has no place for)
        self.dropped = 0
        #: the primary's offset its ACKs reached
        self._acked = offset

    def clone(self) -> RedisStream:
        """Another replica joining this one's snapshot gets what it got since, and its
        counts (the stream only ever holds whole commands: no partial one to copy)."""
        twin = RedisStream(0)
        twin.primary_offset, twin.sent_offset = self.primary_offset, self.sent_offset
        twin._marks = deque(self._marks)
        twin._acked, twin.dropped = self._acked, self.dropped
        return twin

    def translate(self, data: bytes) -> bytes:
        """The bytes to send for ``data`` (whole commands of the primary's stream)."""
        self._reader.feed(data)
        out = bytearray()
        argv = self._reader.gets()
        while argv is not False:
            commands = for_redis_70(argv) if isinstance(argv, list) else []
            if not commands:
                self.dropped += 1
            for command in commands:
                out += encode_command(command)
            argv = self._reader.gets()
        self.primary_offset += len(data)
        self.sent_offset += len(out)
        self._marks.append((self.sent_offset, self.primary_offset))
        return bytes(out)

    def primary_for(self, acked: int) -> int:
        """The primary's offset a replica's ACK of ``acked`` sent bytes stands for (the
        last chunk it has whole; an ACK inside a chunk counts the chunks before it)."""
        marks = self._marks
        while len(marks) > 1 and marks[1][0] <= acked:
            marks.popleft()
        if marks and marks[0][0] <= acked:
            self._acked = max(self._acked, marks[0][1])
        return self._acked


def continues_unchanged(backlog: bytes) -> bool:
    """Whether ``backlog`` (what a Redis replica asking to continue missed) is whole
    commands that Redis 7.0 gets unchanged: then the offsets still agree."""
    reader = hiredis.Reader()
    try:
        reader.feed(backlog)
        argv = reader.gets()
        while argv is not False:
            if not isinstance(argv, list) or for_redis_70(argv) != [argv]:
                return False
            argv = reader.gets()
    except (hiredis.ProtocolError, TypeError):
        return False
    return not reader.has_data()
