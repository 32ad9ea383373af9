"""An in-memory full mesh of active-active regions, with links a test can cut, hold and heal.

Each directed link (a → b) is a queue of a's effects for b. ``sync()`` delivers everything (the
seed's "— Sync —" row); ``deliver_one`` delivers a chosen queued effect, in any order, which
the inbox must put right; a cut link keeps its queue until it heals.
"""

from __future__ import annotations

from headwater.activeactive.envelope import Effect, from_line
from headwater.activeactive.region import Region


class Mesh:
    def __init__(self, n: int = 3, mode: bytes = b"strict", wire: bool = False) -> None:
        ids = list(range(1, n + 1))
        self.regions = {r: Region(r, ids, mode) for r in ids}
        self.queues: dict[tuple[int, int], list[Effect]] = {
            (a, b): [] for a in ids for b in ids if a != b
        }
        self.cut: set[tuple[int, int]] = set()
        #: send every effect through its line form (to_line → from_line), as a link would
        self.wire = wire
        #: every effect made so far, in the order collected (a reference region applies them
        #: all: what the regions must converge to, whatever links lost)
        self.made: list[Effect] = []

    def __getitem__(self, region: int) -> Region:
        return self.regions[region]

    def collect(self) -> None:
        """Move every region's new effects onto its outgoing links."""
        for a, region in self.regions.items():
            for effect in region.take_outbox():
                if self.wire:
                    effect = from_line(effect.to_line())
                self.made.append(effect)
                for b in self.regions:
                    if b != a:
                        self.queues[(a, b)].append(effect)

    def deliver_one(self, link: tuple[int, int], index: int = 0) -> None:
        effect = self.queues[link].pop(index)
        self.regions[link[1]].receive(effect)

    def sync(self, *regions: int) -> None:
        """Deliver everything between the given regions (all by default) over uncut links."""
        names = set(regions or self.regions)
        self.collect()
        while True:
            moved = False
            for link, queue in self.queues.items():
                if queue and link not in self.cut and set(link) <= names:
                    self.deliver_one(link)
                    moved = True
            if not moved:
                return

    def partition(self, *groups: set[int]) -> None:
        """Cut every link between regions of different groups."""
        side = {r: i for i, group in enumerate(groups) for r in group}
        self.cut = {(a, b) for a, b in self.queues if side.get(a, -1) != side.get(b, -2)}

    def heal(self) -> None:
        self.cut = set()

    def check(self) -> None:
        for region in self.regions.values():
            region.check_invariants()

    def reference(self) -> Region:
        """A region that applied every effect made (none lost, nothing cut): the state the
        regions converge to."""
        ids = [*self.regions, len(self.regions) + 1]
        mode = next(iter(self.regions.values())).mode
        shadow = Region(ids[-1], ids, mode)
        for effect in self.made:
            shadow.receive(effect)
        return shadow

    def converged(self) -> bool:
        dumps = {region.dump() for region in self.regions.values()}
        return len(dumps) == 1
