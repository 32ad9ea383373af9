"""The Rocket Rides demo without Spark (issue #7): every process of the pipeline, faults on and
Headwater killed -9 mid-run, in a few seconds and without Java. The Spark variant of the same
scenario is tests/spark/test_rocket_rides.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "rocket_rides" / "demo.py"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_demo_without_spark_agrees_and_cleans_up(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, str(DEMO), "--rides", "400", "--no-spark", "--kill-server",
        "--seed", "3", "--run-dir", str(run_dir),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    verdicts = [line.rsplit("|", 2)[1].strip() for line in done.stdout.splitlines()
                if line.startswith("| consumer") or line.startswith("| group-reader")]  # fmt: skip
    assert verdicts == ["yes", "yes", "yes"]
    assert "Headwater kill -9: 1" in done.stdout
    leftovers = [
        p for p in Path("/proc").glob("[0-9]*/cmdline")
        if str(run_dir).encode() in _read(p)
    ]  # fmt: skip
    assert leftovers == []


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
