"""The query buffer Redis would hold for a client, for CLIENT LIST's ``qbuf-free``.

Headwater's parser keeps only the bytes of an unfinished command; Redis keeps a buffer per
client, sized by its reads and shrunk by its cron (``clientsCronResizeQueryBuffer``), and
tools (and Redis's querybuf tests) read its size in CLIENT LIST. So each client carries the
size Redis's buffer would have (``Client.qbuf_alloc``), after Redis's rules:

- a read makes room for 16 KB (``PROTO_IOBUF_LEN``) after what is held;
- the header of a big argument (``PROTO_MBULK_BIG_ARG``, 32 KB) makes room for all of it;
- once a second: a buffer wasting over 4 KB is freed when the client is idle for more than
  2 s (kept to what is held, if anything is), else trimmed toward the last second's peak
  when it is over 32 KB and twice that peak.

A big argument's header is seen when the unfinished command began in the same read (the
usual case: the header and the start of the value come together).
"""

from __future__ import annotations

from headwater.commands.context import Client

IOBUF_LEN = 16 * 1024
BIG_ARG = 32 * 1024
RESIZE_THRESHOLD = 32 * 1024
WASTE = 4 * 1024
IDLE_MS = 3000  # (Redis: idle over 2 s, in whole seconds)


def note_read(c: Client, n: int) -> None:
    """``n`` bytes arrived, after the ``c.qbuf_len`` held."""
    need = c.qbuf_len + max(n, IOBUF_LEN)
    if need > c.qbuf_alloc:
        c.qbuf_alloc = need
    if c.qbuf_len + n > c.qbuf_peak:
        c.qbuf_peak = c.qbuf_len + n


def note_held(c: Client, held: int, data: bytes) -> None:
    """After a read's commands ran: ``held`` bytes of an unfinished command remain, which
    began in ``data`` when ``held <= len(data)``."""
    c.qbuf_len = held
    if not held:
        c.qbuf_bulk = 0
    if not held or held > len(data):
        return
    bulk = c.qbuf_bulk = _big_bulk(data[len(data) - held :])
    if bulk + 2 > c.qbuf_alloc:
        c.qbuf_alloc = bulk + 2
        c.qbuf_peak = max(c.qbuf_peak, bulk + 2)


def _big_bulk(command: bytes) -> int:
    """The declared size of the argument an unfinished RESP command is receiving, when it is
    a big one; else 0."""
    if not command.startswith(b"*"):
        return 0
    at = command.find(b"\r\n") + 2
    while 1 < at < len(command):
        end = command.find(b"\r\n", at)
        if end < 0 or command[at : at + 1] != b"$" or not command[at + 1 : end].isdigit():
            return 0
        size = int(command[at + 1 : end])
        at = end + 2 + size + 2
        if at > len(command):
            return size if size >= BIG_ARG else 0
    return 0


def resize(c: Client, now_ms: float) -> None:
    """Once a second (Redis's clientsCron): shrink a buffer that wastes space."""
    held, alloc = c.qbuf_len, c.qbuf_alloc
    # (the argument being received keeps its room, unless the client went idle)
    floor = max(held, c.qbuf_bulk + 2 if c.qbuf_bulk else 0)
    if alloc - held > WASTE:
        if now_ms - c.last_interaction_ms >= IDLE_MS:
            c.qbuf_alloc = held
        elif alloc > RESIZE_THRESHOLD and alloc // 2 > c.qbuf_peak:
            c.qbuf_alloc = max(floor, c.qbuf_peak)
    c.qbuf_peak = floor
