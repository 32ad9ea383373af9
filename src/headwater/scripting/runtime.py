"""Running scripts: one Lua 5.1 state per engine, the script cache, ``redis.call``'s dispatch,
and the busy state of a long script.

``redis.call`` goes through the same checks a client command does (unknown command, arity),
then Redis's script rules (``noscript`` commands, writes from read-only scripts, -MISCONF),
and runs the handler through the engine's ``call`` on a client of its own (the script client:
the caller's database, the script's protocol), so its effects reach the engine's one choke
point. The engine collects a script's effects and sends them as one MULTI … EXEC
(``ScriptHost.start_collecting``): the script itself is never logged.

A script that runs longer than ``busy-reply-threshold`` makes the server busy: the Lua hook,
called every 100,000 instructions, asks the host to read and answer the other clients
(``ScriptHost.poll_while_busy``, Redis's processEventsWhileBlocked); they get ``-BUSY`` except
for SCRIPT KILL, FUNCTION KILL, FUNCTION STATS and SHUTDOWN NOSAVE, which the next hook call
acts on.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from lupa import lua51

from headwater import REDIS_COMPAT_VERSION
from headwater.commands.acl import refusal as acl_refusal
from headwater.commands.cluster_gate import ClusterGate
from headwater.commands.context import Block, Client, CommandSpec, ServerAPI
from headwater.commands.monitor import feed_monitors
from headwater.commands.server import _human
from headwater.errors import OOM, ReplyError, err
from headwater.resp.encoder import format_double
from headwater.resp.types import Reply
from headwater.scripting import libraries
from headwater.scripting.convert import ReplyReader, error_from_text, lua_to_reply, reply_to_lua
from headwater.scripting.functions import (
    _BAD_LIBRARY_NAME,
    _NAME,
    Function,
    Library,
    RegisterError,
    Registry,
    check_name,
    parse_metadata,
    read_registration,
)
from headwater.scripting.msgpack import LibraryError
from headwater.scripting.sandbox import PRELUDE

log = logging.getLogger("headwater")

BUSY_EVAL = ReplyError(
    "BUSY", "Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
)
BUSY_FUNCTION = ReplyError(
    "BUSY", "Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
)
NOTBUSY = ReplyError("NOTBUSY", "No scripts in execution right now.")
UNKILLABLE = ReplyError(
    "UNKILLABLE",
    "Sorry the script already executed write commands against the dataset. You can either "
    "wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE "
    "command.",
)
KILLED_TEXT = b"ERR Script killed by user with SCRIPT KILL..."
KILLED_FUNCTION_TEXT = b"ERR Script killed by user with FUNCTION KILL..."
SHUTDOWN_TEXT = b"ERR Script killed by a shutdown request"

_UNKNOWN = b"Unknown Redis command called from script"
_ARITY = b"Wrong number of args calling Redis command from script"
_NOSCRIPT = b"This Redis command is not allowed from script"
_RO_WRITE = b"Write commands are not allowed from read-only scripts."
_BAD_ARG = b"Lua redis lib command arguments must be strings or integers"
_NO_ARGS = b"Please specify at least one argument for this redis lib call"

#: (a Final module name is a C static once compiled: no module attribute read per run)
_monotonic: Final = time.monotonic


def _c_bridge() -> Any:
    """``headwater._luabridge`` (the C crossings, ``make setup`` builds it), or None: lupa's
    own crossings, as in the pure build."""
    try:
        return importlib.import_module("headwater._luabridge")
    except ImportError:
        return None


#: how long a library's top level may run (Redis: LOAD_TIMEOUT_MS)
LOAD_TIMEOUT = 0.5
#: every how many runs a step of Lua's garbage collector is taken, of that size (Redis's
#: luaCallFunction: LUA_GC_CYCLE_PERIOD), so the state's garbage does not pile up to a full
#: cycle
GC_CYCLE_PERIOD = 50
#: the step of Lua's collector after each library load (a library leaves its chunk, and what
#: its top level made, as garbage: without it 50,000 loads hold 50% more than Redis's state)
LOAD_GC_STEP = 8
#: the scripts EVAL keeps before it evicts the least recently run (Redis: LRU_LIST_LENGTH)
EVAL_CACHE_SIZE = 500
#: flags of a script (the shebang's) and of a function
FLAG_NO_WRITES = "no-writes"
SCRIPT_FLAGS = ("no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys")


def version_number(version: str) -> int:
    major, minor, patch = (int(part) for part in version.split("."))
    return (major << 16) | (minor << 8) | patch


class ScriptHost(ServerAPI):
    """What scripting needs from the engine, beyond what every handler may use (the
    engine derives from it: compiled, these are direct calls)."""

    lookup: dict[bytes, CommandSpec]
    refuse_writes: ReplyError | None
    #: cluster mode's routing (None on a plain server): a script's commands pass it too
    cluster_gate: ClusterGate | None
    shutdown_requested: tuple[bool | None, bool, bool] | None
    scripting: Scripting

    def call(self, c: Client, row: CommandSpec, argv: list[bytes]) -> Reply | Block:
        raise NotImplementedError

    def start_collecting(self) -> bool:
        raise NotImplementedError

    def finish_collecting(self) -> None:
        raise NotImplementedError

    def effects_mark(self) -> int:
        raise NotImplementedError

    def drop_effects_since(self, mark: int) -> None:
        raise NotImplementedError

    #: the data was over maxmemory with nothing to evict when the command started
    pre_command_oom: bool

    def poll_while_busy(self, running: Client) -> None:
        raise NotImplementedError


# (plain classes, not dataclasses: mypyc compiles their __init__; a dataclass's is generated
# Python, which every EVALSHA would run)
class Script:
    """A compiled EVAL script (the cache's entry)."""

    def __init__(
        self, sha: bytes, body: bytes, function: Any, flags: tuple[str, ...] | None
    ) -> None:
        self.sha = sha
        self.body = body
        self.function = function
        self.flags = flags  # None: no shebang (Redis's compatibility mode)
        #: the function's place in the C bridge's table (0: none, lupa's call)
        self.slot = 0


class Run:
    """The script in execution."""

    def __init__(
        self,
        caller: Client,
        name: bytes,
        is_eval: bool,
        read_only: bool,
        started: float,
        command: list[bytes] | None = None,
    ) -> None:
        self.caller = caller
        self.name = name  # the sha of an EVAL script, the name of a function
        self.is_eval = is_eval
        self.read_only = read_only
        self.started = started
        self.command = command  # FUNCTION STATS shows it
        self.resp = 2  # redis.setresp
        self.repl = 3  # redis.set_repl
        self.wrote = False
        self.busy = False
        self.kill: bytes | None = None
        #: ``allow-cross-slot-keys``: its commands may touch keys of any slot this node serves
        self.cross_slot = False


class ScriptError(Exception):
    """A reply error a Lua entry point produced (compile or load)."""


class LuaRaise(Exception):
    """Raised by a bridge function: Lua sees the error ``{err=text}``, as when Redis's C
    functions raise."""

    def __init__(self, text: bytes, counted: bool = False) -> None:
        super().__init__(text)
        self.text = text
        #: a command's error, counted in INFO errorstats already (Redis's
        #: ignore_error_stats_update)
        self.counted = counted


def _raise(msg: bytes) -> LuaRaise:
    return LuaRaise(b"ERR " + msg)


class LuaVM:
    """One Lua state with the scripts' sandbox. Redis keeps two, one for EVAL's scripts and
    one for FUNCTION's libraries, and replaces each with a fresh one on its flush: a flush
    gives the memory back, and neither sees the other's garbage (INFO's used_memory_lua is
    the eval state's, used_memory_vm_functions the functions')."""

    def __init__(self, scripting: Scripting) -> None:
        lua = lua51.LuaRuntime(
            encoding=None, register_eval=False, register_builtins=False, unpack_returned_tuples=True
        )
        lua.execute("python = nil")
        self.lua = lua
        self.bridge = Bridge(scripting, self)
        fast, c_bridge = _open_c_bridge(lua, scripting)
        entry = lua.execute(
            PRELUDE,
            self.bridge,
            REDIS_COMPAT_VERSION.encode(),
            version_number(REDIS_COMPAT_VERSION),
            fast,
            name="=headwater",
        )
        self.entry = entry
        #: the C bridge's ``run`` and this state's number there (None: lupa calls the
        #: runners), and the runner's stashed results
        self.fast_run: Any = None
        self.c_bridge: Any = None
        self.number = -1
        self.take_stashed: Any = None
        number = entry.bridge_state if fast is not None else None
        if number is not None:
            self.fast_run, self.c_bridge, self.number = c_bridge.run, c_bridge, int(number)
            self.take_stashed = entry.take_stashed
        # (each read of a Lua table's field from Python makes a new wrapper: read them once)
        self.run_eval = entry.run_eval
        self.run_function = entry.run_function
        self.reader = ReplyReader(lua, entry.ok_table, entry.err_table)
        #: the prelude's reply_shape (``convert.lua_to_reply``)
        self.reply_shape = entry.reply_shape
        #: the prelude's gc_step, and the runs since it was last taken
        self.gc_step = entry.gc_step
        self.runs_since_gc = 0
        libraries.install(lua, entry)
        # (what building the sandbox left behind: INFO's used_memory_lua is the state's own)
        lua.execute("collectgarbage('collect')")

    def remember(self, function: Any) -> int:
        """The slot by which the C bridge runs this Lua function (0 without the bridge)."""
        return int(self.entry.remember(function)) if self.fast_run is not None else 0

    def memory(self) -> int:
        return int(self.lua.eval("collectgarbage('count')") * 1024)

    def ran(self) -> None:
        """A script ran, or a script or library was compiled: every GC_CYCLE_PERIOD of them,
        a step of Lua's collector (loads leave garbage as runs do: a compile's closure, the
        library's chunk)."""
        self.runs_since_gc += 1
        if self.runs_since_gc == GC_CYCLE_PERIOD:
            self.runs_since_gc = 0
            self.gc_step(GC_CYCLE_PERIOD)

    def close(self) -> None:
        """The state is dropped: its number in the C bridge is free again (lupa closes the
        state once nothing holds it)."""
        if self.c_bridge is not None:
            self.c_bridge.release(self.number)
            self.fast_run = self.c_bridge = None


def _open_c_bridge(lua: Any, scripting: Scripting) -> tuple[Any, Any]:
    """The C bridge's Lua side ({call, pcall, set_runner}) and its module, or (None, None):
    lupa's crossings then."""
    c_bridge = _c_bridge()
    if c_bridge is None:
        return None, None
    try:
        c_bridge.bind(lua51.__file__)
    except ImportError as exc:
        log.warning("Scripts run without the C bridge: %s", exc)
        return None, None
    c_bridge.set_handlers(scripting.call_command, scripting.unwrap)
    fast = lua.execute(
        "local path, take = ...\n"
        "local open = package.loadlib(path, 'luaopen_headwater_luabridge')\n"
        "return open and open(take)",
        c_bridge.__file__.encode(),
        c_bridge.take,
    )
    return (fast, c_bridge) if fast else (None, None)


class Scripting:
    def __init__(self, host: ScriptHost) -> None:
        self.host = host
        self.scripts: dict[bytes, Script] = {}
        #: the shas of the scripts EVAL added, least recently run first (an insertion-ordered
        #: dict); SCRIPT LOAD's are never evicted (Redis 7.4+)
        self.eval_lru: dict[bytes, None] = {}
        self.run: Run | None = None
        #: the Lua states of EVAL and of FUNCTION (None until first used, and after a flush)
        self.eval_vm: LuaVM | None = None
        self.function_vm: LuaVM | None = None
        #: the state in use now: the running script's, or the loading library's
        self.vm: LuaVM | None = None
        self.client: Client | None = None
        #: set while FUNCTION LOAD runs a library (redis.register_function adds to it)
        self.registering: Callable[..., Any] | None = None
        #: FUNCTION's libraries
        self.registry = Registry()
        #: when the library FUNCTION LOAD runs now started (it may run LOAD_TIMEOUT seconds)
        self.loading_since: float | None = None

    # -- the Lua states ----------------------------------------------------------------------

    def eval_state(self) -> LuaVM:
        vm = self.eval_vm
        if vm is None:
            vm = self.eval_vm = self._new_state()
        return vm

    def function_state(self) -> LuaVM:
        vm = self.function_vm
        if vm is None:
            vm = self.function_vm = self._new_state()
        return vm

    def _new_state(self) -> LuaVM:
        if self.client is None:
            client = Client(self.host, 0)
            client.authenticated = True
            client.is_script = True
            self.client = client
        return LuaVM(self)

    def flush(self) -> None:
        """SCRIPT FLUSH: the cache is dropped with the eval state (a new one is built when
        next needed, as Redis does)."""
        self.scripts.clear()
        self.eval_lru.clear()
        if self.eval_vm is not None:
            self.eval_vm.close()
            self.eval_vm = None

    def flush_functions(self) -> int:
        """FUNCTION FLUSH: every library goes, with the functions' state; the number of
        functions there were."""
        count = len(self.registry.functions)
        self.registry.flush()
        if self.function_vm is not None:
            self.function_vm.close()
            self.function_vm = None
        return count

    # -- compiling ---------------------------------------------------------------------------

    def compile(self, vm: LuaVM, body: bytes, chunkname: bytes) -> Any:
        """The chunk compiled in this state, or ScriptError(compiler message)."""
        function, message = vm.entry.compile(body, chunkname)
        if function is None:
            raise ScriptError(message)
        return function

    def script_for(self, body: bytes, from_eval: bool = False) -> Script:
        """The cached script of this body, compiled and cached if new. A script EVAL adds
        may be evicted (the least recently run, past EVAL_CACHE_SIZE of them); SCRIPT LOAD
        makes a script permanent, an EVAL-added one included."""
        sha = hashlib.sha1(body).hexdigest().encode()
        script = self.scripts.get(sha)
        if script is not None:
            if not from_eval:
                self.eval_lru.pop(sha, None)
            return script
        flags, skip = parse_shebang(body)
        vm = self.eval_state()
        try:
            function = self.compile(vm, body[skip:], b"@user_script")
        except ScriptError as exc:
            message = exc.args[0].decode("utf-8", "surrogateescape")
            raise err(f"Error compiling script (new function): {message}") from None
        script = Script(sha, body, function, flags)
        script.slot = vm.remember(function)
        vm.ran()
        if from_eval:
            self._evict_for_one()
            self.eval_lru[sha] = None
        self.scripts[sha] = script
        return script

    def _evict_for_one(self) -> None:
        lru = self.eval_lru
        while len(lru) >= EVAL_CACHE_SIZE:
            oldest = next(iter(lru))
            del lru[oldest]
            del self.scripts[oldest]
            self.host.stats.evicted_scripts += 1

    def ran(self, script: Script) -> None:
        """An EVAL-added script has run: it is now the most recently used."""
        lru = self.eval_lru
        if script.sha in lru:
            del lru[script.sha]
            lru[script.sha] = None

    # -- function libraries ------------------------------------------------------------------

    def create_library(self, code: bytes, replace: bool = True) -> Library:
        """Compile and run a library's code (FUNCTION LOAD, RESTORE): the library and the
        functions it registered, not yet current (``registry.check_add``/``add``). Without
        ``replace``, a library of that name already there is refused before anything runs."""
        name, skip = parse_metadata(code)
        check_name(name)
        if not replace:
            self.registry.check_absent(name)
        vm = self.function_state()
        try:
            chunk = self.compile(vm, code[skip:], b"@user_function")
        except ScriptError as exc:
            message = exc.args[0].decode("utf-8", "surrogateescape")
            raise err(f"Error compiling function: {message}") from None
        library = Library(name, code)
        lua_type = lua51.lua_type

        def items(table: Any) -> Any:
            if lua_type(table) != "table":
                raise TypeError
            return table.items()

        def register(*args: Any) -> None:
            try:
                spec = read_registration(args, lambda v: lua_type(v) == "function", items)
            except RegisterError as exc:
                raise _raise(str(exc).encode()) from None
            function_name = spec["name"]
            if not _NAME.fullmatch(function_name):
                raise _raise(_BAD_LIBRARY_NAME.encode())
            if function_name in library.functions:
                raise _raise(b"Function already exists in the library")
            function = Function(
                function_name, spec["callback"], spec["description"], spec["flags"], library
            )
            function.slot = vm.remember(function.callback)
            library.functions[function_name] = function

        self.registering = register
        self.loading_since = time.monotonic()
        self.vm = vm
        try:
            ok, result = vm.entry.load_library(chunk)
        finally:
            self.registering = None
            self.loading_since = None
            self.vm = None
        if not ok:
            text = result[b"err"] if vm.entry.is_table(result) else str(result).encode()
            message = text.decode("utf-8", "surrogateescape")
            raise err(f"Error registering functions: {message}")
        if not library.functions:
            raise err("No functions registered")
        vm.gc_step(LOAD_GC_STEP)
        return library

    def memory_lines(self) -> list[str]:
        """INFO memory's scripting fields (a state not built yet counts as Redis's fresh one
        would: not at all, as Headwater builds it on first use)."""
        vm = self.eval_vm.memory() if self.eval_vm is not None else 0
        vm_functions = self.function_vm.memory() if self.function_vm is not None else 0
        scripts = sum(len(script.body) + 96 for script in self.scripts.values())
        functions = sum(len(lib.code) + 96 for lib in self.registry.libraries.values())
        return [
            f"used_memory_lua:{vm}",
            f"used_memory_vm_eval:{vm}",
            f"used_memory_lua_human:{_human(vm)}",
            f"used_memory_scripts_eval:{scripts}",
            f"number_of_cached_scripts:{len(self.scripts)}",
            f"number_of_functions:{len(self.registry.functions)}",
            f"number_of_libraries:{len(self.registry.libraries)}",
            f"used_memory_vm_functions:{vm_functions}",
            f"used_memory_vm_total:{vm + vm_functions}",
            f"used_memory_vm_total_human:{_human(vm + vm_functions)}",
            f"used_memory_functions:{functions}",
            f"used_memory_scripts:{scripts + functions}",
            f"used_memory_scripts_human:{_human(scripts + functions)}",
        ]

    def library_codes(self) -> list[bytes]:
        """The code of every library, for snapshots and AOF rewrites."""
        return [library.code for library in self.registry.libraries.values()]

    def load_libraries(self, codes: list[bytes]) -> None:
        """The libraries a snapshot held, instead of those loaded now (as a Redis RDB load)."""
        self.flush_functions()
        for code in codes:
            library = self.create_library(code)
            self.registry.check_add(library, True)
            self.registry.add(library, True)

    # -- running -----------------------------------------------------------------------------

    def run_script(
        self,
        caller: Client,
        function: Any,
        slot: int,
        name: bytes,
        argv: list[bytes],
        nkeys: int,
        is_eval: bool,
        read_only: bool,
        command: list[bytes] | None = None,
        cross_slot: bool = False,
    ) -> Reply:
        """Run a compiled script or function (``slot``: its place in the C bridge) for
        ``caller``, with KEYS and ARGV from ``argv[3:]``; its reply in the caller's
        protocol. An error reply is raised (the engine counts it, unless it is the error of a
        command the script ran, counted then)."""
        vm = self.eval_vm if is_eval else self.function_vm
        client = self.client
        if vm is None or client is None:
            raise ScriptError("a script ran before its Lua state was built")
        client.db = caller.db
        client.user = caller.user  # (its commands are checked against the caller's rules)
        self.vm = vm
        run = self.run = Run(caller, name, is_eval, read_only, _monotonic(), command)
        run.cross_slot = cross_slot
        host = self.host
        collecting = host.start_collecting()
        try:
            if slot and vm.fast_run is not None:
                outcome: tuple[bool, Any, bool] = vm.fast_run(
                    vm.number, 0 if is_eval else 1, slot, nkeys, argv, 3
                )
                ok, result, stashed = outcome
                if stashed:
                    result = vm.take_stashed()
            else:
                runner = vm.run_eval if is_eval else vm.run_function
                table = vm.lua.table_from
                keys, args = table(argv[3 : 3 + nkeys]), table(argv[3 + nkeys :])
                ok, result = runner(function, keys, args)
            if not ok:
                raise self._error_reply(vm, result)
            reply = lua_to_reply(
                result, run.resp, caller.resp, vm.reply_shape, host.stats.count_error
            )
            if isinstance(reply, ReplyError):
                raise reply
            return reply
        finally:
            if collecting:
                host.finish_collecting()
            self.run = None
            self.vm = None
            if run.busy:
                self._end_busy()
            vm.ran()
            host.histograms.observe("script_run_seconds", _monotonic() - run.started)

    def _end_busy(self) -> None:
        self.host.busy_reply = None
        self.host.log("warning", "The slow script ended: the server answers all commands again")

    def _error_reply(self, vm: LuaVM, error: Any) -> ReplyError:
        run = self.run
        assert run is not None
        if not vm.entry.is_table(error):
            return err(f"Error running script {run.name.decode()}, {str(error)[:100]}")
        text = error[b"err"]
        if type(text) is not bytes:
            text = str(text).encode()
        text = text.split(b"\0", 1)[0]  # (a C string to Redis)
        source, line = error[b"source"], error[b"line"]
        if type(source) is bytes and line is not None:
            text += b" script: %s, on %s:%d." % (run.name, source, int(line))
        return error_from_text(text, counted=error[b"ignore_error_stats_update"] is True)

    # -- redis.call ---------------------------------------------------------------------------

    def call_command(self, raise_error: bool, args: tuple[Any, ...]) -> Any:
        run, client, vm = self.run, self.client, self.vm
        if run is None or client is None or vm is None:
            raise _raise(b"redis.call is only available while a script runs")
        reader = vm.reader
        if not args:
            return self._failed(raise_error, b"ERR " + _NO_ARGS)
        argv = list(args)
        for i, arg in enumerate(argv):
            kind = type(arg)
            if kind is bytes:
                continue
            if kind is int:
                argv[i] = b"%d" % arg
            elif kind is float:
                argv[i] = format_double(arg)  # (Redis 7.2+; 7.0 printed %.17g)
            else:
                return self._failed(raise_error, b"ERR " + _BAD_ARG)
        row = self._row_for(argv)
        refused = self._refusal(run, row, argv)
        if refused is not None:
            return self._rejected(raise_error, row, refused)
        assert row is not None
        client.resp = run.resp
        if row.is_write:
            run.wrote = True
            if run.repl == 0:
                return self._call_unlogged(client, row, argv, raise_error)
        host = self.host
        reply = host.call(client, row, argv)
        if host.pubsub.monitors:
            self._show_monitors(client, row, argv)
        if isinstance(reply, Block):  # a script never blocks (Redis 7.4+)
            reply = reply.reply_if_denied()
        failed, value = reply_to_lua(reader, reply, run.resp)
        if failed and raise_error:
            raise LuaRaise(value[b"err"], counted=True)
        return value

    def _show_monitors(self, client: Client, row: CommandSpec, argv: list[bytes]) -> None:
        """A command the script ran, shown to the monitors as ``[<db> lua]`` (after the
        line of the EVAL or FCALL that runs the script)."""
        pubsub = self.host.pubsub
        if pubsub.monitors:
            feed_monitors(pubsub, client, row, argv, source="lua")

    def _call_unlogged(
        self, client: Client, row: CommandSpec, argv: list[bytes], raise_error: bool
    ) -> Any:
        """A write after ``redis.set_repl(redis.REPL_NONE)``: its effects are dropped."""
        mark = self.host.effects_mark()
        reply = self.host.call(client, row, argv)
        self._show_monitors(client, row, argv)
        self.host.drop_effects_since(mark)
        if isinstance(reply, Block):
            reply = reply.reply_if_denied()
        vm = self.vm
        if vm is None:
            raise ScriptError("redis.call ran with no script running")
        failed, value = reply_to_lua(vm.reader, reply, client.resp)
        if failed and raise_error:
            raise LuaRaise(value[b"err"], counted=True)
        return value

    def _rejected(self, raise_error: bool, row: CommandSpec | None, text: bytes) -> Any:
        """A command the script may not run here: counted as a rejected call and an error
        reply (Redis's scriptCall), its error marked as counted."""
        if row is not None:
            row.rejected_calls += 1
        self.host.stats.count_error(text.split(b" ", 1)[0].decode("utf-8", "surrogateescape"))
        if raise_error:
            raise LuaRaise(text, counted=True)
        vm = self.vm
        if vm is None:
            raise ScriptError("redis.call ran with no script running")
        reader = vm.reader
        # (the reader's function, not a read of entry: from inside the C bridge's redis.call,
        # lupa's read of a field of entry gives a tuple)
        return reader.make_err(text)

    def _failed(self, raise_error: bool, text: bytes) -> Any:
        if raise_error:
            raise LuaRaise(text)
        vm = self.vm
        if vm is None:
            raise ScriptError("redis.call ran with no script running")
        return vm.lua.table_from({b"err": text})

    def unwrap(self, exc: BaseException) -> Any:
        """The Lua error a bridge function's exception stands for, in the state in use (the
        C bridge's handler: one for every state)."""
        vm = self.vm
        if vm is None:
            raise ScriptError("redis.call ran with no script running")
        return vm.bridge.unwrap(exc)

    def _row_for(self, argv: list[bytes]) -> CommandSpec | None:
        lookup = self.host.lookup
        row = lookup.get(argv[0])
        if row is None:
            row = lookup.get(argv[0].lower())
        if row is not None and row.subcommands and len(argv) > 1:
            return row.subcommands.get(argv[1].lower())
        return row

    def _refusal(self, run: Run, row: CommandSpec | None, argv: list[bytes]) -> bytes | None:
        if row is None:
            return b"ERR " + _UNKNOWN
        if not row.arity_ok(len(argv)):
            return b"ERR " + _ARITY
        flags = row.flags
        if "noscript" in flags:
            return b"ERR " + _NOSCRIPT
        denied = acl_refusal(run.caller, row, argv, "lua")
        if denied is not None:
            return b"ERR ACL failure in script: " + denied.encode("utf-8", "surrogateescape")
        if run.read_only and (row.is_write or "x_may_replicate" in flags):
            return b"ERR " + _RO_WRITE
        # (Redis's scriptVerifyOOM: out of memory when the script started, its first write)
        if self.host.pre_command_oom and not run.wrote and "denyoom" in flags:
            return OOM.line()
        if row.is_write:
            # as Redis's scriptVerifyWriteCommandAllow: a read-only replica always, a disk
            # error before the script's first write, too few good replicas always
            replication = self.host.replication_refusal
            if replication is not None and replication.code == "READONLY":
                return replication.line()
            refuse = self.host.refuse_writes
            if refuse is not None and not run.wrote:
                return refuse.line()
            if replication is not None:
                return replication.line()
        gate = self.host.cluster_gate
        caller = run.caller
        if gate is not None and not caller.replaying and not caller.is_master:
            return gate.script_refusal(caller, row, argv, run.cross_slot)
        return None

    # -- busy scripts ------------------------------------------------------------------------

    def tick(self) -> bytes | None:
        """Called by the Lua hook; the error text to stop the script with, if any."""
        run = self.run
        if run is None:
            loading = self.loading_since
            if loading is not None and time.monotonic() - loading > LOAD_TIMEOUT:
                return b"ERR FUNCTION LOAD timeout"
            return None
        if not run.busy:
            threshold_ms = self.host.config["busy-reply-threshold"]
            if (time.monotonic() - run.started) * 1000 < threshold_ms:
                return None
            run.busy = True
            self.host.busy_reply = BUSY_EVAL if run.is_eval else BUSY_FUNCTION
            self.host.log("warning", "Slow script detected: still in execution after the threshold")
        self.host.poll_while_busy(run.caller)
        if self.host.shutdown_requested is not None and run.kill is None:
            run.kill = SHUTDOWN_TEXT
            self.host.drop_effects_since(0)  # SHUTDOWN NOSAVE: what the script wrote is not kept
        return run.kill

    def kill(self, is_eval: bool) -> None:
        """SCRIPT KILL (``is_eval``) or FUNCTION KILL; raises Redis's refusals."""
        run = self.run
        if run is None:
            raise NOTBUSY
        if run.wrote:
            raise UNKILLABLE
        if is_eval and not run.is_eval:
            raise BUSY_FUNCTION
        if not is_eval and run.is_eval:
            raise BUSY_EVAL
        run.kill = KILLED_TEXT if is_eval else KILLED_FUNCTION_TEXT


class Bridge:
    """The Python functions one Lua state calls (``redis.call`` & co.): they raise
    ``LuaRaise``."""

    def __init__(self, scripting: Scripting, vm: LuaVM) -> None:
        self.scripting = scripting
        self.vm = vm

    def call(self, *args: Any) -> Any:
        return self.scripting.call_command(True, args)

    def pcall(self, *args: Any) -> Any:
        return self.scripting.call_command(False, args)

    def unwrap(self, exc: BaseException) -> Any:
        """The Lua error a bridge function's exception stands for."""
        lua = self.vm.lua
        if isinstance(exc, LuaRaise):
            if exc.counted:
                return self.vm.reader.make_err(exc.text)
            return lua.table_from({b"err": exc.text})
        if isinstance(exc, LibraryError):
            return exc.text.encode("utf-8", "surrogateescape")
        log.error("error in a scripting bridge function: %r", exc)
        return lua.table_from({b"err": b"ERR " + str(exc).encode()})

    def tick(self) -> bytes | None:
        time.sleep(0)  # (the C bridge runs Lua holding the GIL: the other threads' turn)
        return self.scripting.tick()

    def _checked(self, name: str, args: tuple[Any, ...]) -> Any:
        """rawset or setmetatable, refused on the sandbox's read-only tables."""
        entry = self.vm.entry
        kind = lua51.lua_type(args[0]) if args else None
        if kind != "table":
            got = "no value" if not args else _lua_type_name(args[0])
            where = entry.where().decode("utf-8", "surrogateescape")
            raise LibraryError(
                f"{where}bad argument #1 to '{name}' (table expected, got {got})", located=True
            )
        status, result = entry.checked_call(name.encode(), *args)
        if status == b"readonly":
            raise LibraryError("Attempt to modify a readonly table", located=True)
        if status is not True:  # Lua's own errors in a C function: argument errors say where
            text = result.decode("utf-8", "surrogateescape") if type(result) is bytes else ""
            if text.startswith(("bad argument", "cannot change a protected metatable")):
                where = entry.where().decode("utf-8", "surrogateescape")
                text = where + text.replace(" to '?' ", f" to '{name}' ")  # (no name via pcall)
            raise LibraryError(text, located=True)
        return result

    def rawset(self, *args: Any) -> Any:
        return self._checked("rawset", args)

    def setmetatable(self, *args: Any) -> Any:
        return self._checked("setmetatable", args)

    def sha1hex(self, *args: Any) -> bytes:
        if len(args) != 1 or type(args[0]) not in (bytes, int, float):
            raise _raise(b"wrong number of arguments")
        text = args[0] if type(args[0]) is bytes else format_double(float(args[0]))
        return hashlib.sha1(text).hexdigest().encode()

    def log(self, *args: Any) -> None:
        if len(args) < 2:
            raise _raise(b"redis.log() requires two arguments or more.")
        level = args[0]
        if type(level) not in (int, float):
            raise _raise(b"First argument must be a number (log level).")
        if not 0 <= level <= 3:
            raise _raise(b"Invalid debug level.")
        parts = [
            a if type(a) is bytes else format_double(float(a))
            for a in args[1:]
            if type(a) in (bytes, int, float)
        ]
        name = ("debug", "debug", "notice", "warning")[int(level)]
        message = b" ".join(parts).decode("utf-8", "replace")
        self.scripting.host.log(name, message)

    def setresp(self, *args: Any) -> None:
        if len(args) != 1:
            raise _raise(b"redis.setresp() requires one argument.")
        if args[0] not in (2, 3) or type(args[0]) is bool:
            raise _raise(b"RESP version must be 2 or 3.")
        run = self.scripting.run
        if run is not None:
            run.resp = int(args[0])

    def set_repl(self, *args: Any) -> None:
        if len(args) != 1:
            raise _raise(b"redis.set_repl() requires two arguments.")
        flags = args[0]
        if type(flags) not in (int, float) or flags not in (0, 1, 2, 3):
            raise _raise(
                b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
            )
        run = self.scripting.run
        if run is not None:
            run.repl = int(flags)

    def acl_check_cmd(self, *args: Any) -> bool:
        if not args:
            raise _raise(_NO_ARGS)
        argv = [a if type(a) is bytes else str(a).encode() for a in args]
        if self.scripting._row_for(argv) is None:
            raise _raise(b"Invalid command passed to redis.acl_check_cmd()")
        return True

    def register_function(self, *args: Any) -> Any:
        registering = self.scripting.registering
        if registering is None:
            raise _raise(b"redis.register_function can only be called on FUNCTION LOAD command")
        return registering(*args)


def _lua_type_name(value: Any) -> str:
    if value is None:
        return "nil"
    if type(value) is bool:
        return "boolean"
    if type(value) in (int, float):
        return "number"
    if type(value) is bytes:
        return "string"
    return str(lua51.lua_type(value) or "userdata")


def parse_shebang(body: bytes) -> tuple[tuple[str, ...] | None, int]:
    """``#!lua flags=…`` → (flags, length of the line, kept out of the compiled code but
    not its line feed); (None, 0) without a shebang. Raises Redis's errors."""
    if not body.startswith(b"#!"):
        return None, 0
    end = body.find(b"\n")
    if end < 0:
        raise err("Invalid script shebang")
    parts = body[:end].decode("utf-8", "surrogateescape").split()
    if not parts:
        raise err("Invalid engine in script shebang")
    if parts[0] != "#!lua":
        raise err(f"Unexpected engine in script shebang: {parts[0]}")
    flags: list[str] = []
    for part in parts[1:]:
        if not part.startswith("flags="):
            raise err(f"Unknown lua shebang option: {part}")
        for flag in part[6:].split(",") if part != "flags=" else ():
            if flag not in SCRIPT_FLAGS:
                raise err(f"Unexpected flag in script shebang: {flag}")
            flags.append(flag)
    return tuple(flags), end
