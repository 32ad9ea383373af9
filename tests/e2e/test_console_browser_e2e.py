"""The web console in a real browser (issue 34): Debian's headless Chromium, driven by
Playwright, against a running server with data. Each page is looked at as a person would
(the values shown, the rows, the chart drawn), the actions are clicked and confirmed, and
the server is asked afterwards what they did. Every page leaves a screenshot in
build/console-screenshots/.

Under `make test` (HEADWATER_EXPECT_BUILD set) a missing browser fails the run; elsewhere the
tests are skipped without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.helpers import ROOT, ServerProcess, free_port, start_headwater
from tests.support.doc_runner import port_map, run_page
from tests.support.replicas import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = ROOT / "build" / "console-screenshots"
# (as the machine's notes say: without the background-networking flags Chromium keeps
# trying to reach Google's hosts, which this closed network refuses)
FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip

if not Path(CHROMIUM).exists():
    if os.environ.get("HEADWATER_EXPECT_BUILD"):
        raise RuntimeError("Debian's chromium is missing: `make test` installs it (make browser)")
    pytest.skip("needs Debian's chromium (make browser)", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ServerProcess, int]]:
    admin = free_port()
    process = start_headwater(
        "--admin-port", str(admin), "--notify-keyspace-events", "KEA",
        "--slowlog-log-slower-than", "0",
    )  # fmt: skip
    seed(redis.Redis(port=process.port, decode_responses=True))
    yield process, admin
    process.stop()


def seed(r: redis.Redis) -> None:
    """120 small streams (two pages of 50 and one of 20), and ``orders`` with 300 entries at
    known times, a group with two consumers and entries pending."""
    pipe = r.pipeline(transaction=False)
    for i in range(120):
        pipe.xadd(f"events:{i:03d}", {"n": str(i)}, id=f"{1_000 + i}-1")
    pipe.execute()
    base = 1_700_000_000_000
    for i in range(300):
        r.xadd("orders", {"order": str(i), "amount": str(i * 10)}, id=f"{base + i * 1000}-0")
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "alice", {"orders": ">"}, count=5)
    r.xreadgroup("billing", "bob", {"orders": ">"}, count=3)


@pytest.fixture
def page(browser: Any, served: tuple[ServerProcess, int]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


def url(served: tuple[ServerProcess, int], fragment: str = "") -> str:
    return f"http://127.0.0.1:{served[1]}/console/{fragment}"


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def chart_pixels(page: Any, selector: str) -> int:
    """Pixels a chart's canvas has drawn (0 for a blank canvas)."""
    return int(
        page.eval_on_selector(
            selector,
            "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }",
        )
    )


def test_overview_shows_the_server_and_a_live_chart(
    page: Any, served: tuple[ServerProcess, int]
) -> None:
    r = redis.Redis(port=served[0].port)
    info = r.info()
    page.goto(url(served))
    expect(page.locator("[data-field=role] .value")).to_have_text("master")
    expect(page.locator("[data-field=version] .value")).to_contain_text(info["redis_version"])
    expect(page.locator("[data-field=keys] .value")).to_have_text("121")
    expect(page.locator("[data-field=aof] .value")).to_contain_text("on (everysec)")
    # the chart gets a point a second: three points, then its lines are on the canvas
    expect(page.locator("canvas.chart")).to_have_attribute("data-points", "3", timeout=10_000)
    assert chart_pixels(page, "canvas.chart") > 500
    shot(page, "overview")


def test_streams_are_listed_sorted_paged_and_filtered(
    page: Any, served: tuple[ServerProcess, int]
) -> None:
    page.goto(url(served, "#/streams"))
    rows = page.locator("#streams tbody tr")
    expect(page.locator("#page-info")).to_have_text("Page 1 of 3 · 121 streams")
    expect(rows).to_have_count(50)
    first = rows.first
    expect(first).to_have_attribute("data-stream", "orders")  # (the longest first)
    expect(first.locator("td").nth(1)).to_have_text("300")
    expect(first.locator("td").nth(5)).to_have_text("1")  # (one group)
    shot(page, "streams")
    page.locator("th[data-sort=name]").click()  # by name, descending
    expect(first).to_have_attribute("data-stream", "orders")
    page.locator("th[data-sort=name]").click()  # ascending
    expect(first).to_have_attribute("data-stream", "events:000")
    page.get_by_role("button", name="Next").click()
    expect(page.locator("#page-info")).to_have_text("Page 2 of 3 · 121 streams")
    expect(first).to_have_attribute("data-stream", "events:050")
    page.get_by_label("Filter by pattern").fill("events:11*")
    page.get_by_label("Filter by pattern").press("Enter")
    expect(page.locator("#page-info")).to_have_text("Page 1 of 1 · 10 streams")
    expect(rows).to_have_count(10)


def test_stream_browser_pages_and_jumps(page: Any, served: tuple[ServerProcess, int]) -> None:
    page.goto(url(served, "#/stream/orders"))
    rows = page.locator("#entries > tbody > tr")
    expect(rows).to_have_count(50)
    expect(rows.last).to_have_attribute("data-id", "1700000299000-0")  # newest last
    expect(rows.last.locator("table.fields")).to_contain_text("amount2990")
    page.locator("#older").click()
    expect(rows.last).to_have_attribute("data-id", "1700000249000-0")
    page.locator("#newer").click()
    expect(rows.first).to_have_attribute("data-id", "1700000250000-0")
    page.get_by_label("Jump to time").fill("2023-11-14T22:15:00")  # 1700000100000 ms
    page.locator("#jump").click()
    expect(rows.first).to_have_attribute("data-id", "1700000100000-0")
    expect(rows.first.locator("td").nth(1)).to_have_text("2023-11-14 22:15:00.000")
    shot(page, "stream-browser")


def test_groups_show_lag_pending_and_the_actions_act(
    page: Any, served: tuple[ServerProcess, int]
) -> None:
    r = redis.Redis(port=served[0].port, decode_responses=True)
    r.xgroup_create("orders", "audit", id="0")
    r.xreadgroup("audit", "carol", {"orders": ">"}, count=4)
    r.xreadgroup("audit", "dave", {"orders": ">"}, count=2)
    page.goto(url(served, "#/groups/orders"))
    audit = page.locator("section[data-group=audit]")
    expect(audit.locator("[data-field=lag] .value")).to_have_text("294")
    expect(audit.locator("[data-field=pending] .value")).to_have_text("6")
    expect(audit.locator("table.consumers tbody tr")).to_have_count(2)
    expect(audit.locator("table.pending tbody tr")).to_have_count(6)
    expect(audit.locator("canvas.chart")).to_have_attribute("data-points", "2", timeout=10_000)
    assert chart_pixels(page, "section[data-group=audit] canvas.chart") > 100
    shot(page, "groups")

    pending = r.xpending_range("orders", "audit", "-", "+", 10)
    moved = pending[0]["message_id"]
    audit.get_by_label(f"select {moved}").check()
    audit.get_by_label("Claim to consumer").fill("dave")
    audit.locator("button.claim").click()
    expect(page.locator("#confirm-text")).to_contain_text(
        "Claim 1 entries of group audit to consumer dave"
    )
    page.locator("#confirm-ok").click()
    expect(page.locator("#action-status")).to_contain_text("Done")
    wait_until(
        lambda: r.xpending_range("orders", "audit", moved, moved, 1)[0]["consumer"] == "dave"
    )

    expect(audit.locator(f"table.pending tr[data-id='{moved}'] td").nth(2)).to_have_text("dave")
    audit.get_by_label(f"select {moved}").check()
    audit.locator("button.ack").click()
    page.locator("#confirm-cancel").click()  # (cancelled: nothing happens)
    time.sleep(0.3)
    assert r.xpending("orders", "audit")["pending"] == 6
    audit.locator("button.ack").click()
    page.locator("#confirm-ok").click()
    wait_until(lambda: r.xpending("orders", "audit")["pending"] == 5)
    expect(audit.locator("[data-field=pending] .value")).to_have_text("5")

    audit.locator("tr[data-consumer=carol] button.delete-consumer").click()
    expect(page.locator("#confirm-text")).to_contain_text("Delete consumer carol of group audit")
    page.locator("#confirm-ok").click()
    wait_until(lambda: [c["name"] for c in r.xinfo_consumers("orders", "audit")] == ["dave"])
    expect(audit.locator("table.consumers tbody tr")).to_have_count(1)


def test_live_tail_shows_new_entries(page: Any, served: tuple[ServerProcess, int]) -> None:
    r = redis.Redis(port=served[0].port, decode_responses=True)
    page.goto(url(served, "#/tail/orders"))
    expect(page.locator("#tail-state")).to_contain_text("Waiting for new entries")
    added = r.xadd("orders", {"order": "live", "amount": "42"})
    line = page.locator(f"#tail li[data-id='{added}']")
    expect(line).to_have_text(f"{added}  order=live  amount=42")
    names = [c.get("name") for c in r.client_list()]
    assert "headwater-console" in names  # (the tail's own connection, as CLIENT LIST shows)
    shot(page, "live-tail")


def test_replication_page_shows_a_replica(page: Any, served: tuple[ServerProcess, int]) -> None:
    replica = start_headwater("--replicaof", "127.0.0.1", str(served[0].port))
    try:
        r = redis.Redis(port=served[0].port)
        wait_until(lambda: r.info("replication")["connected_slaves"] == 1, timeout=20)
        page.goto(url(served, "#/replication"))
        expect(page.locator("[data-field=role] .value")).to_have_text("master")
        expect(page.locator("#replicas tbody tr")).to_have_count(1)
        expect(page.locator("#replicas tbody tr td").nth(1)).to_have_text("online")
        expect(page.locator("[data-field=replicas] .value")).to_have_text("1")
        shot(page, "replication")
    finally:
        replica.stop()


def test_slowlog_and_live_keyspace_events(page: Any, served: tuple[ServerProcess, int]) -> None:
    r = redis.Redis(port=served[0].port)
    r.set("marker", "1")
    page.goto(url(served, "#/diagnostics"))
    expect(page.locator("#slowlog")).to_contain_text("SET marker 1")
    expect(page.locator("#events-state")).to_contain_text('notify-keyspace-events is "')
    time.sleep(0.5)  # (the events' subscription is made as the page opens)
    r.set("watched", "1")
    expect(page.locator("#events")).to_contain_text("__keyevent@0__:set  watched")
    shot(page, "diagnostics")


def test_a_reader_sees_but_cannot_act(browser: Any, tmp_path: Path) -> None:
    acl = tmp_path / "users.acl"
    acl.write_text(
        "user default on >adminpw ~* &* +@all\n"
        "user viewer on >viewpw ~* &* -@all +@read +info +client +config|get +slowlog"
        " +latency +psubscribe\n"
    )
    admin = free_port()
    process = start_headwater("--admin-port", str(admin), "--aclfile", str(acl))
    try:
        r = redis.Redis(port=process.port, password="adminpw", decode_responses=True)
        r.xadd("jobs", {"j": "1"}, id="1-1")
        r.xgroup_create("jobs", "workers", id="0")
        r.xreadgroup("workers", "w1", {"jobs": ">"})
        context = browser.new_context(http_credentials={"username": "viewer", "password": "viewpw"})
        viewer = context.new_page()
        viewer.goto(f"http://127.0.0.1:{admin}/console/#/groups/jobs")
        group = viewer.locator("section[data-group=workers]")
        expect(group.locator("[data-field=pending] .value")).to_have_text("1")
        group.get_by_label("select 1-1").check()
        group.locator("button.ack").click()
        viewer.locator("#confirm-ok").click()
        expect(viewer.locator("#action-status")).to_contain_text(
            "NOPERM User viewer has no permissions to run the 'xack' command"
        )
        assert r.xpending("jobs", "workers")["pending"] == 1
        shot(viewer, "refused-action")
        context.close()
        anonymous = browser.new_context()  # (no credentials: the browser is asked for them)
        response = anonymous.request.get(f"http://127.0.0.1:{admin}/console/")
        assert response.status == 401
        assert response.headers["www-authenticate"].startswith("Basic ")
        anonymous.close()
    finally:
        process.stop()


def test_the_readme_walkthrough_ends_in_the_console(browser: Any, tmp_path: Path) -> None:
    """A newcomer with the README alone: `make run`, the 30-second example, then the group's
    lag in the console, as the README says; then its Python example."""
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "run"], cwd=ROOT, capture_output=True, text=True
    )
    run_line = dry.stdout.strip().splitlines()[-1]
    assert run_line == ".venv/bin/headwater server --port 6379 --dir ./data --admin-port 9121"
    ports = port_map()
    server = start_headwater("--admin-port", str(ports[9121]), port=ports[6379])
    try:
        readme = ROOT / "README.md"
        run_page(readme, tmp_path, ports, only=slice(0, 2))  # (the make lines: done)
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{ports[9121]}/console/#/groups/orders")
        billing = page.locator("section[data-group=billing]")
        expect(billing.locator("[data-field=lag] .value")).to_have_text("1")
        expect(billing.locator("[data-field=pending] .value")).to_have_text("1")
        expect(billing.locator("tr[data-consumer=worker-1] td").nth(1)).to_have_text("1")
        shot(page, "readme-walkthrough")
        output = run_page(readme, tmp_path, ports, only=slice(2, 3))
        assert "{'item': 'pen', 'qty': '3'}" in output
        expect(billing.locator("[data-field=lag] .value")).to_have_text("0")
        context.close()
    finally:
        server.stop()
