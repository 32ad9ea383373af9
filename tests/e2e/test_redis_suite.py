"""Redis's own test suite (7.4.1, external mode) on the units listed in
``tests/redis_suite/ci-units.txt``: each unit must finish, and each failure must be one that
``tests/redis_suite/known-failures.txt`` names with its reason. ``make redis-suite`` runs every
unit and writes ``tests/REDIS-SUITE.md``."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers import HEADWATER, ROOT

sys.path.insert(0, str(ROOT / "tools"))
import redis_suite

pytestmark = pytest.mark.e2e
CI_UNITS = [
    line.strip()
    for line in (ROOT / "tests" / "redis_suite" / "ci-units.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


def _suite() -> Path:
    suite = redis_suite.default_suite()
    if not (suite / "run-external.sh").exists():
        pytest.skip(f"Redis's test suite is not at {suite} (set REDIS_TESTS)")
    if shutil.which("tclsh") is None or shutil.which("redis-cli") is None:
        pytest.skip("tclsh and redis-cli are needed (make redis-server installs them)")
    return suite


@pytest.mark.timeout(900)
@pytest.mark.parametrize("unit", CI_UNITS)
def test_redis_suite_unit(unit: str, capsys: pytest.CaptureFixture[str]) -> None:
    server = " ".join([*HEADWATER, "server", "--appendonly", "no"])
    status = redis_suite.main(
        [unit, "--suite", str(_suite()), "--server", server, "--jobs", "1", "--no-table"]
    )
    out, err = capsys.readouterr()
    assert status == 0, out + err
