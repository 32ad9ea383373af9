"""redis-py's own cluster tests (``tests/test_cluster.py`` and the asyncio one) against a
6-node Headwater cluster and, in the same run, a 6-node redis-server cluster, each made with
``redis-cli --cluster create --cluster-replicas 1``; prints both outcomes side by side and
writes them to ``tests/REDIS-PY-CLUSTER.md``.

    python tools/redis_py_cluster_suite.py [--sdist DIR]

The tests come from redis-py's source distribution of the version installed in the virtual
environment (``pip download --no-binary``; ``--sdist`` names an unpacked one instead). They
are not part of ``make test`` (about two minutes): `make redis-py-cluster` runs them.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tests" / "REDIS-PY-CLUSTER.md"
PORT = 16379  # (redis-py's tests' own default cluster address)
FILES = ("tests/test_cluster.py", "tests/test_asyncio/test_cluster.py")
#: why a test fails on Headwater and not on Redis: Headwater reports Redis 8.10, so redis-py
#: runs the tests it skips on 7.0 for later commands, some of which Headwater lacks
WHY = {
    "lmovem": "LMOVEM/BLMOVEM: commands Headwater does not have (a test for a later Redis)",
    "blmovem": "as LMOVEM",
    "zinterstore_count": "ZINTERSTORE/ZUNIONSTORE ... COUNT: an option Headwater does not have",
    "zunionstore_count": "as ZINTERSTORE COUNT",
    "backup_status": "BACKUP STATUS: a command Headwater does not have",
    "keys_that_cannot_be_located": "MSETEX (Redis 8.4): a command Headwater does not have",
    "acl_log": "passes on Headwater; fails on Redis 7.0.15 (its ACL LOG entry lacks a field "
    "redis-py's test expects)",
    "deprecated_lib_name": "client-side (a deprecation warning redis-py's asyncio test counts)",
    "TestSSL": "needs a TLS cluster on redis-py's own ports and certificates",
}


def sdist_tests(directory: Path) -> Path:
    version = metadata.version("redis")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"redis=={version}", "-d", str(directory)],
        check=True, capture_output=True,
    )  # fmt: skip
    archive = next(directory.glob("redis-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(directory, filter="data")
    return next(p for p in directory.iterdir() if p.is_dir())


def start(kind: str, work: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(6):
        port = PORT + i
        data = work / f"{kind}-{port}"
        data.mkdir(parents=True)
        common = ["--port", str(port), "--cluster-enabled", "yes", "--dir", str(data)]
        if kind == "redis":
            argv = ["redis-server", *common, "--save", "", "--enable-debug-command", "yes"]
        else:
            argv = [str(ROOT / ".venv" / "bin" / "headwater"), "server", *common]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
    time.sleep(2)
    nodes = [f"127.0.0.1:{PORT + i}" for i in range(6)]
    subprocess.run(
        ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "1", "--cluster-yes"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    time.sleep(3)
    return procs


def run(tests: Path, kind: str, work: Path) -> dict[str, str]:
    procs = start(kind, work)
    outcome: dict[str, str] = {}
    try:
        for name in FILES:
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs",
                 "-W", "ignore", name, f"--redis-url=redis://localhost:{PORT}/0"],
                cwd=tests, capture_output=True, text=True, timeout=1200,
            )  # fmt: skip
            tail = [
                line for line in done.stdout.splitlines() if " in " in line and "passed" in line
            ]
            outcome[name] = tail[-1] if tail else done.stdout[-500:]
            for line in done.stdout.splitlines():
                if line.startswith(("FAILED", "ERROR")):
                    outcome[line.split(" - ")[0]] = kind
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    return outcome


def reason(test: str) -> str:
    return next((why for key, why in WHY.items() if key in test), "(no reason known)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help="an unpacked redis-py source distribution")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="redis-py-cluster-"))
    try:
        tests = args.sdist or sdist_tests(work)
        results = {kind: run(tests, kind, work) for kind in ("redis", "headwater")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "# redis-py's cluster tests",
        "",
        f"redis-py {metadata.version('redis')}'s `tests/test_cluster.py` and "
        "`tests/test_asyncio/test_cluster.py`, each against a 6-node cluster (3 primaries, 3 "
        "replicas) of redis-server 7.0.15 and of Headwater, made by `redis-cli --cluster "
        "create`. Command: `.venv/bin/python tools/redis_py_cluster_suite.py` "
        "(`make redis-py-cluster`).",
        "",
        "| file | redis-server 7.0.15 | headwater |",
        "|---|---|---|",
    ]
    for name in FILES:
        lines.append(f"| `{name}` | {results['redis'][name]} | {results['headwater'][name]} |")
    lines += ["", "Tests that fail or err on one side, and why:", ""]
    failing = sorted({t for r in results.values() for t in r if t.startswith(("FAILED", "ERROR"))})
    for test in failing:
        sides = [kind for kind in ("redis", "headwater") if test in results[kind]]
        lines.append(f"- `{re.sub(r'^(FAILED|ERROR) ', '', test)}` ({', '.join(sides)}): "
                     f"{reason(test)}")  # fmt: skip
    text = "\n".join(lines) + "\n"
    TABLE.write_text(text)
    print(text)
    unexplained = [t for t in failing if reason(t) == "(no reason known)"]
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
