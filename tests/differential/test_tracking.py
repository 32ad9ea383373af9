"""Client-side caching (CLIENT TRACKING), byte for byte against redis-server 7.0: what every
connection receives after each step: RESP3 ``invalidate`` pushes, RESP2 redirection as
``__redis__:invalidate`` messages, BCAST batches, flush nulls, ``tracking-redir-broken``,
the options' errors, GETREDIR and TRACKINGINFO.

A step may name a connection's id as ``{name}`` (REDIRECT's argument); client ids differ
between the two servers, so each connection's id is shown as ``<name>`` wherever an
integer reply equals it (the scenarios keep their other integers away from ids).
"""

from __future__ import annotations

import re

import pytest

from tests.differential.pubsub_session import Session, Step, words
from tests.helpers import ServerProcess, encode_command


def _steps(*lines: str) -> list[Step]:
    """``"r: GET a"`` → the step on connection ``r``."""
    return [(name, words(command)) for name, _, command in (ln.partition(": ") for ln in lines)]


SCENARIOS: dict[str, tuple[list[str], list[Step]]] = {
    "resp2_redirect_to_a_subscriber": (
        ["r", "red", "w"],
        _steps(
            "red: SUBSCRIBE __redis__:invalidate",
            "r: CLIENT TRACKING on REDIRECT {red}",
            "w: SET a 1",
            "r: GET a",
            "r: MGET a b c",
            "w: SET a 2",
            "w: SET a 3",  # (told once per read)
            "w: DEL b",
            "r: GET a",
            "r: SET a 4",  # its own change, to the redirection
            "r: GET a",
            "w: FLUSHALL",
            "r: CLIENT GETREDIR",
            "r: CLIENT TRACKING off",
            "r: CLIENT GETREDIR",
        ),
    ),
    "resp2_redirect_to_a_non_subscriber": (
        ["r", "red", "w"],
        _steps(
            "r: CLIENT TRACKING on REDIRECT {red}",
            "r: GET a",
            "w: SET a 1",
        ),
    ),
    "resp3_pushes_after_replies": (
        ["r", "w"],
        _steps(
            "r: HELLO 3",
            "r: CLIENT TRACKING on",
            "r: GET a",
            "w: SET a 1",
            "r: GET a",
            "r: SET a 2",
            "r: HSET h f v",
            "r: HGET h f",
            "r: HDEL h f",
            "r: MGET x y",
            "r: MULTI",
            "r: SET x 1",
            "r: GET y",
            "r: EXEC",
            "r: GET z",
            "r: FLUSHDB",
            "w: SET z 1",
            "r: GET z",
            "w: FLUSHALL",
        ),
    ),
    "noloop": (
        ["r", "w"],
        _steps(
            "r: HELLO 3",
            "r: CLIENT TRACKING on NOLOOP",
            "r: MGET a b",
            "r: SET a 1",
            "w: SET b 1",
            "r: CLIENT TRACKINGINFO",
        ),
    ),
    "bcast": (
        ["r", "w"],
        _steps(
            "r: HELLO 3",
            "r: CLIENT TRACKING on BCAST PREFIX a: PREFIX b:",
            "w: MSET a:2 x a:1 y b:1 z c:1 w",
            "w: DEL a:1",
            "r: CLIENT TRACKING on BCAST PREFIX c",
            "w: SET c:9 1",
            "r: CLIENT TRACKINGINFO",
            "r: CLIENT TRACKING on BCAST PREFIX a",
            "r: CLIENT TRACKING on BCAST PREFIX x PREFIX xy",
            "r: CLIENT TRACKING on",
            "r: CLIENT TRACKING off",
            "r: CLIENT TRACKING on BCAST NOLOOP",
            "r: SET own 1",
            "w: SET theirs 1",
            "r: CLIENT TRACKINGINFO",
        ),
    ),
    "optin_optout": (
        ["r", "w"],
        _steps(
            "r: HELLO 3",
            "r: CLIENT CACHING yes",
            "r: CLIENT TRACKING on OPTIN",
            "r: GET a",
            "w: SET a 1",
            "r: CLIENT CACHING no",
            "r: CLIENT CACHING maybe",
            "r: CLIENT CACHING yes",
            "r: CLIENT TRACKINGINFO",
            "r: GET b",
            "r: CLIENT TRACKINGINFO",
            "w: SET b 1",
            "r: CLIENT TRACKING on OPTOUT",
            "r: CLIENT TRACKING off",
            "r: CLIENT TRACKING on OPTOUT",
            "r: CLIENT CACHING yes",
            "r: CLIENT CACHING no",
            "r: GET c",
            "r: GET d",
            "w: MSET c 1 d 1",
        ),
    ),
    "errors": (
        ["r", "w"],
        _steps(
            "r: CLIENT TRACKING on PREFIX a",
            "r: CLIENT TRACKING on OPTIN OPTOUT",
            "r: CLIENT TRACKING on BCAST OPTIN",
            "r: CLIENT TRACKING on REDIRECT 1000000",
            "r: CLIENT TRACKING on REDIRECT abc",
            "r: CLIENT TRACKING on REDIRECT {w} REDIRECT {w}",
            "r: CLIENT TRACKING on REDIRECT",
            "r: CLIENT TRACKING on FOO",
            "r: CLIENT TRACKING maybe",
            "r: CLIENT TRACKING",
            "r: CLIENT TRACKING on BCAST PREFIX foobar PREFIX foo",
            "r: CLIENT TRACKING on BCAST PREFIX x PREFIX y",
            "r: CLIENT TRACKING on BCAST",
            "r: CLIENT TRACKINGINFO",
            "r: CLIENT GETREDIR x",
            "r: CLIENT TRACKINGINFO x",
            "r: CLIENT CACHING",
        ),
    ),
    "redirection_broken": (
        ["r", "red", "w"],
        _steps(
            "r: HELLO 3",
            "r: CLIENT TRACKING on REDIRECT {red}",
            "r: GET k",
            "red: QUIT",
            "w: SET k 1",
            "r: CLIENT TRACKINGINFO",
            "r: GET k",
            "w: SET k 2",
        ),
    ),
    "redirect_to_resp3": (
        ["r", "red", "w"],
        _steps(
            "red: HELLO 3",
            "r: CLIENT TRACKING on REDIRECT {red}",
            "r: GET k",
            "w: SET k 1",
            "w: FLUSHALL",
        ),
    ),
}


_VERSION = re.compile(rb"(\$7\r\nversion\r\n)\$\d+\r\n[^\r]*")


class _Tracked(Session):
    """A session whose connections know each other's ids (``{name}`` in a step)."""

    def __init__(self, server: ServerProcess, names: list[str]) -> None:
        super().__init__(server, names)
        self.ids: dict[str, int] = {}
        for name, sock in self.socks.items():
            sock.sendall(encode_command("CLIENT", "ID"))
            reply = self.received()[0][1]
            self.ids[name] = int(reply[1:-2])

    def argv(self, argv: list[bytes | str]) -> list[bytes | str]:
        return [re.sub(r"\{(\w+)\}", lambda m: str(self.ids[m[1]]), str(arg)) for arg in argv]

    def masked(self, got: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        """Ids as names, and HELLO's version (the servers' differ)."""
        got = [(who, _VERSION.sub(rb"\1VERSION", data)) for who, data in got]
        for name, client_id in self.ids.items():
            got = [
                (who, data.replace(b":%d\r\n" % client_id, b":<%s>\r\n" % name.encode()))
                for who, data in got
            ]
        return got


def _transcript(server: ServerProcess, name: str) -> list[object]:
    names, steps = SCENARIOS[name]
    session = _Tracked(server, names)
    try:
        session.step(names[0], ["FLUSHALL"])
        return [
            (who, list(argv), session.masked(session.step(who, session.argv(list(argv)))))
            for who, argv in steps
        ]
    finally:
        session.close()


@pytest.mark.parametrize("name", SCENARIOS)
def test_same_as_redis(headwater: ServerProcess, redis_server: ServerProcess, name: str) -> None:
    ours = _transcript(headwater, name)
    theirs = _transcript(redis_server, name)
    for got, want in zip(ours, theirs, strict=True):
        assert got == want


def _client_fields(server: ServerProcess, steps: list[Step]) -> list[str]:
    """CLIENT INFO's ``flags`` and ``redir`` after each step (``redir`` as a name)."""
    session = _Tracked(server, ["r", "red"])
    try:
        shown = []
        for who, argv in steps:
            session.step(who, session.argv(list(argv)))
            info = session.step("r", ["CLIENT", "INFO"])[0][1].decode()
            flags = re.search(r" flags=(\S+)", info)
            redir = re.search(r" redir=(-?\d+)", info)
            assert flags is not None and redir is not None
            by_id = {str(i): n for n, i in session.ids.items()}
            shown.append(f"{flags[1]} {by_id.get(redir[1], redir[1])}")
        return shown
    finally:
        session.close()


def test_client_list_flags_and_redir(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    steps = _steps(
        "r: CLIENT TRACKING on",
        "r: CLIENT TRACKING on REDIRECT {red}",
        "r: HELLO 3",
        "r: GET k",
        "red: QUIT",
        "r: SET k 1",
        "r: CLIENT TRACKING off",
        "r: CLIENT TRACKING on BCAST",
        "r: CLIENT TRACKING off",
    )
    assert _client_fields(headwater, steps) == _client_fields(redis_server, steps)


def test_info_counts(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    steps = _steps(
        "r: CLIENT TRACKING on",
        "r: MGET a b c",
        "red: CLIENT TRACKING on",
        "red: GET a",
        "w: CLIENT TRACKING on BCAST PREFIX p: PREFIX q:",
        "r: INFO",
        "w: SET a 1",
        "r: CLIENT TRACKING off",
        "w: CLIENT TRACKING off",
        "r: INFO",
    )

    def counts(server: ServerProcess) -> list[list[str]]:
        session = _Tracked(server, ["r", "red", "w"])
        try:
            session.step("r", ["FLUSHALL"])
            shown = []
            for who, argv in steps:
                got = session.step(who, list(argv))
                if argv[0] == "INFO":
                    text = got[0][1].decode()
                    shown.append(sorted(re.findall(r"tracking_\w+:\d+", text)))
            return shown
        finally:
            session.close()

    assert counts(headwater) == counts(redis_server)
