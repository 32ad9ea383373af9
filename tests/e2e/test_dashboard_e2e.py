"""The Grafana dashboard shipped in dashboards/ (issue 34): every metric its queries name is
one that /metrics really serves, on the servers it is meant for: a primary with a stream,
a consumer group, scripts and IDMP, its replica, and an active-active region."""

from __future__ import annotations

import json
import re

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_admin_e2e import fetch
from tests.helpers import ROOT, free_port, start_headwater
from tests.support.region_mesh import TcpMesh
from tests.support.replicas import info, wait_until

pytestmark = pytest.mark.e2e

DASHBOARD = ROOT / "dashboards" / "grafana-headwater.json"
METRIC = re.compile(r"\b(?:redis|headwater)_[a-z0-9_]+\b")


def queried() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(variable["definition"])
    return {name for expr in exprs for name in METRIC.findall(expr)}


def served(admin: int) -> set[str]:
    body = fetch(f"http://127.0.0.1:{admin}/metrics")[1]
    return {s.name for f in text_string_to_metric_families(body) for s in f.samples}


def test_every_metric_the_dashboard_queries_is_served() -> None:
    admins = [free_port(), free_port(), free_port()]
    primary = start_headwater("--admin-port", str(admins[0]))
    replica = start_headwater(
        "--admin-port", str(admins[1]), "--replicaof", "127.0.0.1", str(primary.port)
    )
    mesh = TcpMesh(2, own_options={1: ("--admin-port", str(admins[2]))})
    try:
        client = redis.Redis(port=primary.port)
        client.xadd("orders", {"n": 1})
        client.execute_command("XADD", "orders", "IDMP", "p", "i1", "*", "n", "2")
        client.execute_command("XADD", "orders", "IDMP", "p", "i1", "*", "n", "2")
        client.xgroup_create("orders", "billing", "0")
        client.xreadgroup("billing", "alice", {"orders": ">"}, count=1)
        client.eval("return 1", 0)
        wait_until(lambda: info(redis.Redis(port=replica.port))["master_link_status"] == "up")
        mesh[1].xadd("rides", {"n": 1})
        names = served(admins[0]) | served(admins[1]) | served(admins[2])
        missing = sorted(queried() - names)
        assert not missing, f"the dashboard queries metrics /metrics does not serve: {missing}"
        assert len(queried()) > 25
    finally:
        mesh.close()
        replica.stop()
        primary.stop()
