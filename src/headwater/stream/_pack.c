/* A run of stream entries packed into a node's buffers in one call (stream/node.py,
 * ``Node.extend``): what a replica's link, AOF replay and a restart's log append, and XADD's
 * one entry. The compiled Python loop costs ~5.7k instructions an entry (a method call and a
 * boxed integer per ID column, a bytes object per value's length prefix, the listpack size
 * rules through several calls); this is a few hundred. Without this module (the pure build)
 * ``Node.extend`` runs the Python loop; both leave the same nodes
 * (tests/unit/test_node_pack.py, tests/unit/test_stream_pack_equivalence.py).
 *
 * C packs bytes, Python decides. Where a node ends is not decided here: the rule (Redis's
 * stream-node-max-bytes / stream-node-max-entries, and that a new node takes its first entry
 * whatever its size) is written once, in ``room`` in stream/node.py, which hands this module
 * a budget; ``pack_run`` only counts against it. What this file does repeat is how entries
 * are laid out in a node's blob and how many bytes Redis's listpack gives each (node.py's
 * module docstring, ``_append_packed``, ``lp_int``, ``lp_str``, ``_delta_lp``): the tests
 * above compare the two byte for byte.
 *
 * ``pack_run(blob, entries, start, free, bytes_left, entries_left, master_ms, master_seq,
 * field_list, count) -> (stop, spent, ms, seq, offsets)``
 *
 * Appends ``entries[start:]`` (``((ms, seq), pairs, size)``) to ``blob`` while each has the
 * node's field names (``field_list``) and stays in the budget: the first ``free`` entries are
 * taken whatever their size, the next while fewer than ``entries_left`` were taken in this
 * call and ``spent + size <= bytes_left``, ``spent`` being the listpack bytes the entries
 * taken in this call added (node.py's ``fits``, in the same terms). It stops at the first entry outside the budget or with other fields or other
 * types, and says neither which: the caller decides what comes next. ``stop`` is the index of
 * that entry (or ``len(entries)``), ``spent`` the listpack bytes added (the master's count
 * widening included: ``count`` is the node's live entries before the call), and ``ms``,
 * ``seq`` and ``offsets`` are the new entries' column values as native-order bytes, for
 * ``array.frombytes``.
 *
 * ``append_one(blob, ms, seq, offsets, sid, pairs, field_list, master_ms, master_seq, count)
 * -> lp``: one entry (``Node.append``: XADD's, placed by the caller), its ID and offset
 * appended to the columns (the arrays themselves: three method calls cost less than three
 * bytes objects and a result tuple for one entry) and its values to ``blob``; returns the
 * listpack bytes it adds to the node, or -1, changing nothing, when it has other field names
 * or other types.
 *
 * ``plain_id(raw) -> (ms, seq) | None``: a plain ``<ms>-<seq>`` ID parsed (``ids._plain_id``'s
 * rules, without its ~0.9k compiled instructions a digit at a time and a boxed tuple)
 * ``format_id(ms, seq) -> bytes``: ``b"%d-%d" % (ms, seq)``, the form of every ID in a reply
 * (compiled, the bytes formatting costs ~1.5k instructions: a tuple, then the format string
 * parsed; this ~0.2k). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <limits.h>
#include <string.h>

/* bytes of an integer element of a listpack (encoding + backlen) */
static long long lp_int(long long v)
{
    if (v >= 0 && v <= 127) {
        return 2;
    }
    if (v >= -4096 && v <= 4095) {
        return 3;
    }
    if (v >= -32768 && v <= 32767) {
        return 4;
    }
    if (v >= -8388608 && v <= 8388607) {
        return 5;
    }
    if (v >= -2147483648LL && v <= 2147483647LL) {
        return 6;
    }
    return 10;
}

static long long lp_backlen(long long size)
{
    if (size <= 127) {
        return 1;
    }
    if (size < 16383) {
        return 2;
    }
    if (size < 2097151) {
        return 3;
    }
    if (size < 268435455) {
        return 4;
    }
    return 5;
}

/* listpack's lpStringToInt64: strict decimal (no leading zeros, no '+', not "-0"), in int64 */
static int as_int64(const unsigned char *s, Py_ssize_t n, long long *out)
{
    if (n == 0 || n > 20) {
        return 0;
    }
    int negative = s[0] == '-';
    const unsigned char *d = s + negative;
    Py_ssize_t nd = n - negative;
    if (nd == 0 || (d[0] == '0' && n > 1)) {
        return 0;
    }
    uint64_t value = 0;
    for (Py_ssize_t k = 0; k < nd; k++) {
        if (d[k] < '0' || d[k] > '9') {
            return 0;
        }
        uint64_t digit = (uint64_t)(d[k] - '0');
        if (value > (UINT64_MAX - digit) / 10) {
            return 0;
        }
        value = value * 10 + digit;
    }
    if (negative) {
        if (value > (uint64_t)INT64_MAX + 1) {
            return 0;
        }
        *out = value == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(long long)value;
    } else {
        if (value > (uint64_t)INT64_MAX) {
            return 0;
        }
        *out = (long long)value;
    }
    return 1;
}

/* bytes of a string element; strings that look like integers are stored as integers */
static long long lp_str(const unsigned char *s, Py_ssize_t n)
{
    long long as_int;
    if (n <= 20 && n > 0 && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))
        && as_int64(s, n, &as_int)) {
        return lp_int(as_int);
    }
    long long payload = n < 64 ? 1 + n : n < 4096 ? 2 + n : 5 + (long long)n;
    return payload + lp_backlen(payload);
}

/* C's uint64 difference of two IDs' parts stored into an int64 */
static long long delta_lp(uint64_t value, uint64_t master)
{
    return lp_int((long long)(int64_t)(value - master));
}

static int is_count_step(long long count)
{
    return count == 128 || count == 4096 || count == 32768 || count == 8388608
           || count == 2147483648LL;
}

/* the entry's pairs as a list or tuple of bytes with the node's field names, or NULL */
static PyObject *const *same_fields(PyObject *pairs, PyObject *field_list, Py_ssize_t nfields)
{
    Py_ssize_t n;
    PyObject *const *items;
    if (PyList_CheckExact(pairs)) {
        n = PyList_GET_SIZE(pairs);
        items = (PyObject *const *)((PyListObject *)pairs)->ob_item;
    } else if (PyTuple_CheckExact(pairs)) {
        n = PyTuple_GET_SIZE(pairs);
        items = (PyObject *const *)((PyTupleObject *)pairs)->ob_item;
    } else {
        return NULL;
    }
    if (n != 2 * nfields) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nfields; k++) {
        PyObject *field = items[2 * k], *value = items[2 * k + 1];
        PyObject *master = PyList_GET_ITEM(field_list, k);
        if (!PyBytes_CheckExact(field) || !PyBytes_CheckExact(value)
            || !PyBytes_CheckExact(master)) {
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(field);
        if (field != master
            && (size != PyBytes_GET_SIZE(master)
                || memcmp(PyBytes_AS_STRING(field), PyBytes_AS_STRING(master), (size_t)size))) {
            return NULL;
        }
    }
    return items;
}

/* (CPython's PyLong_As[Unsigned]LongLong convert any int of two digits or more through
 * _PyLong_AsByteArray, ~120 instructions; the ``long`` ones loop over the digits) */
#if ULONG_MAX < UINT64_MAX
#error "stream/_pack.c needs a 64-bit long (LP64)"
#endif

static int as_u64(PyObject *value, uint64_t *out)
{
    if (!PyLong_CheckExact(value)) {
        return 0;
    }
    unsigned long got = PyLong_AsUnsignedLong(value);
    if (got == (unsigned long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = (uint64_t)got;
    return 1;
}

static int as_i64(PyObject *value, long long *out)
{
    if (!PyLong_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "_pack: an int argument is not an int");
        return 0;
    }
    long got = PyLong_AsLong(value);
    if (got == -1 && PyErr_Occurred()) {
        return 0;
    }
    *out = (long long)got;
    return 1;
}

/* the ID of an entry, or 0 */
static int entry_id(PyObject *sid, uint64_t *ms, uint64_t *seq)
{
    return PyTuple_CheckExact(sid) && PyTuple_GET_SIZE(sid) == 2
           && as_u64(PyTuple_GET_ITEM(sid, 0), ms) && as_u64(PyTuple_GET_ITEM(sid, 1), seq);
}

/* growable native-order column bytes */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Column;

static int column_put(Column *c, const void *value, Py_ssize_t width)
{
    if (c->len + width > c->cap) {
        Py_ssize_t cap = c->cap ? 2 * c->cap : 32 * width;
        char *data = PyMem_Realloc(c->data, (size_t)cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->data = data;
        c->cap = cap;
    }
    memcpy(c->data + c->len, value, (size_t)width);
    c->len += width;
    return 0;
}

/* the entry's blob bytes appended: the same-fields flag, then each value length-prefixed
 * (u32 little-endian); returns the values' listpack bytes, or -1 */
static long long put_values(PyObject *blob, PyObject *const *items, Py_ssize_t nfields)
{
    Py_ssize_t add = 1;
    for (Py_ssize_t k = 0; k < nfields; k++) {
        add += 4 + PyBytes_GET_SIZE(items[2 * k + 1]);
    }
    Py_ssize_t at = PyByteArray_GET_SIZE(blob);
    if (PyByteArray_Resize(blob, at + add) < 0) {
        return -1;
    }
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(blob) + at;
    *p++ = 0; /* _SAME_FIELDS */
    long long lp = 0;
    for (Py_ssize_t k = 0; k < nfields; k++) {
        PyObject *value = items[2 * k + 1];
        Py_ssize_t n = PyBytes_GET_SIZE(value);
        const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(value);
        uint32_t size = (uint32_t)n;
        p[0] = (unsigned char)size;
        p[1] = (unsigned char)(size >> 8);
        p[2] = (unsigned char)(size >> 16);
        p[3] = (unsigned char)(size >> 24);
        memcpy(p + 4, s, (size_t)n);
        p += 4 + n;
        lp += lp_str(s, n);
    }
    return lp;
}

static PyObject *column_bytes(Column *c)
{
    return PyBytes_FromStringAndSize(c->data ? c->data : "", c->len);
}

/* (Py_BuildValue parses its format on every call: ~1.4k instructions for this tuple) */
static PyObject *columns_result(Py_ssize_t stop, long long spent, Column *ms, Column *seq,
                                Column *offsets)
{
    PyObject *result = PyTuple_New(5);
    if (result == NULL) {
        return NULL;
    }
    PyObject *items[5] = {
        PyLong_FromSsize_t(stop), PyLong_FromLongLong(spent), column_bytes(ms),
        column_bytes(seq),        column_bytes(offsets),
    };
    for (int k = 0; k < 5; k++) {
        if (items[k] == NULL) {
            for (int j = k + 1; j < 5; j++) {
                Py_XDECREF(items[j]);
            }
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, k, items[k]);
    }
    return result;
}

static PyObject *pack_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "pack_run takes 10 arguments");
        return NULL;
    }
    PyObject *blob = args[0], *entries = args[1], *field_list = args[8];
    if (!PyByteArray_CheckExact(blob) || !PyList_CheckExact(entries)
        || !PyList_CheckExact(field_list)) {
        PyErr_SetString(PyExc_TypeError, "pack_run: a bytearray, a list, ..., a list");
        return NULL;
    }
    long long start, free, bytes_left, entries_left, count;
    uint64_t master_ms, master_seq;
    if (!as_i64(args[2], &start) || !as_i64(args[3], &free) || !as_i64(args[4], &bytes_left)
        || !as_i64(args[5], &entries_left) || !as_i64(args[9], &count)) {
        return NULL;
    }
    if (!as_u64(args[6], &master_ms) || !as_u64(args[7], &master_seq)) {
        PyErr_SetString(PyExc_ValueError, "pack_run: the master ID is not two uint64");
        return NULL;
    }
    Py_ssize_t nfields = PyList_GET_SIZE(field_list);
    Py_ssize_t end = PyList_GET_SIZE(entries);
    long long same_tail = lp_int(nfields + 3);
    Column ms = {0}, seq = {0}, offsets = {0};
    long long spent = 0, taken = 0;
    Py_ssize_t blob_start = PyByteArray_GET_SIZE(blob);
    Py_ssize_t i = start < 0 ? 0 : (Py_ssize_t)start;
    for (; i < end; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
            break;
        }
        long long size;
        if (!as_i64(PyTuple_GET_ITEM(entry, 2), &size)) {
            PyErr_Clear();
            break;
        }
        /* the budget node.py's ``room`` gave, counted as its ``fits`` counts */
        if (taken >= free && (taken >= entries_left || spent + size > bytes_left)) {
            break;
        }
        uint64_t id_ms, id_seq;
        if (!entry_id(PyTuple_GET_ITEM(entry, 0), &id_ms, &id_seq)) {
            break;
        }
        PyObject *const *items = same_fields(PyTuple_GET_ITEM(entry, 1), field_list, nfields);
        if (items == NULL) {
            break;
        }
        Py_ssize_t at = PyByteArray_GET_SIZE(blob);
        if ((uint64_t)at > UINT32_MAX) {
            break; /* (the caller's own way raises as array('I') does) */
        }
        uint32_t offset = (uint32_t)at;
        long long values = put_values(blob, items, nfields);
        if (values < 0 || column_put(&ms, &id_ms, 8) < 0 || column_put(&seq, &id_seq, 8) < 0
            || column_put(&offsets, &offset, 4) < 0) {
            goto fail;
        }
        long long lp = 2 + delta_lp(id_ms, master_ms) + delta_lp(id_seq, master_seq) + values
                       + same_tail;
        count++;
        if (is_count_step(count)) {
            lp += lp_int(count) - lp_int(count - 1);
        }
        spent += lp;
        taken++;
    }
    PyObject *result = columns_result(i, spent, &ms, &seq, &offsets);
    if (result == NULL) {
        goto fail;
    }
    PyMem_Free(ms.data);
    PyMem_Free(seq.data);
    PyMem_Free(offsets.data);
    return result;
fail: /* (nothing appended: the blob back to its length, the columns dropped) */
    if (PyByteArray_GET_SIZE(blob) > blob_start) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        (void)PyByteArray_Resize(blob, blob_start); /* (shrinking: cannot fail) */
        PyErr_Restore(type, value, traceback);
    }
    PyMem_Free(ms.data);
    PyMem_Free(seq.data);
    PyMem_Free(offsets.data);
    return NULL;
}

/* ``column.append(value)``, the name interned once */
static int column_append(PyObject *column, PyObject *value)
{
    static PyObject *name = NULL;
    if (name == NULL && (name = PyUnicode_InternFromString("append")) == NULL) {
        return -1;
    }
    PyObject *args[2] = {column, value};
    PyObject *done = PyObject_VectorcallMethod(
        name, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    return 0;
}

/* ``del column[-1]`` after a failed append (the error kept) */
static void column_pop(PyObject *column)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (PySequence_DelItem(column, PySequence_Size(column) - 1) < 0) {
        PyErr_Clear();
    }
    PyErr_Restore(type, value, traceback);
}

static PyObject *append_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "append_one takes 10 arguments");
        return NULL;
    }
    PyObject *blob = args[0], *sid = args[4], *pairs = args[5], *field_list = args[6];
    PyObject *columns[3] = {args[1], args[2], args[3]};
    if (!PyByteArray_CheckExact(blob) || !PyList_CheckExact(field_list)) {
        PyErr_SetString(PyExc_TypeError, "append_one: a bytearray, ..., a list");
        return NULL;
    }
    uint64_t master_ms, master_seq, id_ms, id_seq;
    long long count;
    if (!as_u64(args[7], &master_ms) || !as_u64(args[8], &master_seq)) {
        PyErr_SetString(PyExc_ValueError, "append_one: the master ID is not two uint64");
        return NULL;
    }
    if (!as_i64(args[9], &count)) {
        return NULL;
    }
    Py_ssize_t nfields = PyList_GET_SIZE(field_list);
    PyObject *const *items = same_fields(pairs, field_list, nfields);
    Py_ssize_t at = PyByteArray_GET_SIZE(blob);
    if (items == NULL || !entry_id(sid, &id_ms, &id_seq) || (uint64_t)at > UINT32_MAX) {
        return PyLong_FromLong(-1); /* (the caller's own way: it appends or raises) */
    }
    PyObject *offset = PyLong_FromSsize_t(at);
    if (offset == NULL) {
        return NULL;
    }
    PyObject *values[3] = {PyTuple_GET_ITEM(sid, 0), PyTuple_GET_ITEM(sid, 1), offset};
    int done = 0;
    for (; done < 3; done++) {
        if (column_append(columns[done], values[done]) < 0) {
            break;
        }
    }
    Py_DECREF(offset);
    long long lp = done == 3 ? put_values(blob, items, nfields) : -1;
    if (lp < 0) { /* (a MemoryError: the columns back as they were) */
        while (done > 0) {
            column_pop(columns[--done]);
        }
        return NULL;
    }
    lp += 2 + delta_lp(id_ms, master_ms) + delta_lp(id_seq, master_seq) + lp_int(nfields + 3);
    if (is_count_step(count + 1)) {
        lp += lp_int(count + 1) - lp_int(count);
    }
    return PyLong_FromLongLong(lp);
}

/* decimal digits of v at the end of buf (which ends at end); returns where they start */
static char *put_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

/* ``b"%d-%d" % (ms, seq)`` for anything else than two uint64 (never an entry's ID) */
static PyObject *format_any(PyObject *ms, PyObject *seq)
{
    PyObject *text = PyUnicode_FromFormat("%S-%S", ms, seq);
    if (text == NULL) {
        return NULL;
    }
    PyObject *out = PyUnicode_AsASCIIString(text);
    Py_DECREF(text);
    return out;
}

static PyObject *format_id(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "format_id(ms, seq) takes two arguments");
        return NULL;
    }
    uint64_t ms, seq;
    if (!PyLong_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "format_id: ms and seq are ints");
        return NULL;
    }
    if (!as_u64(args[0], &ms) || !as_u64(args[1], &seq)) {
        return format_any(args[0], args[1]);
    }
    char buf[48];
    char *end = buf + sizeof buf;
    char *start = put_u64(end, seq);
    *--start = '-';
    start = put_u64(start, ms);
    return PyBytes_FromStringAndSize(start, end - start);
}

/* ``plain_id(raw) -> (ms, seq) | None``: ``<ms>-<seq>``, both parts plain decimal of 1 to 18
 * digits, as ``ids._plain_id`` reads them (None for anything else, which ``parse_id``'s
 * general rules judge). */
static PyObject *plain_id(PyObject *self, PyObject *raw)
{
    (void)self;
    if (!PyBytes_Check(raw)) {
        PyErr_SetString(PyExc_TypeError, "plain_id: raw is bytes");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(raw);
    Py_ssize_t n = PyBytes_GET_SIZE(raw), i = 0;
    long long ms = 0, seq = 0;
    while (i < n && i <= 18 && p[i] >= '0' && p[i] <= '9') {
        ms = ms * 10 + (p[i] - '0');
        i++;
    }
    if (i == 0 || i > 18 || i >= n - 1 || p[i] != '-' || n - i - 1 > 18) {
        Py_RETURN_NONE;
    }
    for (i++; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            Py_RETURN_NONE;
        }
        seq = seq * 10 + (p[i] - '0');
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        return NULL;
    }
    PyObject *a = PyLong_FromLongLong(ms), *b = PyLong_FromLongLong(seq);
    if (a == NULL || b == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_DECREF(pair);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, a);
    PyTuple_SET_ITEM(pair, 1, b);
    return pair;
}

static PyMethodDef methods[] = {
    {"plain_id", (PyCFunction)plain_id, METH_O,
     "The (ms, seq) of a plain '<ms>-<seq>' ID, or None (see the module)."},
    {"pack_run", (PyCFunction)(void (*)(void))pack_run, METH_FASTCALL,
     "Pack a run of same-field stream entries into a node's buffers, within the budget given "
     "(see the module)."},
    {"append_one", (PyCFunction)(void (*)(void))append_one, METH_FASTCALL,
     "Pack one same-field stream entry into a node's buffers (see the module)."},
    {"format_id", (PyCFunction)(void (*)(void))format_id, METH_FASTCALL,
     "An entry ID's reply form, b'<ms>-<seq>' (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater.stream._pack", "A stream node's entries packed in C.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__pack(void)
{
    return PyModule_Create(&module);
}
