"""MIGRATE of a stream with IDMP history between Headwater nodes carries that history (Redis
8.6's payload), so a producer's retry after the move gets its entry back instead of a second
one; Redis 7.0, which cannot hold it, refuses the payload as it refuses any newer one."""

from __future__ import annotations

import pytest
import redis

from tests.helpers import start_headwater, start_redis

pytestmark = pytest.mark.e2e


def test_a_moved_stream_still_deduplicates_its_producers() -> None:
    source, target, old_redis = start_headwater(), start_headwater(), start_redis()
    try:
        a, b = redis.Redis(port=source.port), redis.Redis(port=target.port)
        made = [a.execute_command("XADD", "s", "IDMP", "p", f"i{n}", "*", "n", n) for n in range(5)]
        a.execute_command("XADD", "plain", "*", "n", 0)
        with pytest.raises(redis.ResponseError, match="DUMP payload version or checksum"):
            a.execute_command("MIGRATE", "127.0.0.1", old_redis.port, "s", 0, 5000, "COPY")
        assert a.execute_command("MIGRATE", "127.0.0.1", old_redis.port, "plain", 0, 5000) == b"OK"
        moved = a.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", "s")
        assert moved == b"OK" and a.exists("s") == 0
        for n in range(5):  # the retries: each gets the entry it made on the source
            assert b.execute_command("XADD", "s", "IDMP", "p", f"i{n}", "*", "n", n) == made[n]
        assert b.xlen("s") == 5
        assert b.xinfo_stream("s")["iids-duplicates"] == 5
    finally:
        for server in (source, target, old_redis):
            server.stop()
