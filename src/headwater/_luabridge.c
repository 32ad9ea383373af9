/* The two crossings between Python and Lua that every FCALL and EVALSHA makes, in C.
 *
 * lupa (the Lua 5.1 runtime Headwater embeds) converts values generically on each crossing:
 * a Lua->Python call builds its argument tuple one element at a time and passes an empty
 * kwargs dict; a Python->Lua call goes through a generic __call__ that returns a tuple.
 * Measured, the two cost more than the Lua that runs between them (PROFILE-transport.md).
 *
 * This module stands in for those two crossings only, in the same Lua state as lupa's:
 *
 * - ``redis.call`` / ``redis.pcall`` are C functions (``call``): their arguments go to the
 *   Python handler as one tuple of bytes, ints and floats (anything else: None, which the
 *   handler refuses as Redis does); a reply that is a string, a number, a boolean or nil is
 *   pushed here; any other (a table lupa made) is handed back through lupa's own callable
 *   ``take`` (the first argument of ``luaopen_headwater_luabridge``);
 * - ``run`` calls the Lua runner a state's prelude registered (``set_runner``, which answers
 *   the state's number) with a script's KEYS and ARGV (tables built here: there may be more
 *   than Lua's stack holds) and returns ``(ok, value, stashed)``: a table result stays in
 *   Lua, stashed by the runner, for lupa to read (``stashed`` True). There are several
 *   states (Redis's: one for EVAL, one for FUNCTION, each replaced on its flush): ``release``
 *   gives a closed state's number back.
 *
 * The Lua C API is not linked: its functions are looked up in lupa's extension module, which
 * exports them (``bind``), so that both speak to the same Lua. Lua finds this module's entry
 * through ``package.loadlib`` (this file, already loaded: the same statics). ``run`` keeps
 * the GIL while Lua runs (lupa releases it and takes it back on every call into Python: 2%
 * of a server's CPU under FCALL load); the Lua hook, every 100,000 instructions, lets the
 * other threads have it (``Bridge.tick``). ``call`` takes it in case Lua was entered
 * through lupa.
 *
 * Nothing here decides a rule of Redis's: which values are plain, what a reply becomes, what
 * an error says, all stay in Python (``scripting/runtime.py``) and in the prelude. Without
 * this module (the pure build) lupa's crossings are used: the same behaviour, slower. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <math.h>

typedef struct lua_State lua_State;
typedef int (*lua_CFunction)(lua_State *L);
typedef double lua_Number;

/* Lua 5.1's lua.h values */
#define LUA_REGISTRYINDEX (-10000)
#define LUA_GLOBALSINDEX (-10002)
#define upvalue_index(i) (LUA_GLOBALSINDEX - (i))
#define LUA_TNIL 0
#define LUA_TBOOLEAN 1
#define LUA_TNUMBER 3
#define LUA_TSTRING 4
#define LUA_TTABLE 5

static struct {
    int (*gettop)(lua_State *);
    void (*settop)(lua_State *, int);
    int (*checkstack)(lua_State *, int);
    int (*type)(lua_State *, int);
    const char *(*tolstring)(lua_State *, int, size_t *);
    lua_Number (*tonumber)(lua_State *, int);
    int (*toboolean)(lua_State *, int);
    void (*pushlstring)(lua_State *, const char *, size_t);
    void (*pushnumber)(lua_State *, lua_Number);
    void (*pushboolean)(lua_State *, int);
    void (*pushnil)(lua_State *);
    void (*pushvalue)(lua_State *, int);
    void (*pushcclosure)(lua_State *, lua_CFunction, int);
    void (*createtable)(lua_State *, int, int);
    void (*setfield)(lua_State *, int, const char *);
    void (*rawgeti)(lua_State *, int, int);
    void (*rawseti)(lua_State *, int, int);
    int (*pcall)(lua_State *, int, int, int);
    void (*call)(lua_State *, int, int);
    int (*error)(lua_State *);
    int (*ref)(lua_State *, int);
} lua;

static const char *const lua_names[] = {
    "lua_gettop", "lua_settop", "lua_checkstack", "lua_type", "lua_tolstring",
    "lua_tonumber", "lua_toboolean", "lua_pushlstring", "lua_pushnumber", "lua_pushboolean",
    "lua_pushnil", "lua_pushvalue", "lua_pushcclosure", "lua_createtable", "lua_setfield",
    "lua_rawgeti", "lua_rawseti", "lua_pcall", "lua_call", "lua_error", "luaL_ref",
};

static int bound = 0;
/* the states with a runner, by number (state NULL: a free number); the array grows as
 * states are made, and ``release`` frees a number for the next */
struct runner {
    lua_State *state;
    int runner_ref;
};
static struct runner *states = NULL;
static long states_len = 0;
/* redis.call's handler: handler(raise_error: bool, args: tuple) -> value */
static PyObject *call_handler = NULL;
/* what a handler's exception becomes in Lua: unwrap(exc) -> value */
static PyObject *unwrap_handler = NULL;
/* a value for lupa to push (``take``), and the marker of "stashed in Lua" */
static PyObject *pending = NULL;

/* -- Lua values -> Python ------------------------------------------------------------------ */

static PyObject *number_to_python(lua_Number n)
{
    /* as lupa: an integral number is an int, any other a float */
    if (isfinite(n) && n == floor(n) && fabs(n) < 9.2e18)
        return PyLong_FromLongLong((long long)n);
    return PyFloat_FromDouble(n);
}

/* a redis.call argument: bytes, int or float; anything else None (the handler refuses it) */
static PyObject *argument_to_python(lua_State *L, int index)
{
    size_t len;
    const char *s;
    switch (lua.type(L, index)) {
    case LUA_TSTRING:
        s = lua.tolstring(L, index, &len);
        return PyBytes_FromStringAndSize(s, (Py_ssize_t)len);
    case LUA_TNUMBER:
        return number_to_python(lua.tonumber(L, index));
    default:
        Py_RETURN_NONE;
    }
}

/* -- Python values -> Lua ------------------------------------------------------------------ */

/* 1 if pushed; 0 if the value is not plain (the caller has it pushed by lupa) */
static int push_plain(lua_State *L, PyObject *value)
{
    if (PyBytes_CheckExact(value)) {
        lua.pushlstring(L, PyBytes_AS_STRING(value), (size_t)PyBytes_GET_SIZE(value));
    } else if (PyBool_Check(value)) {
        lua.pushboolean(L, value == Py_True);
    } else if (PyLong_CheckExact(value)) {
        double n = PyLong_AsDouble(value);
        if (n == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        lua.pushnumber(L, n);
    } else if (PyFloat_CheckExact(value)) {
        lua.pushnumber(L, PyFloat_AS_DOUBLE(value));
    } else if (value == Py_None) {
        lua.pushnil(L);
    } else {
        return 0;
    }
    return 1;
}

/* Push ``value`` (a new reference, consumed) and give the GIL back. A value that is not plain
 * goes through lupa's ``take``, which needs no GIL of ours. */
static void push_and_release(lua_State *L, PyObject *value, PyGILState_STATE gil)
{
    if (push_plain(L, value)) {
        Py_DECREF(value);
        PyGILState_Release(gil);
        return;
    }
    Py_XSETREF(pending, value);
    PyGILState_Release(gil);
    lua.pushvalue(L, upvalue_index(2));
    lua.call(L, 0, 1);
}

/* ``redis.call`` (upvalue 1 true) and ``redis.pcall`` (false); upvalue 2: lupa's ``take`` */
static int call(lua_State *L)
{
    int n = lua.gettop(L);
    int raise_error = lua.toboolean(L, upvalue_index(1));
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *args = PyTuple_New(n);
    PyObject *result = NULL;
    if (args != NULL) {
        int i;
        for (i = 0; i < n; i++) {
            PyObject *item = argument_to_python(L, i + 1);
            if (item == NULL)
                break;
            PyTuple_SET_ITEM(args, i, item);
        }
        if (i == n) {
            /* the arguments are in the tuple: off the stack, so that the handler, and lupa
             * pushing its reply, have room on it (as Redis's luaArgsToRedisArgv pops them) */
            lua.settop(L, 0);
            PyObject *call_args[2] = {raise_error ? Py_True : Py_False, args};
            result = PyObject_Vectorcall(call_handler, call_args, 2, NULL);
        }
        Py_DECREF(args);
    }
    if (result != NULL) {
        push_and_release(L, result, gil);
        return 1;
    }
    /* the handler raised: the Lua error unwrap makes of it (its {err=...} table) */
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *error = exc != NULL ? PyObject_CallOneArg(unwrap_handler, exc) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    if (error == NULL) {
        PyErr_Clear();
        PyGILState_Release(gil);
        lua.pushlstring(L, "ERR the script bridge failed", 28);
        return lua.error(L);
    }
    push_and_release(L, error, gil);
    return lua.error(L);
}

/* from the prelude: the Lua function ``run`` calls; answers the state's number for ``run``
 * (nil if no memory is left for it: lupa's crossings then) */
static int set_runner(lua_State *L)
{
    lua.settop(L, 1);
    long i = 0;
    while (i < states_len && states[i].state != NULL)
        i++;
    if (i == states_len) {
        /* (plain realloc: Lua may run without the GIL) */
        struct runner *grown = realloc(states, sizeof(struct runner) * (size_t)(states_len + 4));
        if (grown == NULL) {
            lua.pushnil(L);
            return 1;
        }
        states = grown;
        for (long j = states_len; j < states_len + 4; j++)
            states[j].state = NULL;
        states_len += 4;
    }
    states[i].runner_ref = lua.ref(L, LUA_REGISTRYINDEX);
    states[i].state = L;
    lua.pushnumber(L, (lua_Number)i);
    return 1;
}

/* ``package.loadlib(<this file>, 'luaopen_headwater_luabridge')(take)``: {call=, pcall=,
 * set_runner=} */
__attribute__((visibility("default"))) int luaopen_headwater_luabridge(lua_State *L)
{
    lua.createtable(L, 0, 3);
    lua.pushboolean(L, 1);
    lua.pushvalue(L, 1);
    lua.pushcclosure(L, call, 2);
    lua.setfield(L, -2, "call");
    lua.pushboolean(L, 0);
    lua.pushvalue(L, 1);
    lua.pushcclosure(L, call, 2);
    lua.setfield(L, -2, "pcall");
    lua.pushcclosure(L, set_runner, 0);
    lua.setfield(L, -2, "set_runner");
    return 1;
}

/* -- the module's Python functions ---------------------------------------------------------- */

static PyObject *bind(PyObject *self, PyObject *arg)
{
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL)
        return NULL;
    if (bound)
        Py_RETURN_NONE;
    /* (already loaded by lupa's import: this only finds it) */
    void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL)
        return PyErr_Format(PyExc_ImportError, "cannot find lupa's Lua in %s", path);
    void **slots = (void **)&lua;
    for (size_t i = 0; i < sizeof(lua_names) / sizeof(lua_names[0]); i++) {
        slots[i] = dlsym(library, lua_names[i]);
        if (slots[i] == NULL)
            return PyErr_Format(PyExc_ImportError, "%s does not export %s", path, lua_names[i]);
    }
    bound = 1;
    Py_RETURN_NONE;
}

static PyObject *set_handlers(PyObject *self, PyObject *args)
{
    PyObject *call_f, *unwrap_f;
    if (!PyArg_ParseTuple(args, "OO", &call_f, &unwrap_f))
        return NULL;
    Py_INCREF(call_f);
    Py_XSETREF(call_handler, call_f);
    Py_INCREF(unwrap_f);
    Py_XSETREF(unwrap_handler, unwrap_f);
    Py_RETURN_NONE;
}

static PyObject *release(PyObject *self, PyObject *arg)
{
    long number = PyLong_AsLong(arg);
    if (number == -1 && PyErr_Occurred())
        return NULL;
    if (number >= 0 && number < states_len)
        states[number].state = NULL;
    Py_RETURN_NONE;
}

static PyObject *take(PyObject *self, PyObject *unused)
{
    PyObject *value = pending;
    pending = NULL;
    if (value == NULL)
        Py_RETURN_NONE;
    return value;
}

/* argv[start:end] as a Lua array, pushed; 0 if an item is not bytes (TypeError set) */
static int push_array(lua_State *L, PyObject *argv, Py_ssize_t start, Py_ssize_t end)
{
    lua.createtable(L, (int)(end - start), 0);
    for (Py_ssize_t i = start; i < end; i++) {
        PyObject *item = PyList_GET_ITEM(argv, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "run: the arguments must be bytes");
            return 0;
        }
        lua.pushlstring(L, PyBytes_AS_STRING(item), (size_t)PyBytes_GET_SIZE(item));
        lua.rawseti(L, -2, (int)(i - start + 1));
    }
    return 1;
}

/* run(state, mode, slot, nkeys, argv, start) -> (ok, value, stashed): the state's runner
 * called with (mode, slot, KEYS, ARGV), KEYS the nkeys items of argv from start, ARGV the
 * rest */
static PyObject *run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyList_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "run(state, mode, slot, nkeys, argv: list, start)");
        return NULL;
    }
    long number = PyLong_AsLong(args[0]);
    long mode = PyLong_AsLong(args[1]), slot = PyLong_AsLong(args[2]);
    long nkeys = PyLong_AsLong(args[3]);
    Py_ssize_t start = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (number < 0 || number >= states_len || states[number].state == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the Lua bridge is not open in this state");
        return NULL;
    }
    PyObject *argv = args[4];
    Py_ssize_t size = PyList_GET_SIZE(argv);
    if (start < 0 || nkeys < 0 || start + nkeys > size || size > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "run: bad start or nkeys");
        return NULL;
    }
    lua_State *L = states[number].state;
    int top = lua.gettop(L);
    if (!lua.checkstack(L, 8))
        return PyErr_NoMemory();
    lua.rawgeti(L, LUA_REGISTRYINDEX, states[number].runner_ref);
    lua.pushnumber(L, (lua_Number)mode);
    lua.pushnumber(L, (lua_Number)slot);
    if (!push_array(L, argv, start, start + nkeys) || !push_array(L, argv, start + nkeys, size)) {
        lua.settop(L, top);
        return NULL;
    }
    int status = lua.pcall(L, 4, 3, 0);
    PyObject *ok, *value, *stashed = Py_False;
    if (status != 0) { /* (outside the runner's xpcall: out of memory) */
        size_t len = 0;
        const char *s = lua.tolstring(L, -1, &len);
        ok = Py_False;
        value = s != NULL ? PyBytes_FromStringAndSize(s, (Py_ssize_t)len) : Py_NewRef(Py_None);
    } else {
        ok = lua.toboolean(L, -3) ? Py_True : Py_False;
        if (lua.toboolean(L, -1))
            stashed = Py_True;
        switch (lua.type(L, -2)) {
        case LUA_TSTRING:
        case LUA_TNUMBER:
            value = argument_to_python(L, -2);
            break;
        case LUA_TBOOLEAN:
            value = Py_NewRef(lua.toboolean(L, -2) ? Py_True : Py_False);
            break;
        default: /* nil, or what the runner stashed */
            value = Py_NewRef(Py_None);
        }
    }
    lua.settop(L, top);
    if (value == NULL)
        return NULL;
    PyObject *result = PyTuple_Pack(3, ok, value, stashed);
    Py_DECREF(value);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_O, "Find the Lua C API in lupa's module at this path."},
    {"set_handlers", set_handlers, METH_VARARGS, "redis.call's handler, and unwrap."},
    {"release", release, METH_O, "A closed state's number, free again."},
    {"take", take, METH_NOARGS, "The value redis.call hands to lupa (for its take)."},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL, "Run a script (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater._luabridge", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__luabridge(void)
{
    return PyModule_Create(&module);
}
