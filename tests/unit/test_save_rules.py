"""The save rules alone (``SaveRules``): when the cron starts a BGSAVE without being asked."""

from __future__ import annotations

import time

from headwater.server.save_rules import RETRY_AFTER_FAILURE_S, SaveRules
from tests.unit.conftest import Harness


class CountingSnapshots:
    """Stands in for ``Snapshots``: counts the BGSAVEs started."""

    def __init__(self) -> None:
        self.child: tuple[int, int] | None = None
        self.last_save_attempt = 0.0
        self.started = 0

    def start_bgsave(self) -> None:
        self.started += 1


def _rules(save: str) -> tuple[Harness, CountingSnapshots, SaveRules]:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "save", save)
    snapshots = CountingSnapshots()
    rules = SaveRules(h.engine.config, h.engine, snapshots)  # type: ignore[arg-type]
    h.engine.last_save_time = int(time.time())
    return h, snapshots, rules


def test_a_rule_starts_a_bgsave_once_both_its_changes_and_its_seconds_are_met() -> None:
    h, snapshots, rules = _rules("100 2")
    c = h.client()
    h.call(c, "SET", "a", "1")
    h.engine.last_save_time -= 100
    rules.run(rewriting=False)
    assert snapshots.started == 0  # one change of the two
    h.call(c, "SET", "b", "1")
    h.engine.last_save_time += 50
    rules.run(rewriting=False)
    assert snapshots.started == 0  # 50 s of the 100
    h.engine.last_save_time -= 50
    rules.run(rewriting=True)
    assert snapshots.started == 0  # a rewrite child runs
    snapshots.child = (1, 0)
    rules.run(rewriting=False)
    assert snapshots.started == 0  # a BGSAVE child runs
    snapshots.child = None
    rules.run(rewriting=False)
    assert snapshots.started == 1


def test_after_a_failed_save_the_rules_wait_before_trying_again() -> None:
    h, snapshots, rules = _rules("1 1")
    h.call(h.client(), "SET", "a", "1")
    h.engine.last_save_time -= 10
    h.engine.info.rdb_last_bgsave_status = "err"
    snapshots.last_save_attempt = time.time()
    rules.run(rewriting=False)
    assert snapshots.started == 0
    snapshots.last_save_attempt -= RETRY_AFTER_FAILURE_S
    rules.run(rewriting=False)
    assert snapshots.started == 1


def test_a_scheduled_bgsave_waits_for_the_rewrite_then_starts_once() -> None:
    _, snapshots, rules = _rules("")
    rules.bgsave_scheduled = True
    rules.run(rewriting=True)
    assert snapshots.started == 0
    rules.run(rewriting=False)
    rules.run(rewriting=False)
    assert snapshots.started == 1
    assert not rules.bgsave_scheduled
