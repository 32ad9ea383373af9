/* Canonical RESP commands split out of a byte stream: a replica's link to its primary (and
 * AOF-like streams), where every command is an array of bulk strings in canonical form
 * (``*<n>\r\n`` then ``$<len>\r\n<data>\r\n`` for each word, no sign, no leading zeros).
 *
 * hiredis's reader does the same job for any RESP, at a cost: a generic task stack, a
 * callback per object, a memmove of its buffer each time 1 KiB of it was read, and no count
 * of the bytes a command took (the link needs it for its offset, and sized each argv
 * again). Here a command is scanned first without making objects (resumable: a long command
 * arriving in many reads is not rescanned from its start), then built as a list of bytes.
 * The buffer is compacted only when its read part is at least half of it.
 *
 * ``Splitter()``: ``feed(data)`` appends bytes (and returns ``pending``); ``gets()`` returns the next command (a list
 * of bytes) or False when the rest is not a whole command yet; anything that is not a
 * canonical command at the current position raises ValueError and consumes nothing, so the
 * caller can stop there. So does a header over the limits ``max_words`` and ``max_bulk``
 * (settable: a client's connection sets Redis's, which depend on AUTH and CONFIG), as soon
 * as the header is here, before its data. ``taken``: bytes of the whole commands returned
 * so far; ``pending``: bytes held after them; ``take_rest()`` hands those over (a caller
 * that parses the rest some other way). Without this module (the pure build)
 * ``resp/split.py`` does the same in Python.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include "structmember.h"

/* more than this many words or bulk bytes is not a command a server sends */
#define MAX_WORDS (1LL << 31)
#define MAX_BULK (1LL << 40)
/* where the words of a command this short are is kept by the scan for the build */
#define NOTED_WORDS 16

typedef struct {
    PyObject_HEAD
    char *buf;
    Py_ssize_t len; /* bytes held */
    Py_ssize_t cap;
    Py_ssize_t pos; /* the next command's first byte */
    long long taken;
    long long max_words; /* a longer '*' header is refused */
    long long max_bulk;  /* and a longer '$' one */
    /* the scan of the command at pos, resumed by the next gets() */
    long long words;      /* its word count (-1: header not read yet) */
    long long scanned;    /* words found whole so far */
    Py_ssize_t cursor;    /* the byte after them */
    /* the first NOTED_WORDS words' data: offset from pos, and size */
    Py_ssize_t noted_at[NOTED_WORDS];
    Py_ssize_t noted_size[NOTED_WORDS];
} Splitter;

enum { SCAN_WHOLE = 1, SCAN_SHORT = 0, SCAN_BAD = -1 };

/* ``<mark><digits>\r\n`` at *at: its number in *value, *at moved past it. SCAN_SHORT when
 * the bytes end first; SCAN_BAD (with ValueError set) when it is not canonical. */
static int read_header(Splitter *self, Py_ssize_t *at, char mark, long long limit,
                       long long *value)
{
    const char *buf = self->buf;
    Py_ssize_t p = *at, end = self->len;
    if (p >= end) {
        return SCAN_SHORT;
    }
    if (buf[p] != mark) {
        PyErr_Format(PyExc_ValueError, "expected '%c', got byte 0x%02x", mark,
                     (unsigned char)buf[p]);
        return SCAN_BAD;
    }
    p++;
    long long n = 0;
    Py_ssize_t first = p;
    while (p < end && buf[p] >= '0' && buf[p] <= '9') {
        if (p - first >= 15 || (p > first && n == 0)) {
            PyErr_Format(PyExc_ValueError, "a '%c' length that is not canonical", mark);
            return SCAN_BAD;
        }
        n = n * 10 + (buf[p] - '0');
        p++;
    }
    if (p < end && (buf[p] != '\r' || p == first)) {
        PyErr_Format(PyExc_ValueError, "a '%c' length that is not canonical", mark);
        return SCAN_BAD;
    }
    if (p + 1 >= end) {
        return SCAN_SHORT;
    }
    if (buf[p + 1] != '\n') {
        PyErr_Format(PyExc_ValueError, "a '%c' length that is not canonical", mark);
        return SCAN_BAD;
    }
    if (n > limit) {
        PyErr_Format(PyExc_ValueError, "a '%c' length over the limit", mark);
        return SCAN_BAD;
    }
    *value = n;
    *at = p + 2;
    return SCAN_WHOLE;
}

/* Find where the command at pos ends (resuming the scan); SCAN_WHOLE once it is whole. */
static int scan(Splitter *self)
{
    if (self->words < 0) {
        Py_ssize_t at = self->pos;
        long long words;
        int got = read_header(self, &at, '*', self->max_words, &words);
        if (got != SCAN_WHOLE) {
            return got;
        }
        if (words == 0) {
            PyErr_SetString(PyExc_ValueError, "an empty command");
            return SCAN_BAD;
        }
        self->words = words;
        self->scanned = 0;
        self->cursor = at;
    }
    while (self->scanned < self->words) {
        Py_ssize_t at = self->cursor;
        long long size;
        int got = read_header(self, &at, '$', self->max_bulk, &size);
        if (got != SCAN_WHOLE) {
            return got;
        }
        if (self->len - at < size + 2) {
            return SCAN_SHORT;
        }
        if (self->buf[at + size] != '\r' || self->buf[at + size + 1] != '\n') {
            PyErr_SetString(PyExc_ValueError, "a bulk string not followed by CRLF");
            return SCAN_BAD;
        }
        if (self->scanned < NOTED_WORDS) {
            self->noted_at[self->scanned] = at - self->pos;
            self->noted_size[self->scanned] = (Py_ssize_t)size;
        }
        self->cursor = at + (Py_ssize_t)size + 2;
        self->scanned++;
    }
    return SCAN_WHOLE;
}

/* The whole command at pos as a list of bytes (its headers known good). */
static PyObject *build(Splitter *self)
{
    PyObject *argv = PyList_New((Py_ssize_t)self->words);
    if (argv == NULL) {
        return NULL;
    }
    const char *buf = self->buf;
    if (self->words <= NOTED_WORDS) {
        const char *start = buf + self->pos;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)self->words; i++) {
            PyObject *word = PyBytes_FromStringAndSize(start + self->noted_at[i],
                                                       self->noted_size[i]);
            if (word == NULL) {
                Py_DECREF(argv);
                return NULL;
            }
            PyList_SET_ITEM(argv, i, word);
        }
        return argv;
    }
    Py_ssize_t p = self->pos + 1;
    while (buf[p] != '\r') {
        p++;
    }
    p += 2;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)self->words; i++) {
        Py_ssize_t size = 0;
        p++; /* '$' */
        while (buf[p] != '\r') {
            size = size * 10 + (buf[p] - '0');
            p++;
        }
        p += 2;
        PyObject *word = PyBytes_FromStringAndSize(buf + p, size);
        if (word == NULL) {
            Py_DECREF(argv);
            return NULL;
        }
        PyList_SET_ITEM(argv, i, word);
        p += size + 2;
    }
    return argv;
}

static PyObject *Splitter_gets(Splitter *self, PyObject *unused)
{
    (void)unused;
    int got = scan(self);
    if (got == SCAN_BAD) {
        self->words = -1; /* (scanned again, and refused again, if called again) */
        return NULL;
    }
    if (got == SCAN_SHORT) {
        Py_RETURN_FALSE;
    }
    PyObject *argv = build(self);
    if (argv == NULL) {
        return NULL;
    }
    self->taken += self->cursor - self->pos;
    self->pos = self->cursor;
    self->words = -1;
    return argv;
}

/* Room for ``more`` bytes: the read part dropped first when it is at least half. */
static int make_room(Splitter *self, Py_ssize_t more)
{
    if (self->pos > 0 && (self->pos >= self->len / 2 || self->len + more > self->cap)) {
        Py_ssize_t kept = self->len - self->pos;
        memmove(self->buf, self->buf + self->pos, (size_t)kept);
        if (self->words >= 0) {
            self->cursor -= self->pos;
        }
        self->len = kept;
        self->pos = 0;
    }
    if (self->len + more <= self->cap) {
        return 0;
    }
    if (more > PY_SSIZE_T_MAX / 2 - self->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cap = self->cap ? self->cap : 16384;
    while (cap < self->len + more) {
        cap *= 2;
    }
    char *grown = PyMem_Realloc(self->buf, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf = grown;
    self->cap = cap;
    return 0;
}

static PyObject *Splitter_feed(Splitter *self, PyObject *data)
{
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (make_room(self, view.len) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    memcpy(self->buf + self->len, view.buf, (size_t)view.len);
    self->len += view.len;
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(self->len - self->pos);
}

static int Splitter_init(Splitter *self, PyObject *args, PyObject *kwds)
{
    if (!PyArg_ParseTuple(args, ":Splitter") || (kwds != NULL && PyDict_Size(kwds) > 0)) {
        PyErr_SetString(PyExc_TypeError, "Splitter() takes no arguments");
        return -1;
    }
    self->len = self->pos = 0;
    self->taken = 0;
    self->words = -1;
    self->max_words = MAX_WORDS;
    self->max_bulk = MAX_BULK;
    return 0;
}

static PyObject *Splitter_take_rest(Splitter *self, PyObject *unused)
{
    (void)unused;
    PyObject *rest = PyBytes_FromStringAndSize(self->buf + self->pos, self->len - self->pos);
    if (rest == NULL) {
        return NULL;
    }
    self->len = self->pos = 0;
    self->words = -1;
    return rest;
}

static PyObject *Splitter_pending(Splitter *self, void *unused)
{
    (void)unused;
    return PyLong_FromSsize_t(self->len - self->pos);
}

static void Splitter_dealloc(Splitter *self)
{
    PyMem_Free(self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Splitter_methods[] = {
    {"feed", (PyCFunction)Splitter_feed, METH_O,
     "feed(data): bytes appended to the stream; returns the bytes pending then."},
    {"gets", (PyCFunction)Splitter_gets, METH_NOARGS,
     "gets(): the next whole command (a list of bytes), or False; ValueError if the bytes "
     "there are not a canonical command (nothing consumed)."},
    {"take_rest", (PyCFunction)Splitter_take_rest, METH_NOARGS,
     "take_rest(): the bytes held after the whole commands returned, no longer held."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Splitter_members[] = {
    {"taken", T_LONGLONG, offsetof(Splitter, taken), READONLY,
     "bytes of the whole commands gets() returned"},
    {"max_words", T_LONGLONG, offsetof(Splitter, max_words), 0,
     "a '*' header over this is refused (ValueError)"},
    {"max_bulk", T_LONGLONG, offsetof(Splitter, max_bulk), 0,
     "a '$' header over this is refused (ValueError)"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Splitter_getset[] = {
    {"pending", (getter)Splitter_pending, NULL, "bytes held after the whole commands", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SplitterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "headwater.resp._split.Splitter",
    .tp_basicsize = sizeof(Splitter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Canonical RESP commands split out of a byte stream.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Splitter_init,
    .tp_dealloc = (destructor)Splitter_dealloc,
    .tp_methods = Splitter_methods,
    .tp_members = Splitter_members,
    .tp_getset = Splitter_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater.resp._split",
    "Canonical RESP commands split out of a byte stream.", -1, NULL,
};

PyMODINIT_FUNC PyInit__split(void)
{
    if (PyType_Ready(&SplitterType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&SplitterType);
    if (PyModule_AddObject(m, "Splitter", (PyObject *)&SplitterType) < 0) {
        Py_DECREF(&SplitterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
