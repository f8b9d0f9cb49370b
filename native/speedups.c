/*
 * logstore._speedups: the Python-object side of the boundary.
 *
 * The core's API is flat (pointers, lengths, ints) and reached through cffi.
 * Crossing it from a Python list costs a conversion per element (about 40 ns
 * here), which alone caps batch encoding below 10M records/s. This module
 * walks the list itself under the GIL, then calls the same core functions.
 * It holds no state and owns no memory beyond the objects it returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_core.h"

/* Body size of a plain-value record: no key, no headers, same timestamp. */
static inline int64_t plain_body_size(int32_t index, Py_ssize_t value_len) {
    return 1 + 1 /* timestamp delta 0 */ + varint_size(index) + 1 /* null key */ +
           varint_size(value_len) + value_len + 1 /* no headers */;
}

/* First pass: the size of the records section, or -1 if an item is not bytes. */
static int64_t plain_section_size(PyObject *seq, Py_ssize_t count) {
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int64_t size = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyBytes_CheckExact(items[i])) return -1;
        Py_ssize_t n = PyBytes_GET_SIZE(items[i]);
        if (n > INT32_MAX / 2) return -1;
        int64_t body = plain_body_size((int32_t)i, n);
        size += varint_size(body) + body;
    }
    return size;
}

static void plain_section_write(PyObject *seq, Py_ssize_t count, uint8_t *out, int64_t size) {
    PyObject **items = PySequence_Fast_ITEMS(seq);
    uint8_t *p = out;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t n = PyBytes_GET_SIZE(items[i]);
        int64_t body = plain_body_size((int32_t)i, n);
        ls_assert(p + varint_size(body) + body <= out + size);
        p = varint_write(p, body);
        *p++ = 0; /* attributes */
        *p++ = 0; /* timestamp delta 0 */
        p = varint_write(p, (int64_t)i);
        *p++ = 1; /* key length -1 (zigzag) */
        p = varint_write(p, n);
        memcpy(p, PyBytes_AS_STRING(items[i]), (size_t)n);
        p += n;
        *p++ = 0; /* header count */
    }
    ls_assert(p == out + size);
}

/* encode_plain(values: list|tuple of bytes, base_offset, timestamp,
 *              producer_id, producer_epoch, base_sequence,
 *              partition_leader_epoch, attributes) -> bytes | None
 * A whole uncompressed batch, or None when some value is not bytes. */
static PyObject *encode_plain(PyObject *self, PyObject *args) {
    PyObject *values;
    long long base_offset, timestamp, producer_id;
    int producer_epoch, base_sequence, leader_epoch, attributes;
    if (!PyArg_ParseTuple(args, "OLLLiiii", &values, &base_offset, &timestamp, &producer_id,
                          &producer_epoch, &base_sequence, &leader_epoch, &attributes))
        return NULL;
    if (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)) Py_RETURN_NONE;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(values);
    if (count <= 0 || count > INT32_MAX) Py_RETURN_NONE;
    int64_t section = plain_section_size(values, count);
    if (section < 0 || section > LS_BATCH_SIZE_LIMIT - LS_BATCH_HEADER_SIZE) Py_RETURN_NONE;
    int64_t size = LS_BATCH_HEADER_SIZE + section;
    PyObject *batch = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (batch == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(batch);
    plain_section_write(values, count, out + LS_BATCH_HEADER_SIZE, section);
    int rc = ls_batch_seal(out, size, base_offset, leader_epoch, (int16_t)attributes,
                           (int32_t)(count - 1), timestamp, timestamp, producer_id,
                           (int16_t)producer_epoch, base_sequence, (int32_t)count);
    if (rc != LS_OK) {
        Py_DECREF(batch);
        PyErr_Format(PyExc_ValueError, "sealing the batch failed (%d): check its header fields", rc);
        return NULL;
    }
    return batch;
}

static PyMethodDef speedups_methods[] = {
    {"encode_plain", encode_plain, METH_VARARGS,
     "encode_plain(values, base_offset, timestamp, producer_id, producer_epoch, base_sequence, "
     "partition_leader_epoch, attributes) -> bytes | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "logstore._speedups",
    "Python-object helpers of the native core (see native/speedups.c).", -1, speedups_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&speedups_module); }
