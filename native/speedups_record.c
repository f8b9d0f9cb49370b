/*
 * Record: key, value, headers, timestamp, offset. A C type so a read can
 * build millions of them per second. Immutable, and its fields are checked
 * to be bytes-like, str, int or None, so a Record can never be part of a
 * reference cycle: it needs no GC tracking, and allocating millions of them
 * triggers no collections.
 */
#include "speedups.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *key, *value, *headers, *timestamp, *offset;
} RecordObject;

static PyTypeObject RecordType;
PyObject *sp_empty_tuple; /* set at import, never released */

PyObject *sp_record_new(PyObject *key, PyObject *value, PyObject *headers, PyObject *timestamp,
                        PyObject *offset) {
    ls_assert(key != NULL && value != NULL && headers != NULL && timestamp != NULL && offset != NULL);
    RecordObject *self = PyObject_New(RecordObject, &RecordType);
    if (self == NULL) return NULL;
    self->key = key, self->value = value, self->headers = headers;
    self->timestamp = timestamp, self->offset = offset;
    return (PyObject *)self;
}

static int check_bytes_or_none(PyObject *v, const char *what) {
    if (v == Py_None || PyObject_CheckBuffer(v)) return 0;
    PyErr_Format(PyExc_TypeError, "Record %s must be bytes-like or None, not %.100s", what,
                 Py_TYPE(v)->tp_name);
    return -1;
}

/* Headers as a tuple of (str | bytes, bytes-like | None) pairs. */
static PyObject *headers_tuple_of(PyObject *headers) {
    PyObject *items = PySequence_Tuple(headers);
    if (items == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    PyObject *result = PyTuple_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *pair = PySequence_Tuple(PyTuple_GET_ITEM(items, i));
        if (pair != NULL && (PyTuple_GET_SIZE(pair) != 2 ||
                             !(PyUnicode_Check(PyTuple_GET_ITEM(pair, 0)) ||
                               PyBytes_Check(PyTuple_GET_ITEM(pair, 0))))) {
            Py_CLEAR(pair);
            PyErr_SetString(PyExc_TypeError, "Record headers must be (str, bytes | None) pairs");
        }
        if (pair == NULL || check_bytes_or_none(PyTuple_GET_ITEM(pair, 1), "header values") < 0) {
            Py_XDECREF(pair);
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, i, pair);
    }
    Py_DECREF(items);
    return result;
}

static PyObject *record_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"key", "value", "headers", "timestamp", "offset", NULL};
    PyObject *key = Py_None, *value = Py_None, *headers = sp_empty_tuple, *timestamp = Py_None;
    PyObject *offset = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOOO:Record", names, &key, &value, &headers,
                                     &timestamp, &offset))
        return NULL;
    if (check_bytes_or_none(key, "key") < 0 || check_bytes_or_none(value, "value") < 0) return NULL;
    if ((timestamp != Py_None && !PyLong_Check(timestamp)) || (offset && !PyLong_Check(offset))) {
        PyErr_SetString(PyExc_TypeError, "Record timestamp must be an int or None, and offset an int");
        return NULL;
    }
    PyObject *headers_tuple = headers == sp_empty_tuple ? Py_NewRef(headers) : headers_tuple_of(headers);
    if (headers_tuple == NULL) return NULL;
    PyObject *offset_obj = offset ? Py_NewRef(offset) : PyLong_FromLong(-1);
    if (offset_obj == NULL) {
        Py_DECREF(headers_tuple);
        return NULL;
    }
    PyObject *r = sp_record_new(Py_NewRef(key), Py_NewRef(value), headers_tuple, Py_NewRef(timestamp),
                                offset_obj);
    if (r == NULL) {
        Py_DECREF(key), Py_DECREF(value), Py_DECREF(headers_tuple);
        Py_DECREF(timestamp), Py_DECREF(offset_obj);
    }
    return r;
}

static void record_dealloc(RecordObject *self) {
    Py_CLEAR(self->key);
    Py_CLEAR(self->value);
    Py_CLEAR(self->headers);
    Py_CLEAR(self->timestamp);
    Py_CLEAR(self->offset);
    PyObject_Free(self);
}

static PyObject *record_fields(RecordObject *self) {
    return PyTuple_Pack(5, self->offset, self->timestamp, self->key, self->value, self->headers);
}

static PyObject *record_richcompare(PyObject *a, PyObject *b, int op) {
    if (!PyObject_TypeCheck(b, &RecordType) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
    PyObject *fa = record_fields((RecordObject *)a), *fb = record_fields((RecordObject *)b);
    PyObject *result = NULL;
    if (fa != NULL && fb != NULL) result = PyObject_RichCompare(fa, fb, op);
    Py_XDECREF(fa);
    Py_XDECREF(fb);
    return result;
}

static Py_hash_t record_hash(RecordObject *self) {
    PyObject *fields = record_fields(self);
    if (fields == NULL) return -1;
    Py_hash_t h = PyObject_Hash(fields);
    Py_DECREF(fields);
    return h;
}

static PyObject *record_repr(RecordObject *self) {
    return PyUnicode_FromFormat("Record(offset=%R, timestamp=%R, key=%R, value=%R, headers=%R)",
                                self->offset, self->timestamp, self->key, self->value, self->headers);
}

static PyObject *record_reduce(RecordObject *self, PyObject *unused) {
    return Py_BuildValue("(O(OOOOO))", (PyObject *)&RecordType, self->key, self->value,
                         self->headers, self->timestamp, self->offset);
}

static PyMethodDef record_methods[] = {
    {"__reduce__", (PyCFunction)record_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef record_members[] = {
    {"key", T_OBJECT, offsetof(RecordObject, key), READONLY, "bytes or None"},
    {"value", T_OBJECT, offsetof(RecordObject, value), READONLY, "bytes or None"},
    {"headers", T_OBJECT, offsetof(RecordObject, headers), READONLY, "tuple of (str, bytes | None)"},
    {"timestamp", T_OBJECT, offsetof(RecordObject, timestamp), READONLY, "ms since the epoch, or None"},
    {"offset", T_OBJECT, offsetof(RecordObject, offset), READONLY, "the record's offset; -1 until stored"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RecordType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logstore.records.Record",
    .tp_basicsize = sizeof(RecordObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Record(key=None, value=None, headers=(), timestamp=None, offset=-1)\n\n"
              "A record of a v2 batch: key and value are bytes or None; headers a tuple of\n"
              "(str, bytes | None) pairs; timestamp in ms (None: the batch's time); offset\n"
              "-1 until stored. Immutable.",
    .tp_new = record_tp_new,
    .tp_dealloc = (destructor)record_dealloc,
    .tp_richcompare = record_richcompare,
    .tp_hash = (hashfunc)record_hash,
    .tp_repr = (reprfunc)record_repr,
    .tp_members = record_members,
    .tp_methods = record_methods,
};

int sp_record_install(PyObject *module) {
    sp_empty_tuple = PyTuple_New(0);
    if (sp_empty_tuple == NULL) return -1;
    return PyModule_AddType(module, &RecordType);
}
