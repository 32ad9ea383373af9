/* The two bisections of a sorted set's chunks (structures/zsets.py), in C.
 *
 * A sorted set keeps each chunk's scores in an ``array('d')``. Python's ``bisect`` over such
 * an array makes a float object for every probe and compares it through the generic rich
 * comparison; a ZADD bisects twice or four times (the chunks' last scores, then one chunk's
 * scores, and members within a run of equal scores), and measured in process the bisections
 * were a quarter of a compiled ZADD. Here the probes read the doubles in place (the array's
 * buffer) and compare members as ``bytes`` compare (memcmp, then length).
 *
 * ``position(scores, members, score, member, right)``: how many elements of the columns sort
 * before (score, member), at or before it when ``right``: ``bisect_left`` of the scores, then,
 * in a run of equal scores, ``bisect_left``/``bisect_right`` of the members within the run.
 * ``score_position(scores, score, right)``: ``bisect_left``/``bisect_right`` of the scores.
 *
 * Both give exactly what structures/zsets.py's pure versions give (a NaN compares as
 * Python's floats do: never below, never above); without this module (the pure build) those
 * run. Nothing here decides a rule of Redis's order: the order is the Python module's. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* The doubles of an array('d') (a new buffer view the caller releases), or -1 with an error. */
static int doubles_of(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT) < 0) {
        return -1;
    }
    if (view->itemsize != (Py_ssize_t)sizeof(double) || view->format == NULL
        || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "the scores must be an array('d')");
        return -1;
    }
    return 0;
}

static Py_ssize_t bisect_doubles(const double *a, Py_ssize_t lo, Py_ssize_t hi, double x,
                                 int right)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + ((hi - lo) >> 1);
        if (right) {
            if (x < a[mid]) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        } else if (a[mid] < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* a < b for two objects (bytes compared in place), 1/0, or -1 with an error. */
static int less(PyObject *a, PyObject *b)
{
    if (PyBytes_CheckExact(a) && PyBytes_CheckExact(b)) {
        Py_ssize_t la = PyBytes_GET_SIZE(a), lb = PyBytes_GET_SIZE(b);
        int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)(la < lb ? la : lb));
        return c < 0 || (c == 0 && la < lb);
    }
    return PyObject_RichCompareBool(a, b, Py_LT);
}

/* bisect_left/bisect_right of x in list[lo:hi], or -1 with an error. */
static Py_ssize_t bisect_list(PyObject *list, Py_ssize_t lo, Py_ssize_t hi, PyObject *x,
                              int right)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + ((hi - lo) >> 1);
        PyObject *item = PyList_GET_ITEM(list, mid);
        int below;
        Py_INCREF(item);  /* (a generic comparison may run Python code) */
        below = right ? less(x, item) : less(item, x);
        Py_DECREF(item);
        if (below < 0) {
            return -1;
        }
        if (hi > PyList_GET_SIZE(list)) {  /* (the list shrank under a comparison) */
            PyErr_SetString(PyExc_RuntimeError, "the members changed during a bisection");
            return -1;
        }
        if (right ? below : !below) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

static PyObject *position(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t n, i, end;
    double score;
    int right;
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "position(scores, members, score, member, right)");
        return NULL;
    }
    if (!PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "the members must be a list");
        return NULL;
    }
    score = PyFloat_AsDouble(args[2]);
    if (score == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    right = PyObject_IsTrue(args[4]);
    if (right < 0 || doubles_of(args[0], &view) < 0) {
        return NULL;
    }
    n = view.len / (Py_ssize_t)sizeof(double);
    i = bisect_doubles((const double *)view.buf, 0, n, score, 0);
    end = i;
    if (i < n && ((const double *)view.buf)[i] == score) {  /* a run of this score */
        end = bisect_doubles((const double *)view.buf, i, n, score, 1);
    }
    PyBuffer_Release(&view);
    if (end > i) {
        if (end > PyList_GET_SIZE(args[1])) {
            PyErr_SetString(PyExc_ValueError, "fewer members than scores");
            return NULL;
        }
        i = bisect_list(args[1], i, end, args[3], right);
        if (i < 0) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

static PyObject *score_position(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t i;
    double score;
    int right;
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "score_position(scores, score, right)");
        return NULL;
    }
    score = PyFloat_AsDouble(args[1]);
    if (score == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    right = PyObject_IsTrue(args[2]);
    if (right < 0 || doubles_of(args[0], &view) < 0) {
        return NULL;
    }
    i = bisect_doubles((const double *)view.buf, 0, view.len / (Py_ssize_t)sizeof(double),
                       score, right);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"position", (PyCFunction)(void (*)(void))position, METH_FASTCALL,
     "Elements of the columns before (score, member) (at or before it when right)."},
    {"score_position", (PyCFunction)(void (*)(void))score_position, METH_FASTCALL,
     "bisect_left (bisect_right when right) of score in an array('d')."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "headwater.structures._zsearch", NULL, -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__zsearch(void)
{
    return PyModule_Create(&module);
}
