/* Listpacks decoded in one call, and LZF decompression (import-rdb and RESTORE:
 * ``rdb/listpack.py``, ``rdb/streams.py`` and ``rdb/lzf.py`` run without this module, the pure
 * build; tests/unit/test_rdb_native.py checks that both agree).
 *
 * ``decode(blob, text) -> list | None``: the elements of a listpack, checked as
 * ``listpack.decode`` checks them (header size and count, every element in bounds with its
 * backlen, the end byte); integers as ``int``, or with ``text`` as their decimal text
 * (``listpack.as_bytes``). None when anything is wrong: the caller then runs the Python
 * decoder, which says what (so this module never has to word an error).
 *
 * ``stream_node(blob, master_ms, master_seq) -> tuple | None``: one Redis stream listpack
 * (``t_stream.c``'s layout, see ``rdb/streams.py``) as the columns of a Headwater stream node
 * (``stream/node.py``): ``(fields, ms, seq, offsets, blob, tomb, count, deleted, lp_bytes,
 * last_ms, last_seq)``, the three arrays as native-order bytes, ``tomb`` None when no entry is
 * deleted. The same bytes and listpack accounting as ``Node.append`` per entry and
 * ``Node.delete_at`` per deleted one. None for anything the caller must look at in Python: a
 * malformed listpack, and also shapes Redis does not write (a master entry without fields, an
 * entry with its own field list equal to the master's); the Python reader handles or refuses
 * those. The caller checks the IDs' order against the previous node. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define LP_HEADER 6
#define LP_END 0xFF
#define LP_COUNT_UNKNOWN 65535

/* One decoded element: an integer, or a string at [str, str + len). */
typedef struct {
    int is_int;
    int64_t value;
    const unsigned char *str;
    Py_ssize_t len;
} element;

static Py_ssize_t backlen_size(Py_ssize_t size)
{
    if (size <= 127) return 1;
    if (size < 16383) return 2;
    if (size < 2097151) return 3;
    if (size < 268435455) return 4;
    return 5;
}

/* The backlen bytes of an element of ``size`` bytes are at p (``listpack._backlen``). */
static int backlen_matches(const unsigned char *p, Py_ssize_t size, Py_ssize_t bl)
{
    unsigned char want[5];
    switch (bl) {
    case 1: want[0] = (unsigned char)size; break;
    case 2:
        want[0] = (unsigned char)(size >> 7);
        want[1] = (unsigned char)((size & 127) | 128);
        break;
    case 3:
        want[0] = (unsigned char)(size >> 14);
        want[1] = (unsigned char)(((size >> 7) & 127) | 128);
        want[2] = (unsigned char)((size & 127) | 128);
        break;
    case 4:
        want[0] = (unsigned char)(size >> 21);
        want[1] = (unsigned char)(((size >> 14) & 127) | 128);
        want[2] = (unsigned char)(((size >> 7) & 127) | 128);
        want[3] = (unsigned char)((size & 127) | 128);
        break;
    default:
        want[0] = (unsigned char)(size >> 28);
        want[1] = (unsigned char)(((size >> 21) & 127) | 128);
        want[2] = (unsigned char)(((size >> 14) & 127) | 128);
        want[3] = (unsigned char)(((size >> 7) & 127) | 128);
        want[4] = (unsigned char)((size & 127) | 128);
    }
    return memcmp(p, want, (size_t)bl) == 0;
}

/* The elements of the listpack into a fresh array (*out, *count); 0 on success, -1 when the
 * listpack is malformed (no exception set), -2 on a memory error (exception set). */
static int walk(const unsigned char *b, Py_ssize_t n, element **out, Py_ssize_t *count)
{
    *out = NULL;
    *count = 0;
    if (n < LP_HEADER + 1) return -1;
    uint32_t total = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16
                     | (uint32_t)b[3] << 24;
    unsigned header_count = (unsigned)b[4] | (unsigned)b[5] << 8;
    if ((Py_ssize_t)total != n || b[n - 1] != LP_END) return -1;
    /* (every element takes at least 2 bytes) */
    Py_ssize_t room = (n - LP_HEADER) / 2 + 1;
    element *els = PyMem_Malloc(sizeof(element) * (size_t)room);
    if (els == NULL) {
        PyErr_NoMemory();
        return -2;
    }
    Py_ssize_t pos = LP_HEADER, end = n - 1, k = 0;
    while (pos < end) {
        Py_ssize_t start = pos;
        unsigned first = b[pos];
        element *e = &els[k];
        e->is_int = 0;
        if (first < 0x80) {
            if (pos + 1 >= end || b[pos + 1] != 1) goto bad;
            e->is_int = 1;
            e->value = first;
            pos += 2;
            k++;
            continue;
        }
        if (first < 0xC0) {
            Py_ssize_t size = first & 0x3F;
            pos += 1 + size;
            if (pos >= end || b[pos] != size + 1) goto bad;
            e->str = b + start + 1;
            e->len = size;
            pos += 1;
            k++;
            continue;
        }
        if (first < 0xE0) {
            if (pos + 2 > end) goto bad;
            int64_t v = ((int64_t)(first & 0x1F) << 8) | b[pos + 1];
            e->is_int = 1;
            e->value = v >= 0x1000 ? v - 0x2000 : v;
            pos += 2;
        } else if (first < 0xF0) {
            if (pos + 2 > end) goto bad;
            Py_ssize_t size = ((Py_ssize_t)(first & 0x0F) << 8) | b[pos + 1];
            if (size > end - pos - 2) goto bad;
            e->str = b + pos + 2;
            e->len = size;
            pos += 2 + size;
        } else if (first == 0xF0) {
            if (pos + 5 > end) goto bad;
            uint32_t size = (uint32_t)b[pos + 1] | (uint32_t)b[pos + 2] << 8
                            | (uint32_t)b[pos + 3] << 16 | (uint32_t)b[pos + 4] << 24;
            if ((Py_ssize_t)size > end - pos - 5) goto bad;
            e->str = b + pos + 5;
            e->len = (Py_ssize_t)size;
            pos += 5 + (Py_ssize_t)size;
        } else if (first >= 0xF1 && first <= 0xF4) {
            static const int widths[4] = {2, 3, 4, 8};
            int width = widths[first - 0xF1];
            if (pos + 1 + width > end) goto bad;
            uint64_t u = 0;
            for (int i = width - 1; i >= 0; i--) u = (u << 8) | b[pos + 1 + i];
            if (width < 8 && (u >> (8 * width - 1)) & 1) u |= ~(uint64_t)0 << (8 * width);
            e->is_int = 1;
            e->value = (int64_t)u;
            pos += 1 + width;
        } else {
            goto bad;
        }
        if (pos > end) goto bad;
        Py_ssize_t bl = backlen_size(pos - start);
        if (pos + bl > end || !backlen_matches(b + pos, pos - start, bl)) goto bad;
        pos += bl;
        k++;
    }
    if (header_count != LP_COUNT_UNKNOWN && (Py_ssize_t)header_count != k) goto bad;
    *out = els;
    *count = k;
    return 0;
bad:
    PyMem_Free(els);
    return -1;
}

static PyObject *int_text(int64_t v)
{
    char buf[24];
    int len = snprintf(buf, sizeof buf, "%lld", (long long)v);
    return PyBytes_FromStringAndSize(buf, len);
}

static PyObject *element_object(const element *e, int text)
{
    if (!e->is_int) return PyBytes_FromStringAndSize((const char *)e->str, e->len);
    return text ? int_text(e->value) : PyLong_FromLongLong((long long)e->value);
}

static PyObject *decode(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    int text;
    if (!PyArg_ParseTuple(args, "y*p:decode", &view, &text)) return NULL;
    element *els;
    Py_ssize_t count;
    int rc = walk(view.buf, view.len, &els, &count);
    if (rc != 0) {
        PyBuffer_Release(&view);
        if (rc == -2) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(count);
    if (out != NULL) {
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *item = element_object(&els[i], text);
            if (item == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, item);
        }
    }
    PyMem_Free(els);
    PyBuffer_Release(&view);
    return out;
}

/* ---------------------------------------------------------------------------------------- */
/* Stream nodes */

/* ``node.lp_int``: bytes of an integer element. */
static Py_ssize_t lp_int(int64_t v)
{
    if (v >= 0 && v <= 127) return 2;
    Py_ssize_t payload;
    if (v >= -4096 && v <= 4095) payload = 2;
    else if (v >= -32768 && v <= 32767) payload = 3;
    else if (v >= -8388608 && v <= 8388607) payload = 4;
    else if (v >= -2147483648LL && v <= 2147483647LL) payload = 5;
    else payload = 9;
    return payload + backlen_size(payload);
}

/* listpack's lpStringToInt64 (``node._as_int64``): strict decimal text that fits int64. */
static int as_int64(const unsigned char *s, Py_ssize_t n, int64_t *out)
{
    if (n == 0 || n > 20) return 0;
    int negative = s[0] == '-';
    const unsigned char *d = s + negative;
    Py_ssize_t digits = n - negative;
    if (digits == 0 || (d[0] == '0' && n > 1)) return 0;
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < digits; i++) {
        if (d[i] < '0' || d[i] > '9') return 0;
        uint64_t digit = (uint64_t)(d[i] - '0');
        if (v > (UINT64_MAX - digit) / 10) return 0;
        v = v * 10 + digit;
    }
    if (negative) {
        if (v > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

/* ``node.lp_str`` of an element's text (an integer element's decimal text is an integer). */
static Py_ssize_t lp_str(const element *e)
{
    if (e->is_int) return lp_int(e->value);
    int64_t v;
    if (as_int64(e->str, e->len, &v)) return lp_int(v);
    Py_ssize_t n = e->len;
    Py_ssize_t payload = n < 64 ? 1 + n : n < 4096 ? 2 + n : 5 + n;
    return payload + backlen_size(payload);
}

/* The element's text length (an integer's decimal text) and, with dst, the text. */
static Py_ssize_t text_len(const element *e, char *dst)
{
    if (!e->is_int) {
        if (dst != NULL) memcpy(dst, e->str, (size_t)e->len);
        return e->len;
    }
    char buf[24];
    int len = snprintf(buf, sizeof buf, "%lld", (long long)e->value);
    if (dst != NULL) memcpy(dst, buf, (size_t)len);
    return len;
}

static int same_text(const element *a, const element *b)
{
    char ta[24], tb[24];
    const char *pa, *pb;
    Py_ssize_t la, lb;
    if (a->is_int) {
        la = text_len(a, ta);
        pa = ta;
    } else {
        la = a->len;
        pa = (const char *)a->str;
    }
    if (b->is_int) {
        lb = text_len(b, tb);
        pb = tb;
    } else {
        lb = b->len;
        pb = (const char *)b->str;
    }
    return la == lb && memcmp(pa, pb, (size_t)la) == 0;
}

static void put_u32(char *p, uint32_t v)
{
    p[0] = (char)(v & 0xFF);
    p[1] = (char)((v >> 8) & 0xFF);
    p[2] = (char)((v >> 16) & 0xFF);
    p[3] = (char)((v >> 24) & 0xFF);
}

static PyObject *stream_node(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    unsigned long long master_ms, master_seq;
    if (!PyArg_ParseTuple(args, "y*KK:stream_node", &view, &master_ms, &master_seq)) return NULL;
    element *els = NULL;
    Py_ssize_t n = 0;
    PyObject *result = NULL, *fields = NULL, *ms_b = NULL, *seq_b = NULL, *off_b = NULL;
    PyObject *blob_b = NULL, *tomb_b = NULL;
    int rc = walk(view.buf, view.len, &els, &n);
    if (rc == -2) goto done;
    if (rc == -1) goto fallback;
    if (n < 4 || !els[0].is_int || !els[1].is_int || !els[2].is_int) goto fallback;
    int64_t count_h = els[0].value, deleted_h = els[1].value, nfields = els[2].value;
    if (nfields <= 0 || 3 + nfields >= n) goto fallback;
    const element *master_fields = &els[3];
    if (!els[3 + nfields].is_int || els[3 + nfields].value != 0) goto fallback;
    /* A first pass: the entries' number and the blob's size, everything checked. */
    Py_ssize_t entries = 0, blob_size = 0, i = 4 + (Py_ssize_t)nfields, dead = 0;
    Py_ssize_t lp = 7 + lp_int(nfields) + lp_int(0);
    for (Py_ssize_t f = 0; f < nfields; f++) lp += lp_str(&master_fields[f]);
    uint64_t prev_ms = 0, prev_seq = 0;
    while (i < n) {
        if (i + 3 > n) goto fallback;
        const element *fl = &els[i], *dms = &els[i + 1], *dseq = &els[i + 2];
        if (!fl->is_int || !dms->is_int || !dseq->is_int) goto fallback;
        if (fl->value & ~(int64_t)3) goto fallback;
        uint64_t ms = master_ms + (uint64_t)dms->value;
        uint64_t seq = master_seq + (uint64_t)dseq->value;
        if (entries == 0 ? (ms != master_ms || seq != master_seq)
                         : (ms < prev_ms || (ms == prev_ms && seq <= prev_seq)))
            goto fallback;
        prev_ms = ms;
        prev_seq = seq;
        lp += 2 + lp_int(dms->value) + lp_int(dseq->value);
        Py_ssize_t stop;
        int64_t expected;
        blob_size += 1;
        if (fl->value & 2) {
            stop = i + 3 + (Py_ssize_t)nfields;
            if (stop >= n) goto fallback;
            for (Py_ssize_t k = i + 3; k < stop; k++) {
                blob_size += 4 + text_len(&els[k], NULL);
                lp += lp_str(&els[k]);
            }
            expected = nfields + 3;
            lp += lp_int(expected);
        } else {
            if (i + 3 >= n || !els[i + 3].is_int) goto fallback;
            int64_t own = els[i + 3].value;
            if (own <= 0 || own > (n - i) / 2) goto fallback;
            stop = i + 4 + 2 * (Py_ssize_t)own;
            if (stop >= n) goto fallback;
            if (own == nfields) { /* (Node.append would store it as "same fields") */
                int same = 1;
                for (Py_ssize_t f = 0; f < nfields && same; f++)
                    same = same_text(&els[i + 4 + 2 * f], &master_fields[f]);
                if (same) goto fallback;
            }
            blob_size += 4;
            for (Py_ssize_t k = i + 4; k < stop; k++) {
                blob_size += 4 + text_len(&els[k], NULL);
                lp += lp_str(&els[k]);
            }
            expected = 2 * own + 4;
            lp += lp_int(own) + lp_int(expected);
        }
        if (!els[stop].is_int || els[stop].value != expected) goto fallback;
        if (fl->value & 1) dead++;
        entries++;
        i = stop + 1;
    }
    if (entries == 0 || blob_size > UINT32_MAX) goto fallback;
    if (count_h != entries - dead || deleted_h != dead) goto fallback;
    lp += lp_int(count_h) + lp_int(deleted_h);
    /* The second pass fills the columns. */
    fields = PyList_New((Py_ssize_t)nfields);
    if (fields == NULL) goto done;
    for (Py_ssize_t f = 0; f < nfields; f++) {
        PyObject *name = element_object(&master_fields[f], 1);
        if (name == NULL) goto done;
        PyList_SET_ITEM(fields, f, name);
    }
    ms_b = PyBytes_FromStringAndSize(NULL, entries * 8);
    seq_b = PyBytes_FromStringAndSize(NULL, entries * 8);
    off_b = PyBytes_FromStringAndSize(NULL, entries * 4);
    blob_b = PyByteArray_FromStringAndSize(NULL, blob_size);
    if (ms_b == NULL || seq_b == NULL || off_b == NULL || blob_b == NULL) goto done;
    if (dead) {
        tomb_b = PyByteArray_FromStringAndSize(NULL, entries);
        if (tomb_b == NULL) goto done;
    } else {
        tomb_b = Py_NewRef(Py_None);
    }
    uint64_t *ms_col = (uint64_t *)PyBytes_AS_STRING(ms_b);
    uint64_t *seq_col = (uint64_t *)PyBytes_AS_STRING(seq_b);
    uint32_t *off_col = (uint32_t *)PyBytes_AS_STRING(off_b);
    char *blob = PyByteArray_AS_STRING(blob_b);
    char *tomb = dead ? PyByteArray_AS_STRING(tomb_b) : NULL;
    Py_ssize_t w = 0, e = 0;
    i = 4 + (Py_ssize_t)nfields;
    while (i < n) {
        const element *fl = &els[i];
        uint64_t ms = master_ms + (uint64_t)els[i + 1].value;
        uint64_t seq = master_seq + (uint64_t)els[i + 2].value;
        memcpy(&ms_col[e], &ms, 8);
        memcpy(&seq_col[e], &seq, 8);
        uint32_t off = (uint32_t)w;
        memcpy(&off_col[e], &off, 4);
        if (tomb != NULL) tomb[e] = (char)(fl->value & 1);
        Py_ssize_t start, stop;
        if (fl->value & 2) {
            blob[w++] = 0; /* same fields as the master: the values */
            start = i + 3;
            stop = start + (Py_ssize_t)nfields;
        } else {
            int64_t own = els[i + 3].value;
            blob[w++] = 1; /* its own fields: their number, then fields and values */
            put_u32(blob + w, (uint32_t)own);
            w += 4;
            start = i + 4;
            stop = start + 2 * (Py_ssize_t)own;
        }
        for (Py_ssize_t k = start; k < stop; k++) {
            Py_ssize_t len = text_len(&els[k], blob + w + 4);
            put_u32(blob + w, (uint32_t)len);
            w += 4 + len;
        }
        e++;
        i = stop + 1;
    }
    result = Py_BuildValue(
        "(OOOOOOLLnKK)", fields, ms_b, seq_b, off_b, blob_b, tomb_b, (long long)count_h,
        (long long)deleted_h, lp, prev_ms, prev_seq);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(fields);
    Py_XDECREF(ms_b);
    Py_XDECREF(seq_b);
    Py_XDECREF(off_b);
    Py_XDECREF(blob_b);
    Py_XDECREF(tomb_b);
    PyMem_Free(els);
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* LZF */

/* LZF's decompression of n bytes into exactly ``length`` bytes at o; 0, or -1 for anything
 * ``lzf.decompress`` refuses. */
static int lzf_into(const unsigned char *d, Py_ssize_t n, unsigned char *o, Py_ssize_t length)
{
    Py_ssize_t i = 0, w = 0;
    while (i < n) {
        unsigned ctrl = d[i++];
        if (ctrl < 32) {
            Py_ssize_t run = (Py_ssize_t)ctrl + 1;
            if (run > n - i || run > length - w) return -1;
            memcpy(o + w, d + i, (size_t)run);
            w += run;
            i += run;
            continue;
        }
        Py_ssize_t size = ctrl >> 5;
        if (size == 7) {
            if (i >= n) return -1;
            size += d[i++];
        }
        if (i >= n) return -1;
        Py_ssize_t ref = w - ((Py_ssize_t)(ctrl & 0x1F) << 8) - d[i] - 1;
        i++;
        size += 2;
        if (ref < 0 || size > length - w) return -1;
        for (Py_ssize_t k = 0; k < size; k++) o[w + k] = o[ref + k]; /* (may overlap) */
        w += size;
    }
    return w == length ? 0 : -1;
}

/* ``lzf_decompress(data, length) -> bytes | None``: ``lzf.decompress`` (exactly ``length``
 * bytes out), None for anything ``lzf.decompress`` refuses (it then says what). */
static PyObject *lzf_decompress(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "y*n:lzf_decompress", &view, &length)) return NULL;
    if (length < 0 || length > PY_SSIZE_T_MAX / 2) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, length);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int rc = lzf_into(view.buf, view.len, (unsigned char *)PyBytes_AS_STRING(out), length);
    PyBuffer_Release(&view);
    if (rc != 0) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

/* ---------------------------------------------------------------------------------------- */
/* Writing: what ``listpack.encode_pure`` and ``lzf.compress_pure`` write, byte for byte (the
 * RDB a Redis replica loads, DUMP, export-rdb). The Python decides what goes in. */

/* LZF's hash table: the last input position per slot, valid only in the call that set it
 * (``stamp``), so a call does not clear 64K slots to compress a few hundred bytes. */
#define LZF_HLOG 16
#define LZF_HSIZE (1 << LZF_HLOG)
#define LZF_MAX_LIT (1 << 5)
#define LZF_MAX_OFF (1 << 13)
#define LZF_MAX_REF ((1 << 8) + (1 << 3))
static Py_ssize_t lzf_slot_pos[LZF_HSIZE];
static uint32_t lzf_slot_stamp[LZF_HSIZE];
static uint32_t lzf_stamp;

static unsigned lzf_idx(uint32_t h)
{
    return ((h >> (24 - LZF_HLOG)) - h * 5) & (LZF_HSIZE - 1);
}

static Py_ssize_t lzf_match_length(const unsigned char *d, Py_ssize_t ref, Py_ssize_t ip,
                                   Py_ssize_t maxlen)
{
    Py_ssize_t length = 2;
    if (maxlen > 16) {
        for (int k = 0; k < 16; k++) {
            length++;
            if (d[ref + length] != d[ip + length]) return length;
        }
    }
    length++;
    while (length < maxlen && d[ref + length] == d[ip + length]) length++;
    return length;
}

/* One more byte of the literal run whose control byte is at o[*run]; a full run (32 bytes)
 * is closed and the next one opened. */
static void lzf_literal(unsigned char *o, Py_ssize_t *w, Py_ssize_t *run, Py_ssize_t *lit,
                        unsigned char byte)
{
    ++*lit;
    o[(*w)++] = byte;
    if (*lit == LZF_MAX_LIT) {
        o[*run] = (unsigned char)(*lit - 1);
        *lit = 0;
        *run = *w;
        o[(*w)++] = 0;
    }
}

/* The compressed size written to o (room for out_limit + 3 bytes), or -1 when it would take
 * more than ``out_limit - 1`` (``lzf.compress_pure``'s None). */
static Py_ssize_t lzf_into_packed(const unsigned char *d, Py_ssize_t n, unsigned char *o,
                                  Py_ssize_t out_limit)
{
    if (++lzf_stamp == 0) {
        memset(lzf_slot_stamp, 0, sizeof lzf_slot_stamp);
        lzf_stamp = 1;
    }
    Py_ssize_t w = 1, run = 0, lit = 0, ip = 0, end2 = n - 2;
    o[0] = 0;
    uint32_t hval = n >= 2 ? ((uint32_t)d[0] << 8) | d[1] : 0;
    while (ip < end2) {
        hval = ((hval << 8) | d[ip + 2]) & 0xFFFFFF;
        unsigned slot = lzf_idx(hval);
        Py_ssize_t ref = lzf_slot_stamp[slot] == lzf_stamp ? lzf_slot_pos[slot] : -1;
        lzf_slot_pos[slot] = ip;
        lzf_slot_stamp[slot] = lzf_stamp;
        if (ref > 0 && ref < ip && ip - ref - 1 < LZF_MAX_OFF && d[ref] == d[ip]
            && d[ref + 1] == d[ip + 1] && d[ref + 2] == d[ip + 2]) {
            Py_ssize_t off = ip - ref - 1;
            Py_ssize_t maxlen = n - ip - 2 < LZF_MAX_REF ? n - ip - 2 : LZF_MAX_REF;
            if (lit) o[run] = (unsigned char)(lit - 1);
            else w--; /* (undo the empty run) */
            if (w + 3 + 1 >= out_limit) return -1;
            Py_ssize_t length = lzf_match_length(d, ref, ip, maxlen) - 2;
            ip++;
            if (length < 7) {
                o[w++] = (unsigned char)((off >> 8) + (length << 5));
            } else {
                o[w++] = (unsigned char)((off >> 8) + (7 << 5));
                o[w++] = (unsigned char)(length - 7);
            }
            o[w++] = (unsigned char)(off & 0xFF);
            run = w;
            o[w++] = 0;
            lit = 0;
            ip += length + 1;
            if (ip >= end2) break;
            ip -= 2;
            hval = ((uint32_t)d[ip] << 8) | d[ip + 1];
            hval = ((hval << 8) | d[ip + 2]) & 0xFFFFFF;
            slot = lzf_idx(hval);
            lzf_slot_pos[slot] = ip;
            lzf_slot_stamp[slot] = lzf_stamp;
            ip++;
            hval = ((hval << 8) | d[ip + 2]) & 0xFFFFFF;
            slot = lzf_idx(hval);
            lzf_slot_pos[slot] = ip;
            lzf_slot_stamp[slot] = lzf_stamp;
            ip++;
        } else {
            if (w >= out_limit) return -1;
            lzf_literal(o, &w, &run, &lit, d[ip++]);
        }
    }
    if (w + 3 > out_limit) return -1;
    while (ip < n) lzf_literal(o, &w, &run, &lit, d[ip++]);
    if (lit) o[run] = (unsigned char)(lit - 1);
    else w--;
    return w;
}

/* ``lzf_compress(data, out_limit) -> bytes | None``: ``lzf.compress_pure``. */
static PyObject *lzf_compress(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t out_limit;
    if (!PyArg_ParseTuple(args, "y*n:lzf_compress", &view, &out_limit)) return NULL;
    if (view.len == 0 || out_limit <= 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    /* (the encoder may pass out_limit by a few bytes before it gives up) */
    unsigned char *o = PyMem_Malloc((size_t)out_limit + 8);
    if (o == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Py_ssize_t size = lzf_into_packed(view.buf, view.len, o, out_limit);
    PyBuffer_Release(&view);
    PyObject *out = size < 0 ? (Py_INCREF(Py_None), Py_None)
                             : PyBytes_FromStringAndSize((const char *)o, size);
    PyMem_Free(o);
    return out;
}

/* The backlen of an element of ``size`` bytes at p (``listpack._backlen``); its width. */
static Py_ssize_t put_backlen(unsigned char *p, Py_ssize_t size)
{
    Py_ssize_t width = backlen_size(size);
    for (Py_ssize_t i = 0; i < width; i++) {
        unsigned char b = (unsigned char)((size >> (7 * (width - 1 - i))) & 127);
        p[i] = i == 0 ? b : (unsigned char)(b | 128);
    }
    return width;
}

/* One integer element at p (``listpack.encode_int``); its size. */
static Py_ssize_t put_int(unsigned char *p, int64_t v)
{
    Py_ssize_t body;
    if (v >= 0 && v <= 127) {
        p[0] = (unsigned char)v;
        body = 1;
    } else if (v >= -4096 && v <= 4095) {
        uint64_t u = (uint64_t)v & 0x1FFF;
        p[0] = (unsigned char)((u >> 8) | 0xC0);
        p[1] = (unsigned char)(u & 0xFF);
        body = 2;
    } else {
        int width = v >= -32768 && v <= 32767       ? 2
                    : v >= -8388608 && v <= 8388607 ? 3
                    : v >= INT32_MIN && v <= INT32_MAX ? 4
                                                       : 8;
        p[0] = width == 2 ? 0xF1 : width == 3 ? 0xF2 : width == 4 ? 0xF3 : 0xF4;
        uint64_t u = (uint64_t)v;
        for (int i = 0; i < width; i++) p[1 + i] = (unsigned char)(u >> (8 * i));
        body = 1 + width;
    }
    return body + put_backlen(p + body, body);
}

/* One string element at p (``listpack.encode_str`` after the integer test); its size. */
static Py_ssize_t put_str(unsigned char *p, const char *s, Py_ssize_t n)
{
    Py_ssize_t head;
    if (n < 64) {
        p[0] = (unsigned char)(0x80 | n);
        head = 1;
    } else if (n < 4096) {
        p[0] = (unsigned char)((n >> 8) | 0xE0);
        p[1] = (unsigned char)(n & 0xFF);
        head = 2;
    } else {
        p[0] = 0xF0;
        for (int i = 0; i < 4; i++) p[1 + i] = (unsigned char)((uint64_t)n >> (8 * i));
        head = 5;
    }
    memcpy(p + head, s, (size_t)n);
    return head + n + put_backlen(p + head + n, head + n);
}

static Py_ssize_t put_text(unsigned char *p, const unsigned char *s, Py_ssize_t n);

/* The listpack in ``out`` (written from base + LP_HEADER up to p) ended: the end byte, then
 * the header (total bytes, element count saturated), and the bytes object cut to its size;
 * NULL (out released) when that fails. */
static PyObject *finish_listpack(PyObject *out, unsigned char *base, unsigned char *p,
                                 Py_ssize_t count)
{
    *p++ = LP_END;
    Py_ssize_t total = p - base;
    unsigned header_count = count < LP_COUNT_UNKNOWN ? (unsigned)count : LP_COUNT_UNKNOWN;
    for (int i = 0; i < 4; i++) base[i] = (unsigned char)((uint32_t)total >> (8 * i));
    base[4] = (unsigned char)(header_count & 0xFF);
    base[5] = (unsigned char)(header_count >> 8);
    if (_PyBytes_Resize(&out, total) < 0) return NULL;
    return out;
}


/* ``encode_mapping(d: dict) -> bytes | None``: ``encode`` of the dict's keys and values,
 * alternately, in its order (a hash's listpack); None when one is not ``bytes``. */
static PyObject *encode_mapping(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyDict_Check(arg)) Py_RETURN_NONE;
    Py_ssize_t count = 2 * PyDict_GET_SIZE(arg), room = LP_HEADER + 1, at = 0;
    PyObject *key, *value;
    while (PyDict_Next(arg, &at, &key, &value)) {
        if (!PyBytes_Check(key) || !PyBytes_Check(value)) Py_RETURN_NONE;
        room += PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value) + 20;
    }
    if (room > (Py_ssize_t)UINT32_MAX) Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, room);
    if (out == NULL) return NULL;
    unsigned char *base = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned char *p = base + LP_HEADER;
    at = 0;
    while (PyDict_Next(arg, &at, &key, &value)) {
        p += put_text(p, (const unsigned char *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key));
        p += put_text(p, (const unsigned char *)PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
    }
    return finish_listpack(out, base, p, count);
}

/* ``encode(elements: list) -> bytes | None``: ``listpack.encode_pure`` of a list of ``int``
 * and ``bytes``; None for anything else (another type, an int past int64), which the Python
 * encoder then takes (or refuses, saying why). */
static PyObject *encode(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyList_Check(arg)) Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(arg);
    Py_ssize_t room = LP_HEADER + 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *e = PyList_GET_ITEM(arg, i);
        if (PyBytes_Check(e)) room += PyBytes_GET_SIZE(e) + 10;
        else if (PyLong_Check(e)) room += 14;
        else Py_RETURN_NONE;
    }
    if (room > (Py_ssize_t)UINT32_MAX) Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, room);
    if (out == NULL) return NULL;
    unsigned char *base = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned char *p = base + LP_HEADER;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *e = PyList_GET_ITEM(arg, i);
        if (PyLong_Check(e)) {
            int overflow;
            long long value = PyLong_AsLongLongAndOverflow(e, &overflow);
            if (overflow || (value == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            p += put_int(p, (int64_t)value);
            continue;
        }
        p += put_text(p, (const unsigned char *)PyBytes_AS_STRING(e), PyBytes_GET_SIZE(e));
    }
    return finish_listpack(out, base, p, count);
}

/* A bytes element (integer text as an integer, as ``lpAppend``) at p; its size. */
static Py_ssize_t put_text(unsigned char *p, const unsigned char *s, Py_ssize_t n)
{
    int64_t v;
    if (as_int64(s, n, &v)) return put_int(p, v);
    return put_str(p, (const char *)s, n);
}

static uint32_t read_u32le(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* ``stream_listpack(fields, ms, seq, offsets, blob, tomb, count, deleted, master_ms,
 * master_seq) -> bytes | None``: the listpack Redis keeps for a Headwater stream node
 * (``streams.node_listpack_pure``), from the node's columns (``stream/node.py``; the arrays
 * in native order, ``tomb`` None when nothing is deleted). None for columns that do not
 * agree with each other, which the Python writer then reads as it would. */
static PyObject *stream_listpack(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *fields, *tomb_obj;
    Py_buffer ms_v, seq_v, off_v, blob_v;
    long long count, deleted;
    unsigned long long master_ms, master_seq;
    if (!PyArg_ParseTuple(args, "O!y*y*y*y*OLLKK:stream_listpack", &PyTuple_Type, &fields, &ms_v,
                          &seq_v, &off_v, &blob_v, &tomb_obj, &count, &deleted, &master_ms,
                          &master_seq))
        return NULL;
    PyObject *out = NULL;
    Py_buffer tomb_v = {0};
    int has_tomb = tomb_obj != Py_None;
    if (has_tomb && PyObject_GetBuffer(tomb_obj, &tomb_v, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t n = ms_v.len / 8, nfields = PyTuple_GET_SIZE(fields);
    if (seq_v.len != n * 8 || off_v.len != n * 4 || ms_v.len % 8) goto none;
    Py_ssize_t room = LP_HEADER + 1 + 14 * (4 + nfields) + 3 * blob_v.len + 64 * n;
    for (Py_ssize_t f = 0; f < nfields; f++) {
        PyObject *name = PyTuple_GET_ITEM(fields, f);
        if (!PyBytes_Check(name)) goto none;
        room += PyBytes_GET_SIZE(name) + 10;
    }
    if (room > (Py_ssize_t)UINT32_MAX) goto none;
    out = PyBytes_FromStringAndSize(NULL, room);
    if (out == NULL) goto done;
    unsigned char *base = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned char *p = base + LP_HEADER;
    const uint64_t *ms = ms_v.buf, *seq = seq_v.buf;
    const uint32_t *offsets = off_v.buf;
    const unsigned char *blob = blob_v.buf, *tomb = has_tomb ? tomb_v.buf : NULL;
    Py_ssize_t blob_len = blob_v.len, elements = 0;
    p += put_int(p, count);
    p += put_int(p, deleted);
    p += put_int(p, nfields);
    for (Py_ssize_t f = 0; f < nfields; f++) {
        PyObject *name = PyTuple_GET_ITEM(fields, f);
        p += put_text(p, (const unsigned char *)PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name));
    }
    p += put_int(p, 0);
    elements += 4 + nfields;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t pos = offsets[i];
        if (pos >= blob_len) goto none;
        int live = tomb == NULL || i >= tomb_v.len || !tomb[i];
        int64_t ms_delta = (int64_t)(ms[i] - master_ms), seq_delta = (int64_t)(seq[i] - master_seq);
        if (blob[pos] == 0) { /* the master's fields: only the values follow */
            pos++;
            p += put_int(p, (live ? 0 : 1) | 2);
            p += put_int(p, ms_delta);
            p += put_int(p, seq_delta);
            for (Py_ssize_t f = 0; f < nfields; f++) {
                if (pos + 4 > blob_len) goto none;
                Py_ssize_t len = read_u32le(blob + pos);
                if (len > blob_len - pos - 4) goto none;
                p += put_text(p, blob + pos + 4, len);
                pos += 4 + len;
            }
            p += put_int(p, nfields + 3);
            elements += 4 + nfields;
            continue;
        }
        if (blob[pos] != 1 || pos + 5 > blob_len) goto none;
        Py_ssize_t own = read_u32le(blob + pos + 1);
        pos += 5;
        /* (its own field names may still be the master's: then Redis marks it so) */
        int same = own == nfields;
        Py_ssize_t scan = pos;
        for (Py_ssize_t k = 0; k < 2 * own; k++) {
            if (scan + 4 > blob_len) goto none;
            Py_ssize_t len = read_u32le(blob + scan);
            if (len > blob_len - scan - 4) goto none;
            if (same && k % 2 == 0) {
                PyObject *name = PyTuple_GET_ITEM(fields, k / 2);
                same = PyBytes_GET_SIZE(name) == len
                       && memcmp(PyBytes_AS_STRING(name), blob + scan + 4, (size_t)len) == 0;
            }
            scan += 4 + len;
        }
        p += put_int(p, (live ? 0 : 1) | (same ? 2 : 0));
        p += put_int(p, ms_delta);
        p += put_int(p, seq_delta);
        if (!same) p += put_int(p, own);
        for (Py_ssize_t k = 0; k < 2 * own; k++) {
            Py_ssize_t len = read_u32le(blob + pos);
            if (!same || k % 2 == 1) p += put_text(p, blob + pos + 4, len);
            pos += 4 + len;
        }
        p += put_int(p, same ? nfields + 3 : 2 * own + 4);
        elements += same ? 4 + nfields : 5 + 2 * own;
    }
    out = finish_listpack(out, base, p, elements);
    goto done;
none:
    Py_XDECREF(out);
    out = Py_None;
    Py_INCREF(out);
done:
    if (has_tomb && tomb_v.obj != NULL) PyBuffer_Release(&tomb_v);
    PyBuffer_Release(&ms_v);
    PyBuffer_Release(&seq_v);
    PyBuffer_Release(&off_v);
    PyBuffer_Release(&blob_v);
    return out;
}

/* ---------------------------------------------------------------------------------------- */
/* Runs of RDB strings */

/* An RDB length at p[*pos] (``Reader.len_or_special``): 0 and the length, 1 and the special
 * encoding, or -1 for anything else (truncated, unknown). */
static int rdb_len(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out)
{
    Py_ssize_t at = *pos;
    if (at >= end) return -1;
    unsigned first = p[at];
    unsigned kind = first >> 6;
    if (kind == 0) {
        *out = first & 0x3F;
        *pos = at + 1;
        return 0;
    }
    if (kind == 1) {
        if (at + 2 > end) return -1;
        *out = ((uint64_t)(first & 0x3F) << 8) | p[at + 1];
        *pos = at + 2;
        return 0;
    }
    if (kind == 3) {
        *out = first & 0x3F;
        *pos = at + 1;
        return 1;
    }
    int width = first == 0x80 ? 4 : first == 0x81 ? 8 : 0;
    if (width == 0 || at + 1 + width > end) return -1;
    uint64_t v = 0;
    for (int i = 0; i < width; i++) v = (v << 8) | p[at + 1 + i];
    *out = v;
    *pos = at + 1 + width;
    return 0;
}

/* One RDB string at p[*pos] (``Reader.string``) as a new bytes object; NULL without an
 * exception for anything ``Reader.string`` would refuse, NULL with one for a memory error. */
static PyObject *rdb_string(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end)
{
    Py_ssize_t at = *pos;
    uint64_t n;
    int special = rdb_len(p, &at, end, &n);
    if (special < 0) return NULL;
    if (!special) {
        if (n > (uint64_t)(end - at)) return NULL;
        *pos = at + (Py_ssize_t)n;
        return PyBytes_FromStringAndSize((const char *)p + at, (Py_ssize_t)n);
    }
    if (n <= 2) { /* int8, int16, int32, little-endian, as decimal text */
        int width = 1 << n;
        if (at + width > end) return NULL;
        uint64_t u = 0;
        for (int i = width - 1; i >= 0; i--) u = (u << 8) | p[at + i];
        if ((u >> (8 * width - 1)) & 1) u |= ~(uint64_t)0 << (8 * width);
        *pos = at + width;
        return int_text((int64_t)u);
    }
    if (n != 3) return NULL;
    uint64_t clen, length;
    if (rdb_len(p, &at, end, &clen) != 0 || rdb_len(p, &at, end, &length) != 0) return NULL;
    if (clen > (uint64_t)(end - at) || length == 0 || length > (uint64_t)PY_SSIZE_T_MAX / 2)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)length);
    if (out == NULL) return NULL;
    if (lzf_into(p + at, (Py_ssize_t)clen, (unsigned char *)PyBytes_AS_STRING(out),
                 (Py_ssize_t)length) != 0) {
        Py_DECREF(out);
        return NULL;
    }
    *pos = at + (Py_ssize_t)clen;
    return out;
}

/* ``strings(data, pos, n, end, scored) -> (list, pos)``: up to ``n`` RDB strings from
 * ``data[pos:end]`` (``Reader.string`` each), with ``scored`` each followed by a binary
 * double (``Reader.binary_double``, put in the list as a float after its string). It stops
 * before the first one it does not take (truncated, malformed, a NaN score) and returns the
 * position
 * there, so that the caller's ``Reader`` reads the rest and words the error. */
static PyObject *strings(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos, n, end;
    int scored;
    if (!PyArg_ParseTuple(args, "y*nnnp:strings", &view, &pos, &n, &end, &scored)) return NULL;
    if (end > view.len) end = view.len;
    if (pos < 0 || n < 0 || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "strings: bad position or count");
        return NULL;
    }
    const unsigned char *p = view.buf;
    PyObject *out = PyList_New(0);
    if (out == NULL) goto fail;
    for (Py_ssize_t got = 0; got < n; got++) {
        Py_ssize_t at = pos;
        PyObject *item = rdb_string(p, &at, end);
        if (item == NULL) {
            if (PyErr_Occurred()) goto fail;
            break;
        }
        if (scored) {
            if (at + 8 > end) {
                Py_DECREF(item);
                break;
            }
            uint64_t bits = 0;
            for (int i = 7; i >= 0; i--) bits = (bits << 8) | p[at + i];
            double score;
            memcpy(&score, &bits, 8);
            if (score != score) { /* (NaN: the caller refuses it, in the file's order) */
                Py_DECREF(item);
                break;
            }
            PyObject *number = PyFloat_FromDouble(score);
            if (number == NULL || PyList_Append(out, item) < 0 || PyList_Append(out, number) < 0) {
                Py_XDECREF(number);
                Py_DECREF(item);
                goto fail;
            }
            Py_DECREF(number);
            at += 8;
        } else if (PyList_Append(out, item) < 0) {
            Py_DECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        pos = at;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", out, pos);
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"strings", strings, METH_VARARGS, "A run of RDB strings (up to the first it refuses)."},
    {"lzf_decompress", lzf_decompress, METH_VARARGS, "LZF's decompression (None: refused)."},
    {"lzf_compress", lzf_compress, METH_VARARGS, "LZF's compression (None: no gain)."},
    {"encode", encode, METH_O, "A listpack of ints and bytes (None: look in Python)."},
    {"encode_mapping", encode_mapping, METH_O,
     "A listpack of a dict's keys and values (None: look in Python)."},
    {"stream_listpack", stream_listpack, METH_VARARGS,
     "A Headwater stream node's columns as Redis's listpack (None: look in Python)."},
    {"decode", decode, METH_VARARGS, "A listpack's elements (None: malformed)."},
    {"stream_node", stream_node, METH_VARARGS,
     "A Redis stream listpack as a Headwater node's columns (None: look in Python)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_listpack", "Listpacks decoded in one call.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__listpack(void)
{
    return PyModule_Create(&module);
}
