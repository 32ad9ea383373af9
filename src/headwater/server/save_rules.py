"""When to BGSAVE without being asked: ``save <seconds> <changes>`` rules, and BGSAVE
SCHEDULE waiting for a rewrite to end."""

from __future__ import annotations

import logging
import time

from headwater.config import Config
from headwater.engine import Engine
from headwater.server.snapshots import Snapshots

log = logging.getLogger("headwater")

#: after a failed save, the rules wait this long before the next attempt (seconds, as Redis)
RETRY_AFTER_FAILURE_S = 5


class SaveRules:
    def __init__(self, config: Config, engine: Engine, snapshots: Snapshots) -> None:
        self.config = config
        self.engine = engine
        self.snapshots = snapshots
        #: BGSAVE SCHEDULE while a rewrite runs: started once it is done
        self.bgsave_scheduled = False

    def run(self, rewriting: bool) -> None:
        """From the cron: start a BGSAVE if one is scheduled or a rule is met (no child runs)."""
        if self.snapshots.child is not None or rewriting:
            return
        if self.bgsave_scheduled:
            self.bgsave_scheduled = False
            self.snapshots.start_bgsave()
            return
        rule = self._rule_met()
        if rule is not None:
            log.warning("%d changes in %d seconds. Saving...", rule[1], rule[0])
            self.snapshots.start_bgsave()

    def _rule_met(self) -> tuple[int, int] | None:
        engine = self.engine
        changes = engine.dirty - engine.dirty_at_last_save
        now = time.time()
        since_attempt = now - self.snapshots.last_save_attempt
        if engine.info.rdb_last_bgsave_status != "ok" and since_attempt < RETRY_AFTER_FAILURE_S:
            return None
        for seconds, needed in self.config["save"]:
            if changes >= needed and now - engine.last_save_time >= seconds:
                return seconds, needed
        return None
