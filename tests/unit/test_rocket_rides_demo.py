"""The Rocket Rides demo without Spark (issue #7): every process of the pipeline, faults on and
Headwater killed -9 mid-run, in a few seconds and without Java. The stream is trimmed to about
100 entries while 400 rides flow, so the Python reconciliation needs the archive of what was
trimmed. The Spark variant of the same scenario is tests/spark/test_rocket_rides.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "rocket_rides" / "demo.py"
RIDES = 400

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_demo_without_spark_agrees_and_cleans_up(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, str(DEMO), "--rides", str(RIDES), "--no-spark", "--kill-server",
        "--max-length", "100", "--seed", "3", "--run-dir", str(run_dir),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    report = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, report
    verdicts = [line.rsplit("|", 2)[1].strip() for line in done.stdout.splitlines()
                if line.startswith("| consumer") or line.startswith("| group-reader")]  # fmt: skip
    assert verdicts == ["yes", "yes", "yes"]
    assert "Headwater kill -9: 1" in done.stdout

    shown = facts(done.stdout)
    removed = int(re.findall(r"removed by trimming ([\d,]*\d)", shown["entries in the stream"])[0])
    assert removed >= RIDES - 100 - 100, report  # down to ~100, whole nodes of 100 at most left
    assert shown["trimming (MAXLEN ~ 100)"].startswith("yes: "), report
    assert ", 0 past a checkpoint;" in shown["trimming (MAXLEN ~ 100)"], report
    assert shown["first entry <= every checkpoint"].startswith("yes: "), report
    assert shown["reconciliation read each entry once"].endswith(f"of {RIDES} added"), report

    leftovers = [
        p for p in Path("/proc").glob("[0-9]*/cmdline")
        if str(run_dir).encode() in _read(p)
    ]  # fmt: skip
    assert leftovers == []


def facts(stdout: str) -> dict[str, str]:
    """The table's fact rows (label | value) as {label: value}."""
    rows = [[c.strip() for c in line[1:-1].split("|")] for line in stdout.splitlines()]
    return {cells[0]: cells[1] for cells in rows if len(cells) == 2}


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
