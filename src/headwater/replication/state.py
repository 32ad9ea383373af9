"""Replication IDs and offsets, and the PSYNC decision (Redis: replication.c,
``masterTryPartialResynchronization`` and ``shiftReplicationId``).

A server's history is named by a replication ID (40 hex characters) and measured by the
offset of the backlog. A replica takes its primary's ID and offset at a full sync and keeps
them in step with the bytes it receives, so both servers name the same byte by the same
(ID, offset). When a replica is promoted (``REPLICAOF NO ONE``) its history goes on under a new
ID; the old one is kept as ``replid2``, valid up to ``second_repl_offset - 1``, so the other
replicas of the old primary, which ask with the old ID, can continue from its backlog (PSYNC2).
"""

from __future__ import annotations

import secrets

from headwater.replication.backlog import Backlog

NO_REPLID = "0" * 40


def new_replid() -> str:
    """40 random hex characters."""
    return secrets.token_hex(20)


def valid_replid(text: str) -> bool:
    return len(text) == 40 and all(ch in "0123456789abcdef" for ch in text)


class ReplicationState:
    """The IDs, the offsets and the backlog of one server."""

    def __init__(self, backlog_size: int, replid: str | None = None) -> None:
        self.replid = replid or new_replid()
        self.replid2 = NO_REPLID
        #: the first offset not valid under ``replid2`` (-1: no second ID)
        self.second_repl_offset = -1
        self.backlog = Backlog(backlog_size)

    @property
    def offset(self) -> int:
        """master_repl_offset: the offset of the last byte of the stream."""
        return self.backlog.offset

    def shift_replid(self) -> None:
        """A new history starts here (promotion): the current ID becomes the second one."""
        self.replid2 = self.replid
        self.second_repl_offset = self.offset + 1
        self.replid = new_replid()

    def clear_replid2(self) -> None:
        self.replid2 = NO_REPLID
        self.second_repl_offset = -1

    def adopt(self, replid: str, offset: int) -> None:
        """A full sync from a primary: its history, from its offset on."""
        self.replid = replid
        self.clear_replid2()
        self.backlog.reset(offset)

    def can_continue(self, replid: str, start: int) -> bool:
        """Whether ``PSYNC replid start`` may continue from the backlog: the ID names our
        history (or our previous one, up to where it ended) and the backlog holds ``start``."""
        if replid != self.replid and (replid != self.replid2 or start > self.second_repl_offset):
            return False
        return self.backlog.covers(start)
