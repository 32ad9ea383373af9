"""Several connections to one server, driven step by step, with everything each receives
recorded: Pub/Sub and MONITOR send to clients other than the one that asked, and a command
may have several replies (SUBSCRIBE a b) or none (a second MONITOR)."""

from __future__ import annotations

import re
import select
import socket
from collections.abc import Sequence

from tests.helpers import ServerProcess, encode_command

#: how long a step waits for more bytes after the last ones arrived
SETTLE_S = 0.03
#: how long it waits for the first bytes (a loaded machine may take longer than SETTLE_S to
#: answer at all; a step that gets nothing pays this once)
FIRST_S = 0.3

#: a MONITOR line's time and address differ from one server to another
_LUA_HEAD = re.compile(rb"\+\d+\.\d{6} \[(\d+) lua\]")
#: a monitor line's time and client address (``lua``, a script's command, is kept)
_MONITOR_HEAD = re.compile(rb"\+\d+\.\d{6} \[(\d+) (?!lua\])[^\]]+\]")

Step = tuple[str, Sequence[bytes | str]]


class Session:
    def __init__(self, server: ServerProcess, names: Sequence[str]) -> None:
        self.socks = {name: socket.create_connection(("127.0.0.1", server.port)) for name in names}

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()

    def step(self, name: str, argv: Sequence[bytes | str]) -> list[tuple[str, bytes]]:
        """Send one command on connection ``name``; what every connection received after."""
        self.socks[name].sendall(encode_command(*argv))
        return self.received()

    def received(self) -> list[tuple[str, bytes]]:
        got: dict[str, bytes] = {}
        by_sock = {sock: name for name, sock in self.socks.items()}
        while True:
            wait = SETTLE_S if got else FIRST_S
            ready, _, _ = select.select(list(by_sock), [], [], wait)
            if not ready:
                break
            for sock in ready:
                data = sock.recv(1 << 20)
                name = by_sock[sock]
                got[name] = got.get(name, b"") + (data or b"<closed>")
                if not data:
                    del by_sock[sock]
        return sorted(
            (name, _LUA_HEAD.sub(rb"+TIME [\1 lua]", _MONITOR_HEAD.sub(rb"+TIME [\1 ADDR]", data)))
            for name, data in got.items()
        )


def transcript(server: ServerProcess, names: Sequence[str], steps: Sequence[Step]) -> list[object]:
    """Each step with what it made every connection receive."""
    session = Session(server, names)
    try:
        session.step(names[0], ["FLUSHALL"])
        return [(name, list(argv), session.step(name, argv)) for name, argv in steps]
    finally:
        session.close()


def words(line: str) -> list[str]:
    return line.split()
