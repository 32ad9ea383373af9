"""Scripting in the engine: effects (a script's writes are logged as the effects of its
commands in one MULTI/EXEC, never the script, and replaying them gives the same state), the
sandbox, busy scripts and their kill, and bad input."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.engine.replay import Replayer
from headwater.scripting.runtime import _c_bridge
from tests.unit.conftest import Harness, error_text
from tests.unit.test_replay_roundtrip import _without_consumer_times
from tests.unit.test_rewrite import exact_state


def _eval(h: Harness, c: Any, body: str, *args: str, numkeys: int = 0) -> Any:
    return h.call(c, "EVAL", body, str(numkeys), *args)


def _replayed_state(h: Harness, path: Path) -> dict[Any, Any]:
    h.write_aof(path)
    replayed = Harness()
    replayed.clock.now = h.clock.now
    replayer = Replayer(replayed.engine, fast=False)
    replayer.replay(path, truncate_torn=False)  # a line that fails raises FailedCommand
    replayer.close()
    return exact_state(replayed.engine.keyspace.dbs)


def test_a_scripts_writes_are_logged_as_effects_in_one_transaction() -> None:
    h = Harness()
    c = h.client()
    body = (
        "redis.call('set', KEYS[1], 'a') "
        "local id = redis.call('xadd', KEYS[2], '*', 'f', ARGV[1]) "
        "redis.call('incr', 'n') "
        "return id"
    )
    entry_id = _eval(h, c, body, "k", "s", "v", numkeys=2)
    lines = [argv for _, argv in h.effects]
    assert lines == [
        [b"MULTI"],
        [b"set", b"k", b"a"],
        [b"xadd", b"s", entry_id, b"f", b"v"],  # the ID the script got, not "*"
        [b"incr", b"n"],
        [b"EXEC"],
    ]
    assert not any(b"EVAL" in argv[0].upper() for argv in lines)


def test_a_read_only_script_logs_nothing_and_a_failed_one_keeps_its_writes() -> None:
    h = Harness()
    c = h.client()
    _eval(h, c, "return redis.call('get', 'k')")
    assert h.effects == []
    reply = _eval(h, c, "redis.call('set', 'k', 'v') error('late')")
    assert isinstance(reply, Exception)
    # (one effect alone is not wrapped: it is atomic, and Redis does not wrap it either)
    assert [argv for _, argv in h.effects] == [[b"set", b"k", b"v"]]
    assert h.call(c, "GET", "k") == b"v"  # as in Redis: no rollback


def test_set_repl_none_leaves_the_following_writes_out_of_the_log() -> None:
    h = Harness()
    c = h.client()
    body = (
        "redis.call('set', 'a', '1') redis.set_repl(redis.REPL_NONE) "
        "redis.call('set', 'b', '2') redis.set_repl(redis.REPL_ALL) redis.call('set', 'c', '3')"
    )
    _eval(h, c, body)
    assert h.effect_lines() == [[b"set", b"a", b"1"], [b"set", b"c", b"3"]]


def test_a_script_inside_multi_is_part_of_the_transaction() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "MULTI")
    _eval(h, c, "return redis.call('set', 'a', '1')")
    h.call(c, "SET", "b", "2")
    h.call(c, "EXEC")
    assert [argv for _, argv in h.effects] == [
        [b"MULTI"],
        [b"set", b"a", b"1"],
        [b"SET", b"b", b"2"],
        [b"EXEC"],
    ]


# -- effects replayed give the same state -------------------------------------------------------

WRITES = [
    "redis.call('set', KEYS[1], ARGV[1])",
    "redis.call('incr', 'n')",
    "redis.call('hset', 'h', ARGV[1], KEYS[1])",
    "redis.call('del', KEYS[1])",
    "redis.call('xadd', 's', '*', 'f', ARGV[1])",
    "redis.call('xadd', 's', 'MAXLEN', '~', '3', '*', 'f', ARGV[1])",
    "redis.call('xtrim', 's', 'MAXLEN', '2')",
    "redis.pcall('xgroup', 'create', 's', 'g', '0', 'MKSTREAM')",
    "redis.call('xreadgroup', 'group', 'g', 'alice', 'count', '2', 'streams', 's', '>')",
    "redis.pcall('incr', KEYS[1])",
    "redis.call('expire', KEYS[1], '100')",
    "redis.call('select', '1') redis.call('set', 'other-db', ARGV[1])",
    "if redis.call('exists', 'n') == 1 then redis.call('incrby', 'n', 5) end",
    "error('stop here')",
]


@settings(
    max_examples=int(os.environ.get("HW_SCRIPT_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    scripts=st.lists(
        st.tuples(
            st.lists(st.sampled_from(WRITES), min_size=1, max_size=6),
            st.sampled_from(["k1", "k2"]),
            st.sampled_from(["1", "v", "22"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_replaying_a_scripts_effects_gives_the_same_state(
    scripts: list[tuple[list[str], str, str]], tmp_path: Path
) -> None:
    h = Harness()
    c = h.client()
    for statements, key, value in scripts:
        _eval(h, c, " ".join(statements), key, value, numkeys=1)
        h.clock.advance(3)
    assert all(argv[0].upper() not in (b"EVAL", b"EVALSHA") for _, argv in h.effects)
    before = _without_consumer_times(exact_state(h.engine.keyspace.dbs))
    after = _without_consumer_times(_replayed_state(h, tmp_path / "script.aof"))
    assert after == before  # (consumers' seen and active times are no effect's: see there)


# -- sandbox ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "return io.open('/etc/passwd')",
        "return require('os')",
        "return loadfile('/etc/passwd')",
        "return dofile('/etc/passwd')",
        "return debug.getinfo(1)",
        "return loadstring('return io')()",
        "return load('return io')()",
        "return getfenv(0)",
        "return python",
    ],
)
def test_the_sandbox_reaches_nothing_outside(body: str) -> None:
    h = Harness()
    reply = _eval(h, h.client(), body)
    assert isinstance(reply, Exception)
    assert "Script attempted to access nonexistent global variable" in str(reply)


@pytest.mark.parametrize(
    "body",
    [
        "x = 1",
        "redis.call = function() end",
        "string.rep = nil",
        "_G.KEYS = {}",
        "rawset(_G, 'redis', {})",
        "rawset(redis, 'call', print)",
        "setmetatable(_G, nil)",
        "getmetatable(_G).__index = {}",
        "getmetatable('').__index = {}",
        "rawset(getmetatable(''), '__index', {})",
        "getmetatable('').__index.rep = nil",
        "rawset(_G, 'x', 1)",
        "setmetatable(_G, {})",
        "setmetatable(redis, {})",
    ],
)
def test_globals_and_libraries_are_read_only(body: str) -> None:
    h = Harness()
    c = h.client()
    reply = _eval(h, c, body)
    assert isinstance(reply, Exception)
    assert _eval(h, c, "return redis.call('ping').ok") == b"PONG"  # nothing was changed
    assert _eval(h, c, "return ('x'):rep(2) .. string.rep('y', 2)") == b"xxyy"
    assert isinstance(_eval(h, c, "return x"), Exception)


def test_bytecode_cannot_be_loaded() -> None:
    h = Harness()
    body = "return {loadstring(string.dump(function() return 1 end))}"
    assert _eval(h, h.client(), body) == []


# -- busy scripts -------------------------------------------------------------------------------


def test_a_busy_script_answers_others_busy_and_is_killed() -> None:
    h = Harness()
    runner, other = h.client(), h.client()
    h.call(other, "CONFIG", "SET", "busy-reply-threshold", "0")
    seen: list[Any] = []

    def poll(running: Any) -> None:  # what the server's poller would do with "other"
        assert running is runner
        seen.append(h.call(other, "GET", "k"))
        seen.append(h.call(other, "SCRIPT", "KILL"))

    h.engine.busy_poller = poll
    reply = _eval(h, runner, "while true do end")
    assert str(seen[0]).startswith("BUSY Redis is busy running a script. You can only call SCRIPT")
    assert seen[1] == b"OK"
    assert str(reply).startswith("ERR Script killed by user with SCRIPT KILL... script: ")
    assert h.engine.busy_reply is None
    assert str(h.call(other, "SCRIPT", "KILL")).startswith("NOTBUSY No scripts in execution")


def test_pcall_cannot_hold_a_killed_script() -> None:
    h = Harness()
    runner, other = h.client(), h.client()
    h.call(other, "CONFIG", "SET", "lua-time-limit", "0")
    h.engine.busy_poller = lambda running: h.call(other, "SCRIPT", "KILL")
    body = "while true do pcall(function() while true do end end) end"
    assert str(_eval(h, runner, body)).startswith("ERR Script killed by user with SCRIPT KILL")


def test_a_script_that_wrote_is_unkillable() -> None:
    h = Harness()
    runner, other = h.client(), h.client()
    h.call(other, "CONFIG", "SET", "busy-reply-threshold", "0")
    answers: list[Any] = []

    def poll(running: Any) -> None:
        answers.append(h.call(other, "SCRIPT", "KILL"))
        if len(answers) == 3:
            h.call(other, "SHUTDOWN", "NOSAVE")

    h.engine.busy_poller = poll
    reply = _eval(h, runner, "redis.call('set', 'k', 'v') while true do end")
    assert all(str(a).startswith("UNKILLABLE Sorry the script already executed") for a in answers)
    assert "shutdown" in str(reply)
    assert h.effects == []  # SHUTDOWN NOSAVE: the script's writes are not logged


def test_xread_block_inside_a_script_does_not_block() -> None:
    h = Harness()
    c = h.client()
    assert _eval(h, c, "return redis.call('xread', 'block', '0', 'streams', 's', '$')") is None
    assert h.engine.blocked_count == 0


# -- bad input ----------------------------------------------------------------------------------


def test_bad_scripts_get_errors_and_the_engine_goes_on() -> None:
    h = Harness()
    c = h.client()
    assert "Error compiling script" in str(_eval(h, c, "return +"))
    assert "attempt to perform arithmetic" in str(_eval(h, c, "return {} + 1"))
    assert "stack overflow" in str(_eval(h, c, "local function f() return 1 + f() end return f()"))
    huge = _eval(h, c, "local t = {} for i = 1, 200000 do t[i] = i end return t")
    assert len(huge) == 200000
    assert huge[-1] == 200000
    big = _eval(h, c, "return string.rep('x', 5000000)")
    assert len(big) == 5000000
    assert _eval(h, c, "return 1") == 1


def test_a_call_with_thousands_of_arguments_from_unpack() -> None:
    # Redis's suite passes 7,999 values from unpack; the C bridge takes them all. lupa's
    # crossing (the pure build's) checks Lua's C stack first and refuses a call of 7,998
    # arguments or more (command and key included): an error reply, nothing written, the
    # engine goes on.
    h = Harness()
    c = h.client()
    body = "local a = {} for i = 1, %d do a[i] = i end return redis.call('rpush', 'l', unpack(a))"
    assert _eval(h, c, body % 7995) == 7995
    if _c_bridge() is not None:
        assert _eval(h, c, body % 7999) == 7995 + 7999
    else:
        assert "not a python object" in error_text(_eval(h, c, body % 7999))
        assert h.call(c, "LLEN", "l") == 7995
    assert _eval(h, c, "return redis.call('llen', 'l')") == h.call(c, "LLEN", "l")


# -- functions ----------------------------------------------------------------------------------

LIB = (
    "#!lua name=lib\n"
    "redis.register_function('add', function(k, a) return redis.call('incrby', k[1], a[1]) end)"
)


def test_function_libraries_are_effects_and_replay(tmp_path: Path) -> None:
    h = Harness()
    c = h.client()
    assert h.call(c, "FUNCTION", "LOAD", LIB) == b"lib"
    assert h.call(c, "FCALL", "add", "1", "n", "5") == 5
    h.call(c, "FUNCTION", "LOAD", "#!lua name=tmp\nredis.register_function('t', function() end)")
    h.call(c, "FUNCTION", "DELETE", "tmp")
    lines = h.effect_lines()
    assert lines[0] == [b"FUNCTION", b"LOAD", b"REPLACE", LIB.encode()]
    assert [b"incrby", b"n", b"5"] in lines
    assert [b"FUNCTION", b"DELETE", b"tmp"] in lines
    assert not any(argv[0].upper() == b"FCALL" for argv in lines)
    h.write_aof(tmp_path / "f.aof")
    replayed = Harness()
    Replayer(replayed.engine, fast=True).replay(tmp_path / "f.aof", truncate_torn=False)
    rc = replayed.client()
    assert replayed.call(rc, "GET", "n") == b"5"
    assert replayed.call(rc, "FCALL", "add", "1", "n", "1") == 6
    assert replayed.engine.scripting.library_codes() == [LIB.encode()]


def test_a_library_that_redefines_a_function_of_another_changes_nothing() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "FUNCTION", "LOAD", LIB)
    other = "#!lua name=other\nredis.register_function('mine', function() return 1 end)\n"
    other += "redis.register_function('add', function() return 2 end)"
    assert str(h.call(c, "FUNCTION", "LOAD", other)) == "ERR Function add already exists"
    assert str(h.call(c, "FCALL", "mine", "0")) == "ERR Function not found"
    assert h.call(c, "FCALL", "add", "1", "n", "2") == 2
    replaced = "#!lua name=lib\nredis.register_function('add', function() return 'new' end)"
    assert h.call(c, "FUNCTION", "LOAD", "REPLACE", replaced) == b"lib"
    assert h.call(c, "FCALL", "add", "0") == b"new"
    effects = len(h.effects)
    h.call(c, "FUNCTION", "LOAD", other)  # refused: nothing logged
    assert len(h.effects) == effects


@pytest.mark.parametrize(
    "payload",
    [b"", b"garbage", b"\x00" * 9, b"\xf5\x03abc\x0a\x00" + b"\x00" * 8, os.urandom(300)],
)
def test_function_restore_of_garbage_is_refused(payload: bytes) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "FUNCTION", "LOAD", LIB)
    reply = h.call(c, "FUNCTION", "RESTORE", payload)
    assert isinstance(reply, Exception)
    assert h.engine.scripting.library_codes() == [LIB.encode()]
    assert h.call(c, "FCALL", "add", "1", "n", "1") == 1


def test_function_dump_restores_with_each_policy() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "FUNCTION", "LOAD", LIB)
    payload = h.call(c, "FUNCTION", "DUMP")
    assert str(h.call(c, "FUNCTION", "RESTORE", payload)) == "ERR Library lib already exists"
    assert h.call(c, "FUNCTION", "RESTORE", payload, "REPLACE") == b"OK"
    h.call(c, "FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('x', function() end)")
    assert h.call(c, "FUNCTION", "RESTORE", payload, "FLUSH") == b"OK"
    assert h.engine.scripting.library_codes() == [LIB.encode()]
    assert str(h.call(c, "FUNCTION", "RESTORE", payload, "MERGE")).startswith("ERR Wrong restore")


def test_snapshots_keep_the_libraries(tmp_path: Path) -> None:
    from headwater.persistence.snapshot import load_snapshot, write_snapshot

    h = Harness()
    c = h.client()
    h.call(c, "FUNCTION", "LOAD", LIB)
    h.call(c, "SET", "k", "v")
    write_snapshot(tmp_path / "s", h.engine.keyspace.dbs, h.engine.scripting.library_codes())
    other = Harness()
    codes: list[bytes] = []
    assert load_snapshot(tmp_path / "s", other.engine.keyspace.dbs, libraries=codes) == 1
    assert codes == [LIB.encode()]
    other.engine.scripting.load_libraries(codes)
    assert other.call(other.client(), "FCALL", "add", "1", "n", "3") == 3


def test_info_shows_scripts_and_functions() -> None:
    h = Harness()
    c = h.client()
    _eval(h, c, "return 1")
    h.call(c, "SCRIPT", "LOAD", "return 2")
    h.call(c, "FUNCTION", "LOAD", LIB)
    info = h.call(c, "INFO", "memory").decode()
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    assert fields["number_of_cached_scripts"] == "2"
    assert fields["number_of_functions"] == "1"
    assert fields["number_of_libraries"] == "1"
    assert int(fields["used_memory_scripts_eval"]) > 0
    assert int(fields["used_memory_vm_eval"]) > 0


def _memory(h: Harness, c: Any) -> dict[str, int]:
    info = h.call(c, "INFO", "memory").decode()
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    names = ("used_memory_lua", "used_memory_vm_functions", "used_memory_vm_total")
    return {name: int(fields[name]) for name in names}


def test_eval_and_functions_have_a_lua_state_each() -> None:
    h = Harness()
    c = h.client()
    _eval(h, c, "return 1")
    fresh = _memory(h, c)
    assert fresh["used_memory_lua"] > 0
    assert fresh["used_memory_vm_functions"] == 0
    for i in range(200):
        lib = f"#!lua name=l{i}\nredis.register_function('f{i}', function() return {i} end)"
        h.call(c, "FUNCTION", "LOAD", lib)
    loaded = _memory(h, c)
    assert loaded["used_memory_vm_functions"] > 100_000
    assert loaded["used_memory_lua"] < fresh["used_memory_lua"] + 10_000
    assert loaded["used_memory_vm_total"] == (
        loaded["used_memory_lua"] + loaded["used_memory_vm_functions"]
    )
    h.call(c, "FUNCTION", "FLUSH")
    assert _memory(h, c)["used_memory_vm_functions"] == 0


def test_script_flush_gives_the_eval_state_memory_back() -> None:
    h = Harness()
    c = h.client()
    _eval(h, c, "return 1")
    h.call(c, "SCRIPT", "FLUSH")
    _eval(h, c, "return 1")
    fresh = _memory(h, c)["used_memory_lua"]
    for i in range(3000):
        h.call(c, "SCRIPT", "LOAD", f"return {i}")
    assert _memory(h, c)["used_memory_lua"] > fresh + 500_000
    h.call(c, "SCRIPT", "FLUSH")
    _eval(h, c, "return 1")
    assert _memory(h, c)["used_memory_lua"] < fresh + 2_000


def test_flushes_replace_the_states_and_scripts_still_run() -> None:
    """Each flush drops a state (and its number in the C bridge): many of them in a row."""
    h = Harness()
    c = h.client()
    for i in range(40):
        assert _eval(h, c, "return ARGV[1] .. KEYS[1]", "k", str(i), numkeys=1) == b"%dk" % i
        lib = "#!lua name=lib\nredis.register_function('f', function(k, a) return a[1] end)"
        h.call(c, "FUNCTION", "LOAD", "REPLACE", lib)
        assert h.call(c, "FCALL", "f", "0", str(i)) == str(i).encode()
        h.call(c, "SCRIPT", "FLUSH")
        h.call(c, "FUNCTION", "FLUSH")
    assert error_text(h.call(c, "FCALL", "f", "0")) == "ERR Function not found"


def test_an_aof_rewrite_base_keeps_the_libraries(tmp_path: Path) -> None:
    from headwater.persistence.rewrite import write_base

    h = Harness()
    c = h.client()
    h.call(c, "FUNCTION", "LOAD", LIB)
    h.call(c, "SET", "k", "v")
    write_base(tmp_path / "base.aof", h.engine.keyspace.dbs, h.engine.scripting.library_codes())
    replayed = Harness()
    Replayer(replayed.engine, fast=True).replay(tmp_path / "base.aof", truncate_torn=False)
    rc = replayed.client()
    assert replayed.call(rc, "GET", "k") == b"v"
    assert replayed.call(rc, "FCALL", "add", "1", "n", "4") == 4


def _info_field(h: Harness, c: Any, name: str) -> str:
    info = h.call(c, "INFO", "stats")
    text = info.decode() if isinstance(info, bytes) else str(info)
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    raise KeyError(name)


def test_eval_keeps_500_scripts_and_evicts_the_least_recently_run() -> None:
    """Redis 7.4+: EVAL's scripts live in an LRU of 500; SCRIPT LOAD's are never evicted,
    and SCRIPT LOAD of an EVAL-added script makes it permanent."""
    h = Harness()
    c = h.client()
    shas = [h.call(c, "SCRIPT", "LOAD", f"return {i}") for i in range(3)]  # loaded: permanent
    evaled = [f"return 'e{i}'" for i in range(500)]
    for body in evaled:
        _eval(h, c, body)
    first, second, third = (hashlib.sha1(body.encode()).hexdigest() for body in evaled[:3])
    assert _info_field(h, c, "evicted_scripts") == "0"
    h.call(c, "SCRIPT", "LOAD", evaled[1])  # promoted: out of the LRU
    assert h.call(c, "EVALSHA", first, "0") == b"e0"  # run again: the most recent now
    _eval(h, c, "return 'new'")  # the LRU holds 499 + this one: nothing evicted yet
    assert _info_field(h, c, "evicted_scripts") == "0"
    _eval(h, c, "return 'newer'")
    _eval(h, c, "return 'newest'")  # evicts e2 then e3 (e0 was run, e1 promoted)
    assert _info_field(h, c, "evicted_scripts") == "2"
    assert h.call(c, "SCRIPT", "EXISTS", first, second, third, *shas) == [1, 1, 0, 1, 1, 1]
    assert error_text(h.call(c, "EVALSHA", third, "0")).startswith("NOSCRIPT")
    h.call(c, "SCRIPT", "FLUSH")
    for body in evaled:
        _eval(h, c, body)
    assert _info_field(h, c, "evicted_scripts") == "2"  # an emptied cache evicts nothing


def test_the_c_bridge_runs_scripts_in_the_compiled_build() -> None:
    """``make setup`` builds ``headwater._luabridge`` with the hot modules: the compiled run
    crosses between Python and Lua in C, the pure run through lupa (the rest of this file
    and the differential tests check both against the same replies)."""
    h = Harness()
    scripting = h.engine.scripting
    expected = os.environ.get("HEADWATER_EXPECT_BUILD")
    if expected is None:
        pytest.skip("HEADWATER_EXPECT_BUILD is not set (make test sets it)")
    for state in (scripting.eval_state(), scripting.function_state()):
        assert (state.fast_run is not None) == (expected == "compiled")


def test_crossings_with_many_arguments_and_from_a_coroutine() -> None:
    """Arguments beyond Lua's guaranteed stack (the C bridge grows it), ``redis.call`` from a
    coroutine (another Lua thread than the one the script started on), and replies of every
    plain and table kind on the way back."""
    h = Harness()
    c = h.client()
    many = [str(i) for i in range(20000)]
    assert _eval(h, c, "return {#KEYS, #ARGV, ARGV[#ARGV]}", *many, numkeys=3) == [
        3,
        19997,
        b"19999",
    ]
    assert h.call(c, "RPUSH", "l", *many[:3000]) == 3000
    body = "return #redis.call('LRANGE', 'l', 0, -1) + #{redis.call('RPUSH', 'm', unpack(ARGV))}"
    assert _eval(h, c, body, *many[:5000]) == 3001
    body = (
        "local co = coroutine.wrap(function() return redis.call('INCRBY', 'n', 2) end) "
        "return {co(), redis.call('SET', 'k', 'v').ok, redis.call('GET', 'nothing'), "
        "redis.pcall('INCR', 'k').err, 1.5 + redis.call('INCR', 'n')}"
    )
    not_integer = b"ERR value is not an integer or out of range"
    assert _eval(h, c, body) == [2, b"OK", None, not_integer, 4]
    body = "return {0.5 + redis.call('INCR', 'n'), 'x' .. 1.25, redis.call('EXISTS', 'k')}"
    assert _eval(h, c, body) == [4, b"x1.25", 1]
    assert error_text(_eval(h, c, "return redis.call('INCR', 'k')")).startswith(
        "ERR value is not an integer or out of range script:"
    )
