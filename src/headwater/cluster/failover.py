"""Replica elections and manual failover (Redis 7.0's clusterHandleSlaveFailover,
clusterSendFailoverAuthIfNeeded and the manual-failover state).

A replica whose master is FAIL waits 500 ms + 0..499 ms + 1 s per better replica (by
replication offset), then asks every master for its vote in a new epoch; a master votes at
most once per epoch, only for a replica of a FAIL master (or of a master handing over:
manual failover) whose claimed slots are not known under a greater epoch. With a majority
of the masters' votes the replica takes its master's slots under the new epoch and tells
everyone. CLUSTER FAILOVER on a replica: by default the master pauses its writes and the
replica waits until it has everything before the election; FORCE skips the master; TAKEOVER
skips the vote too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.cluster import bus_codec as codec
from headwater.cluster.state import (
    FAIL,
    MASTER,
    MIGRATE_TO,
    NOFAILOVER,
    PFAIL,
    REPLICA,
    Node,
)

if TYPE_CHECKING:
    from headwater.cluster.bus import ClusterBus

#: how long a master stays orphaned before a replica moves to it
MIGRATION_DELAY_MS = 5000
#: how long a manual failover may take (CLUSTER_MF_TIMEOUT); the master pauses writes for
#: twice that at most
MF_TIMEOUT_MS = 5000
MF_PAUSE_MULT = 2


class Failover:
    def __init__(self, bus: ClusterBus) -> None:
        self.bus = bus
        self.auth_time_ms = 0
        self.auth_count = 0
        self.auth_sent = False
        self.auth_rank = 0
        self.auth_epoch = 0
        #: a manual failover: its end (0: none), whether the election may start, the
        #: replica a master hands over to, and the offset the master paused at (-1: unknown)
        self.mf_end_ms = 0
        self.mf_can_start = False
        self.mf_replica: Node | None = None
        self.mf_master_offset = -1
        #: settings the server keeps current
        self.validity_factor = 10
        self.ping_period_s = 10
        self.no_failover = False
        self.migration_barrier = 1

    # -- the replica's side ----------------------------------------------------------------

    def rank(self) -> int:
        """How many replicas of my master may be further ahead than me."""
        myself = self.bus.cluster.myself
        master = myself.master
        if master is None:
            return 0
        mine = self.bus.wire.offset()
        return sum(
            1
            for r in master.replicas
            if r is not myself and not r.flags & NOFAILOVER and r.repl_offset > mine
        )

    def cron(self, now_ms: int) -> None:
        if self.mf_end_ms and self.mf_end_ms < now_ms:
            self.reset()  # ("Manual failover timed out.")
        myself = self.bus.cluster.myself
        if myself.flags & MASTER:
            replica = self.mf_replica
            if self.mf_end_ms and replica is not None and replica.link is not None:
                self.bus.send_ping(replica, codec.PING, now_ms)
            return
        if self.mf_end_ms and not self.mf_can_start and self.mf_master_offset >= 0:
            self.mf_can_start = self.mf_master_offset == self.bus.wire.offset()
        self.elect(now_ms)
        if self.bus.allow_replica_migration:
            self.migrate_to_orphans(now_ms)

    def elect(self, now_ms: int) -> None:
        """One step of an election (Redis's clusterHandleSlaveFailover)."""
        bus = self.bus
        cluster = bus.cluster
        myself = cluster.myself
        master = myself.master
        manual = bool(self.mf_end_ms) and self.mf_can_start
        timeout = bus.node_timeout_ms()
        if (
            myself.flags & MASTER
            or master is None
            or (not master.flags & FAIL and not manual)
            or (self.no_failover and not manual)
            or not master.numslots
        ):
            return
        age = bus.wire.master_data_age_ms()
        if age > timeout:
            age -= timeout
        limit = self.ping_period_s * 1000 + timeout * self.validity_factor
        if self.validity_factor and age > limit and not manual:
            return  # (data too old to serve)
        auth_timeout = max(timeout * 2, 2000)
        auth_age = now_ms - self.auth_time_ms
        if auth_age > auth_timeout * 2:
            self.auth_time_ms = now_ms + 500 + bus.rng.randrange(500)
            self.auth_count = 0
            self.auth_sent = False
            self.auth_rank = self.rank()
            self.auth_time_ms += self.auth_rank * 1000
            if self.mf_end_ms:
                self.auth_time_ms, self.auth_rank = now_ms, 0
            self._pong_my_peers(now_ms)
            if not self.mf_end_ms:
                return
            auth_age = now_ms - self.auth_time_ms
        if not self.auth_sent and not self.mf_end_ms:
            rank = self.rank()
            if rank > self.auth_rank:
                self.auth_time_ms += (rank - self.auth_rank) * 1000
                self.auth_rank = rank
        if now_ms < self.auth_time_ms or auth_age > auth_timeout:
            return
        if not self.auth_sent:
            cluster.current_epoch += 1
            self.auth_epoch = cluster.current_epoch
            request = bus.header(codec.AUTH_REQUEST)
            if self.mf_end_ms:
                request.mflags |= codec.MF_FORCEACK
            self.auth_sent = True
            cluster.changed = cluster.must_sync = True
            bus.wire.save_now()
            bus.broadcast(request)
            return
        if self.auth_count >= cluster.size // 2 + 1:
            if myself.config_epoch < self.auth_epoch:
                myself.config_epoch = self.auth_epoch
            self.replace_master(now_ms)

    def _pong_my_peers(self, now_ms: int) -> None:
        """Tell the other replicas of my master my offset (they rank themselves by it)."""
        myself = self.bus.cluster.myself
        master = myself.master
        if master is None:
            return
        for replica in master.replicas:
            if replica is not myself and replica.link is not None and replica.connected:
                self.bus.send_ping(replica, codec.PONG, now_ms)

    def replace_master(self, now_ms: int) -> None:
        """Become a master and take my master's slots (clusterFailoverReplaceYourMaster)."""
        bus = self.bus
        cluster = bus.cluster
        myself = cluster.myself
        old = myself.master
        if myself.flags & MASTER or old is None:
            return
        cluster.set_master_role(myself)
        cluster.must_sync = True
        bus.wire.became_master()
        for slot in cluster.slots_of(old):
            cluster.unassign(slot)
            cluster.assign(slot, myself)
        bus.wire.state_changed()
        bus.wire.save_now()
        bus.broadcast_pong(now_ms)
        self.reset()

    def acked(self, sender: Node, current_epoch: int) -> None:
        if sender.flags & MASTER and sender.numslots and current_epoch >= self.auth_epoch:
            self.auth_count += 1

    # -- replica migration (Redis's clusterHandleSlaveMigration) ---------------------------

    def migrate_to_orphans(self, now_ms: int) -> None:
        """A master with slots that had replicas and has none left working gets one from the
        master with the most, after CLUSTER_SLAVE_MIGRATION_DELAY: the replica of smallest
        name among those, if its master keeps more than ``cluster-migration-barrier``."""
        bus = self.bus
        cluster = bus.cluster
        myself = cluster.myself
        mine = myself.master
        if not cluster.ok or mine is None or myself.flags & MASTER:
            return
        working = {
            node.name: sum(1 for r in node.replicas if not r.flags & (FAIL | PFAIL))
            for node in cluster.nodes.values()
            if node.flags & MASTER and not node.flags & FAIL
        }
        most = max(working.values(), default=0)
        orphans = [
            node
            for node in cluster.nodes.values()
            if node.flags & MASTER
            and not node.flags & FAIL
            and node.flags & MIGRATE_TO
            and node.numslots
            and not working.get(node.name)
        ]
        for node in cluster.nodes.values():
            orphaned = node in orphans
            if orphaned and not node.orphaned_ms:
                node.orphaned_ms = now_ms
            elif not orphaned:
                node.orphaned_ms = 0
        if not orphans or most < 2 or working.get(mine.name, 0) != most:
            return
        if working[mine.name] <= self.migration_barrier:
            return
        candidate = min(
            (r for node in cluster.nodes.values() if working.get(node.name) == most
             for r in node.replicas),
            key=lambda r: r.name,
            default=myself,
        )  # fmt: skip
        target = orphans[0]
        if candidate is myself and now_ms - target.orphaned_ms > MIGRATION_DELAY_MS:
            bus.follow(target)

    # -- a master's side -------------------------------------------------------------------

    def vote(self, requester: Node, m: codec.Message, now_ms: int) -> None:
        """An AUTH_REQUEST: the vote, if this master may give it."""
        bus = self.bus
        cluster = bus.cluster
        myself = cluster.myself
        master = requester.master
        if myself.flags & REPLICA or not myself.numslots:
            return
        if m.current_epoch < cluster.current_epoch:
            return
        if cluster.last_vote_epoch == cluster.current_epoch:
            return  # (voted in this epoch already)
        forced = bool(m.mflags & codec.MF_FORCEACK)
        if requester.flags & MASTER or master is None or (not master.flags & FAIL and not forced):
            return
        if now_ms - master.voted_time_ms < bus.node_timeout_ms() * 2:
            return
        for slot in codec.slots_in(m.myslots):
            owner = cluster.owners[slot]
            if owner is not None and owner.config_epoch > m.config_epoch:
                return
        cluster.last_vote_epoch = cluster.current_epoch
        master.voted_time_ms = now_ms
        cluster.changed = cluster.must_sync = True
        bus.wire.save_now()
        if requester.link is not None and requester.connected:
            bus.send(requester, bus.header(codec.AUTH_ACK))

    def mfstart(self, sender: Node, link: object, now_ms: int) -> None:
        """A replica of mine asks to take over: writes pause until it has all of them."""
        myself = self.bus.cluster.myself
        if sender.master is not myself:
            return
        self.reset()
        self.mf_end_ms = now_ms + MF_TIMEOUT_MS
        self.mf_replica = sender
        self.bus.wire.pause_writes(MF_TIMEOUT_MS * MF_PAUSE_MULT)
        self.bus.send_on(link, self.bus.ping(codec.PING, now_ms))

    def master_paused_at(self, sender: Node, m: codec.Message) -> None:
        myself = self.bus.cluster.myself
        paused = m.mflags & codec.MF_PAUSED
        if self.mf_end_ms and myself.master is sender and paused and self.mf_master_offset < 0:
            self.mf_master_offset = m.offset

    # -- CLUSTER FAILOVER --------------------------------------------------------------------

    def manual(self, force: bool, takeover: bool, now_ms: int) -> None:
        bus = self.bus
        myself = bus.cluster.myself
        self.reset()
        self.mf_end_ms = now_ms + MF_TIMEOUT_MS
        if takeover:
            bus.cluster.bump_epoch()
            self.replace_master(now_ms)
        elif force:
            self.mf_can_start = True
        elif myself.master is not None:
            bus.send(myself.master, bus.header(codec.MFSTART))

    def reset(self) -> None:
        if self.mf_replica is not None:
            self.bus.wire.unpause_writes()
        self.mf_end_ms = 0
        self.mf_can_start = False
        self.mf_replica = None
        self.mf_master_offset = -1
