"""The Lua side of scripting: the sandbox every script and function runs in.

``PRELUDE`` runs once in a fresh Lua 5.1 state with the Python bridge functions as its
arguments and returns the table of entry points the runtime calls (compile, run, …).

Stock Lua 5.1 has no read-only tables (Redis patches its Lua for them), so the sandbox is built
from proxies: scripts run with an empty environment table whose metatable reads through to the
real globals (``api``) and refuses every assignment with Redis's text; the libraries scripts
see (``redis``, ``string``, ``math``, …) are read-only proxies too, and ``rawset`` refuses them.
A missing global is an error, as in Redis (``Script attempted to access nonexistent global
variable``). ``loadstring`` gives the chunks it makes the same environment, so no chunk ever
reaches the real globals (with ``os``, ``io``, ``debug``, ``require``, ``loadfile``, ``dofile``).
Limits: ``pairs`` and ``#`` see nothing through a proxy (``pairs(redis)`` is empty).

A library loaded by FUNCTION LOAD runs its top level with the reads redirected to the library
API (``redis.register_function``, ``redis.log``, …), then back to the full API, as Redis swaps
the ``__index`` of its globals' metatable: its functions, which share that environment, see
the full API when they are called.
"""

from __future__ import annotations

PRELUDE = r"""
local bridge, version, version_num, fast = ...
local G = _G
local type, tostring, select, error, rawget, rawset, setmetatable, xpcall, pcall, unpack =
      type, tostring, select, error, rawget, rawset, setmetatable, xpcall, pcall, unpack
local next, pairs, ipairs, getmetatable = next, pairs, ipairs, getmetatable
local loadstring, setfenv = loadstring, setfenv
local getinfo, sethook = debug.getinfo, debug.sethook
local unwrap, tick = bridge.unwrap, bridge.tick
local INTERNAL = '=headwater'

-- read-only proxy -> the table it shows (rawget, next, pairs and ipairs see through it)
local protected = setmetatable({}, {__mode = 'k'})
local function readonly_error() error('Attempt to modify a readonly table', 2) end
local function readonly(t)
  local proxy = setmetatable({}, {__index = t, __newindex = readonly_error, __metatable = false})
  protected[proxy] = t
  return proxy
end

-- Python functions are userdata to Lua: type() calls those of the API functions, as Redis's
-- are C functions
local python_functions = setmetatable({}, {__mode = 'k'})
local function mark_functions(t)
  for k, v in pairs(t) do
    if type(v) == 'userdata' and k ~= 'null' then python_functions[v] = true end
  end
end
local function lua_type(v)
  if python_functions[v] then return 'function' end
  return type(v)
end

-- the full API scripts see
local api = {}
for _, name in ipairs({'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable', 'ipairs',
    'rawequal', 'select', 'tonumber', 'tostring', 'unpack', '_VERSION'}) do
  api[name] = G[name]
end
api.type = lua_type
for _, name in ipairs({'string', 'math', 'table', 'coroutine'}) do api[name] = readonly(G[name]) end
-- os: only its clock (Redis 7.4's sandbox)
api.os = readonly({clock = os.clock})
-- rawset and setmetatable refuse the read-only tables; they are Python functions (as Redis's
-- are C ones: a tail call to them keeps the script's frame), over checked_call below
local py_rawset, py_setmetatable = bridge.rawset, bridge.setmetatable
python_functions[py_rawset], python_functions[py_setmetatable] = true, true
api.rawset, api.setmetatable = py_rawset, py_setmetatable
api.rawget = function(t, k) return rawget(protected[t] or t, k) end
api.next = function(t, k) return next(protected[t] or t, k) end
api.pairs = function(t) return pairs(protected[t] or t) end
api.ipairs = function(t) return ipairs(protected[t] or t) end
-- the strings' metatable: getmetatable('') gives a read-only view of it
do
  local string_meta = getmetatable('')
  string_meta.__metatable = readonly({__index = api.string})
end
-- an error raised by the Python side of redis.call & co. reaches Lua as a userdata holding
-- the exception: scripts see Redis's {err=...} table instead
local function plain_error(e)
  if type(e) == 'userdata' then return unwrap(e) end
  return e
end
-- Redis's pcall gives the text of an error table ({err=...}), not the table
local function caught(ok, ...)
  if ok then return ok, ... end
  local e = plain_error((...))
  if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then e = rawget(e, 'err') end
  return ok, e
end
api.pcall = function(f, ...) return caught(pcall(f, ...)) end
api.xpcall = function(f, handler)
  return xpcall(f, function(e) return handler(plain_error(e)) end)
end

-- the environment of every script: reads go to api (or the library API while one loads);
-- getmetatable(_G) shows what Redis's globals have, a read-only {__index = <the error of a
-- nonexistent global>}
local env_meta = {__index = api, __newindex = readonly_error}
local env = setmetatable({}, env_meta)
protected[env] = api
api._G = env
local function sandboxed_load(chunk, name)
  if type(chunk) == 'string' and chunk:byte(1) == 27 then  -- no bytecode (it can break Lua)
    return nil, 'binary chunks are not allowed'
  end
  local f, e = loadstring(chunk, name)
  if f then setfenv(f, env) end
  return f, e
end
api.loadstring = sandboxed_load
api.load = function(source, name)
  if type(source) == 'string' then return sandboxed_load(source, name) end
  local parts = {}
  while true do
    local piece = source()
    if piece == nil or piece == '' then break end
    parts[#parts + 1] = piece
  end
  return sandboxed_load(table.concat(parts), name)
end
local function missing_global(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end
setmetatable(api, {__index = missing_global})
env_meta.__metatable = readonly({__index = missing_global})

-- the redis table: what may raise is Python (a C function to Lua, so a tail call to it
-- keeps the script's frame, whose line the error reply names); call and pcall are the C
-- bridge's when it is built (``fast``: headwater/_luabridge.c), else lupa's crossings
local redis = {call = fast and fast.call or bridge.call, sha1hex = bridge.sha1hex,
  pcall = fast and fast.pcall or bridge.pcall,
  log = bridge.log, setresp = bridge.setresp, set_repl = bridge.set_repl,
  acl_check_cmd = bridge.acl_check_cmd}
local function push_error(text)
  local code, msg = 'ERR', text
  if text:sub(1, 1) == '-' then
    local space = text:find(' ', 1, true)
    if space then code, msg = text:sub(2, space - 1), text:sub(space + 1) else msg = text:sub(2) end
  end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return {err = code .. ' ' .. msg}
end
function redis.error_reply(...)
  local text = ...
  if select('#', ...) ~= 1 or type(text) ~= 'string' then
    return push_error('wrong number or type of arguments')
  end
  if text:sub(1, 1) ~= '-' then text = '-' .. text end
  return push_error(text)
end
function redis.status_reply(...)
  local text = ...
  if select('#', ...) ~= 1 or type(text) ~= 'string' then
    return push_error('wrong number or type of arguments')
  end
  return {ok = text}
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_ALL = 0, 1, 3
redis.REPL_SLAVE, redis.REPL_REPLICA = 2, 2
function redis.replicate_commands() return true end
function redis.breakpoint() return false end
function redis.debug() end
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = version, version_num
mark_functions(redis)
api.redis = readonly(redis)

-- what a library's top level sees while FUNCTION LOAD runs it: redis, and in it only this
local library_redis = setmetatable({register_function = bridge.register_function,
  log = redis.log, REDIS_VERSION = version, REDIS_VERSION_NUM = version_num,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3}, {__index = missing_global})
local library_api = setmetatable({redis = readonly(library_redis)}, {__index = missing_global})

-- errors: Redis's handler, which also skips our own Lua frames (the hook)
local function error_handler(e)
  e = plain_error(e)
  local level = 2
  local info = getinfo(level, 'Sl')
  while info and (info.what == 'C' or info.source == INTERNAL) do
    level = level + 1
    info = getinfo(level, 'Sl')
  end
  if type(e) ~= 'table' then e = {err = 'ERR ' .. tostring(e)} end
  if info then
    e.source = info.source
    e.line = info.currentline
  end
  return e
end
api.__redis__err__handler = error_handler

-- time checks: every 100000 instructions (the hook stays set: no Lua runs but ours); once a
-- script is killed, on every line until it ends (pcall cannot hold it), without asking again
local killed_error
local function hook()
  if not killed_error then
    local kill = tick()
    if kill then
      killed_error = kill
      sethook(hook, 'l')
    end
  end
  -- (not in our own frames: the line hook also fires between xpcall's return and finish())
  if killed_error and getinfo(2, 'S').source ~= INTERNAL then error({err = killed_error}) end
end
sethook(hook, '', 100000)

local entry = {}
function entry.compile(body, chunkname)
  local f, e = loadstring(body, chunkname)
  if not f then return nil, e end
  setfenv(f, env)
  return f, false
end
-- (the count hook back before the error is forgotten: the line hook would fire on the line
-- between, ask tick() again and keep the error for the next script)
local function finish(ok, result)
  if killed_error then
    sethook(hook, '', 100000)
    killed_error = nil
  end
  return ok, result
end
-- KEYS and ARGV come as tables (made by the C bridge, or by lupa's table_from): a script
-- may have more arguments than Lua's stack holds (varargs would)
local function run_eval(f, keys, argv)
  rawset(api, 'KEYS', keys)
  rawset(api, 'ARGV', argv)
  return finish(xpcall(f, error_handler))
end
-- the function FCALL runs, with its arguments: upvalues of one closure made once (xpcall
-- passes no arguments in Lua 5.1), instead of a new closure per call (FCALL never nests)
local current_f, current_keys, current_argv
local function call_current()
  local f, keys, argv = current_f, current_keys, current_argv
  current_f, current_keys, current_argv = nil, nil, nil
  return f(keys, argv)
end
local function run_function(f, keys, argv)
  rawset(api, 'KEYS', nil)
  rawset(api, 'ARGV', nil)
  current_f, current_keys, current_argv = f, keys, argv
  return finish(xpcall(call_current, error_handler))
end
entry.run_eval, entry.run_function = run_eval, run_function
function entry.load_library(f)
  env_meta.__index = library_api
  local ok, result = xpcall(f, error_handler)
  env_meta.__index = api
  return finish(ok, result)
end
function entry.is_table(value) return type(value) == 'table' end
local collectgarbage = collectgarbage
function entry.gc_step(size) collectgarbage('step', size) end
function entry.ok_table(text) return {ok = text} end
-- a command's error reply, as Redis gives it to the script: marked as already counted in
-- INFO errorstats (the script returning it does not count it again)
function entry.err_table(text) return {err = text, ignore_error_stats_update = true} end
-- what a script's table result stands for, as Redis's luaReplyToRedisReply reads it: raw
-- reads only (a metatable's __index never runs), in its order: err, ok, double, big_number,
-- verbatim_string, map, set, else an array of the items before the first nil (always three
-- values: lupa gives them as one tuple)
function entry.reply_shape(t)
  local v = rawget(t, 'err')
  if type(v) == 'string' then return 'err', v, rawget(t, 'ignore_error_stats_update') == true end
  v = rawget(t, 'ok')
  if type(v) == 'string' then return 'ok', v, false end
  v = rawget(t, 'double')
  if type(v) == 'number' then return 'double', v, false end
  v = rawget(t, 'big_number')
  if type(v) == 'string' then return 'big_number', v, false end
  v = rawget(t, 'verbatim_string')
  if type(v) == 'table' then
    local format, text = rawget(v, 'format'), rawget(v, 'string')
    if type(format) == 'string' and type(text) == 'string' then return 'verbatim', format, text end
  end
  v = rawget(t, 'map')
  if type(v) == 'table' then return 'map', v, false end
  v = rawget(t, 'set')
  if type(v) == 'table' then return 'set', v, false end
  local n = 0
  while rawget(t, n + 1) ~= nil do n = n + 1 end
  return 'array', n, false
end
local raw_operations = {rawset = rawset, setmetatable = setmetatable}
-- 'readonly', or pcall's results
function entry.checked_call(name, t, ...)
  if protected[t] then return 'readonly', nil end
  return pcall(raw_operations[name], t, ...)
end
function entry.protect(f, ...) return pcall(f, ...) end
-- luaL_where(L, 1) for a Python function Lua called: the position of its caller
function entry.where()
  local info = getinfo(3, 'Sl')
  if info and info.currentline > 0 then return info.short_src .. ':' .. info.currentline .. ': ' end
  return ''
end
-- the C bridge's runner: scripts and functions by slot (``remember``; a weak table: the
-- function lives as long as Python holds it), their table results stashed for lupa to read
local slots = setmetatable({}, {__mode = 'v'})
local last_slot = 0
function entry.remember(f)
  last_slot = last_slot + 1
  slots[last_slot] = f
  return last_slot
end
local stashed
local function stash(ok, result)
  if type(result) == 'table' then
    stashed = result
    return ok, nil, true
  end
  return ok, result, false
end
local function run_slot(mode, slot, keys, argv)
  if mode == 0 then return stash(run_eval(slots[slot], keys, argv)) end
  return stash(run_function(slots[slot], keys, argv))
end
function entry.take_stashed()
  local value = stashed
  stashed = nil
  return value
end
-- (the state's number in the C bridge, for its ``run``)
if fast then entry.bridge_state = fast.set_runner(run_slot) end
function entry.install(name, library)
  mark_functions(library)
  api[name] = readonly(library)
end
return entry
"""
