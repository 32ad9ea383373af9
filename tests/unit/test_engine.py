"""The engine through its public entry point, as a connection would drive it."""

from __future__ import annotations

from headwater.commands.context import Block, Client, spec
from headwater.config import Config
from headwater.ops.change import ONE, Written
from headwater.resp.types import Reply
from tests.unit.conftest import Harness, decode_all
from tests.unit.conftest import error_text as _err


def test_unknown_command_lists_args_and_truncates() -> None:
    h = Harness()
    c = h.client()
    assert _err(h.call(c, "FOO", "a", "b")) == (
        "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
    )
    long = _err(h.call(c, "FOO", "x" * 300))
    assert long == "ERR unknown command 'FOO', with args beginning with: '" + "x" * 128 + "' "


def test_dping_stays_unknown() -> None:
    h = Harness()
    assert "unknown command 'DPING'" in _err(h.call(h.client(), "DPING"))


def test_errors_are_counted_per_code() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v")
    h.call(c, "HGET", "k", "f")
    h.call(c, "NOPE")
    assert h.engine.stats.total_error_replies == 2
    assert h.engine.stats.errorstats == {"WRONGTYPE": 1, "ERR": 1}


def test_queued_error_aborts_exec_and_nothing_runs() -> None:
    h = Harness()
    c = h.client()
    assert h.call(c, "MULTI") == b"OK"
    assert h.call(c, "SET", "a", "1") == b"QUEUED"
    _err(h.call(c, "SET", "a"))
    assert _err(h.call(c, "EXEC")).startswith("EXECABORT")
    assert h.call(c, "GET", "a") is None


def test_exec_runs_queue_and_wraps_effects_in_multi() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "MULTI")
    h.call(c, "SET", "a", "1")
    h.call(c, "INCR", "a")
    h.call(c, "GET", "a")
    assert h.call(c, "EXEC") == [b"OK", 2, b"2"]
    assert [argv[0] for _, argv in h.effects] == [b"MULTI", b"SET", b"INCR", b"EXEC"]


def test_readonly_transaction_propagates_nothing() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "MULTI")
    h.call(c, "GET", "a")
    h.call(c, "EXEC")
    assert h.effects == []


def test_watch_fails_exec_when_another_client_writes() -> None:
    h = Harness()
    a, b = h.client(), h.client()
    h.call(a, "WATCH", "k")
    h.call(b, "SET", "k", "1")
    h.call(a, "MULTI")
    h.call(a, "SET", "k", "2")
    assert h.call(a, "EXEC") is None
    assert h.call(a, "GET", "k") == b"1"


def test_watch_fails_exec_when_key_expires_meanwhile() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v", "PX", "100")
    h.call(c, "WATCH", "k")
    h.clock.advance(200)
    h.call(c, "MULTI")
    h.call(c, "PING")
    assert h.call(c, "EXEC") is None


def test_watch_of_already_expired_key_does_not_fail_exec() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v", "PX", "100")
    h.clock.advance(200)
    h.call(c, "WATCH", "k")
    h.engine.cron()  # active expiry deletes the stale key: logically no change
    h.call(c, "MULTI")
    h.call(c, "PING")
    assert h.call(c, "EXEC") == [b"PONG"]


def test_failed_set_nx_does_not_touch_watchers() -> None:
    h = Harness()
    a, b = h.client(), h.client()
    h.call(a, "SET", "k", "1")
    h.call(a, "WATCH", "k")
    assert h.call(b, "SET", "k", "2", "NX") is None
    h.call(a, "MULTI")
    h.call(a, "PING")
    assert h.call(a, "EXEC") == [b"PONG"]


def test_expire_propagates_absolute_time_and_expiry_propagates_del() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v")
    h.call(c, "EXPIRE", "k", "10")
    deadline = h.clock.now_ms() + 10_000
    assert h.effects[-1] == (0, [b"PEXPIREAT", b"k", b"%d" % deadline])
    h.clock.advance(10_001)
    h.engine.cron()
    assert h.effects[-1] == (0, [b"DEL", b"k"])
    assert h.engine.stats.expired_keys == 1


def test_set_with_relative_expiry_propagates_pxat() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v", "EX", "5")
    assert h.effects == [(0, [b"SET", b"k", b"v", b"PXAT", b"%d" % (h.clock.now_ms() + 5000)])]


def test_set_with_pxat_propagates_as_given() -> None:
    # Redis 7.2+ (unit/expire.tcl): only EX, PX and EXAT are rewritten to PXAT
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v", "pxat", "99999999999999", "GET")
    assert h.effect_lines() == [[b"SET", b"k", b"v", b"pxat", b"99999999999999", b"GET"]]


def test_spop_of_every_member_propagates_del_or_unlink() -> None:
    # Redis 7.4 (unit/type/set.tcl); 7.0 sent DEL whatever lazyfree-lazy-server-del said
    h = Harness()
    c = h.client()
    h.call(c, "SADD", "s", "a", "b")
    h.call(c, "SPOP", "s", "2")
    h.call(c, "SADD", "s", "a", "b")
    h.call(c, "CONFIG", "SET", "lazyfree-lazy-server-del", "yes")
    h.call(c, "SPOP", "s", "3")
    assert h.effect_lines()[1::2] == [[b"DEL", b"s"], [b"UNLINK", b"s"]]


def test_lazy_expiry_on_read() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v", "PX", "50")
    h.clock.advance(51)
    assert h.call(c, "GET", "k") is None
    assert h.call(c, "DBSIZE") == 0


def test_client_reply_off_skip_on() -> None:
    h = Harness()
    c = h.client()
    assert h.call(c, "CLIENT", "REPLY", "SKIP") is None
    assert h.call(c, "PING") is None  # skipped
    assert h.call(c, "PING") == b"PONG"
    assert h.call(c, "CLIENT", "REPLY", "OFF") is None
    assert h.call(c, "SET", "a", "1") is None
    assert h.call(c, "CLIENT", "REPLY", "ON") == b"OK"
    assert h.call(c, "GET", "a") == b"1"


def test_requirepass_gates_commands_until_auth() -> None:
    config = Config()
    config.set_many([("requirepass", "s3cret")])
    h = Harness(config=config)
    c = h.client()
    assert _err(h.call(c, "GET", "a")) == "NOAUTH Authentication required."
    assert _err(h.call(c, "AUTH", "wrong")).startswith("WRONGPASS")
    assert h.call(c, "AUTH", "s3cret") == b"OK"
    assert h.call(c, "GET", "a") is None
    assert h.call(c, "RESET") == b"RESET"
    assert _err(h.call(c, "PING")) == "NOAUTH Authentication required."


def test_hello_switches_protocol_and_reports_compat_version() -> None:
    h = Harness()
    c = h.client()
    reply = h.call(c, "HELLO", "3", "SETNAME", "me")
    assert c.resp == 3 and c.name == b"me"
    assert reply[b"version"] == b"8.10.0" and reply[b"proto"] == 3
    h.engine.execute(c, [b"HGETALL", b"none"])
    assert h.raw(c) == b"%0\r\n"


def test_reset_leaves_multi_and_watch() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "WATCH", "k")
    h.call(c, "MULTI")
    assert h.call(c, "RESET") == b"RESET"
    assert not c.in_multi and not c.watched
    assert _err(h.call(c, "EXEC")) == "ERR EXEC without MULTI"


# -- blocking --------------------------------------------------------------------------------


def _cmd_take(c: Client, argv: list[bytes]) -> Written | Block:
    """TAKE key timeout_ms: pop the string at key, or wait for one."""
    value = c.db.get(argv[1])
    if value is not None:
        c.db.delete(argv[1])
        return Written(value, ONE)
    timeout = int(argv[2])
    deadline = c.server.clock.monotonic_ms() + timeout if timeout else 0
    return Block([argv[1]], deadline, None)


def _cmd_put(c: Client, argv: list[bytes]) -> Written:
    c.db.set(argv[1], argv[2])
    c.db.signal_ready(argv[1])
    return Written(1, ONE)


TEST_COMMANDS = (
    spec("take", 3, "write blocking", (1, 1, 1), _cmd_take),
    spec("put", 3, "write", (1, 1, 1), _cmd_put),
)


def test_blocked_clients_are_served_fifo_after_the_write() -> None:
    h = Harness(TEST_COMMANDS)
    first, second, writer = h.client(), h.client(), h.client()
    h.call(first, "TAKE", "q", "0")
    h.call(second, "TAKE", "q", "0")
    assert first.gate.blocked is not None and second.gate.blocked is not None
    assert h.engine.blocked_count == 2 and h.engine.blocking_keys_count() == 1
    h.call(writer, "PUT", "q", "one")
    assert h.raw(first) == b"$3\r\none\r\n"
    assert second.gate.blocked is not None  # the value was taken: second keeps waiting
    h.call(writer, "PUT", "q", "two")
    assert h.raw(second) == b"$3\r\ntwo\r\n"
    assert h.engine.blocked_count == 0 and h.engine.blocking_keys_count() == 0


def test_block_times_out_with_the_timeout_reply() -> None:
    h = Harness(TEST_COMMANDS)
    c = h.client()
    h.call(c, "TAKE", "q", "100")
    h.scheduler.advance(99)
    assert c.gate.blocked is not None
    h.scheduler.advance(1)
    assert c.gate.blocked is None and h.raw(c) == b"$-1\r\n"
    assert h.engine.stats.total_blocking_timeouts == 1


def test_client_unblock_timeout_and_error() -> None:
    h = Harness(TEST_COMMANDS)
    waiter, admin = h.client(), h.client()
    h.call(waiter, "TAKE", "q", "0")
    assert h.call(admin, "CLIENT", "UNBLOCK", str(waiter.id)) == 1
    assert h.raw(waiter) == b"$-1\r\n"
    h.call(waiter, "TAKE", "q", "0")
    assert h.call(admin, "CLIENT", "UNBLOCK", str(waiter.id), "ERROR") == 1
    assert h.raw(waiter) == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    assert h.call(admin, "CLIENT", "UNBLOCK", str(waiter.id)) == 0


def test_disconnect_while_blocked_cleans_up() -> None:
    h = Harness(TEST_COMMANDS)
    c, writer = h.client(), h.client()
    h.call(c, "TAKE", "q", "0")
    h.engine.client_closed(c)
    assert h.engine.blocked_count == 0 and h.engine.blocking_keys_count() == 0
    h.call(writer, "PUT", "q", "v")
    assert h.call(writer, "GET", "q") == b"v"


def test_blocking_command_inside_exec_does_not_block() -> None:
    h = Harness(TEST_COMMANDS)
    c = h.client()
    h.call(c, "MULTI")
    h.call(c, "TAKE", "q", "0")
    assert h.call(c, "EXEC") == [None]
    assert c.gate.blocked is None


def test_handler_crash_is_an_error_reply_not_a_dead_server() -> None:
    def boom(c: Client, argv: list[bytes]) -> Reply:
        raise RuntimeError("bug")

    h = Harness((spec("boom", 1, "", handler=boom),))
    c = h.client()
    assert "internal error" in _err(h.call(c, "BOOM"))
    assert h.call(c, "PING") == b"PONG"


def test_client_kill_by_id_asks_the_transport_and_skips_self() -> None:
    h = Harness()
    killed: list[int] = []
    h.engine.on_kill = lambda c: killed.append(c.id)
    me, other = h.client(), h.client()
    assert h.call(me, "CLIENT", "KILL", "ID", str(other.id)) == 1
    assert h.call(me, "CLIENT", "KILL", "ID", str(me.id)) == 0  # SKIPME yes by default
    assert h.call(me, "CLIENT", "KILL", "ID", str(me.id), "SKIPME", "no") == 1
    assert killed == [other.id] and me.close_after_reply


def test_client_list_by_id_and_setinfo() -> None:
    h = Harness()
    a, b = h.client(), h.client()
    h.call(a, "CLIENT", "SETINFO", "LIB-NAME", "redis-py")
    h.call(a, "CLIENT", "SETNAME", "alpha")
    listing = h.call(b, "CLIENT", "LIST", "ID", str(a.id)).decode()
    assert listing.startswith(f"id={a.id} ") and "name=alpha" in listing
    assert "lib-name=redis-py" in listing and listing.endswith("\n")


def test_config_rewrite_keeps_user_lines_and_updates_values(tmp_path: object) -> None:
    path = tmp_path / "hw.conf"  # type: ignore[operator]
    path.write_text("# my settings\nhz 10\nport 7000\n")
    config = Config()
    config.file = str(path)
    config.load_value("port", ["7000"])
    h = Harness(config=config)
    c = h.client()
    h.call(c, "CONFIG", "SET", "hz", "20", "maxmemory-policy", "allkeys-lru")
    assert h.call(c, "CONFIG", "REWRITE") == b"OK"
    text = path.read_text()
    assert "# my settings" in text and "hz 20" in text and "hz 10" not in text
    assert "maxmemory-policy allkeys-lru" in text and "port 7000" in text


def test_config_rewrite_without_file_is_an_error() -> None:
    h = Harness()
    assert _err(h.call(h.client(), "CONFIG", "REWRITE")) == (
        "ERR The server is running without a config file"
    )


def test_commandstats_count_calls_rejections_and_failures() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v")
    h.call(c, "SET", "k")
    h.call(c, "HSET", "k", "f", "v")
    info = h.call(c, "INFO", "commandstats").decode()
    assert "cmdstat_set:calls=1," in info and "rejected_calls=1" in info
    assert "cmdstat_hset:calls=1," in info and "failed_calls=1" in info


def test_help_subcommands_reply_simple_string_lines() -> None:
    h = Harness()
    c = h.client()
    for container in ("CLIENT", "COMMAND", "OBJECT", "CONFIG", "XINFO", "DEBUG"):
        h.engine.execute(c, [container.encode(), b"HELP"])
        raw = h.raw(c)
        assert raw.startswith(b"*") and b"\r\n+" + container.encode() in raw, container


def _info_field(h: Harness, c: Client, name: str) -> str:
    info = h.call(c, "INFO", "clients").decode()
    return dict(line.split(":", 1) for line in info.split("\r\n") if ":" in line)[name]


def test_info_counts_keys_whose_waiters_a_deletion_wakes() -> None:
    """total_blocking_keys_on_nokey (Redis 7.2+): keys with an XREADGROUP waiter, which a
    deletion wakes (NOGROUP); a BLPOP waiter on the same key does not count."""
    h = Harness()
    admin, lister, reader = h.client(), h.client(), h.client()
    h.call(lister, "BLPOP", "s", "0")
    assert _info_field(h, admin, "total_blocking_keys") == "1"
    assert _info_field(h, admin, "total_blocking_keys_on_nokey") == "0"
    h.call(admin, "XADD", "s", "666", "k", "v")
    h.call(admin, "XGROUP", "CREATE", "s", "g", "$")
    h.call(reader, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    assert _info_field(h, admin, "total_blocking_keys") == "1"
    assert _info_field(h, admin, "total_blocking_keys_on_nokey") == "1"
    h.call(admin, "DEL", "s")
    assert _err(decode_all(h.raw(reader))).startswith("NOGROUP")
    assert _info_field(h, admin, "total_blocking_keys") == "1"
    assert _info_field(h, admin, "total_blocking_keys_on_nokey") == "0"


def test_getex_with_a_past_deadline_deletes_and_propagates_del() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v")
    past = b"%d" % (h.clock.now_ms() // 1000 - 100)
    assert h.call(c, "GETEX", "k", "EXAT", past) == b"v"
    assert h.effects[-1] == (0, [b"DEL", b"k"])
    assert h.call(c, "EXISTS", "k") == 0


def test_client_kill_maxage_is_checked_before_anything_is_killed() -> None:
    """Redis 7.4's CLIENT KILL MAXAGE: an integer greater than 0, with its own texts."""
    h = Harness()
    c, other = h.client(), h.client()
    assert _err(h.call(c, "CLIENT", "KILL", "MAXAGE", "str")) == (
        "ERR maxage is not an integer or out of range"
    )
    for bad in ("-1", "0"):
        assert (
            _err(h.call(c, "CLIENT", "KILL", "MAXAGE", bad))
            == "ERR maxage should be greater than 0"
        )
    assert h.call(c, "CLIENT", "KILL", "MAXAGE", "1", "SKIPME", "yes") == 0
    assert not other.closed
