"""Exactly-once, causal application of remote effects.

Theory of operation
-------------------
``applied[r]`` is how many of region r's effects this region has applied (its own included:
``applied[me]`` is its own last sequence). A remote effect from origin o is *ready* when

- its ``seq`` is ``applied[o] + 1`` (per-origin order, no gaps), and
- for every other region r, ``applied[r] >= effect.vector[r]`` (everything the sender had seen
  is here: causal order).

``offer`` files an effect and returns, in order, every effect that became ready (its caller
applies them at once, in that order, and ``offer`` has already counted them as applied). One
that arrives early waits in ``waiting[o][seq]``; one already applied or already waiting is a
duplicate and is dropped, so a link may resend freely. After a broken link the receiver asks
each peer to resume at ``resume_point(o)``: nothing is sent twice, nothing is missed.

Causal order is what lets an observed-remove DEL name "what I had seen" by per-sub-log
horizons (see envelope.py). Its cost: a region cut from region 2 but not from region 1 waits
for 2's effects before it applies those of 1's that followed them (region 1 relays them when
asked: server/aa_links.py). ``adopt`` takes a state transfer's vector (transfer.py).

``vectors[o]`` is the vector of o's last applied effect: an effect read from a compact line
(envelope.py) has none until it is applied, and its vector is that one with its own
sequence (``resolved``). Such an effect is causally ready as soon as it is the next of its
origin: its other components are its predecessor's, which was ready.
"""

from __future__ import annotations

from collections.abc import Iterable

from headwater.activeactive.envelope import (
    RELATIVE,
    Effect,
    Vector,
    follows,
    make_vector,
    moved_on,
)
from headwater.errors import require


class Inbox:
    __slots__ = ("_vectors", "applied", "me", "own_vector", "waiting")

    def __init__(self, me: int, regions: Iterable[int]) -> None:
        self.me = me
        self.applied: dict[int, int] = {r: 0 for r in regions}
        self.applied.setdefault(me, 0)
        self.waiting: dict[int, dict[int, Effect]] = {r: {} for r in self.applied}
        #: the vector of each other origin's last applied effect, and of this region's own
        #: (an attribute of its own: set on every own effect, without a dictionary)
        self._vectors: dict[int, Vector] = {}
        self.own_vector: Vector | None = None

    @property
    def vectors(self) -> dict[int, Vector]:
        """The vector of each origin's last applied effect (its own included): what a
        compact line's effect is read against (snapshots save it). A copy: set it whole."""
        vectors = dict(self._vectors)
        if self.own_vector is not None:
            vectors[self.me] = self.last_own_vector()
        return vectors

    @vectors.setter
    def vectors(self, vectors: dict[int, Vector]) -> None:
        self._vectors = {o: v for o, v in vectors.items() if o != self.me}
        self.own_vector = vectors.get(self.me)

    def last_own_vector(self) -> Vector:
        """The vector of the last own effect: ``own_vector``, whose own sequence falls behind
        while own effects follow each other (``next_own``), brought up to date."""
        prev = self.own_vector
        seq = self.applied[self.me]
        if prev is None:
            return make_vector(self.applied)
        if len(prev) == 1 and prev[0] == (self.me, seq):
            return prev
        vector = moved_on(prev, self.me, seq)
        self.own_vector = vector
        return vector

    def _last_vector(self, origin: int) -> Vector | None:
        if origin != self.me:
            return self._vectors.get(origin)
        return None if self.own_vector is None else self.last_own_vector()

    def _keep_vector(self, origin: int, vector: Vector) -> None:
        if origin == self.me:
            self.own_vector = vector
        else:
            self._vectors[origin] = vector

    def resume_point(self, origin: int) -> int:
        """The first sequence of origin this region still needs."""
        return self.applied.get(origin, 0) + 1

    def waiting_count(self) -> int:
        return sum(len(w) for w in self.waiting.values())

    def next_own(self) -> tuple[int, Vector, bool]:
        """Count one more effect of this region's own: its sequence; its vector; whether
        that follows the previous own effect's (only the own sequence moved: a compact
        line). When it follows, the vector is ``RELATIVE`` (a compact line has none to
        write, nor an ``Add`` to read: ``last_own_vector`` makes it when asked), so that the
        usual XADD builds no vector at all."""
        me = self.me
        applied = self.applied
        seq = applied[me] + 1
        applied[me] = seq
        prev = self.own_vector
        if prev is not None and _only_own_moved(prev, applied, me):
            return seq, RELATIVE, True
        vector = make_vector(applied)
        self.own_vector = vector
        return seq, vector, prev is not None and follows(vector, prev, me)

    def resolved(self, effect: Effect) -> Effect:
        """The effect, with its vector filled in if a compact line left it out; called as
        it is counted applied (the one before it of its origin is). Keeps the vector."""
        origin = effect.origin
        if effect.vector:
            self._keep_vector(origin, effect.vector)
            return effect
        prev = self._last_vector(origin)
        if prev is None:
            # (a snapshot of the layout before saved no vectors: the applied one stands in;
            # an Add's apply never reads it)
            prev = make_vector(self.applied)
        vector = moved_on(prev, origin, effect.seq)
        self._keep_vector(origin, vector)
        return Effect(origin, effect.seq, vector, effect.ops, True)

    def mark_applied(self, effect: Effect) -> Effect:
        """Count an effect replayed from the log (own or remote) as applied, and return it
        (``resolved``); raises ``InvariantViolation`` when it is not the next of its origin
        (a damaged log)."""
        origin = effect.origin
        applied = self.applied.setdefault(origin, 0)
        self.waiting.setdefault(origin, {})
        require(
            effect.seq == applied + 1,
            f"log replays effect {origin}:{effect.seq} after {origin}:{applied}",
        )
        self.applied[origin] = effect.seq
        return self.resolved(effect)

    def offer(self, effect: Effect) -> list[Effect]:
        """File a remote effect; the effects now ready, in the order to apply them."""
        origin = effect.origin
        if origin == self.me or effect.seq <= self.applied.get(origin, 0):
            return []  # own effect echoed back, or a duplicate
        if origin not in self.applied:
            self.applied[origin] = 0
            self.waiting[origin] = {}
        waiting = self.waiting[origin]
        if effect.seq in waiting:
            return []
        waiting[effect.seq] = effect
        return self._drain()

    def adopt(self, vector: dict[int, int], vectors: dict[int, Vector]) -> list[Effect]:
        """A state transfer made ``vector`` what is applied (it covers ``applied``: the merge
        takes the larger of each component), and ``vectors`` its origins' last vectors: the
        waiting effects it already holds are dropped; those now ready, in order."""
        self.vectors = vectors
        self.applied.clear()
        self.applied.update(vector)
        self.applied.setdefault(self.me, 0)
        waiting = self.waiting
        self.waiting = {r: {} for r in self.applied}
        for region, pending in waiting.items():
            self.applied.setdefault(region, 0)
            self.waiting[region] = {
                seq: e for seq, e in pending.items() if seq > self.applied[region]
            }
        self.waiting[self.me] = {}
        return self._drain()

    def _drain(self) -> list[Effect]:
        ready: list[Effect] = []
        progress = True
        while progress:
            progress = False
            for region, pending in self.waiting.items():
                nxt = pending.get(self.applied[region] + 1)
                if nxt is not None and self._causally_ready(nxt):
                    del pending[nxt.seq]
                    self.applied[region] = nxt.seq
                    ready.append(self.resolved(nxt))
                    progress = True
        return ready

    def _causally_ready(self, effect: Effect) -> bool:
        applied = self.applied
        return all(
            applied.get(region, 0) >= seq
            for region, seq in effect.vector
            if region != effect.origin
        )

    def check_invariants(self) -> None:
        require(set(self.waiting) == set(self.applied), "waiting and applied name other regions")
        require(not self.waiting.get(self.me), "own effects waiting in the inbox")
        for region, pending in self.waiting.items():
            require(self.applied[region] >= 0, "negative applied sequence")
            for seq, effect in pending.items():
                require(effect.origin == region and effect.seq == seq, "effect filed wrongly")
                require(seq > self.applied[region], "an applied effect still waits")
            nxt = pending.get(self.applied[region] + 1)
            require(nxt is None or not self._causally_ready(nxt), "a ready effect still waits")
        for origin, vector in self.vectors.items():
            require(
                (origin, self.applied.get(origin, 0)) in vector,
                f"the last vector of region {origin} is not its last effect's",
            )


def _only_own_moved(prev: Vector, applied: dict[int, int], me: int) -> bool:
    """Whether ``applied`` holds the regions of ``prev`` and no other, at the same
    sequences, but for ``me``'s."""
    if len(prev) != len(applied):
        return False
    for region, seq in prev:  # noqa: SIM110 (compiled, ``all`` of a generator makes one)
        if region != me and applied.get(region, -1) != seq:
            return False
    return True
