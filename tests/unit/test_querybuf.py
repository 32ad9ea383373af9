"""The query buffer Redis would hold (server/querybuf.py): its growth by reads and big
arguments, and the cron's shrinking."""

from __future__ import annotations

import pytest

from headwater.server.querybuf import _big_bulk, note_held, note_read, resize
from tests.unit.conftest import Harness

HEADER = b"*3\r\n$3\r\nset\r\n$1\r\na\r\n$1000000\r\n"


@pytest.mark.parametrize(
    ("command", "size"),
    [
        (HEADER, 1000000),
        (HEADER + b"xyz", 1000000),
        (b"*3\r\n$3\r\nset\r\n$1\r\na\r\n$100\r\nab", 0),  # a small argument
        (b"*2\r\n$100000\r\n" + b"x" * 100002 + b"$5\r\nab", 0),  # the big one is whole
        (b"*3\r\n$3\r\nset\r\n$40000", 0),  # its header unfinished
        (b"PING", 0),
    ],
)
def test_the_big_argument_an_unfinished_command_receives(command: bytes, size: int) -> None:
    assert _big_bulk(command) == size


def test_reads_grow_the_buffer_and_the_cron_shrinks_it() -> None:
    h = Harness()
    c = h.client()
    note_read(c, 30)
    note_held(c, 0, b"x" * 30)
    assert (c.qbuf_len, c.qbuf_alloc) == (0, 16384)
    note_read(c, len(HEADER))
    note_held(c, len(HEADER), HEADER)
    assert (c.qbuf_len, c.qbuf_alloc) == (len(HEADER), 1000002)
    now = c.last_interaction_ms
    resize(c, now + 1000)
    resize(c, now + 2000)
    assert c.qbuf_alloc == 1000002  # the argument keeps its room while the client is active
    resize(c, now + 3000)
    assert c.qbuf_alloc == len(HEADER)  # idle: only what is held


def test_a_buffer_over_twice_the_last_peak_is_trimmed_to_it() -> None:
    h = Harness()
    c = h.client()
    note_read(c, 400000)
    note_held(c, 0, b"")
    assert c.qbuf_alloc == 400000
    now = c.last_interaction_ms
    resize(c, now)  # (the peak of the second that saw the big read)
    assert c.qbuf_alloc == 400000
    note_read(c, 100)
    resize(c, now + 1000)
    assert c.qbuf_alloc == 100
