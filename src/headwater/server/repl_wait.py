"""WAIT and WAITAOF: clients waiting until replicas (and, for WAITAOF, AOFs) have their writes.

A client's write offset (Redis: ``c->woff``) is the stream offset after its last write, to a
loop turn's precision: each turn that fed the stream leaves (effect counter, offset), and a
client's last effect maps to the end of its turn. A request that cannot be answered at once
blocks the client through its reply gate (``Block`` without keys; the engine runs none of
its pipelined commands meanwhile) and asks every replica for an ACK (``REPLCONF GETACK *``
in the stream); each ACK, each fsync of the local AOF and the timeout check it again.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from headwater.commands.context import Block, Client
from headwater.resp.types import Reply

if TYPE_CHECKING:
    from headwater.server.replication import Replication

#: turns remembered for clients' write offsets (an older write waits for the oldest's end)
TURNS_KEPT = 4096


@dataclass
class WaitRequest:
    """A client in WAIT (or WAITAOF: ``aof``, with ``local`` local fsyncs wanted)."""

    client: Client
    replicas: int
    offset: int
    timer: object = None
    aof: bool = False
    local: int = 0


class Waits:
    def __init__(self, repl: Replication) -> None:
        self.repl = repl
        self.waiting: list[WaitRequest] = []
        #: (engine.effect_seq, stream offset) at the end of each turn that fed the stream
        self._turns: deque[tuple[int, int]] = deque(maxlen=TURNS_KEPT)

    def turn_fed(self, effect_seq: int, offset: int) -> None:
        self._turns.append((effect_seq, offset))

    def wait(self, c: Client, replicas: int, timeout_ms: int) -> Reply | Block:
        """WAIT: how many replicas acknowledged the client's writes."""
        self.repl.flush(force=True)
        return self._start(WaitRequest(c, replicas, self._write_offset(c)), timeout_ms)

    def waitaof(self, c: Client, local: int, replicas: int, timeout_ms: int) -> Reply | Block:
        """WAITAOF: the client's writes fsynced by this server's AOF and by replicas'."""
        self.repl.flush(force=True)
        request = WaitRequest(c, replicas, self._write_offset(c), aof=True, local=local)
        return self._start(request, timeout_ms)

    def _start(self, request: WaitRequest, timeout_ms: int) -> Reply | Block:
        reply = self._reply(request)
        if self._satisfied(request) or request.client.in_multi:
            return reply
        loop = self.repl.server.loop
        if timeout_ms:
            request.timer = loop.call_later(timeout_ms / 1000, lambda: self.end(request))
        self.waiting.append(request)
        self.repl.request_acks()
        return Block([], 0, timeout_reply=reply)

    def _write_offset(self, c: Client) -> int:
        """The stream offset after the client's last write (its writes of this turn: the
        current offset; before the turns remembered: the oldest's end, which is past it)."""
        seq = c.effect_seq
        if not seq:
            return 0
        turns = self._turns
        if not turns or seq > turns[-1][0]:
            return self.repl.offset
        return turns[bisect.bisect_left(turns, (seq, -1))][1]

    def _acked(self, offset: int, aof: bool) -> int:
        return sum(
            1
            for p in self.repl.peers
            if p.state == "online"
            and (p.aof_offset if aof else p.ack_offset) >= offset
            and not p.client.closed
        )

    def _local_fsynced(self, c: Client) -> int:
        aof = self.repl.server.durability.aof
        return int(aof.writer is not None and c.effect_seq <= aof.fsynced_seq())

    def _reply(self, request: WaitRequest) -> Reply:
        acked = self._acked(request.offset, request.aof)
        if request.aof:
            return [self._local_fsynced(request.client), acked]
        return acked

    def _satisfied(self, request: WaitRequest) -> bool:
        if self._acked(request.offset, request.aof) < request.replicas:
            return False
        return not request.aof or self._local_fsynced(request.client) >= request.local

    def check(self) -> None:
        """An ACK came, or the AOF synced: answer the requests now satisfied."""
        for request in list(self.waiting):
            if request.client.closed:
                self.waiting.remove(request)
            elif self._satisfied(request):
                self.end(request)

    def end(self, request: WaitRequest) -> None:
        """Answer the request with what is acknowledged now (also its timeout)."""
        if request not in self.waiting:
            return
        self.waiting.remove(request)
        if request.timer is not None:
            request.timer.cancel()  # type: ignore[attr-defined]
        if not request.client.closed:
            self.repl.engine.end_wait(request.client, self._reply(request))
            self.repl.server.schedule_flush()
