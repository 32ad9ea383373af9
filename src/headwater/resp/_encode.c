/* A command encoded as RESP (an array of bulk strings) straight into a bytearray, for the
 * effects every write sends to the AOF and to the replicas (persistence/effect_log.py). The
 * compiled Python ways cost ~3.5-4.5k instructions for a five-word XADD effect (a bytes
 * object or a buffer-protocol concatenation per word); this sizes the whole command, resizes
 * the bytearray once and writes into it, ~0.3k. Without this module (the pure build)
 * ``resp/encoder.py`` appends ``encode_command(argv)``; both write the same bytes
 * (tests/unit/test_encoder.py).
 *
 * ``command_into(buf, argv)``: ``buf`` a bytearray, ``argv`` a list of bytes.
 *
 * ``compact_add(origin, seq, key, ms, id_seq, pairs) -> bytes``: an active-active region's
 * compact effect line ``AAXADD <origin> <seq> <key> <ms>-<id_seq> <pairs…>`` as a RESP
 * command, made once per own XADD for the AOF, the replicas and every peer link
 * (``activeactive/envelope.py``'s ``Effect.to_command``; its pure form encodes ``to_line()``,
 * the same bytes: tests/unit/test_encoder.py). ``pairs`` a tuple of bytes; the numbers
 * unsigned 64-bit. *
 * ``entries_span(fields, ms, seq, offsets, blob, tomb, lo, hi, reverse, limit, out, ids) ->
 * int``: XRANGE's and XREAD's hot loop (``commands/entries.py``'s ``_encode_span``, whose
 * Python is the pure build's and the reference, same bytes: tests/unit/test_entries_span.py).
 * Each live entry of a stream node's ``[lo, hi)`` (backwards with ``reverse``), at most
 * ``limit`` (-1: all), appended to ``out`` as one RESP ``[id, [f1, v1, ...]]`` bytes object,
 * its ID to ``ids`` (a list, or None) as an ``(ms, seq)`` tuple; returns the limit left. The
 * node's columns are read as they are (``seq`` and ``offsets`` narrowed or not), its blob as
 * ``stream/node.py`` lays it out; an entry that runs past the blob raises SystemError. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

static Py_ssize_t digits(unsigned long long n)
{
    Py_ssize_t count = 1;
    while (n >= 10) {
        n /= 10;
        count++;
    }
    return count;
}

/* the bytes of a bulk string of ``size`` bytes: ``$<size>\r\n<data>\r\n`` */
static Py_ssize_t bulk_size(Py_ssize_t size)
{
    return 5 + digits((unsigned long long)size) + size;
}

/* the ``width`` decimal digits of n at p; returns the end */
static char *put_digits(char *p, unsigned long long n, Py_ssize_t width)
{
    for (Py_ssize_t i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + n % 10);
        n /= 10;
    }
    return p + width;
}

static char *crlf(char *p)
{
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* ``<mark><n>\r\n`` at p; returns the end */
static char *header(char *p, char mark, Py_ssize_t n)
{
    *p++ = mark;
    return crlf(put_digits(p, (unsigned long long)n, digits((unsigned long long)n)));
}

/* a bytes object as a bulk string at p; returns the end */
static char *bytes_bulk(char *p, PyObject *word)
{
    Py_ssize_t size = PyBytes_GET_SIZE(word);
    p = header(p, '$', size);
    memcpy(p, PyBytes_AS_STRING(word), (size_t)size);
    return crlf(p + size);
}

static PyObject *command_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "command_into(buf, argv) takes two arguments");
        return NULL;
    }
    PyObject *buf = args[0], *argv = args[1];
    if (!PyByteArray_CheckExact(buf) || !PyList_CheckExact(argv)) {
        PyErr_SetString(PyExc_TypeError, "command_into: a bytearray and a list of bytes");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(argv);
    Py_ssize_t total = 3 + digits((unsigned long long)count);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *word = PyList_GET_ITEM(argv, i);
        if (!PyBytes_Check(word)) {
            PyErr_Format(PyExc_TypeError, "command_into: argument %zd is %.50s, not bytes", i,
                         Py_TYPE(word)->tp_name);
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(word);
        total += bulk_size(size);
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(buf);
    if (total > PY_SSIZE_T_MAX - start) {
        PyErr_NoMemory();
        return NULL;
    }
    if (PyByteArray_Resize(buf, start + total) < 0) {
        return NULL;
    }
    char *p = PyByteArray_AS_STRING(buf) + start;
    p = header(p, '*', count);
    for (Py_ssize_t i = 0; i < count; i++) {
        p = bytes_bulk(p, PyList_GET_ITEM(argv, i));
    }
    Py_RETURN_NONE;
}

/* ``$<width>\r\n<n>\r\n`` at p; returns the end */
static char *number_bulk(char *p, unsigned long long n, Py_ssize_t width)
{
    return crlf(put_digits(header(p, '$', width), n, width));
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "resp/_encode.c reads the stream nodes' little-endian lengths as native integers"
#endif

#if ULONG_MAX < 0xFFFFFFFFFFFFFFFFUL
#error "resp/_encode.c needs a 64-bit unsigned long (LP64)"
#endif

static int as_u64(PyObject *n, unsigned long long *out)
{
    if (!PyLong_Check(n)) {
        PyErr_SetString(PyExc_TypeError, "compact_add: the numbers are ints");
        return 0;
    }
    /* (``unsigned long``: 64 bits on the LP64 builds we make; its conversion has a fast
     * path for one or two digits, where the ``long long`` one goes through a byte array) */
    unsigned long got = PyLong_AsUnsignedLong(n);
    *out = got;
    return !(got == (unsigned long)-1 && PyErr_Occurred());
}

static PyObject *compact_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char name[] = "AAXADD";
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "compact_add(origin, seq, key, ms, id_seq, pairs) takes six arguments");
        return NULL;
    }
    unsigned long long origin, seq, ms, id_seq;
    PyObject *key = args[2], *pairs = args[5];
    if (!as_u64(args[0], &origin) || !as_u64(args[1], &seq) || !as_u64(args[3], &ms) ||
        !as_u64(args[4], &id_seq)) {
        return NULL;
    }
    if (!PyBytes_Check(key) || !PyTuple_CheckExact(pairs)) {
        PyErr_SetString(PyExc_TypeError, "compact_add: key is bytes, pairs a tuple of bytes");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(pairs);
    Py_ssize_t origin_w = digits(origin), seq_w = digits(seq);
    Py_ssize_t ms_w = digits(ms), id_seq_w = digits(id_seq), id_w = ms_w + 1 + id_seq_w;
    Py_ssize_t key_size = PyBytes_GET_SIZE(key);
    Py_ssize_t total = 3 + digits((unsigned long long)count + 5) + bulk_size(sizeof name - 1);
    total += bulk_size(origin_w) + bulk_size(seq_w) + bulk_size(key_size) + bulk_size(id_w);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *word = PyTuple_GET_ITEM(pairs, i);
        if (!PyBytes_Check(word)) {
            PyErr_Format(PyExc_TypeError, "compact_add: pair word %zd is %.50s, not bytes", i,
                         Py_TYPE(word)->tp_name);
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(word);
        if (size > PY_SSIZE_T_MAX / 2 - total) {
            return PyErr_NoMemory();
        }
        total += bulk_size(size);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        return NULL;
    }
    char *p = PyBytes_AS_STRING(out);
    p = header(p, '*', count + 5);
    p = header(p, '$', (Py_ssize_t)(sizeof name - 1));
    memcpy(p, name, sizeof name - 1);
    p = crlf(p + sizeof name - 1);
    p = number_bulk(p, origin, origin_w);
    p = number_bulk(p, seq, seq_w);
    p = bytes_bulk(p, key);
    p = header(p, '$', id_w);
    p = put_digits(p, ms, ms_w);
    *p++ = '-';
    p = crlf(put_digits(p, id_seq, id_seq_w));
    for (Py_ssize_t i = 0; i < count; i++) {
        p = bytes_bulk(p, PyTuple_GET_ITEM(pairs, i));
    }
    if (p != PyBytes_AS_STRING(out) + total) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_SystemError, "compact_add: sized wrong");
        return NULL;
    }
    return out;
}


/* column i of an unsigned array of any item size */
static unsigned long long column_at(const Py_buffer *v, Py_ssize_t i)
{
    const char *at = (const char *)v->buf + i * v->itemsize;
    switch (v->itemsize) {
    case 1: return *(const unsigned char *)at;
    case 2: { uint16_t x; memcpy(&x, at, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, at, 4); return x; }
    default: { uint64_t x; memcpy(&x, at, 8); return x; }
    }
}

static int u32_at(const unsigned char *blob, Py_ssize_t size, Py_ssize_t pos, Py_ssize_t *out)
{
    if (pos < 0 || pos + 4 > size) return 0;
    uint32_t x;
    memcpy(&x, blob + pos, 4); /* (little-endian: see the #error above) */
    *out = (Py_ssize_t)x;
    return 1;
}

/* One entry's RESP: sized in a first walk of its blob bytes, written in a second. */
static PyObject *entry_bytes(PyObject *fields, unsigned long long ms, unsigned long long seq,
                             const unsigned char *blob, Py_ssize_t size, Py_ssize_t pos)
{
    Py_ssize_t id_w = digits(ms) + 1 + digits(seq);
    int own = 0;
    Py_ssize_t nfields = PyTuple_GET_SIZE(fields), at = pos + 1, n = 0;
    if (pos < 0 || pos >= size) goto corrupt;
    if (blob[pos] != 0) {
        own = 1;
        if (!u32_at(blob, size, at, &nfields)) goto corrupt;
        at += 4;
    }
    Py_ssize_t total = 4 + bulk_size(id_w) + 3 + digits((unsigned long long)(2 * nfields));
    Py_ssize_t walk = at;
    for (Py_ssize_t k = 0; k < nfields; k++) {
        if (own) {
            if (!u32_at(blob, size, walk, &n) || walk + 4 + n > size) goto corrupt;
            total += bulk_size(n);
            walk += 4 + n;
        } else {
            total += bulk_size(PyBytes_GET_SIZE(PyTuple_GET_ITEM(fields, k)));
        }
        if (!u32_at(blob, size, walk, &n) || walk + 4 + n > size) goto corrupt;
        total += bulk_size(n);
        walk += 4 + n;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    char *p = PyBytes_AS_STRING(out);
    p = header(p, '*', 2);
    p = header(p, '$', id_w);
    p = put_digits(p, ms, digits(ms));
    *p++ = '-';
    p = crlf(put_digits(p, seq, digits(seq)));
    p = header(p, '*', 2 * nfields);
    walk = at;
    for (Py_ssize_t k = 0; k < nfields; k++) {
        if (own) {
            u32_at(blob, size, walk, &n);
            p = header(p, '$', n);
            memcpy(p, blob + walk + 4, (size_t)n);
            p = crlf(p + n);
            walk += 4 + n;
        } else {
            p = bytes_bulk(p, PyTuple_GET_ITEM(fields, k));
        }
        u32_at(blob, size, walk, &n);
        p = header(p, '$', n);
        memcpy(p, blob + walk + 4, (size_t)n);
        p = crlf(p + n);
        walk += 4 + n;
    }
    return out;
corrupt:
    PyErr_SetString(PyExc_SystemError, "entries_span: an entry runs past the node's blob");
    return NULL;
}

static PyObject *entries_span(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "entries_span takes 12 arguments");
        return NULL;
    }
    PyObject *fields = args[0], *blob_o = args[4], *tomb_o = args[5], *out = args[10];
    PyObject *ids = args[11];
    if (!PyTuple_CheckExact(fields) || !PyByteArray_Check(blob_o) || !PyList_CheckExact(out) ||
        (tomb_o != Py_None && !PyByteArray_Check(tomb_o)) ||
        (ids != Py_None && !PyList_CheckExact(ids))) {
        PyErr_SetString(PyExc_TypeError,
                        "entries_span: a tuple, three arrays, a bytearray, a bytearray or None, "
                        "four ints, a list and a list or None");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fields); k++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(fields, k))) {
            PyErr_SetString(PyExc_TypeError, "entries_span: the field names are bytes");
            return NULL;
        }
    }
    Py_ssize_t lo = PyLong_AsSsize_t(args[6]), hi = PyLong_AsSsize_t(args[7]);
    int reverse = PyObject_IsTrue(args[8]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[9]);
    if (PyErr_Occurred() || reverse < 0) return NULL;
    Py_buffer col[3];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 3; got++) {
        if (PyObject_GetBuffer(args[1 + got], &col[got], PyBUF_FORMAT | PyBUF_ND) < 0) goto done;
        Py_ssize_t w = col[got].itemsize;
        if (!(w == 1 || w == 2 || w == 4 || w == 8)) {
            PyErr_SetString(PyExc_TypeError, "entries_span: columns of 1, 2, 4 or 8 bytes");
            got++;
            goto done;
        }
    }
    Py_ssize_t n = col[0].len / col[0].itemsize;
    if (col[1].len / col[1].itemsize != n || col[2].len / col[2].itemsize != n || lo < 0 ||
        hi > n || lo > hi) {
        PyErr_SetString(PyExc_ValueError, "entries_span: columns or bounds out of step");
        goto done;
    }
    const unsigned char *blob = (const unsigned char *)PyByteArray_AS_STRING(blob_o);
    Py_ssize_t size = PyByteArray_GET_SIZE(blob_o);
    const char *tomb = tomb_o == Py_None ? NULL : PyByteArray_AS_STRING(tomb_o);
    Py_ssize_t ntomb = tomb_o == Py_None ? 0 : PyByteArray_GET_SIZE(tomb_o);
    for (Py_ssize_t step = 0; step < hi - lo && limit != 0; step++) {
        Py_ssize_t i = reverse ? hi - 1 - step : lo + step;
        if (i < ntomb && tomb[i]) continue;
        unsigned long long ms = column_at(&col[0], i), seq = column_at(&col[1], i);
        PyObject *entry =
            entry_bytes(fields, ms, seq, blob, size, (Py_ssize_t)column_at(&col[2], i));
        if (entry == NULL) goto done;
        int failed = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (failed < 0) goto done;
        if (ids != Py_None) {
            PyObject *sid = Py_BuildValue("(KK)", ms, seq);
            if (sid == NULL) goto done;
            failed = PyList_Append(ids, sid);
            Py_DECREF(sid);
            if (failed < 0) goto done;
        }
        if (limit > 0) limit--;
    }
    result = PyLong_FromSsize_t(limit);
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&col[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"command_into", (PyCFunction)(void (*)(void))command_into, METH_FASTCALL,
     "command_into(buf, argv): argv (a list of bytes) appended to buf as a RESP command."},
    {"compact_add", (PyCFunction)(void (*)(void))compact_add, METH_FASTCALL,
     "compact_add(origin, seq, key, ms, id_seq, pairs): a region's AAXADD line as RESP bytes."},
    {"entries_span", (PyCFunction)(void (*)(void))entries_span, METH_FASTCALL,
     "entries_span(fields, ms, seq, offsets, blob, tomb, lo, hi, reverse, limit, out, ids): "
     "a node's live entries as RESP, one bytes object each; returns the limit left."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater.resp._encode", "RESP commands into a bytearray.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__encode(void)
{
    return PyModule_Create(&module);
}
