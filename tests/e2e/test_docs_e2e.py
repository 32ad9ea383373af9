"""The user documentation (issue 34): `make docs`' build passes with warnings as errors, its
reference pages hold every setting and every command, and every page's shell and Python
examples run, in order, as a reader would run them (tests/support/doc_runner.py: the ports
swapped for free ones, the servers it starts in the background) and print what the page
says, so the docs cannot rot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import headwater.engine  # noqa: F401  (first, as the server imports it: the tables need it)
from headwater.commands.table import build_table
from headwater.config import PARAMS
from tests.helpers import ROOT
from tests.support.doc_runner import blocks, run_page

pytestmark = pytest.mark.e2e

MKDOCS = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "mkdocs"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    mkdocs = MKDOCS if MKDOCS.exists() else Path(shutil.which("mkdocs") or "mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr
    return out


def test_the_reference_pages_hold_every_setting_and_command(site: Path) -> None:
    configuration = (site / "reference" / "configuration" / "index.html").read_text()
    for param in PARAMS:
        assert f"<code>{param.name}</code>" in configuration, param.name
    commands = (site / "reference" / "commands" / "index.html").read_text()
    for row in build_table().values():
        assert f"<code>{row.name.upper()}</code>" in commands, row.name
    assert (site / "monitoring" / "index.html").exists()


#: what each page's examples must print, run in order against real servers (doc_runner);
#: every page with sh or python blocks is here (test_every_example_is_run)
EXPECTED = {
    "index.md": ["{b'item': b'book', b'qty': b'1'}",
                 'redis_stream_group_lag{db="db0",stream="orders",group="billing"} 1'],
    "concepts.md": ["ana", "claimed ['", "0 pending"],
    "persistence.md": ["1000 acknowledged", "aof_last_bgrewrite_status:ok", "is valid: 1 keys",
                       "Problem at offset 0: truncated command", "Successfully truncated",
                       "All AOF files and the manifest are valid"],
    "replication.md": ["role:slave", "master_link_status:up", "replicas with it: 2",
                       "on disks: [1, 2]", "1 entry on a replica", "1 entry on the new primary"],
    "security.md": ["No permissions to access a key",
                    "NOPERM User reports has no permissions to run the 'xadd' command",
                    "master_link_status:up", "PONG"],
    "monitoring.md": ["200 text/html", '"name": "orders"'],
    "migrating.md": ["3 keys; b'billing' came along", "\nlisbon\n"],
    "cluster.md": ["[OK] All 16384 slots covered.", "cluster_state:ok", "\n1\n",
                   "100 entries on 3 primaries"],
}  # fmt: skip
#: pages whose examples need more than a server (their own tests run them)
ELSEWHERE = {
    "spark.md": "test_the_spark_page_runs",
    "active-active.md": "test_active_active_converges_as_the_page_says",
    "README.md": "test_console_browser_e2e.py",
}
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs" / "reference").glob("*.md"))]  # fmt: skip


def test_every_example_is_run() -> None:
    for page in USER_DOCS:
        runnable = [kind for kind, _ in blocks(page) if kind in ("sh", "python")]
        if runnable:
            assert page.name in EXPECTED or page.name in ELSEWHERE, page


def test_user_docs_name_no_issues_and_link_nothing_outside_the_repository() -> None:
    for page in USER_DOCS:
        text = page.read_text()
        assert not re.search(r"(?<![\w&])#\d+\b|\bissue \d+", text), page
        assert "../shared" not in text and "/work/" not in text, page


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_page_runs_as_written(name: str, tmp_path: Path) -> None:
    output = run_page(ROOT / "docs" / name, tmp_path)
    for expected in EXPECTED[name]:
        assert expected in output, f"{name}: {expected!r} not in\n{output}"


def test_active_active_converges_as_the_page_says(tmp_path: Path) -> None:
    """The partition example's last XRANGE: only the entry written during the cut."""
    output = run_page(ROOT / "docs" / "active-active.md", tmp_path)
    assert "state=connected" in output, output
    tail = output.rstrip().splitlines()[-3:]
    assert tail[1:] == ["fare", "3.0"], output


@pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java")
def test_the_spark_page_runs(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    output = run_page(ROOT / "docs" / "spark.md", tmp_path, timeout=300)
    assert "|    0| 66.0|" in output and "|    2| 80.5|" in output, output
    assert output.rstrip().endswith("3\n11"), output
