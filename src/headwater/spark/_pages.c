/* One XRANGE reply (RESP2 bytes) split into the buffers of Arrow columns, for the Spark
 * source's executors.
 *
 * Parsing a page of 10,000 entries with hiredis makes five Python objects an entry, and
 * turning those into Arrow arrays walks them again: together about 1 us an entry, more than
 * the server spends producing it. Here the reply's bytes are scanned once to size the
 * columns and once to copy them: the entry IDs, the field names and the values each become
 * one data buffer with int32 offsets (Arrow's binary layout), plus each entry's first pair
 * (the offsets of a map column). What the columns mean stays in Python (``spark/pages.py``):
 * this only splits.
 *
 * ``split_xrange(buf, progress=None)`` returns ``(progress, None)`` while ``buf`` does not yet
 * hold a whole reply (pass ``progress`` back with more bytes: the scan resumes there), raises
 * ValueError when it holds anything but exactly one array of ``[id, [field, value, ...]]``
 * entries (an error reply, say: the caller parses it another way), and OverflowError when a
 * column would pass Arrow's 2 GiB offsets. Otherwise it returns ``(None, columns)``, the
 * columns being ``(count, ids, id_offsets, pair_offsets, fields, field_offsets, values,
 * value_offsets)``, offsets as bytes of native int32. Without this module (the pure build) ``spark/pages.py`` does the same with
 * hiredis.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { WHOLE = 1, SHORT = 0, BAD = -1 };

typedef struct {
    const char *buf;
    Py_ssize_t len;
    Py_ssize_t at;
} Cursor;

/* ``<mark><digits>\r\n``: its number in *value. SHORT when the bytes end first. */
static int header(Cursor *c, char mark, long long *value)
{
    Py_ssize_t p = c->at;
    if (p >= c->len)
        return SHORT;
    if (c->buf[p] != mark)
        return BAD;
    p++;
    long long n = 0;
    int digits = 0;
    while (p < c->len && c->buf[p] >= '0' && c->buf[p] <= '9') {
        if (++digits > 18)
            return BAD;
        n = n * 10 + (c->buf[p] - '0');
        p++;
    }
    if (p + 1 >= c->len)
        return SHORT;
    if (digits == 0 || c->buf[p] != '\r' || c->buf[p + 1] != '\n')
        return BAD;
    c->at = p + 2;
    *value = n;
    return WHOLE;
}

/* ``$<len>\r\n<data>\r\n``: where its data starts and its size. */
static int bulk(Cursor *c, Py_ssize_t *start, long long *size)
{
    int got = header(c, '$', size);
    if (got != WHOLE)
        return got;
    if (*size > c->len - c->at - 2)
        return SHORT;
    Py_ssize_t end = c->at + (Py_ssize_t)*size;
    if (c->buf[end] != '\r' || c->buf[end + 1] != '\n')
        return BAD;
    *start = c->at;
    c->at = end + 2;
    return WHOLE;
}

/* An entry's ``*2`` header (its ID and its fields follow). */
static int entry_header(Cursor *c)
{
    long long two;
    int got = header(c, '*', &two);
    if (got == WHOLE && two != 2)
        return BAD;
    return got;
}

/* ``*<2k>`` before an entry's fields and values: *pairs gets k. */
static int fields_header(Cursor *c, long long *pairs)
{
    long long words;
    int got = header(c, '*', &words);
    if (got != WHOLE)
        return got;
    if (words % 2)
        return BAD;
    *pairs = words / 2;
    return WHOLE;
}

/* How far the first pass got: the byte after the last whole entry, the entries before it,
 * and the sizes of the columns so far. ``entries`` is -1 until the array's header is read. */
typedef struct {
    Py_ssize_t at;
    long long done, entries, pairs, id_bytes, field_bytes, value_bytes;
} Scan;

/* One entry: its ID and its fields, each checked and sized. */
static int measure_entry(Cursor *c, Scan *s)
{
    Py_ssize_t start;
    long long size, pairs;
    int got;
    if ((got = entry_header(c)) != WHOLE)
        return got;
    if ((got = bulk(c, &start, &size)) != WHOLE)
        return got;
    s->id_bytes += size;
    if ((got = fields_header(c, &pairs)) != WHOLE)
        return got;
    s->pairs += pairs;
    for (long long j = 0; j < pairs; j++) {
        if ((got = bulk(c, &start, &size)) != WHOLE)
            return got;
        s->field_bytes += size;
        if ((got = bulk(c, &start, &size)) != WHOLE)
            return got;
        s->value_bytes += size;
    }
    return WHOLE;
}

/* The first pass, resumed where the last call stopped: is the reply whole and well formed,
 * and how big is each column. A reply arriving in many reads is not scanned again from its
 * start each time (only its last, partial entry is). */
static int measure(const char *buf, Py_ssize_t len, Scan *s)
{
    Cursor c = {buf, len, s->at};
    int got;
    if (s->entries < 0) {
        long long entries;
        if ((got = header(&c, '*', &entries)) != WHOLE)
            return got;
        s->entries = entries;
        s->at = c.at;
    }
    while (s->done < s->entries) {
        Scan next = *s;
        if ((got = measure_entry(&c, &next)) != WHOLE)
            return got;
        next.at = c.at;
        next.done++;
        *s = next;
    }
    return s->at == len ? WHOLE : BAD;
}

typedef struct {
    char *data;
    int32_t *offsets;
    int32_t filled;
    Py_ssize_t count;
} Column;

static void put(Column *col, const char *from, long long size)
{
    memcpy(col->data + col->filled, from, (size_t)size);
    col->filled += (int32_t)size;
    col->offsets[++col->count] = col->filled;
}

/* The second pass over a reply ``measure`` accepted: copy into the columns. */
static void fill(Cursor *c, long long entries, Column *ids, int32_t *pair_offsets,
                 Column *fields, Column *values)
{
    long long n = 0, pairs = 0;
    Py_ssize_t start = 0;
    int32_t seen_pairs = 0;
    header(c, '*', &n);
    pair_offsets[0] = 0;
    for (long long i = 0; i < entries; i++) {
        entry_header(c);
        bulk(c, &start, &n);
        put(ids, c->buf + start, n);
        fields_header(c, &pairs);
        for (long long j = 0; j < pairs; j++) {
            bulk(c, &start, &n);
            put(fields, c->buf + start, n);
            bulk(c, &start, &n);
            put(values, c->buf + start, n);
        }
        seen_pairs += (int32_t)pairs;
        pair_offsets[i + 1] = seen_pairs;
    }
}

/* A bytes object of ``size`` bytes to fill; NULL with the error set. */
static PyObject *blank(long long size, char **data)
{
    PyObject *made = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (made != NULL)
        *data = PyBytes_AS_STRING(made);
    return made;
}

/* The columns of a reply ``measure`` accepted whole. */
static PyObject *columns(const char *buf, Py_ssize_t len, const Scan *s)
{
    if (s->id_bytes > INT32_MAX || s->field_bytes > INT32_MAX || s->value_bytes > INT32_MAX ||
        s->pairs > INT32_MAX - 1) {
        PyErr_SetString(PyExc_OverflowError, "an XRANGE page over Arrow's 2 GiB offsets");
        return NULL;
    }
    Column ids = {0}, fields = {0}, values = {0};
    char *pair_data = NULL, *id_off = NULL, *field_off = NULL, *value_off = NULL;
    PyObject *parts[7] = {
        blank(s->id_bytes, &ids.data),
        blank((s->entries + 1) * 4, &id_off),
        blank((s->entries + 1) * 4, &pair_data),
        blank(s->field_bytes, &fields.data),
        blank((s->pairs + 1) * 4, &field_off),
        blank(s->value_bytes, &values.data),
        blank((s->pairs + 1) * 4, &value_off),
    };
    PyObject *result = NULL;
    for (int i = 0; i < 7; i++)
        if (parts[i] == NULL)
            goto done;
    ids.offsets = (int32_t *)id_off;
    fields.offsets = (int32_t *)field_off;
    values.offsets = (int32_t *)value_off;
    ids.offsets[0] = fields.offsets[0] = values.offsets[0] = 0;
    Cursor c = {buf, len, 0};
    fill(&c, s->entries, &ids, (int32_t *)pair_data, &fields, &values);
    result = Py_BuildValue("(LOOOOOOO)", s->entries, parts[0], parts[1], parts[2], parts[3],
                           parts[4], parts[5], parts[6]);
done:
    for (int i = 0; i < 7; i++)
        Py_XDECREF(parts[i]);
    return result;
}

static PyObject *split_xrange(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    PyObject *progress = Py_None;
    if (!PyArg_ParseTuple(args, "y*|O", &view, &progress))
        return NULL;
    Scan s = {0, 0, -1, 0, 0, 0, 0};
    if (progress != Py_None &&
        !PyArg_ParseTuple(progress, "nLLLLLL", &s.at, &s.done, &s.entries, &s.pairs,
                          &s.id_bytes, &s.field_bytes, &s.value_bytes)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (s.at < 0 || s.at > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "progress past the buffer");
        return NULL;
    }
    int got = measure(view.buf, view.len, &s);
    PyObject *result = NULL;
    if (got == SHORT)
        result = Py_BuildValue("((nLLLLLL)O)", s.at, s.done, s.entries, s.pairs, s.id_bytes,
                               s.field_bytes, s.value_bytes, Py_None);
    else if (got == BAD)
        PyErr_SetString(PyExc_ValueError, "not an XRANGE reply");
    else {
        PyObject *made = columns(view.buf, view.len, &s);
        if (made != NULL) {
            result = Py_BuildValue("(OO)", Py_None, made);
            Py_DECREF(made);
        }
    }
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"split_xrange", split_xrange, METH_VARARGS,
     "split_xrange(buf, progress=None) -> (progress, None) while short, (None, columns)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater.spark._pages", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__pages(void) { return PyModule_Create(&module); }
