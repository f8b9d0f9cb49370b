/*
 * logstore._speedups: the Python-object side of the boundary.
 *
 * The core's API is flat (pointers, lengths, ints) and reached through cffi.
 * Crossing it from a Python list costs a conversion per element (about 40 ns
 * here), which alone caps batch encoding below 10M records/s. This module
 * walks the list itself under the GIL, then calls the same core functions.
 * It holds no state and owns no memory beyond the objects it returns.
 *
 * One extension, a file per part (speedups.h says what they share):
 *   speedups_errors.c       the error table: ERRORS, ERR_*, sp_raise_error
 *   speedups_record.c       Record
 *   speedups_message.c      Message
 *   speedups_decode.c       decode_records, decode_messages, decode_fetch_batches
 *   speedups_lookup.c       record_at, locate
 *   speedups_encode.c       encode_plain
 *   speedups_partitioner.c  murmur2, partition_for_key, partition_for_keys
 *   speedups_lock.c         Lock
 *   speedups_accumulator.c  the producer's fast path: AccumulatorCore,
 *                           TopicStateCore, ProducerBatchCore, FastProduce
 * Each adds its names to the module in its sp_*_install.
 */
#include "speedups.h"

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "logstore._speedups",
    "Python-object helpers of the native core (see native/speedups_module.c).", -1, NULL,
    NULL, NULL, NULL, NULL,
};

/* Each readies its part's types and adds its names; none needs another's
 * names at import (they meet only when called). */
static int (*const speedups_installs[])(PyObject *module) = {
    sp_errors_install, sp_record_install,      sp_message_install, sp_decode_install,      sp_lookup_install,
    sp_encode_install, sp_partitioner_install, sp_lock_install,    sp_accumulator_install,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) return NULL;
    /* Lookups read memory-mapped segments: a bad block is an error, not a SIGBUS (guard.c). */
    if (ls_guard_install() != LS_OK) {
        PyErr_SetString(PyExc_ImportError, "logstore._speedups could not install its SIGBUS guard");
        Py_DECREF(module);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(speedups_installs) / sizeof(speedups_installs[0]); i++) {
        if (speedups_installs[i](module) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    return module;
}
