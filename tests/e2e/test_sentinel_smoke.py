"""A smoke test with real Redis Sentinel (issue 17; the full failover acceptance test, with
writers and WAIT, is test_sentinel_failover.py): three Headwater servers (a primary and two
replicas) and three Sentinels (Debian's ``redis-sentinel``) on loopback; kill -9 the primary;
Sentinel promotes a replica, the other follows it (a partial resync), and the data is
there."""

from __future__ import annotations

import os

import pytest

from tests.support.replicas import connect, in_step, info, wait_until
from tests.support.sentinel import admin, sentinel_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.redis]


def test_sentinel_promotes_a_replica() -> None:
    with sentinel_cluster() as cluster:
        primary, *replicas = cluster.servers
        p = connect(primary)
        p.xadd("rides", {"n": "1"}, id="1-0")
        wait_until(lambda: all(in_step(p, connect(r)) for r in replicas), what="replicas")
        sentinel = cluster.sentinel()
        os.kill(primary.proc.pid, 9)
        primary.proc.wait()

        def promoted() -> int | None:
            _host, port = sentinel.sentinel_get_master_addr_by_name("mymaster")
            return int(port) if int(port) != primary.port else None

        new_port = wait_until(promoted, timeout=30, what="failover")
        new, other = sorted(replicas, key=lambda r: r.port != new_port)
        new_primary, other_r = connect(new), connect(other)
        assert info(new_primary)["role"] == "master"
        assert new_primary.xrange("rides") == [(b"1-0", {b"n": b"1"})]
        wait_until(
            lambda: info(other_r).get("master_port") == new_port and in_step(new_primary, other_r),
            timeout=30,
            what="the other replica follows the new primary",
        )
        new_primary.xadd("rides", {"n": "2"}, id="2-0")
        wait_until(lambda: in_step(new_primary, other_r), what="stream from the new primary")
        assert other_r.xlen("rides") == 2
        assert info(new_primary, "stats")["sync_full"] == 0  # the other one resynced partially


def test_sentinel_with_an_acl_user_fails_over() -> None:
    """Issue 33: Sentinel logs in with ``auth-user`` (a user allowed only what Sentinel
    sends), replicas with ``masteruser``; a killed primary is replaced as without ACL, and
    no server refused Sentinel anything (its ACL LOG stays empty)."""
    with sentinel_cluster(acl=True) as cluster:
        primary, *replicas = cluster.servers
        p = admin(primary, True)
        p.xadd("rides", {"n": "1"}, id="1-0")
        sentinel = cluster.sentinel()
        os.kill(primary.proc.pid, 9)
        primary.proc.wait()

        def promoted() -> int | None:
            _host, port = sentinel.sentinel_get_master_addr_by_name("mymaster")
            return int(port) if int(port) != primary.port else None

        new_port = wait_until(promoted, timeout=30, what="failover")
        new = next(r for r in replicas if r.port == new_port)
        new_primary = admin(new, True)
        assert info(new_primary)["role"] == "master"
        assert new_primary.xrange("rides") == [(b"1-0", {b"n": b"1"})]
        other = admin(next(r for r in replicas if r.port != new_port), True)
        wait_until(
            lambda: info(other).get("master_port") == new_port and in_step(new_primary, other),
            timeout=30,
            what="the other replica follows, logged in as repl",
        )
        for server in replicas:
            denied = [e for e in admin(server, True).acl_log() if e[b"username"] != b"default"]
            assert denied == [], denied
