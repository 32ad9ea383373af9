"""Indicative figure for issue 17 (the replication benchmarks proper come with the Sentinel
work, in bench.py): the time of a full sync of N stream entries (REPLICAOF until the replica's
offset is the primary's) beside SAVE and DEBUG RELOAD (a save and a snapshot load) of the same
data on the primary.

    PYTHONPATH=src:. .venv/bin/python benchmarks/repl_full_sync.py 2000000
"""

from __future__ import annotations

import sys
import time

from tests.e2e.test_replication_e2e import connect, in_step, wait_until
from tests.helpers import start_headwater


def main(n: int) -> None:
    primary = start_headwater("--appendonly", "no", "--save", "")
    replica = start_headwater("--appendonly", "no", "--save", "")
    try:
        p, r = connect(primary), connect(replica)
        pipe = p.pipeline(transaction=False)
        for i in range(n):
            pipe.xadd("rides", {"d": "4.2", "rider": "x" * 8}, id=f"{i + 1}-0")
            if i % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()
        started = time.monotonic()
        r.execute_command("REPLICAOF", "127.0.0.1", primary.port)
        wait_until(lambda: in_step(p, r), timeout=600)
        full = time.monotonic() - started
        started = time.monotonic()
        p.save()
        save = time.monotonic() - started
        started = time.monotonic()
        p.execute_command("DEBUG", "RELOAD")
        reload = time.monotonic() - started
        assert r.xlen("rides") == n
        print(
            f"entries={n} full_sync_s={full:.2f} save_s={save:.2f} "
            f"debug_reload_s={reload:.2f} ratio_to_reload={full / reload:.2f}"
        )
    finally:
        replica.stop()
        primary.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
