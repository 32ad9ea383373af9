"""Per-worker counters (crashes survived, double-sent batches, ...) in a small JSON file.

Workers run as separate processes, and the demo's report needs what each one survived. Each worker
owns one file, ``<status dir>/<name>.json``, rewritten atomically (write + rename) whenever a
counter changes, so a reader never sees half a file and a killed worker leaves its last counts.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path


class Counters:
    """Named integer counters of one worker, persisted on every change when ``path`` is set."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.values: dict[str, int] = {}
        self._lock = threading.Lock()

    def bump(self, name: str, by: int = 1) -> None:
        with self._lock:
            self.values[name] = self.values.get(name, 0) + by
            self._save()

    def get(self, name: str) -> int:
        return self.values.get(name, 0)

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.values, sort_keys=True))
        os.replace(tmp, self.path)


def read_counters(status_dir: Path) -> dict[str, dict[str, int]]:
    """Every worker's counters by worker name (missing or unreadable files count as empty)."""
    result: dict[str, dict[str, int]] = {}
    for path in sorted(status_dir.glob("*.json")):
        try:
            result[path.stem] = {k: int(v) for k, v in json.loads(path.read_text()).items()}
        except (OSError, ValueError):
            result[path.stem] = {}
    return result
