"""Redis's own Tcl test suite (tag 7.4.1) in external-server mode against Headwater.

Runs the suite's ``run-external.sh`` once per unit (each unit on a fresh server it starts),
reads each unit's log, and holds every failure against the list of known ones
(``tests/redis_suite/known-failures.txt``: each names a unit, a test and the reason, which is a
feature of a later issue or a documented exclusion; a reason that starts ``[pure build]`` is a
limit of the pure build, held only when the build under test is pure). It writes the table to
``tests/REDIS-SUITE.md`` when asked and exits non-zero when a unit did not finish or a test
failed that the list does not name.

    python tools/redis_suite.py                       # every unit, the table written
    python tools/redis_suite.py --no-table unit/multi # one unit, checked only

The suite itself is not part of this repository: ``--suite`` (or ``REDIS_TESTS``) names a
directory holding Redis's ``tests/`` and ``runtest`` at tag 7.4.1 and the ``run-external.sh``
runner. It needs ``tclsh`` (Debian: ``tcl``) and ``redis-cli``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from headwater._build import build_kind

ROOT = Path(__file__).resolve().parent.parent
KNOWN_FAILURES = ROOT / "tests" / "redis_suite" / "known-failures.txt"
TABLE = ROOT / "tests" / "REDIS-SUITE.md"
DEFAULT_SERVER = f"{ROOT / '.venv' / 'bin' / 'headwater'} server --appendonly no"
#: DEBUG is Redis's own test hook; maxmemory is accepted and not enforced yet (#33), and its
#: tests wait for evictions that never come
DENIED_TAGS = "-needs:debug -needs:config-maxmemory"
#: what the suite's reasons for not running a test mean here
WHY_SKIPPED = {
    "needs:debug denied": "needs DEBUG, Redis's test hook (run-external.sh: --tags -needs:debug)",
    "needs:config-maxmemory denied": "needs maxmemory enforced (#33; --tags "
    "-needs:config-maxmemory)",
    "Not supported on external server": "the suite runs it only on a server it starts itself "
    "(replication, restarts, server options)",
    "large memory flag not provided": "uses gigabytes: the suite runs it only with --large-memory",
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RESULT = re.compile(r"^\[(ok|err|exception|ignore|skip)\]: (.*)$")
IN_FILE = re.compile(r" in tests/unit/\S+\.tcl$")
TIMING = re.compile(r" \(\d+ ms\)$")


def default_suite() -> Path:
    named = os.environ.get("REDIS_TESTS")
    return Path(named) if named else ROOT.parent / "shared" / "redis-tests"


@dataclass
class UnitResult:
    unit: str
    finished: bool = False
    seconds: float = 0.0
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Known:
    unit: str
    test: str
    reason: str


#: a reason that starts so is a limit of the pure build alone: the compiled build must pass
PURE_ONLY = "[pure build]"


def read_known(path: Path, build: str) -> dict[tuple[str, str], Known]:
    """``unit | test name | reason`` a line; ``#`` starts a comment line. ``build``: the
    build under test (``compiled`` or ``pure``): pure-only lines count for the pure one."""
    known: dict[tuple[str, str], Known] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        unit, _, rest = line.partition(" | ")
        test, _, reason = rest.rpartition(" | ")
        if not (unit and test and reason):
            raise SystemExit(f"{path}:{number}: expected 'unit | test | reason': {line!r}")
        if reason.strip().startswith(PURE_ONLY) and build != "pure":
            continue
        known[(unit.strip(), test.strip())] = Known(unit.strip(), test.strip(), reason.strip())
    return known


def parse_log(unit: str, text: str) -> UnitResult:
    result = UnitResult(unit)
    for raw in text.splitlines():
        line = ANSI.sub("", raw)
        if re.match(rf"^\[\d+/\d+ done\]: {re.escape(unit)} ", line):
            result.finished = True
        matched = RESULT.match(line)
        if not matched:
            continue
        status, detail = matched.groups()
        name = IN_FILE.sub("", TIMING.sub("", detail))
        if status == "ok":
            result.passed.append(name)
        elif status in ("err", "exception"):
            result.failed.append(name)
        else:
            result.skipped[skip_reason(status, detail)] += 1
    return result


def skip_reason(status: str, detail: str) -> str:
    if status == "skip":
        return "skipped by name"
    _, _, why = detail.rpartition(": ")
    return why or detail


def run_unit(suite: Path, server: str, unit: str, logs: Path, timeout: int) -> UnitResult:
    env = dict(os.environ, LOGS=str(logs / unit.replace("/", "_")), UNIT_TIMEOUT=str(timeout))
    env.setdefault("TAGS", DENIED_TAGS)
    started = time.monotonic()
    subprocess.run(
        [str(suite / "run-external.sh"), server, unit],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    log = logs / unit.replace("/", "_") / (unit.replace("/", "_") + ".log")
    result = parse_log(unit, log.read_text(errors="replace") if log.exists() else "")
    result.seconds = time.monotonic() - started
    return result


def all_units(suite: Path) -> list[str]:
    tests = suite / "tests"
    found = sorted(tests.glob("unit/*.tcl")) + sorted(tests.glob("unit/type/*.tcl"))
    return [str(path.relative_to(tests).with_suffix("")) for path in found]


def unknown_failures(
    results: Iterable[UnitResult], known: dict[tuple[str, str], Known]
) -> list[str]:
    return [
        f"{r.unit}: {name}" for r in results for name in r.failed if (r.unit, name) not in known
    ]


def render_table(
    results: list[UnitResult], known: dict[tuple[str, str], Known], command: str
) -> str:
    lines = [
        "# Redis's test suite (7.4.1) against Headwater",
        "",
        "Made by `make redis-suite` (`tools/redis_suite.py`), external-server mode, one fresh",
        f"server a unit: `{command}`. Do not edit by hand: the reasons for failures live in",
        "`tests/redis_suite/known-failures.txt`.",
        "",
        "| unit | ok | err | skipped | finished | seconds |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in results:
        done = "yes" if r.finished else "**NO**"
        counts = f"{len(r.passed)} | {len(r.failed)} | {sum(r.skipped.values())}"
        lines.append(f"| {r.unit} | {counts} | {done} | {r.seconds:.0f} |")
    total_ok = sum(len(r.passed) for r in results)
    total_err = sum(len(r.failed) for r in results)
    total_skip = sum(sum(r.skipped.values()) for r in results)
    lines.append(f"| **total** | {total_ok} | {total_err} | {total_skip} | | |")
    lines += ["", "## Skipped by the suite, and why", "", "| reason | tests |", "|---|---:|"]
    reasons: Counter[str] = Counter()
    for r in results:
        reasons.update(r.skipped)
    lines += [f"| {WHY_SKIPPED.get(why, why)} | {n} |" for why, n in reasons.most_common()]
    lines += ["", "## Failing tests", "", "| unit | test | reason |", "|---|---|---|"]
    for r in results:
        for name in r.failed:
            entry = known.get((r.unit, name))
            lines.append(f"| {r.unit} | {name} | {entry.reason if entry else '**not listed**'} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("units", nargs="*", help="units such as unit/multi (default: every unit)")
    parser.add_argument(
        "--suite", type=Path, default=default_suite(), help="the suite's directory (REDIS_TESTS)"
    )
    parser.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help="command that starts the server (default: %(default)s)",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="units run at once (default: %(default)s)"
    )
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds a unit may take (default: %(default)s)"
    )
    parser.add_argument(
        "--known", type=Path, default=KNOWN_FAILURES, help="the known failures and their reasons"
    )
    parser.add_argument(
        "--table", type=Path, default=TABLE, help="where the table goes (default: %(default)s)"
    )
    parser.add_argument("--no-table", action="store_true", help="check only, write no table")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.suite / "run-external.sh").exists():
        print(f"no Redis test suite at {args.suite} (set REDIS_TESTS or --suite)", file=sys.stderr)
        return 2
    known = read_known(args.known, build_kind())
    units = args.units or all_units(args.suite)
    with (
        tempfile.TemporaryDirectory(prefix="redis-suite-") as logs,
        ThreadPoolExecutor(args.jobs) as pool,
    ):
        results = list(
            pool.map(
                lambda u: run_unit(args.suite, args.server, u, Path(logs), args.timeout), units
            )
        )
        for r in results:
            done = "finished" if r.finished else "DID NOT FINISH"
            print(f"{r.unit:32} ok {len(r.passed):4}  err {len(r.failed):4}  {done}")
            for name in r.failed:
                entry = known.get((r.unit, name))
                print(f"    [err] {name}: {entry.reason if entry else 'NOT LISTED'}")
    if not args.no_table:
        args.table.write_text(
            render_table(results, known, args.server.replace(str(ROOT) + "/", ""))
        )
    unfinished = [r.unit for r in results if not r.finished]
    unknown = unknown_failures(results, known)
    passed, failed = sum(len(r.passed) for r in results), sum(len(r.failed) for r in results)
    print(f"suite: {passed} passed, {failed} failed")
    for unit in unfinished:
        print(f"did not finish: {unit}", file=sys.stderr)
    for name in unknown:
        print(f"failed, not in {args.known.name}: {name}", file=sys.stderr)
    return 1 if unfinished or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
