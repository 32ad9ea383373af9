"""Pure planning: how a micro-batch's ID ranges become Spark partitions, and how a row budget
is shared between streams.

Rule 1: everything here is a pure function of its arguments. After a driver crash Spark re-plans
the last batch from the same (start, end) offsets; the partitions, and with them the partition
ids the writer puts into IDMP producer ids, must come out identical. So slices are cut at ID
*times* computed from the offsets alone, never from what the server holds at planning time.

A range is ``(after, until]``: ``after`` exclusive (the last ID consumed), ``until`` inclusive.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import NamedTuple

from headwater.spark.offsets import UINT64_MAX, StreamId


class Slice(NamedTuple):
    stream: str
    after: StreamId  # exclusive
    until: StreamId  # inclusive


def time_slices(after: StreamId, until: StreamId, pieces: int) -> list[tuple[StreamId, StreamId]]:
    """Split ``(after, until]`` into at most ``pieces`` ranges at millisecond boundaries: cut
    ``i`` of ``pieces`` ends at ``(after.ms + span * i // pieces)-<max seq>``. Ranges within one
    millisecond are not split."""
    if until <= after:
        return []
    span = until.ms - after.ms
    cuts: list[StreamId] = []
    for i in range(1, pieces):
        cut = StreamId(after.ms + span * i // pieces, UINT64_MAX)
        if after < cut < until and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
    bounds = [after, *cuts, until]
    return list(itertools.pairwise(bounds))


def plan_slices(
    start: Mapping[str, StreamId], end: Mapping[str, StreamId], min_partitions: int
) -> list[Slice]:
    """The partitions of one batch, in ``start``'s stream order: each stream with new entries
    gets ``ceil(min_partitions / streams with new entries)`` time slices (at least one)."""
    moving = [key for key in start if end[key] > start[key]]
    if not moving:
        return []
    pieces = -(-min_partitions // len(moving))
    return [
        Slice(key, lo, hi) for key in moving for lo, hi in time_slices(start[key], end[key], pieces)
    ]


def share_budget(available: Mapping[str, int], budget: int) -> dict[str, int]:
    """Split ``budget`` rows over streams fairly (water-filling in key order): a stream with
    fewer rows than its share gives the rest to the others. Deterministic."""
    taken = dict.fromkeys(available, 0)
    waiting = [key for key, count in available.items() if count > 0]
    left = budget
    while waiting and left > 0:
        share = max(left // len(waiting), 1)
        for key in list(waiting):
            take = min(share, available[key] - taken[key], left)
            taken[key] += take
            left -= take
            if taken[key] == available[key]:
                waiting.remove(key)
            if left == 0:
                break
    return taken
