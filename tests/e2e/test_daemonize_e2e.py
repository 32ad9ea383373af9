"""``daemonize yes`` and ``pidfile`` as redis-server: the command returns at once with 0, the
server runs detached with its log in ``logfile``, its pid in the pid file, which SHUTDOWN
removes; a pid file that cannot be written is logged and the server runs anyway."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import redis

from tests.helpers import HEADWATER, ROOT, free_port
from tests.support.replicas import wait_until

pytestmark = pytest.mark.e2e


def _start(tmp_path: Path, *extra: str) -> int:
    port = free_port()
    done = subprocess.run(
        [*HEADWATER, "server", "--port", str(port), "--dir", str(tmp_path), "--daemonize", "yes",
         "--logfile", str(tmp_path / "server.log"), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    return port


def _answers(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=1).ping())
    except redis.ConnectionError:
        return False


def test_daemonized_server_writes_and_removes_its_pid_file(tmp_path: Path) -> None:
    pidfile = tmp_path / "hw.pid"
    port = _start(tmp_path, "--pidfile", str(pidfile))
    wait_until(lambda: _answers(port), timeout=20)
    pid = int(pidfile.read_text())
    os.kill(pid, 0)  # (alive: the detached server, not the command that returned)
    assert os.getsid(pid) == pid  # (a session of its own: no terminal to lose)
    assert "ready to accept connections" in (tmp_path / "server.log").read_text()
    redis.Redis(port=port).shutdown(nosave=True)
    wait_until(lambda: not pidfile.exists(), timeout=10)


def test_an_unwritable_pid_file_is_logged_not_fatal(tmp_path: Path) -> None:
    port = _start(tmp_path, "--pidfile", str(tmp_path / "missing-dir" / "hw.pid"))
    wait_until(lambda: _answers(port), timeout=20)
    assert "Failed to write PID file" in (tmp_path / "server.log").read_text()
    redis.Redis(port=port).shutdown(nosave=True)
