/* Redis's CRC-64 (rdb/crc64.py: the Jones polynomial, reflected, initial value 0, no final
 * xor) in C, for the long inputs: an RDB file's checksum covers the whole file, and the
 * mypyc-compiled Python loop makes a Python integer of every 64-bit step (~10 MB/s; a 5M-element
 * RDB file is ~70 MB). Here slicing-by-8: eight 256-entry tables built at import from the
 * polynomial, eight bytes per step, the GIL released for long inputs. Without this module (the
 * pure build) crc64.py's loop runs; both give the same values (tests/unit/test_rdb_codec.py).
 *
 * ``crc64(data, crc=0)``: the checksum of a bytes-like object, continuing from ``crc``. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define POLY UINT64_C(0x95AC9329AC4BC9B5) /* 0xAD93D23594C935A9, bit-reflected */
/* inputs at least this long are checksummed without the GIL */
#define RELEASE_GIL_BYTES 65536

static uint64_t table[8][256];

static void build_tables(void)
{
    for (int byte = 0; byte < 256; byte++) {
        uint64_t crc = (uint64_t)byte;
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 1) ? (crc >> 1) ^ POLY : crc >> 1;
        }
        table[0][byte] = crc;
    }
    for (int k = 1; k < 8; k++) {
        for (int i = 0; i < 256; i++) {
            uint64_t prev = table[k - 1][i];
            table[k][i] = (prev >> 8) ^ table[0][prev & 0xFF];
        }
    }
}

static uint64_t checksum(uint64_t crc, const unsigned char *p, Py_ssize_t n)
{
    while (n >= 8) {
        uint64_t word = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16
                        | (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40
                        | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
        crc ^= word;
        crc = table[7][crc & 0xFF] ^ table[6][(crc >> 8) & 0xFF]
              ^ table[5][(crc >> 16) & 0xFF] ^ table[4][(crc >> 24) & 0xFF]
              ^ table[3][(crc >> 32) & 0xFF] ^ table[2][(crc >> 40) & 0xFF]
              ^ table[1][(crc >> 48) & 0xFF] ^ table[0][crc >> 56];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    }
    return crc;
}

static PyObject *crc64(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned long long start = 0;
    if (!PyArg_ParseTuple(args, "y*|K:crc64", &view, &start)) {
        return NULL;
    }
    uint64_t crc = (uint64_t)start;
    if (view.len >= RELEASE_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        crc = checksum(crc, (const unsigned char *)view.buf, view.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = checksum(crc, (const unsigned char *)view.buf, view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong((unsigned long long)crc);
}

static PyMethodDef methods[] = {
    {"crc64", crc64, METH_VARARGS, "crc64(data, crc=0): Redis's CRC-64 of data, from crc."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater.rdb._crc64", "Redis's CRC-64, slicing-by-8.", -1, methods,
};

PyMODINIT_FUNC PyInit__crc64(void)
{
    build_tables();
    return PyModule_Create(&module);
}
