"""A start that loads a large AOF (issue 34): clients connect meanwhile and get Redis's
answers for a loading server: INFO persistence with loading:1 and its figures, -LOADING for
the rest; SHUTDOWN stops the load and saves nothing; check-aof draws its progress on a
terminal and leaves a log alone for a short job."""

from __future__ import annotations

import os
import pty
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.helpers import HEADWATER, ROOT, RawClient, free_port
from tests.support.replicas import wait_until

pytestmark = pytest.mark.e2e

KEYS = 1_500_000


def write_aof(data_dir: Path, keys: int = KEYS) -> Path:
    """An AOF of ``keys`` SETs (~70 MB: a load of one to two seconds)."""
    aof_dir = data_dir / "appendonlydir"
    aof_dir.mkdir(parents=True)
    path = aof_dir / "appendonly.aof.1.incr.aof"
    with open(path, "wb") as out:
        for start in range(0, keys, 100_000):
            out.write(b"".join(
                b"*3\r\n$3\r\nSET\r\n$%d\r\nk:%d\r\n$%d\r\nv:%d\r\n"
                % (len(b"k:%d" % i), i, len(b"v:%d" % i), i)
                for i in range(start, min(start + 100_000, keys))
            ))  # fmt: skip
    (aof_dir / "appendonly.aof.manifest").write_text(
        "file appendonly.aof.1.incr.aof seq 1 type i\n"
    )
    return path


def start(data_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    log = open(data_dir / "server.log", "wb")  # noqa: SIM115 - the process keeps it
    proc = subprocess.Popen(
        [*HEADWATER, "server", "--port", str(port), "--dir", str(data_dir)],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip
    return proc, port


def loading_info(port: int) -> dict[str, object] | None:
    """INFO persistence while the server loads (None before it listens)."""
    try:
        return redis.Redis(port=port, socket_timeout=10).info("persistence")
    except redis.ConnectionError:
        return None


def wait_for_loading(port: int) -> dict[str, object]:
    seen: list[dict[str, object]] = []

    def loading() -> bool:
        info = loading_info(port)
        if info is not None and info["loading"] == 1:
            seen.append(info)
        return bool(seen)

    wait_until(loading, timeout=20)
    return seen[0]


def test_a_long_load_answers_as_redis_answers(tmp_path: Path) -> None:
    aof = write_aof(tmp_path)
    proc, port = start(tmp_path)
    try:
        info = wait_for_loading(port)
        # (raw: redis-py takes -LOADING for a connection error, reconnects and retries)
        raw = RawClient(port)
        refused = b"-LOADING Redis is loading the dataset in memory\r\n"
        assert raw.call("GET", "k:1") == refused
        assert raw.call("PING") == refused
        assert raw.call("DEBUG", "RELOAD") == refused  # (allowed in Redis; it would reach in)
        assert raw.call("CLIENT", "SETNAME", "watcher") == b"+OK\r\n"  # (allowed, as in Redis)
        raw.close()
        r = redis.Redis(port=port, socket_timeout=10)
        assert info["loading_total_bytes"] == aof.stat().st_size
        assert 0 < info["loading_loaded_bytes"] <= info["loading_total_bytes"]  # type: ignore[operator]
        assert 0 < float(info["loading_loaded_perc"]) <= 100  # type: ignore[arg-type]
        assert abs(int(info["loading_start_time"]) - time.time()) < 30  # type: ignore[call-overload]
        wait_until(lambda: r.info("persistence")["loading"] == 0, timeout=60)
        assert r.dbsize() == KEYS
        assert r.get("k:1499999") == b"v:1499999"
        log = (tmp_path / "server.log").read_text()
        assert " MB of data" in log and "Data loaded in" in log
    finally:
        proc.kill()
        proc.wait()


def test_shutdown_while_loading_stops_and_saves_nothing(tmp_path: Path) -> None:
    aof = write_aof(tmp_path)
    size = aof.stat().st_size
    proc, port = start(tmp_path)
    try:
        wait_for_loading(port)
        r = redis.Redis(port=port, socket_timeout=10)
        r.shutdown()  # (SHUTDOWN, not NOSAVE: while loading it never saves)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (
        "SHUTDOWN while loading the data: exiting, nothing saved"
        in (tmp_path / "server.log").read_text()
    )
    assert aof.stat().st_size == size
    assert not (tmp_path / "dump.hwsnap").exists()
    proc, port = start(tmp_path)  # (the whole log is still there)
    try:
        r = redis.Redis(port=port, socket_timeout=10)
        wait_until(lambda: (loading_info(port) or {}).get("loading") == 0, timeout=60)
        assert r.dbsize() == KEYS
    finally:
        proc.kill()
        proc.wait()


def test_check_aof_draws_a_bar_on_a_terminal(tmp_path: Path) -> None:
    aof = write_aof(tmp_path, 300_000)
    leader, follower = pty.openpty()
    done = subprocess.run(
        [*HEADWATER, "check-aof", str(aof)], stdout=subprocess.PIPE, stderr=follower,
        cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert done.returncode == 0, done.stdout
    assert b"is valid" in done.stdout
    frames = drawn.decode().rstrip("\r\n").split("\r")
    assert frames[-1].startswith("appendonly.aof.1.incr.aof  [########################]  100.0%")
    quiet = subprocess.run(
        [*HEADWATER, "check-aof", str(aof)], capture_output=True, cwd=ROOT, timeout=120,
        check=False,
    )  # fmt: skip
    assert quiet.stderr == b""  # (not a terminal, a short job: nothing to log)


def test_check_aof_reads_a_manifest_as_redis_check_aof_does(tmp_path: Path) -> None:
    """Given the manifest, every file it names is checked in order; --fix cuts only the last
    incremental file, and refuses to cut an earlier one (a hole in the history)."""
    aof_dir = tmp_path / "appendonlydir"
    aof_dir.mkdir()
    set_k = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
    (aof_dir / "appendonly.aof.1.base.aof").write_bytes(set_k)
    (aof_dir / "appendonly.aof.1.incr.aof").write_bytes(set_k)
    (aof_dir / "appendonly.aof.2.incr.aof").write_bytes(set_k + b"*2\r\n$3\r\nDEL")
    manifest = aof_dir / "appendonly.aof.manifest"
    manifest.write_text(
        "file appendonly.aof.1.base.aof seq 1 type b\n"
        "file appendonly.aof.1.incr.aof seq 1 type i\n"
        "file appendonly.aof.2.incr.aof seq 2 type i\n"
    )

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*HEADWATER, "check-aof", *args, str(manifest)],
            capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        )  # fmt: skip

    found = check()
    assert found.returncode == 1
    assert "Checking the multi-part AOF" in found.stdout and "3 files" in found.stdout
    assert "appendonly.aof.2.incr.aof, size=38, ok_up_to=27" in found.stdout
    fixed = check("--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert (aof_dir / "appendonly.aof.2.incr.aof").read_bytes() == set_k
    assert check().stdout.endswith("All AOF files and the manifest are valid\n")
    (aof_dir / "appendonly.aof.1.incr.aof").write_bytes(set_k + b"garbage")
    refused = check("--fix")
    assert refused.returncode == 1
    assert "only the last one can be fixed" in refused.stdout
    assert (aof_dir / "appendonly.aof.1.incr.aof").read_bytes() == set_k + b"garbage"


def test_check_aof_names_a_bad_manifest(tmp_path: Path) -> None:
    manifest = tmp_path / "appendonly.aof.manifest"
    manifest.write_text("file appendonly.aof.1.incr.aof seq 1 type i\n")
    done = subprocess.run(
        [*HEADWATER, "check-aof", str(manifest)],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == (
        f"Bad AOF manifest {manifest}: {manifest}: names appendonly.aof.1.incr.aof, "
        "which does not exist\n"
    )
