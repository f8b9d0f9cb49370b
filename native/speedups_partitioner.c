/*
 * Kafka's key partitioning: murmur2(key) -> int, partition_for_key(key, n)
 * -> int, partition_for_keys(keys, n) -> list[int].
 * murmur2 is the Java client's Utils.murmur2 (MurmurHash2, seed 0x9747b28c,
 * little-endian words) and librdkafka's rd_murmur2; a key's partition is
 * (murmur2(key) & 0x7fffffff) % n, Java's toPositive then modulo, so keyed
 * records land where the Java client and librdkafka put them.
 *
 * murmur2: ls_murmur2 in ls_core.h, shared with the Arrow partitioner; the
 * modulo: sp_partition_of in speedups.h, shared with FastProduce.
 */
#include "speedups.h"

/* Java's int from the hash's bits; spelled out because converting an
 * out-of-range uint32_t to int32_t is implementation-defined in C. */
static inline long long java_int(uint32_t h) {
    return (long long)h - (h & 0x80000000u ? 0x100000000LL : 0);
}

/* The partition count as Kafka has it: an int32 of at least 1. Anything
 * with __index__ is an int here (numpy ints); bool is refused as a likely
 * mix-up of arguments. */
static int arg_num_partitions(PyObject *arg, int32_t *out) {
    if (PyBool_Check(arg) || !PyIndex_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "num_partitions must be an int, not %.100s", Py_TYPE(arg)->tp_name);
        return -1;
    }
    PyObject *index = PyNumber_Index(arg);
    if (index == NULL) return -1;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (overflow != 0 || n <= 0 || n > INT32_MAX) {
        sp_raise_error(SP_ERR_NUM_PARTITIONS, "num_partitions must be between 1 and %d, got %R", INT32_MAX,
                       arg);
        return -1;
    }
    *out = (int32_t)n;
    return 0;
}

/* Hashes a bytes-like key; -1 with an error set. bytes, the common case,
 * skip the buffer protocol: a 10-byte key's partition_for_key takes 29 ns
 * as bytes, 32 ns as a bytearray. inline: GCC inlined it into its three
 * callers when they were part of one 2,000-line file, and stops doing so in
 * this small one without the hint (partition_for_keys: 6.7 vs 6.3 ns a key). */
static inline int key_hash(PyObject *key, uint32_t *out) {
    if (PyBytes_Check(key)) {
        *out = ls_murmur2((const uint8_t *)PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key));
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "key must be a contiguous bytes-like object, not %.100s",
                     Py_TYPE(key)->tp_name);
        return -1;
    }
    *out = ls_murmur2(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return 0;
}

/* murmur2(data) -> int: Kafka's Utils.murmur2, a signed 32-bit int. */
static PyObject *murmur2(PyObject *self, PyObject *data) {
    uint32_t h;
    if (key_hash(data, &h) < 0) return NULL;
    return PyLong_FromLongLong(java_int(h));
}

/* partition_for_key(key, num_partitions) -> int in [0, num_partitions). */
static PyObject *partition_for_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "partition_for_key(key, num_partitions) takes 2 arguments, got %zd", nargs);
        return NULL;
    }
    int32_t n;
    uint32_t h;
    if (arg_num_partitions(args[1], &n) < 0 || key_hash(args[0], &h) < 0) return NULL;
    return PyLong_FromLong(sp_partition_of(h, n));
}

/* partition_for_keys(keys, num_partitions) -> list[int]
 * One partition per key, -1 for a None key: keyless records are the
 * sticky partitioner's, which the caller decides. One call for a whole
 * produce_batch instead of one per record. */
static PyObject *partition_for_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "partition_for_keys(keys, num_partitions) takes 2 arguments, got %zd", nargs);
        return NULL;
    }
    int32_t n;
    if (arg_num_partitions(args[1], &n) < 0) return NULL;
    /* A tuple (a list is copied, a tuple is shared): getting a key's buffer
     * can run Python code (__buffer__), which must not resize what we walk. */
    PyObject *seq = PySequence_Tuple(args[0]);
    if (seq == NULL) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(seq);
    PyObject *result = PyList_New(count);
    for (Py_ssize_t i = 0; result != NULL && i < count; i++) {
        PyObject *key = PyTuple_GET_ITEM(seq, i);
        uint32_t h = 0;
        if (key != Py_None && key_hash(key, &h) < 0) {
            Py_CLEAR(result);
            break;
        }
        long p = key == Py_None ? -1 : sp_partition_of(h, n);
        ls_assert(p >= -1 && p < n);
        PyObject *item = PyLong_FromLong(p);
        if (item == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, item);
    }
    Py_DECREF(seq);
    return result;
}

static PyMethodDef partitioner_methods[] = {
    {"murmur2", murmur2, METH_O, "murmur2(data) -> int: Kafka's Utils.murmur2 (signed 32-bit)"},
    {"partition_for_key", (PyCFunction)(void (*)(void))partition_for_key, METH_FASTCALL,
     "partition_for_key(key, num_partitions) -> int: (murmur2(key) & 0x7fffffff) % num_partitions"},
    {"partition_for_keys", (PyCFunction)(void (*)(void))partition_for_keys, METH_FASTCALL,
     "partition_for_keys(keys, num_partitions) -> list[int]: partition_for_key per key, -1 for None"},
    {NULL, NULL, 0, NULL},
};

int sp_partitioner_install(PyObject *module) {
    return PyModule_AddFunctions(module, partitioner_methods);
}
