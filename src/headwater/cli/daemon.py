"""``daemonize yes`` and ``pidfile``, as redis-server: the server detaches from the terminal
(fork, setsid, its standard streams on /dev/null: the log goes to ``logfile``), and writes
its process id to ``pidfile`` (when daemonized without one: /var/run/headwater.pid), which a
clean exit removes. A pid file that cannot be written is logged and the server goes on."""

from __future__ import annotations

import atexit
import logging
import os
import sys

DEFAULT_PIDFILE = "/var/run/headwater.pid"

log = logging.getLogger("headwater.server")


def daemonize() -> None:
    """The calling process exits 0; its child goes on as a session leader."""
    if os.fork() > 0:
        os._exit(0)  # (the parent: nothing of the server to flush or close)
    os.setsid()
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)


def pidfile_for(daemonized: bool, configured: str) -> str:
    return configured or (DEFAULT_PIDFILE if daemonized else "")


def write_pidfile(path: str) -> None:
    try:
        with open(path, "w") as out:
            out.write(f"{os.getpid()}\n")
    except OSError as exc:
        log.warning("Failed to write PID file: %s", exc.strerror or exc)
        return
    pid = os.getpid()
    atexit.register(_remove, path, pid)


def _remove(path: str, pid: int) -> None:
    if os.getpid() == pid:  # (not from a child this process forked: a BGSAVE's)
        try:
            os.unlink(path)
        except OSError:
            pass
