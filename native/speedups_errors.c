/*
 * Errors: every failure this module reports itself has a code in one table,
 * with the class of logstore.errors it raises and a hint saying what to do
 * (as py-lmdb maps MDB_* codes onto its Error classes). sp_raise_error
 * formats "message; hint". The classes are looked up by name once, at
 * import, from logstore.errors (which imports nothing, so there is no
 * cycle); the table is _speedups.ERRORS, code -> (name, class, hint), and
 * each code is ERR_<name>. The codes, sp_error_t, are in speedups.h.
 *
 * Wrong argument types stay TypeErrors, and PyArg_Parse's own errors (an int
 * out of its C range: OverflowError) stay as Python raises them.
 */
#include "speedups.h"

static const struct sp_error_info {
    const char *name;       /* ERR_<name> in the module */
    const char *class_name; /* a class of logstore.errors */
    const char *hint;
} sp_errors[SP_ERR_END_] = {
    [SP_ERR_BATCH_CORRUPT] = {"BATCH_CORRUPT", "RecordDecodeError",
                              "the batch is not served: restart to recover the log (it is truncated "
                              "there), or restore the segment from a replica"},
    [SP_ERR_RECORD_MALFORMED] = {"RECORD_MALFORMED", "RecordDecodeError",
                                 "the batch is corrupt and must not be served: have its producer send "
                                 "it again, or let log recovery truncate the log at it"},
    [SP_ERR_RECORD_COUNT] = {"RECORD_COUNT", "RecordDecodeError",
                             "pass the batch header's record count (if that was passed, the batch is "
                             "corrupt or cut short: have it sent again)"},
    [SP_ERR_TRAILING_BYTES] = {"TRAILING_BYTES", "RecordDecodeError",
                               "pass the batch header's record count (if that was passed, the batch holds "
                               "more records than it counts: it is corrupt)"},
    [SP_ERR_HEADER_NAME] = {"HEADER_NAME", "RecordDecodeError",
                            "Kafka header names are UTF-8 strings: fix the producer that wrote these "
                            "bytes (the batch is not served)"},
    [SP_ERR_NUM_PARTITIONS] = {"NUM_PARTITIONS", "InvalidArgumentError",
                               "pass the topic's partition count, from its metadata"},
    [SP_ERR_POSITION] = {"POSITION", "InvalidArgumentError",
                         "start at 0, or at the position the previous call returned"},
    [SP_ERR_INDEX_COUNT] = {"INDEX_COUNT", "InvalidArgumentError",
                            "pass the index's entry count, at most len(index) // 8"},
    [SP_ERR_BATCH_FIELDS] = {"BATCH_FIELDS", "InvalidArgumentError",
                             "build batches with logstore.records.build_batch, which checks every field "
                             "and compresses"},
    [SP_ERR_MAPPED_READ] = {"MAPPED_READ", "MappedReadError",
                            "a page of the mapped segment or index could not be read in: check the disk "
                            "(dmesg), then restart the broker to try its log directory again"},
};

static PyObject *sp_error_classes[SP_ERR_END_]; /* set at import, never released */
PyObject *sp_corrupt_record_error;            /* set at import, never released */

/* Raises the class of code with "message; hint"; returns NULL to return. */
PyObject *sp_raise_error(sp_error_t code, const char *format, ...) {
    ls_assert(code > 0 && code < SP_ERR_END_ && sp_error_classes[code] != NULL);
    va_list va;
    va_start(va, format);
    PyObject *message = PyUnicode_FromFormatV(format, va);
    va_end(va);
    if (message != NULL) {
        PyErr_Format(sp_error_classes[code], "%U; %s", message, sp_errors[code].hint);
        Py_DECREF(message);
    }
    return NULL;
}

/* Looks up the table's classes and adds ERRORS and the ERR_* codes to module. */
int sp_errors_install(PyObject *module) {
    PyObject *errors = PyImport_ImportModule("logstore.errors");
    if (errors == NULL) return -1;
    PyObject *table = PyDict_New();
    int rc = table != NULL ? 0 : -1;
    sp_corrupt_record_error = rc == 0 ? PyObject_GetAttrString(errors, "CorruptRecordError") : NULL;
    if (sp_corrupt_record_error == NULL) rc = -1;
    for (int code = 1; rc == 0 && code < SP_ERR_END_; code++) {
        const struct sp_error_info *e = &sp_errors[code];
        char constant[64];
        PyObject *cls = PyObject_GetAttrString(errors, e->class_name);
        if (cls != NULL && !PyExceptionClass_Check(cls)) {
            PyErr_Format(PyExc_ImportError, "logstore.errors.%s is not an exception class", e->class_name);
            Py_CLEAR(cls);
        }
        PyObject *key = cls ? PyLong_FromLong(code) : NULL;
        PyObject *entry = key ? Py_BuildValue("(sOs)", e->name, cls, e->hint) : NULL;
        snprintf(constant, sizeof constant, "ERR_%s", e->name);
        if (entry == NULL || PyDict_SetItem(table, key, entry) < 0 ||
            PyModule_AddIntConstant(module, constant, code) < 0) {
            Py_XDECREF(cls);
            rc = -1;
        } else {
            sp_error_classes[code] = cls; /* keeps the reference */
        }
        Py_XDECREF(key);
        Py_XDECREF(entry);
    }
    if (rc == 0 && PyModule_AddObjectRef(module, "ERRORS", table) < 0) rc = -1;
    Py_XDECREF(table);
    Py_DECREF(errors);
    return rc;
}
