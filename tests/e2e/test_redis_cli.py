"""redis-cli (Debian's, from Redis 7.0) against a Headwater process."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers import ServerProcess, encode_command

REDIS_CLI = shutil.which("redis-cli")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(REDIS_CLI is None, reason="redis-cli not installed"),
]


def cli(port: int, *args: str, stdin: bytes | None = None, timeout: float = 30) -> str:
    assert REDIS_CLI is not None
    done = subprocess.run(
        [REDIS_CLI, "-p", str(port), *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_ping_set_get(headwater: ServerProcess) -> None:
    assert cli(headwater.port, "ping") == "PONG\n"
    assert cli(headwater.port, "set", "cli:key", "hello world") == "OK\n"
    assert cli(headwater.port, "get", "cli:key") == "hello world\n"
    assert cli(headwater.port, "--no-raw", "get", "cli:key") == '"hello world"\n'
    assert cli(headwater.port, "--no-raw", "get", "cli:missing") == "(nil)\n"
    assert cli(headwater.port, "--no-raw", "incr", "cli:n") == "(integer) 1\n"
    assert cli(headwater.port, "hset", "cli:h", "f", "v") == "1\n"
    assert cli(headwater.port, "hgetall", "cli:h") == "f\nv\n"
    err = cli(headwater.port, "--no-raw", "nosuchcommand")
    assert err.startswith("(error) ERR unknown command 'nosuchcommand'")


def test_pipe_mass_insertion(private_headwater: ServerProcess) -> None:
    port = private_headwater.port
    payload = b"".join(encode_command("SET", f"mass:{i}", f"value-{i}") for i in range(10_000))
    out = cli(port, "--pipe", stdin=payload)
    assert "errors: 0, replies: 10000" in out, out
    assert cli(port, "dbsize") == "10000\n"
    assert cli(port, "get", "mass:9999") == "value-9999\n"
    assert cli(port, "flushall") == "OK\n"


def test_interactive_stdin(headwater: ServerProcess) -> None:
    """redis-cli reading commands line by line from stdin (not a tty)."""
    script = b'set cli:i "two words"\nget cli:i\nincrby cli:j 5\nexists cli:i cli:j cli:x\nping\n'
    assert cli(headwater.port, stdin=script) == "OK\ntwo words\n5\n2\nPONG\n"


def test_info_server_no_raw(headwater: ServerProcess) -> None:
    out = cli(headwater.port, "--no-raw", "info", "server")
    lines = out.replace("\r", "").splitlines()
    assert lines[0] == "# Server"
    fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    assert fields["redis_version"] == "8.10.0"
    assert fields["server_name"] == "headwater"
    assert fields["tcp_port"] == str(headwater.port)


def test_cli_resp3(headwater: ServerProcess) -> None:
    cli(headwater.port, "hset", "cli:h3", "a", "1")
    assert cli(headwater.port, "-3", "--no-raw", "hgetall", "cli:h3") == '1# "a" => "1"\n'
    assert cli(headwater.port, "-3", "--no-raw", "get", "cli:none") == "(nil)\n"
