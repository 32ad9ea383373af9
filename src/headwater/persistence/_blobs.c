/* A snapshot's runs of ``bytes`` fields (persistence/snapshot.py: a u64 little-endian length,
 * then the bytes) split into a list of bytes objects in one call: a set's members, a hash's
 * fields and values, a sorted set's members each followed by its 8-byte score. The Python loop
 * (``_In.blobs`` without this module, the pure build) takes one interpreted step per blob, most
 * of a snapshot load of sets and hashes; both give the same lists
 * (tests/unit/test_snapshot.py).
 *
 * ``split(data, pos, n, end, tail) -> (list, pos)``: up to ``n`` fields from ``data[pos:end]``,
 * each followed by ``tail`` bytes (0, or 8 for a score) put in the list as a bytes object of
 * their own; it stops before a field (or its tail) that does not end by ``end`` and returns the
 * position after the last whole one, so the caller's slow path waits for the rest of the bytes
 * or says where the file is truncated. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *split(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, n, end, tail;
    if (!PyArg_ParseTuple(args, "y*nnnn:split", &view, &pos, &n, &end, &tail)) {
        return NULL;
    }
    if (end > view.len) {
        end = view.len;
    }
    if (pos < 0 || n < 0 || tail < 0 || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "split: bad position, count or tail");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t per = tail > 0 ? 2 : 1;
    /* (at most one field per 8 bytes: a count read from a corrupt file cannot ask for more) */
    Py_ssize_t most = (end - pos) / 8;
    Py_ssize_t room = (n < most ? n : most) * per;
    PyObject *out = PyList_New(room);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t filled = 0;
    Py_ssize_t got = 0;
    while (got < n && end - pos >= 8) {
        const unsigned char *q = p + pos;
        uint64_t size = (uint64_t)q[0] | (uint64_t)q[1] << 8 | (uint64_t)q[2] << 16
                        | (uint64_t)q[3] << 24 | (uint64_t)q[4] << 32 | (uint64_t)q[5] << 40
                        | (uint64_t)q[6] << 48 | (uint64_t)q[7] << 56;
        Py_ssize_t left = end - pos - 8;
        if (size > (uint64_t)left || left - (Py_ssize_t)size < tail) {
            break;
        }
        PyObject *item = PyBytes_FromStringAndSize((const char *)q + 8, (Py_ssize_t)size);
        if (item == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(out, filled++, item);
        pos += 8 + (Py_ssize_t)size;
        if (tail > 0) {
            item = PyBytes_FromStringAndSize((const char *)p + pos, tail);
            if (item == NULL) {
                goto fail;
            }
            PyList_SET_ITEM(out, filled++, item);
            pos += tail;
        }
        got++;
    }
    PyBuffer_Release(&view);
    if (filled < room) { /* (stopped early: the whole fields, without the empty slots) */
        PyObject *whole = PyList_GetSlice(out, 0, filled);
        Py_DECREF(out);
        if (whole == NULL) {
            return NULL;
        }
        out = whole;
    }
    return Py_BuildValue("(Nn)", out, pos);
fail:
    Py_DECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"split", split, METH_VARARGS,
     "split(data, pos, n, end, tail) -> (list, pos): up to n u64-length-prefixed fields."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater.persistence._blobs",
    "A snapshot's length-prefixed fields split in one call.", -1, methods,
};

PyMODINIT_FUNC PyInit__blobs(void)
{
    return PyModule_Create(&module);
}
