"""ACL in the engine, where Redis 7.2+ (which Headwater follows) answers otherwise than the
7.0 server of the differential tests, and what needs several connections or a file: rules
shown as typed and in order, the NOPERM texts naming the user, EXEC's second check,
connections dropped with their user or their channels, ACL LOAD and SAVE, ``user`` lines,
requirepass as the default user's password, the INFO counters.

Expected texts are Redis 7.2+'s (src/acl.c: ACLDescribeSelector, getAclErrorMessage,
ACLSetUserStringError, ACLLoadFromFile; src/multi.c: execCommand)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from headwater.commands.context import Client
from headwater.config import Config, ConfigError
from headwater.engine import Engine
from headwater.resp.parser import split_args


def _engine(**settings: str) -> Engine:
    config = Config()
    for name, value in settings.items():
        config.load_value(name.replace("_", "-"), [value])
    return Engine(config)


def run(engine: Engine, c: Client, line: str | list[bytes]) -> bytes:
    argv = line if isinstance(line, list) else split_args(line.encode())
    assert argv is not None
    c.out.clear()
    engine.execute(c, argv)
    reply = b"".join(c.out)
    c.out.clear()
    return reply


@pytest.fixture
def engine() -> Engine:
    return _engine()


def _list(engine: Engine) -> list[str]:
    c = engine.new_client("127.0.0.1:9", "127.0.0.1:6379")
    c.authenticated = True
    reply = run(engine, c, "ACL LIST").decode()
    engine.client_closed(c)
    return [line for line in reply.split("\r\n")[2::2] if line]


def test_rules_are_shown_as_typed_in_order(engine: Engine) -> None:
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice +get +set")
    run(engine, c, "ACL SETUSER alice -set +@hash -hset +client|id +select|0 +GET")
    run(engine, c, "ACL SETUSER bob +@all -@dangerous -keys (~s* +xadd +@READ)")
    assert _list(engine) == [
        "user alice off sanitize-payload resetchannels "
        "-@all -set +@hash -hset +client|id +select|0 +get",
        "user bob off sanitize-payload resetchannels +@all -@dangerous -keys "
        "(~s* resetchannels -@all +xadd +@read)",
        "user default on nopass sanitize-payload ~* &* +@all",
    ]


def test_a_later_rule_replaces_an_older_one_of_the_same_command(engine: Engine) -> None:
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice -@all +config|get +config|set -config +@read -@read")
    assert _list(engine)[0].endswith("-@all -config -@read")


def test_noperm_texts_name_the_user(engine: Engine) -> None:
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice on >pw +get +publish %R~r* &ch")
    assert run(engine, c, "AUTH alice pw") == b"+OK\r\n"
    assert run(engine, c, "SET r v") == (
        b"-NOPERM User alice has no permissions to run the 'set' command\r\n"
    )
    assert run(engine, c, "GET x") == b"-NOPERM No permissions to access a key\r\n"
    assert run(engine, c, "PUBLISH other m") == b"-NOPERM No permissions to access a channel\r\n"
    assert run(engine, c, "GET r") == b"$-1\r\n"


def test_dryrun_is_verbose(engine: Engine) -> None:
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice +get %R~r* &ch +publish")
    assert run(engine, c, "ACL DRYRUN alice GET x") == (
        b"$51\r\nUser alice has no permissions to access the 'x' key\r\n"
    )
    assert run(engine, c, "ACL DRYRUN alice PUBLISH other m").endswith(
        b"User alice has no permissions to access the 'other' channel\r\n"
    )
    assert run(engine, c, "ACL DRYRUN alice SET r v").endswith(
        b"User alice has no permissions to run the 'set' command\r\n"
    )
    assert run(engine, c, "ACL DRYRUN alice GET r") == b"+OK\r\n"


def test_exec_checks_again_what_changed_since_queued(engine: Engine) -> None:
    admin, c = engine.new_client(), engine.new_client()
    run(engine, admin, "ACL SETUSER alice on >pw +@all ~*")
    run(engine, c, "AUTH alice pw")
    run(engine, c, "MULTI")
    run(engine, c, "SET k v")
    run(engine, c, "GET k")
    run(engine, admin, "ACL SETUSER alice -set")
    assert run(engine, c, "EXEC") == (
        b"*2\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated "
        b"and the EXEC call. This command is no longer allowed for the following reason: no "
        b"permission to execute the command or subcommand\r\n$-1\r\n"
    )
    assert run(engine, admin, "EXISTS k") == b":0\r\n"
    log = run(engine, admin, "ACL LOG 1")
    assert b"multi" in log and b"set" in log


def test_deleting_a_user_closes_its_connections(engine: Engine) -> None:
    admin, c = engine.new_client(), engine.new_client()
    killed: list[Client] = []
    engine.on_kill = killed.append
    run(engine, admin, "ACL SETUSER alice on >pw +@all ~*")
    run(engine, c, "AUTH alice pw")
    assert run(engine, admin, "ACL DELUSER alice nobody") == b":1\r\n"
    assert killed == [c]
    assert run(engine, admin, "ACL DELUSER default") == (
        b"-ERR The 'default' user cannot be removed\r\n"
    )


def test_deleting_ones_own_user_answers_then_closes(engine: Engine) -> None:
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice on >pw +@all ~*")
    run(engine, c, "AUTH alice pw")
    assert run(engine, c, "ACL DELUSER alice") == b":1\r\n"
    assert c.close_after_reply


def test_a_disabled_user_keeps_its_connections_but_cannot_log_in(engine: Engine) -> None:
    """Redis's documented rule for ``off`` (CLIENT KILL USER ends them)."""
    admin, c, other = engine.new_client(), engine.new_client(), engine.new_client()
    killed: list[Client] = []
    engine.on_kill = killed.append
    run(engine, admin, "ACL SETUSER alice on >pw +@all ~*")
    run(engine, c, "AUTH alice pw")
    run(engine, admin, "ACL SETUSER alice off")
    assert run(engine, c, "PING") == b"+PONG\r\n"
    assert run(engine, other, "AUTH alice pw").startswith(b"-WRONGPASS")
    assert run(engine, admin, "CLIENT KILL USER alice") == b":1\r\n"
    assert killed == [c]
    assert run(engine, admin, "CLIENT KILL USER nobody") == b"-ERR No such user 'nobody'\r\n"


def test_subscribers_lose_revoked_channels(engine: Engine) -> None:
    admin = engine.new_client()
    keeps, loses, pattern = engine.new_client(), engine.new_client(), engine.new_client()
    killed: list[Client] = []
    engine.on_kill = killed.append
    run(engine, admin, "ACL SETUSER alice on >pw +@all ~* resetchannels &news &sport* &p*")
    for c in (keeps, loses, pattern):
        run(engine, c, "AUTH alice pw")
    run(engine, keeps, "SUBSCRIBE news")
    run(engine, loses, "SUBSCRIBE sports")
    run(engine, pattern, "PSUBSCRIBE p*")
    run(engine, admin, "ACL SETUSER alice resetchannels &news &p")
    assert killed == [loses, pattern]


def test_gaining_allchannels_keeps_subscribers(engine: Engine) -> None:
    admin, c = engine.new_client(), engine.new_client()
    killed: list[Client] = []
    engine.on_kill = killed.append
    run(engine, admin, "ACL SETUSER alice on >pw +@all ~* resetchannels &a")
    run(engine, c, "AUTH alice pw")
    run(engine, c, "SUBSCRIBE a")
    run(engine, admin, "ACL SETUSER alice allchannels")
    assert killed == []


def test_requirepass_is_the_default_users_password() -> None:
    engine = _engine(requirepass="secret")
    c = engine.new_client()
    assert run(engine, c, "GET k").startswith(b"-NOAUTH")
    assert run(engine, c, "AUTH wrong").startswith(b"-WRONGPASS")
    assert run(engine, c, "AUTH secret") == b"+OK\r\n"
    assert _list(engine)[0].startswith("user default on sanitize-payload #2bb80d537b1da3e38bd")
    engine.config.set_many([("requirepass", "")])
    assert _list(engine)[0] == "user default on nopass sanitize-payload ~* &* +@all"
    assert run(engine, engine.new_client(), "GET k") == b"$-1\r\n"


def test_auth_failures_are_counted_and_logged() -> None:
    engine = _engine()
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice on >pw")
    run(engine, c, "AUTH alice nope")
    run(engine, c, "SET k v")
    run(engine, c, "AUTH alice pw")
    run(engine, c, "SET k v")
    run(engine, c, "GET k")
    info = run(engine, engine.new_client(), "INFO stats").decode()
    assert "acl_access_denied_auth:1" in info
    assert "acl_access_denied_cmd:2" in info
    assert "acl_access_denied_key:0" in info
    assert "acl_access_denied_channel:0" in info


def test_log_groups_and_numbers_entries(engine: Engine) -> None:
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice on >pw")
    run(engine, c, "AUTH alice pw")
    for _ in range(3):
        run(engine, c, "GET k")
    run(engine, c, "SET k v")
    entries = engine.acl.log.entries
    assert [(e.object, e.count, e.entry_id) for e in entries] == [(b"set", 1, 1), (b"get", 3, 0)]
    run(engine, c, "AUTH default x")
    run(engine, c, "CONFIG SET acllog-max-len 1")
    assert len(engine.acl.log.entries) == 1


def test_user_lines_of_the_configuration() -> None:
    config = Config()
    config.load_value("user", ["alice", "on", ">pw", "~a*", "+get", "(+set", "~b*)"])
    config.load_value("user", ["default", "on", "nopass", "~*", "+@all", "-flushall"])
    engine = Engine(config)
    assert _list(engine) == [
        "user alice on sanitize-payload #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46"
        "e26170c4 ~a* resetchannels -@all +get (~b* resetchannels -@all +set)",
        "user default on nopass sanitize-payload ~* resetchannels +@all -flushall",
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (["alice", "+nosuch"], "Error in user declaration '+nosuch': Unknown command or category"),
        (["alice", "bogus"], "Error in user declaration 'bogus': Syntax error"),
        (["a\tb", "on"], "Spaces not allowed in ACL usernames"),
    ],
)
def test_bad_user_lines_stop_the_start(line: list[str], message: str) -> None:
    config = Config()
    config.load_value("user", line)
    with pytest.raises(ConfigError, match=re.escape(message)):
        Engine(config)


def test_duplicate_user_lines_stop_the_start() -> None:
    config = Config()
    config.load_value("user", ["alice", "on"])
    config.load_value("user", ["alice", "off"])
    with pytest.raises(ConfigError, match="Duplicate user found"):
        Engine(config)


def test_user_lines_and_an_aclfile_together_stop_the_start(tmp_path: Path) -> None:
    config = Config()
    config.load_value("aclfile", [str(tmp_path / "users.acl")])
    config.load_value("user", ["alice", "on"])
    with pytest.raises(ConfigError, match="not both"):
        Engine(config)


def test_acl_save_and_load(tmp_path: Path) -> None:
    path = tmp_path / "users.acl"
    path.write_text("user alice on >pw ~a* +get\n\nuser bob off\n")
    engine = _engine(aclfile=str(path))
    assert _list(engine)[0].startswith("user alice on sanitize-payload #30c9")
    c = engine.new_client()
    run(engine, c, "ACL SETUSER carol on nopass +@all ~* &*")
    assert run(engine, c, "ACL SAVE") == b"+OK\r\n"
    saved = path.read_text().splitlines()
    assert saved == [f"user {line[5:]}" for line in _list(engine)]
    run(engine, c, "ACL DELUSER carol")
    assert run(engine, c, "ACL LOAD") == b"+OK\r\n"
    assert [line.split()[1] for line in _list(engine)] == ["alice", "bob", "carol", "default"]


def test_acl_load_keeps_everything_on_any_error(tmp_path: Path) -> None:
    path = tmp_path / "users.acl"
    path.write_text("user alice on\n")
    engine = _engine(aclfile=str(path))
    path.write_text(
        "user alice on +nosuch\nuser bob bogus +get\nsomething else\nuser alice\nuser carol (+get\n"
    )
    c = engine.new_client()
    reply = run(engine, c, "ACL LOAD").decode()
    assert reply == (
        f"-ERR {path}:1: Error in applying operation '+nosuch': Unknown command or category "
        f"name in ACL. {path}:2: Syntax error. {path}:3 should start with user keyword "
        "followed by the username. WARNING: Duplicate user 'alice' found on line 4. "
        f"{path}:5: Unmatched parenthesis in selector definition.WARNING: ACL errors "
        "detected, no change to the previously active ACL rules was performed\r\n"
    )
    assert [line.split()[1] for line in _list(engine)] == ["alice", "default"]


def test_acl_load_drops_clients_of_removed_users(tmp_path: Path) -> None:
    path = tmp_path / "users.acl"
    path.write_text("user alice on >pw +@all ~*\nuser bob on >pw +@all ~*\n")
    engine = _engine(aclfile=str(path))
    admin, alice, bob = engine.new_client(), engine.new_client(), engine.new_client()
    killed: list[Client] = []
    engine.on_kill = killed.append
    run(engine, alice, "AUTH alice pw")
    run(engine, bob, "AUTH bob pw")
    path.write_text("user alice on >pw +get ~*\n")
    assert run(engine, admin, "ACL LOAD") == b"+OK\r\n"
    assert killed == [bob]
    assert run(engine, alice, "SET k v").startswith(b"-NOPERM User alice")


def test_an_unreadable_aclfile_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file or directory"):
        _engine(aclfile=str(tmp_path / "missing.acl"))


def test_scripts_run_with_the_callers_rules(engine: Engine) -> None:
    c = engine.new_client()
    run(engine, c, "ACL SETUSER alice on >pw +eval +get ~*")
    run(engine, c, "AUTH alice pw")
    reply = run(engine, c, [b"EVAL", b"return redis.call('set', 'k', 'v')", b"0"])
    assert reply.startswith(
        b"-ERR ACL failure in script: User alice has no permissions to run the 'set' command"
        b" script: "
    )
    run(engine, c, "AUTH default x")
    assert b"lua" in run(engine, c, "ACL LOG 1")


def test_config_rewrite_keeps_the_users(tmp_path: Path) -> None:
    conf = tmp_path / "headwater.conf"
    conf.write_text("user alice on >pw ~a* +get\n")
    config = Config()
    config.load_value("user", ["alice", "on", ">pw", "~a*", "+get"])
    config.file = str(conf)
    engine = Engine(config)
    c = engine.new_client()
    run(engine, c, "ACL SETUSER bob on nopass +@all ~*")
    assert run(engine, c, "CONFIG REWRITE") == b"+OK\r\n"
    written = [line for line in conf.read_text().splitlines() if line.startswith("user ")]
    assert written == _list(engine)
    reread = Config()
    for line in written:
        words = line.split()
        reread.load_value(words[0], words[1:])
    assert _list(Engine(reread)) == _list(engine)
