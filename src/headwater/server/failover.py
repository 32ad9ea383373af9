"""FAILOVER: a planned switch of roles between this primary and one of its replicas
(Redis 6.2's coordinated failover, ``replication.c`` failoverCommand and
updateFailoverStatus).

Theory of operation
-------------------
``FAILOVER [TO host port [FORCE]] [TIMEOUT ms]`` pauses every write on the primary (held,
not refused: the clients wait, as under CLIENT PAUSE WRITE) and asks the replicas for their
offsets (REPLCONF GETACK). The state is then ``waiting-for-sync``. As soon as the chosen
replica (or, without TO, any replica) has acknowledged the primary's whole stream, the
primary becomes a replica of it (``failover-in-progress``) and its link sends
``PSYNC <replid> <offset> FAILOVER``. The target, seeing its own replication ID there,
becomes a primary (its history goes on under a new ID, the old one kept as its second) and
answers with a partial resync. Once that reply arrives the failover is over: the pause
ends, and the writes that waited meet a replica (``-READONLY``).

Nothing acknowledged is lost: writes stop before the switch, and the switch happens only
when the target has every byte of the stream. A timeout ends the wait: the failover is
aborted (writes resume here), or with FORCE made anyway. ``FAILOVER ABORT`` ends a waiting
failover; a target that refuses the PSYNC, or cannot be reached, aborts it too, and this
server is a primary again.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from headwater.engine.pause import INT64_MAX, PAUSE_WRITE
from headwater.errors import err
from headwater.resp.types import OK, Reply

if TYPE_CHECKING:
    from headwater.server.repl_sync import Peer
    from headwater.server.replication import Replication

log = logging.getLogger("headwater.failover")

NO_FAILOVER = "no-failover"
WAITING = "waiting-for-sync"
IN_PROGRESS = "failover-in-progress"


class Failover:
    def __init__(self, repl: Replication) -> None:
        self.repl = repl
        self.state = NO_FAILOVER
        self.target: tuple[str, int] | None = None
        #: monotonic deadline of the wait (0: none) and whether to switch anyway then
        self.deadline = 0.0
        self.force = False

    # -- the command --------------------------------------------------------------------

    def start(self, target: tuple[str, int] | None, timeout_ms: int, force: bool) -> Reply:
        repl = self.repl
        if self.state != NO_FAILOVER:
            raise err("FAILOVER already in progress.")
        if repl.master is not None:
            raise err("FAILOVER is not valid when server is a replica.")
        if not repl.peers:
            raise err("FAILOVER requires connected replicas.")
        if force and (not timeout_ms or target is None):
            raise err("FAILOVER with force option requires both a timeout and target HOST and IP.")
        if target is not None:
            peer = self._find(target)
            if peer is None:
                raise err("FAILOVER target HOST and PORT is not a replica.")
            if peer.state != "online":
                raise err("FAILOVER target replica is not online.")
            log.warning("FAILOVER requested to %s:%d.", *target)
        else:
            log.warning("FAILOVER requested to any replica.")
        self.target = target
        self.deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else 0.0
        self.force = force
        self.state = WAITING
        engine = repl.engine
        engine.failover_paused = True
        engine.pause_clients(INT64_MAX, PAUSE_WRITE)
        repl.request_acks()
        return OK

    def abort_command(self) -> Reply:
        if self.state == NO_FAILOVER:
            raise err("No failover in progress.")
        self.abort("Failover manually aborted")
        return OK

    # -- progress -----------------------------------------------------------------------

    def check(self) -> None:
        """After each ACK and at every cron: switch once the target has everything."""
        if self.state != WAITING:
            return
        repl = self.repl
        if self.deadline and time.monotonic() >= self.deadline:
            if self.force and self.target is not None:
                log.warning("FAILOVER to %s:%d time out exceeded, failing over.", *self.target)
                self._switch(self.target)
            else:
                self.abort("Replica never caught up before timeout")
            return
        offset = repl.offset
        for peer in repl.peers:
            address = (peer.ip, peer.port)
            if self.target is not None and address != self.target:
                continue
            if peer.state == "online" and peer.ack_offset == offset:
                log.warning("Failover target %s:%d is synced, failing over.", *address)
                self._switch(address)
                return
        repl.request_acks()

    def _switch(self, target: tuple[str, int]) -> None:
        self.target = target
        self.state = IN_PROGRESS
        self.repl.become_replica_of(target, failover=True)

    def psync_answered(self) -> None:
        """The target took the PSYNC FAILOVER: it is the primary, and this a replica."""
        if self.state == IN_PROGRESS:
            log.warning("Failover to %s:%d complete.", *(self.target or ("?", 0)))
            self._end()

    def abort(self, reason: str) -> None:
        """Redis's abortFailover: a switch under way is undone (a primary again)."""
        if self.state == NO_FAILOVER:
            return
        log.warning("FAILOVER aborted: %s", reason)
        if self.state == IN_PROGRESS:
            self.repl.become_primary_again()
        self._end()

    def _end(self) -> None:
        self.state = NO_FAILOVER
        self.target = None
        self.deadline = 0.0
        self.force = False
        engine = self.repl.engine
        engine.failover_paused = False
        engine.unpause_clients()

    def _find(self, target: tuple[str, int]) -> Peer | None:
        for peer in self.repl.peers:
            if (peer.ip, peer.port) == target:
                return peer
        return None
