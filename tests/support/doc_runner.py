"""Running a documentation page's examples as a reader would, in order, in one shell.

A page's ``sh`` blocks run as written and its ``python`` blocks with this interpreter; other
blocks (``text``, ``yaml``, ``conf`` …) are shown, not run. What a reader does by hand is
done for them:

- the ports a page uses (6379, 6380 …, 26379 …, 9121) become free ones, the same mapping in
  every block;
- ``.venv/bin/`` is this repository's virtual environment; ``make setup`` (done), ``make
  test`` (running) and ``make run`` (the test starts that server itself: see the README's
  test) are skipped;
- a line that starts a server in the foreground (``.venv/bin/headwater server …``, or
  ``redis-server … --sentinel``), which a reader leaves running in a terminal of its own, runs
  in the background, its output in ``servers.log``, and the script waits for its port;
- ``redis-cli`` without ``-p`` talks to the page's 6379.

Everything the script started is killed at the end (it runs in a session of its own).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT, free_port

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: the ports the docs use
DOC_PORTS = (6379, 6380, 6381, 6382, 6391, 6392, 6393, 9121, 26379, 26380, 26381)
_PORT = re.compile(r"(?<![\d.-])(" + "|".join(map(str, DOC_PORTS)) + r")(?![\d])")
_SERVER_LINE = re.compile(r"^(\.venv/bin/headwater server|redis-server )")
#: what the test has done before the page runs (``make test``: it is running)
_MAKE_DONE = re.compile(r"^make (setup|run|test)\b")
_PORT_ARG = re.compile(r"--tls-port (\d+)|--port ([1-9]\d*)")

PRELUDE = """\
set -euo pipefail
redis-cli() { command redis-cli -p %(default_port)d "$@"; }
wait_port() {
  for _ in $(seq 1 300); do
    (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing answers on port $1" >&2; cat servers.log >&2; return 1
}
wait_free() {  # (a server just killed may still hold its port for a moment)
  for _ in $(seq 1 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null || return 0
    sleep 0.05
  done
}
"""


def blocks(page: Path) -> list[tuple[str, str]]:
    return BLOCK.findall(page.read_text())


def port_map() -> dict[int, int]:
    return {port: free_port() for port in DOC_PORTS}


def script(page: Path, ports: dict[int, int], only: slice = slice(None)) -> str:
    """The page's runnable blocks (``only`` those) as one bash script."""
    parts = [PRELUDE % {"default_port": ports[6379]}]
    runnable = [(kind, code) for kind, code in blocks(page) if kind in ("sh", "python")]
    for kind, code in runnable[only]:
        if kind == "sh":
            parts.append(_shell(code))
        elif kind == "python":
            parts.append(f"{sys.executable} - <<'PYTHON_BLOCK'\n{code}PYTHON_BLOCK\n")
    text = "\n".join(parts)
    text = _PORT.sub(lambda m: str(ports[int(m.group(1))]), text)
    return re.sub(r"(?<![/\w])\.venv/bin/", f"{ROOT}/.venv/bin/", text)


def _shell(code: str) -> str:
    lines = []
    for line in _joined(code):
        if _MAKE_DONE.match(line):
            continue
        if _SERVER_LINE.match(line) and not line.rstrip().endswith("&"):
            found = _PORT_ARG.search(line)
            port = (found.group(1) or found.group(2)) if found is not None else None
            if port is not None:
                lines.append(f"wait_free {port}")
            lines.append(f"{line} >>servers.log 2>&1 &")
            if port is not None:
                lines.append(f"wait_port {port}")
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def _joined(code: str) -> list[str]:
    """Lines, with backslash continuations joined."""
    out: list[str] = []
    pending = ""
    for line in code.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def run_page(
    page: Path,
    workdir: Path,
    ports: dict[int, int] | None = None,
    timeout: float = 120,
    only: slice = slice(None),
) -> str:
    """Run the page's examples (``only`` those of its sh and python blocks) in ``workdir``;
    their output (stdout and stderr), or an AssertionError with the script and its output."""
    ports = ports or port_map()
    text = script(page, ports, only)
    proc = subprocess.Popen(
        ["bash", "-c", text], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True, env=_environment(),
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc.pid)
        output, _ = proc.communicate()
        raise AssertionError(f"{page.name}: timed out\n{text}\n---\n{output}") from None
    finally:
        _kill(proc.pid)
    if proc.returncode != 0:
        log = workdir / "servers.log"
        servers = log.read_text() if log.exists() else ""
        raise AssertionError(f"{page.name}: exit {proc.returncode}\n{text}\n---\n{output}{servers}")
    return output


def _environment() -> dict[str, str]:
    """A reader's shell with the virtual environment active (``python3`` is its Python: what
    Spark's workers run)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}


def _kill(session: int) -> None:
    try:
        os.killpg(session, signal.SIGKILL)
    except ProcessLookupError:
        pass


def answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
