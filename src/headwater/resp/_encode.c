/* A command encoded as RESP (an array of bulk strings) straight into a bytearray, for the
 * effects every write sends to the AOF and to the replicas (persistence/effect_log.py). The
 * compiled Python ways cost ~3.5-4.5k instructions for a five-word XADD effect (a bytes
 * object or a buffer-protocol concatenation per word); this sizes the whole command, resizes
 * the bytearray once and writes into it, ~0.3k. Without this module (the pure build)
 * ``resp/encoder.py`` appends ``encode_command(argv)``; both write the same bytes
 * (tests/unit/test_encoder.py).
 *
 * ``command_into(buf, argv)``: ``buf`` a bytearray, ``argv`` a list of bytes. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static Py_ssize_t digits(Py_ssize_t n)
{
    Py_ssize_t count = 1;
    while (n >= 10) {
        n /= 10;
        count++;
    }
    return count;
}

/* ``<mark><n>\r\n`` at p; returns the end */
static char *header(char *p, char mark, Py_ssize_t n)
{
    Py_ssize_t width = digits(n);
    *p++ = mark;
    for (Py_ssize_t i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + n % 10);
        n /= 10;
    }
    p += width;
    *p++ = '\r';
    *p++ = '\n';
    return p;
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
    Py_ssize_t total = 3 + digits(count);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *word = PyList_GET_ITEM(argv, i);
        if (!PyBytes_Check(word)) {
            PyErr_Format(PyExc_TypeError, "command_into: argument %zd is %.50s, not bytes", i,
                         Py_TYPE(word)->tp_name);
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(word);
        total += 5 + digits(size) + size;
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
        PyObject *word = PyList_GET_ITEM(argv, i);
        Py_ssize_t size = PyBytes_GET_SIZE(word);
        p = header(p, '$', size);
        memcpy(p, PyBytes_AS_STRING(word), (size_t)size);
        p += size;
        *p++ = '\r';
        *p++ = '\n';
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"command_into", (PyCFunction)(void (*)(void))command_into, METH_FASTCALL,
     "command_into(buf, argv): argv (a list of bytes) appended to buf as a RESP command."},
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
