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
 * unsigned 64-bit. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
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

static PyMethodDef methods[] = {
    {"command_into", (PyCFunction)(void (*)(void))command_into, METH_FASTCALL,
     "command_into(buf, argv): argv (a list of bytes) appended to buf as a RESP command."},
    {"compact_add", (PyCFunction)(void (*)(void))compact_add, METH_FASTCALL,
     "compact_add(origin, seq, key, ms, id_seq, pairs): a region's AAXADD line as RESP bytes."},
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
