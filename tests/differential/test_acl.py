"""ACL against redis-server 7.0, RESP2 and RESP3: every SETUSER rule and how GETUSER and
LIST show it, the rules' errors, NOPERM for commands, keys (read and write apart) and
channels, the ACL LOG's fields, AUTH and HELLO with users, DRYRUN, CAT, GENPASS, DELUSER.

Headwater follows Redis 7.2+ where 7.0 answers otherwise; those differences, and only those,
are normalised before the comparison (``_normalised``):

* the NOPERM texts: 7.0 says "this user has no permissions to run the 'get' command" and
  "... to access one of the keys used as arguments"; 7.2+ names the user ("User alice has no
  permissions to run the 'get' command") and says "No permissions to access a key";
* users carry the ``sanitize-payload`` flag from their creation (7.2+; 7.0 shows none);
* command rules are shown as typed, in order (7.2+); 7.0 recomputes them from its bitmap, so
  the same rules come in another order: the rules of a description are compared as a set;
* ACL LOG entries have three more fields (entry-id, timestamp-created,
  timestamp-last-updated, 7.2+); the age and the client's varying details are masked.

The exact 7.2+ texts and orders are checked in tests/unit/test_acl.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import pytest

from tests.differential.harness import argv_of, parse
from tests.helpers import RawClient, ServerProcess

PASSWORD_HASH = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"  # "password"

#: each scenario: commands on one connection, which starts as the default user
SCENARIOS: dict[str, list[str]] = {
    "new_user": ["ACL SETUSER alice", "ACL GETUSER alice", "ACL LIST", "ACL USERS"],
    "flags_and_passwords": [
        "ACL SETUSER alice on >p1 >p2 >p1",
        "ACL GETUSER alice",
        "ACL SETUSER alice <p1",
        f"ACL SETUSER alice #{PASSWORD_HASH}",
        "ACL GETUSER alice",
        f"ACL SETUSER alice !{PASSWORD_HASH}",
        "ACL SETUSER alice nopass",
        "ACL GETUSER alice",
        "ACL SETUSER alice resetpass off",
        "ACL LIST",
    ],
    "key_patterns": [
        "ACL SETUSER alice ~a* %R~r* %W~w* %RW~rw* ~a*",
        "ACL GETUSER alice",
        "ACL SETUSER alice %R~w* %W~r*",
        "ACL GETUSER alice",
        "ACL SETUSER alice allkeys",
        "ACL GETUSER alice",
        "ACL SETUSER alice resetkeys ~x",
        "ACL LIST",
    ],
    "channel_patterns": [
        "ACL SETUSER alice &news.* &chat",
        "ACL GETUSER alice",
        "ACL SETUSER alice allchannels",
        "ACL GETUSER alice",
        "ACL SETUSER alice resetchannels &one",
        "ACL LIST",
    ],
    "command_rules": [
        "ACL SETUSER alice +get +set",
        "ACL GETUSER alice",
        "ACL SETUSER alice +@hash -hset",
        "ACL GETUSER alice",
        "ACL SETUSER alice +client|id +config|get",
        "ACL GETUSER alice",
        "ACL SETUSER alice +select|0",
        "ACL GETUSER alice",
        "ACL SETUSER alice allcommands -flushall",
        "ACL GETUSER alice",
        "ACL SETUSER alice nocommands +@read",
        "ACL LIST",
        "ACL SETUSER bob +@all -@dangerous",
        "ACL GETUSER bob",
    ],
    "selectors": [
        "ACL SETUSER alice on nopass +get ~a* (+set ~b*) (+@hash %R~h*)",
        "ACL GETUSER alice",
        "ACL LIST",
        "ACL SETUSER alice clearselectors",
        "ACL GETUSER alice",
        "ACL SETUSER alice (+get",
        "ACL SETUSER alice (+get ~x*)",
        "ACL GETUSER alice",
    ],
    "reset": [
        "ACL SETUSER alice on >pw ~* &* +@all (+get)",
        "ACL SETUSER alice reset",
        "ACL GETUSER alice",
    ],
    "rule_errors": [
        "ACL SETUSER alice +nosuchcommand",
        "ACL SETUSER alice -nosuchcommand",
        "ACL SETUSER alice +@nosuchcategory",
        "ACL SETUSER alice bogus",
        "ACL SETUSER alice ~*",
        "ACL SETUSER alice ~* ~more",
        "ACL SETUSER alice &* &more",
        "ACL SETUSER alice <notthere",
        "ACL SETUSER alice #tooshort",
        "ACL SETUSER alice !tooshort",
        "ACL SETUSER alice +config|get|x",
        "ACL SETUSER alice +get|",
        "ACL SETUSER alice +client|nosuchsub",
        "ACL SETUSER alice -select|0",
        "ACL SETUSER alice %X~a",
        "ACL SETUSER alice %~a",
        "ACL SETUSER 'a b'",
        "ACL GETUSER alice",
        "ACL USERS",
    ],
    "errors_change_nothing": [
        "ACL SETUSER alice on >pw +get",
        "ACL SETUSER alice +set +nosuchcommand",
        "ACL GETUSER alice",
    ],
    "noperm_command": [
        "ACL SETUSER alice on >pw +get ~*",
        "AUTH alice pw",
        "GET k",
        "SET k v",
        "CLIENT ID",
        "ACL WHOAMI",
        "MULTI",
        "SET k v",
        "GET k",
        "EXEC",
    ],
    "noperm_subcommand": [
        "ACL SETUSER alice on >pw +client|id +config|get +select|0",
        "AUTH alice pw",
        "CLIENT ID",
        "CLIENT SETNAME x",
        "CONFIG GET maxmemory",
        "CONFIG SET maxmemory 0",
        "SELECT 0",
        "SELECT 1",
    ],
    "noperm_keys_read_write": [
        "ACL SETUSER alice on >pw +@all %R~r* %W~w* ~rw*",
        "AUTH alice pw",
        "SET w1 v",
        "SET r1 v",
        "GET r1",
        "GET w1",
        "SET rw1 v",
        "GET rw1",
        "COPY r1 w2",
        "COPY w1 r2",
        "LMOVE r1 w1 LEFT RIGHT",
        "MSET rw1 a w1 b",
        "MSET rw1 a r1 b",
        "XADD w1 * f v",
        "XADD r1 * f v",
        "XRANGE r1 - +",
        "XRANGE w1 - +",
        "EXISTS w1",
        "DEL r1",
    ],
    "noperm_channels": [
        "ACL SETUSER alice on >pw +@all ~* resetchannels &news.* &chat",
        "AUTH alice pw",
        "PUBLISH news.today hi",
        "PUBLISH sports hi",
        "PUBLISH chat hi",
        "SPUBLISH chat hi",
        "SPUBLISH other hi",
    ],
    "noperm_selectors": [
        "ACL SETUSER alice on >pw +get ~a* (+set ~b*)",
        "AUTH alice pw",
        "GET a1",
        "GET b1",
        "SET b1 v",
        "SET a1 v",
        "DEL a1",
    ],
    "sort_patterns": [  # (BY and GET read keys no key spec names: only full read access)
        "RPUSH mylist 2 1",
        "SET v1 9",
        "SET v2 8",
        "ACL SETUSER alice on >pw (+sort +sort_ro ~mylist)",
        "AUTH alice pw",
        "SORT mylist BY v*",
        "SORT mylist GET v*",
        "SORT mylist GET #",
        "SORT mylist BY nosort",
        "SORT_RO mylist BY v* GET #",
        "SORT mylist LIMIT 0 1 BY v* STORE mylist",
        "AUTH default x",
        "ACL SETUSER alice (+sort ~mylist ~v*) (+sort ~mylist %W~*)",
        "AUTH alice pw",
        "SORT mylist BY v*",
        "SORT mylist GET v*",
        "AUTH default x",
        "ACL SETUSER alice (+sort ~mylist %R~*)",
        "AUTH alice pw",
        "SORT mylist BY v*",
        "SORT mylist BY v* GET v* GET #",
        "SORT_RO mylist BY v*",
        "AUTH default x",
        "ACL SETUSER alice reset on >pw +sort ~other ~*",
        "AUTH alice pw",
        "SORT mylist BY v* GET v*",
    ],
    "log_fields": [
        "ACL LOG RESET",
        "ACL SETUSER alice on >pw +get +multi +discard %R~r* resetchannels +publish",
        "AUTH alice pw",
        "SET k v",
        "SET k v",
        "GET other",
        "PUBLISH ch m",
        "MULTI",
        "INCR n",
        "DISCARD",
        "AUTH alice wrong",
        "AUTH nobody wrong",
        "AUTH default x",
    ],
    "scripts": [
        "ACL SETUSER alice on >pw +eval +fcall +function|load +get %R~r* &ch",
        "AUTH alice pw",
        "EVAL \"return redis.call('get', KEYS[1])\" 1 r1",
        "EVAL \"return redis.call('set', KEYS[1], 'v')\" 1 r1",
        "EVAL \"return redis.call('get', 'x1')\" 0",
        "EVAL \"return redis.pcall('get', 'x1')\" 0",
        "EVAL \"return redis.call('publish', 'other', 'm')\" 0",
    ],
    "auth_and_hello": [
        "ACL SETUSER alice on >pw +@all ~*",
        "AUTH alice wrong",
        "AUTH alice pw",
        "ACL WHOAMI",
        "AUTH a b c",
        "AUTH onlyone",
        "HELLO 2 AUTH alice wrong",
        "HELLO 2 AUTH alice pw SETNAME n",
        "ACL WHOAMI",
        "ACL SETUSER carol off >pw +@all",
        "AUTH carol pw",
        "ACL SETUSER dave on nopass +@all",
        "AUTH dave anything",
        "ACL WHOAMI",
    ],
    "dryrun": [
        "ACL SETUSER alice on +get %R~r* &ch +publish +client|id",
        "ACL DRYRUN alice GET r1",
        "ACL DRYRUN alice GET x1",
        "ACL DRYRUN alice SET r1 v",
        "ACL DRYRUN alice PUBLISH ch m",
        "ACL DRYRUN alice PUBLISH other m",
        "ACL DRYRUN alice CLIENT ID",
        "ACL DRYRUN alice CLIENT KILL ID 1",
        "ACL DRYRUN alice CLIENT NOSUCH",
        "ACL DRYRUN alice NOSUCH x",
        "ACL DRYRUN alice GET",
        "ACL DRYRUN nobody GET x",
        "ACL DRYRUN alice",
    ],
    "subcommand_errors": [
        "ACL",
        "ACL NOSUCH",
        "ACL GETUSER",
        "ACL GETUSER a b",
        "ACL GETUSER nobody",
        "ACL CAT a b",
        "ACL CAT nosuchcategory",
        "ACL GENPASS 0",
        "ACL GENPASS 4097",
        "ACL GENPASS x",
        "ACL GENPASS 1 2",
        "ACL LOG x",
        "ACL LOG 1 2",
        "ACL LOG -5",
        "ACL DELUSER default",
        "ACL DELUSER alice default",
        "ACL DELUSER nobody",
        "ACL LOAD",
        "ACL SAVE",
        "ACL WHOAMI x",
        "ACL LIST x",
    ],
}


def _cleanup(client: RawClient) -> None:
    client.call("AUTH", "default", "x")  # (a default user with nopass takes any password)
    users = parse(client.call("ACL", "USERS"))
    assert isinstance(users, list)
    others = [u for u in users if u != b"default"]
    if others:
        client.call("ACL", "DELUSER", *others)
    client.call("ACL", "SETUSER", "default", "reset", "on", "nopass", "~*", "&*", "+@all")
    client.call("ACL", "LOG", "RESET")


@pytest.fixture
def clients(headwater: ServerProcess, redis_server: ServerProcess) -> Iterator[list[RawClient]]:
    pair = [RawClient(headwater.port), RawClient(redis_server.port)]
    for client in pair:
        _cleanup(client)
    yield pair
    for client in pair:
        client.close()
    for server in (headwater, redis_server):
        fresh = RawClient(server.port)
        _cleanup(fresh)
        fresh.close()


_OUR_NOPERM = [
    (
        re.compile(rb"NOPERM User \S+ has no permissions to run the '([^']*)' command"),
        rb"NOPERM this user has no permissions to run the '\1' command",
    ),
    (
        re.compile(rb"NOPERM No permissions to access a key"),
        b"NOPERM this user has no permissions to access one of the keys used as arguments",
    ),
    (
        re.compile(rb"NOPERM No permissions to access a channel"),
        b"NOPERM this user has no permissions to access one of the channels used as arguments",
    ),
    (
        re.compile(
            rb"ACL failure in script: User \S+ has no permissions to run the '[^']*' command"
        ),
        b"The user executing the script can't run this command or subcommand",
    ),
    (
        re.compile(rb"ACL failure in script: No permissions to access a key"),
        b"The user executing the script can't access at least one of the keys mentioned in the "
        b"command arguments",
    ),
    (
        re.compile(rb"ACL failure in script: No permissions to access a channel"),
        b"The user executing the script can't publish to the channel mentioned in the command",
    ),
]
#: ACL DRYRUN's verbose form (a bulk string)
_OUR_DRYRUN = (
    re.compile(rb"^User \S+ has no permissions to "),
    b"This user has no permissions to ",
)
#: replies that differ between two servers whatever they run (ids, versions): masked
_MASKED = ("HELLO", "CLIENT ID")


def _rules_as_set(text: bytes) -> object:
    """A description's words with the command rules (after the leading +@all or -@all)
    as a set; each selector on its own."""
    parts = text.split(b" (")
    shown: list[object] = []
    for part in parts:
        words = part.rstrip(b")").split()
        words = [w for w in words if w != b"sanitize-payload"]
        start = next((i for i, w in enumerate(words) if w in (b"+@all", b"-@all")), len(words))
        shown.append((words[: start + 1], sorted(words[start + 1 :])))
    return shown


def _norm_value(value: object, key: bytes | None = None) -> object:
    if isinstance(value, list) and key == b"flags":
        return sorted(v for v in value if v != b"sanitize-payload")
    if isinstance(value, bytes) and key == b"commands":
        return _rules_as_set(value)
    if isinstance(value, bytes) and value.startswith(b"user "):
        return _rules_as_set(value)
    if isinstance(value, list):
        return _norm_pairs(value)
    return value


def _norm_pairs(items: list[object]) -> object:
    """A map as RESP2 shows it (key, value, ...) or a plain list."""
    keyed = len(items) % 2 == 0 and all(
        isinstance(k, bytes) and k in _MAP_KEYS for k in items[0::2]
    )
    if not keyed:
        return [_norm_value(item) for item in items]
    out: dict[bytes, object] = {}
    for key, value in zip(items[0::2], items[1::2], strict=True):
        assert isinstance(key, bytes)
        out[key] = _norm_value(value, key)
    return out


_MAP_KEYS = {b"flags", b"passwords", b"commands", b"keys", b"channels", b"selectors"}


def _normalised(raw: bytes, ours: bool) -> object:
    if ours:
        for pattern, replacement in _OUR_NOPERM:
            raw = pattern.sub(replacement, raw)
    if raw.startswith(b"-"):
        return raw
    value = parse(raw)
    if ours and isinstance(value, bytes):
        value = _OUR_DRYRUN[0].sub(_OUR_DRYRUN[1], value)
    if isinstance(value, dict):  # RESP3 GETUSER
        return {k: _norm_value(v, k) for k, v in value.items()}
    return _norm_value(value)


def _session(client: RawClient, resp: int, commands: Sequence[str], ours: bool) -> list[object]:
    client.call("HELLO", str(resp))
    replies = []
    for command in commands:
        raw = client.call(*argv_of(command))
        masked = command.startswith(_MASKED) and not raw.startswith(b"-")
        replies.append(b"<masked>" if masked else _normalised(raw, ours))
    return replies


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_acl_matches_redis(clients: list[RawClient], scenario: str, resp: int) -> None:
    ours, theirs = (
        _session(client, resp, SCENARIOS[scenario], client is clients[0]) for client in clients
    )
    for command, got, want in zip(SCENARIOS[scenario], ours, theirs, strict=True):
        assert got == want, f"RESP{resp} {command!r}: headwater {got!r} != redis {want!r}"


def _log_entries(client: RawClient, resp: int) -> list[dict[bytes, object]]:
    client.call("HELLO", str(resp))
    value = parse(client.call("ACL", "LOG"))
    assert isinstance(value, list)
    entries = []
    for entry in value:
        fields = (
            entry if isinstance(entry, dict) else dict(zip(entry[0::2], entry[1::2], strict=True))
        )
        age = fields.pop(b"age-seconds")
        assert float(age) >= 0  # type: ignore[arg-type]
        for extra in (b"entry-id", b"timestamp-created", b"timestamp-last-updated"):
            fields.pop(extra, None)  # (7.2+ only)
        info = fields.pop(b"client-info")
        assert isinstance(info, bytes)
        kept = dict(part.split(b"=", 1) for part in info.split(b" "))
        fields[b"client-info"] = {k: kept[k] for k in (b"cmd", b"user", b"db", b"name")}
        entries.append(fields)
    return entries


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("scenario", ["log_fields", "scripts", "noperm_keys_read_write"])
def test_log_entries_match_redis(clients: list[RawClient], scenario: str, resp: int) -> None:
    for client in clients:
        client.call("CLIENT", "SETNAME", "logged")
        _session(client, resp, SCENARIOS[scenario], False)
        client.call("AUTH", "default", "x")
    ours, theirs = (_log_entries(client, resp) for client in clients)
    assert ours == theirs


def test_categories_match_redis(clients: list[RawClient]) -> None:
    """ACL CAT: the same categories; in each, the same commands among those both servers
    have (Redis lists them in hash order: compared as sets)."""
    ours, theirs = (parse(c.call("ACL", "CAT")) for c in clients)
    assert isinstance(ours, list) and isinstance(theirs, list)
    assert sorted(ours) == sorted(theirs)
    common = _common_commands(clients)
    for category in theirs:
        mine, redis = (set(parse(c.call("ACL", "CAT", category))) & common for c in clients)  # type: ignore[arg-type]
        assert mine == redis, category


def _common_commands(clients: list[RawClient]) -> set[bytes]:
    names = []
    for client in clients:
        listed = parse(client.call("COMMAND", "LIST"))
        assert isinstance(listed, list)
        full: set[bytes] = set()
        for name in listed:
            full.add(name)
            docs = parse(client.call("COMMAND", "INFO", name))
            assert isinstance(docs, list)
            for sub in docs[0][9]:
                full.add(sub[0])
        names.append(full)
    return names[0] & names[1]


def test_genpass_shapes(clients: list[RawClient]) -> None:
    for client in clients:
        for bits, chars in ((None, 64), (1, 1), (5, 2), (128, 32), (4096, 1024)):
            args = ["ACL", "GENPASS"] + ([str(bits)] if bits else [])
            value = parse(client.call(*args))
            assert isinstance(value, bytes) and re.fullmatch(rb"[0-9a-f]*", value)
            assert len(value) == chars


@pytest.mark.parametrize(
    "pattern", ["acl*", "tls-*", "protected-mode", "enable-protected-configs", "requirepass"]
)
def test_security_settings_match_redis(clients: list[RawClient], pattern: str) -> None:
    """The ACL, TLS and protection settings: same names, same defaults (Redis lists them in
    hash order: compared as pairs)."""
    ours, theirs = (parse(c.call("CONFIG", "GET", pattern)) for c in clients)
    assert isinstance(ours, list) and isinstance(theirs, list)
    assert sorted(zip(ours[0::2], ours[1::2], strict=True)) == sorted(
        zip(theirs[0::2], theirs[1::2], strict=True)
    )
    assert ours  # (each pattern names something)
