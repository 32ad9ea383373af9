"""The user documentation (issue 34): `make docs`' build passes with warnings as errors, its
reference pages hold every setting and every command, and the quick start's examples run,
in order, against a real server (the ports swapped for the test's) and do what the page
says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import headwater.engine  # noqa: F401  (first, as the server imports it: the tables need it)
from headwater.commands.table import build_table
from headwater.config import PARAMS
from tests.helpers import ROOT, free_port, start_headwater

pytestmark = pytest.mark.e2e

MKDOCS = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "mkdocs"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


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


def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "index.md").read_text()
    blocks = BLOCK.findall(page)
    assert [kind for kind, _ in blocks] == ["sh", "sh", "python", "sh"]
    admin = free_port()
    server = start_headwater("--admin-port", str(admin))
    try:
        outputs = []
        for kind, code in blocks[1:]:  # (the first sets up and starts the server: done)
            code = code.replace("6379", str(server.port)).replace("9121", str(admin))
            if kind == "sh":
                code = code.replace("redis-cli ", f"redis-cli -p {server.port} ")
                command = ["bash", "-euo", "pipefail", "-c", code]
            else:
                command = [sys.executable, "-c", code]
            done = subprocess.run(
                command, cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False
            )
            assert done.returncode == 0, f"{code}\n{done.stdout}{done.stderr}"
            outputs.append(done.stdout)
        assert "book" in outputs[1]  # (the entry the group read)
        lag = 'redis_stream_group_lag{db="db0",stream="orders",group="billing"} 1'
        assert lag in outputs[2]
    finally:
        server.stop()
