"""ACL LOG: the security log of refused commands and failed logins (Redis's ACLLog).

Entries are newest first. A refusal like one of the ten newest (same reason, context,
object and user, within a minute) bumps that entry's count and moves it to the front
instead of adding one. Times are unix milliseconds, given by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from headwater.acl.users import DENIED_AUTH, DENIED_CHANNEL, DENIED_CMD, DENIED_KEY

#: Redis's ACL_LOG_GROUPING_MAX_TIME_DELTA
GROUPING_MS: Final = 60_000
#: how many of the newest entries a refusal is compared with
_SCANNED: Final = 10

REASON_NAMES: Final = {
    DENIED_CMD: "command",
    DENIED_KEY: "key",
    DENIED_CHANNEL: "channel",
    DENIED_AUTH: "auth",
}


@dataclass
class LogEntry:
    count: int
    reason: int
    context: str  # toplevel, multi, lua
    object: bytes
    username: bytes
    updated_ms: int
    client_info: str
    entry_id: int
    created_ms: int

    def same_event(self, other: LogEntry) -> bool:
        return (
            self.reason == other.reason
            and self.context == other.context
            and abs(self.updated_ms - other.updated_ms) <= GROUPING_MS
            and self.object == other.object
            and self.username == other.username
        )


class AclLog:
    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.next_id = 0
        #: INFO stats' acl_access_denied_* counters, by reason
        self.denied = dict.fromkeys(REASON_NAMES, 0)

    def add(
        self,
        reason: int,
        context: str,
        obj: bytes,
        username: bytes,
        client_info: str,
        now_ms: int,
        max_len: int,
    ) -> None:
        self.denied[reason] += 1
        if max_len == 0:
            self.trim(0)
            return
        entry = LogEntry(
            1, reason, context, obj, username, now_ms, client_info, self.next_id, now_ms
        )
        for index, current in enumerate(self.entries[:_SCANNED]):
            if current.same_event(entry):
                del self.entries[index]
                self.entries.insert(0, current)
                current.client_info = client_info
                current.updated_ms = now_ms
                current.count += 1
                return
        self.next_id += 1
        self.entries.insert(0, entry)
        self.trim(max_len)

    def trim(self, max_len: int) -> None:
        del self.entries[max_len:]

    def reset(self) -> None:
        self.entries.clear()
