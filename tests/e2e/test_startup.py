"""Starting and stopping the ``headwater`` process: options, config files, signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import HEADWATER, ROOT, free_port, raw_client, wait_for_port

pytestmark = pytest.mark.e2e


def run_headwater(*args: str, timeout: float = 15) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HEADWATER, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )


def spawn(*args: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [*HEADWATER, "server", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT
    )
    try:
        wait_for_port(port, proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--port", "0"], "--port 0 is not supported"),
        (["--port", "70000"], "'--port 70000'"),
        (["--port"], "'--port"),
        (["--nosuchoption", "1"], "'--nosuchoption 1'"),
        (["--maxclients", "abc"], "'--maxclients abc'"),
        (["--appendfsync", "sometimes"], "'--appendfsync sometimes'"),
        (["--hz", "10", "stray-word"], "'--hz 10 stray-word'"),
        (["/nonexistent/headwater.conf"], "can't open config file '/nonexistent/headwater.conf'"),
    ],
    ids=[
        "port-0",
        "port-too-big",
        "port-no-value",
        "unknown-option",
        "maxclients-not-int",
        "bad-enum",
        "too-many-values",
        "missing-config-file",
    ],
)
def test_bad_options_exit_1(tmp_path: Path, args: list[str], needle: str) -> None:
    # --dir last, so that an option wrongly accepted cannot leave ./data behind; a directory
    # of its own, so that nothing another program left in /tmp is loaded.
    done = run_headwater("server", *args, "--dir", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert needle in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_unknown_subcommand_and_usage() -> None:
    done = run_headwater("frobnicate")
    assert done.returncode == 1
    assert "unknown command 'frobnicate'" in done.stderr
    assert "usage: headwater server" in done.stderr
    done = run_headwater("--help")
    assert done.returncode == 0
    assert "usage: headwater server" in done.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["server", "--help"], "usage: headwater server"),
        (["server", "-h"], "usage: headwater server"),
        (["check-aof", "--help"], "usage: headwater check-aof"),
        (["check-snapshot", "--help"], "usage: headwater check-snapshot"),
        (["import-rdb", "--help"], "usage: headwater import-rdb"),
    ],
)
def test_every_command_line_answers_help(args: list[str], needle: str) -> None:
    done = run_headwater(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert needle in done.stdout
    assert not done.stderr


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "headwater.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=15,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("Headwater v=0.1.0")
    assert "redis-compat=8.10.0" in done.stdout


def test_config_file_bad_directive_names_the_line(tmp_path: Path) -> None:
    conf = tmp_path / "headwater.conf"
    conf.write_text("# comment\n\nport 7777\nmaxclients 10\nno-such-directive yes\n")
    done = run_headwater("server", str(conf))
    assert done.returncode == 1
    assert "line 5" in done.stderr
    assert "no-such-directive yes" in done.stderr
    assert "Traceback" not in done.stderr

    conf.write_text('port 7777\nrequirepass "unterminated\n')
    done = run_headwater("server", str(conf))
    assert done.returncode == 1
    assert "line 2" in done.stderr
    assert "Unbalanced quotes" in done.stderr

    conf.write_text("port notaport\n")
    done = run_headwater("server", str(conf))
    assert done.returncode == 1
    assert "line 1" in done.stderr


def test_config_file_is_honoured(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "headwater.conf"
    data_dir = tmp_path / "data"
    conf.write_text(
        f'# test config\nport {port}\nrequirepass "s3cret pass"\ndir {data_dir}\nmaxclients 50\n'
    )
    proc = spawn(str(conf), port=port)
    try:
        with raw_client(port) as c:
            assert c.call("GET", "x") == b"-NOAUTH Authentication required.\r\n"
            assert c.call("AUTH", "wrong") == (
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
            )
            assert c.call("AUTH", "s3cret pass") == b"+OK\r\n"
            assert c.call("GET", "x") == b"$-1\r\n"
            assert c.call("CONFIG", "GET", "maxclients") == (
                b"*2\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n"
            )
            info = c.call("INFO", "server")
            assert f"config_file:{conf}".encode() in info
        assert data_dir.is_dir()
    finally:
        stop(proc)


def test_command_line_overrides_config_file(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "headwater.conf"
    conf.write_text(f"port {free_port()}\nrequirepass fromfile\n")
    proc = spawn(str(conf), "--port", str(port), "--requirepass", "fromargs", port=port)
    try:
        with raw_client(port) as c:
            assert c.call("AUTH", "fromfile").startswith(b"-WRONGPASS")
            assert c.call("AUTH", "fromargs") == b"+OK\r\n"
    finally:
        stop(proc)


def test_startup_line(tmp_path: Path) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    proc = spawn("--port", str(port), "--dir", str(data_dir), port=port)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert "Headwater 0.1.0" in line
        assert "8.10.0" in line
        assert f"port={port}" in line
        assert f"pid={proc.pid}" in line
        assert f"dir={data_dir}" in line
        assert "ready to accept connections" in line
    finally:
        stop(proc)


def test_port_in_use_exits_1(tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        done = run_headwater("server", "--port", str(port), "--dir", str(tmp_path))
    assert done.returncode == 1
    assert "could not start" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_exits_0_promptly(tmp_path: Path, signum: int) -> None:
    port = free_port()
    proc = spawn("--port", str(port), "--dir", str(tmp_path), port=port)
    try:
        # A connected client (idle, and one mid-command) must not hold up the exit.
        idle = socket.create_connection(("127.0.0.1", port))
        busy = socket.create_connection(("127.0.0.1", port))
        busy.sendall(b"*2\r\n$3\r\nGET\r\n")
        time.sleep(0.1)
        start = time.monotonic()
        os.kill(proc.pid, signum)
        code = proc.wait(5)
        assert code == 0
        assert time.monotonic() - start < 3
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
        assert "Traceback" not in output
        assert "ready to exit" in output
        idle.close()
        busy.close()
    finally:
        stop(proc)


def _shutdown(tmp_path: Path) -> tuple[bytes, int]:
    port = free_port()
    proc = spawn("--port", str(port), "--dir", str(tmp_path), port=port)
    try:
        with raw_client(port) as c:
            c.send_raw(b"SHUTDOWN NOSAVE\r\n")
            reply = c.read_until_closed()
        return reply, proc.wait(5)
    finally:
        stop(proc)


def test_shutdown_command_exits_0(tmp_path: Path) -> None:
    _reply, code = _shutdown(tmp_path)
    assert code == 0


def test_shutdown_command_replies_nothing(tmp_path: Path) -> None:
    reply, _ = _shutdown(tmp_path)
    assert reply == b""
