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
#include <structmember.h>

#include <math.h>

#include "ls_core.h"

/* ---------------------------------------------------------------------------
 * Errors: every failure this module reports itself has a code in one table,
 * with the class of logstore.errors it raises and a hint saying what to do
 * (as py-lmdb maps MDB_* codes onto its Error classes). raise_error formats
 * "message; hint". The classes are looked up by name once, at import, from
 * logstore.errors (which imports nothing, so there is no cycle); the table is
 * _speedups.ERRORS, code -> (name, class, hint), and each code is ERR_<name>.
 *
 * Wrong argument types stay TypeErrors, and PyArg_Parse's own errors (an int
 * out of its C range: OverflowError) stay as Python raises them.
 */
typedef enum {
    SP_ERR_BATCH_CORRUPT = 1,
    SP_ERR_RECORD_MALFORMED,
    SP_ERR_RECORD_COUNT,
    SP_ERR_TRAILING_BYTES,
    SP_ERR_HEADER_NAME,
    SP_ERR_NUM_PARTITIONS,
    SP_ERR_POSITION,
    SP_ERR_INDEX_COUNT,
    SP_ERR_BATCH_FIELDS,
    SP_ERR_END_ /* one past the last code */
} sp_error_t;

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
};

static PyObject *sp_error_classes[SP_ERR_END_]; /* set at import, never released */
static PyObject *corrupt_record_error;         /* logstore.errors.CorruptRecordError */

/* Raises the class of code with "message; hint"; returns NULL to return. */
static PyObject *raise_error(sp_error_t code, const char *format, ...) {
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
static int errors_install(PyObject *module) {
    PyObject *errors = PyImport_ImportModule("logstore.errors");
    if (errors == NULL) return -1;
    PyObject *table = PyDict_New();
    int rc = table != NULL ? 0 : -1;
    corrupt_record_error = rc == 0 ? PyObject_GetAttrString(errors, "CorruptRecordError") : NULL;
    if (corrupt_record_error == NULL) rc = -1;
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

/* ---------------------------------------------------------------------------
 * Record: key, value, headers, timestamp, offset. A C type so a read can
 * build millions of them per second. Immutable, and its fields are checked
 * to be bytes-like, str, int or None, so a Record can never be part of a
 * reference cycle: it needs no GC tracking, and allocating millions of them
 * triggers no collections.
 */
typedef struct {
    PyObject_HEAD
    PyObject *key, *value, *headers, *timestamp, *offset;
} RecordObject;

static PyTypeObject RecordType;
static PyObject *empty_tuple;

static PyObject *record_new_fields(PyObject *key, PyObject *value, PyObject *headers,
                                   PyObject *timestamp, PyObject *offset) {
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
    PyObject *key = Py_None, *value = Py_None, *headers = empty_tuple, *timestamp = Py_None;
    PyObject *offset = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOOO:Record", names, &key, &value, &headers,
                                     &timestamp, &offset))
        return NULL;
    if (check_bytes_or_none(key, "key") < 0 || check_bytes_or_none(value, "value") < 0) return NULL;
    if ((timestamp != Py_None && !PyLong_Check(timestamp)) || (offset && !PyLong_Check(offset))) {
        PyErr_SetString(PyExc_TypeError, "Record timestamp must be an int or None, and offset an int");
        return NULL;
    }
    PyObject *headers_tuple = headers == empty_tuple ? Py_NewRef(headers) : headers_tuple_of(headers);
    if (headers_tuple == NULL) return NULL;
    PyObject *offset_obj = offset ? Py_NewRef(offset) : PyLong_FromLong(-1);
    if (offset_obj == NULL) {
        Py_DECREF(headers_tuple);
        return NULL;
    }
    PyObject *r = record_new_fields(Py_NewRef(key), Py_NewRef(value), headers_tuple,
                                    Py_NewRef(timestamp), offset_obj);
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

/* ---------------------------------------------------------------------------
 * Message: one consumed record (or delivery report) with confluent-kafka's
 * accessors. Built in C by decode_messages / decode_fetch_batches, so a fetch
 * turns into a list of these with no per-record Python.
 *
 * Offsets, partition and timestamp are C ints: a decoded record allocates a
 * Message and its key and value, nothing else (timestamp() builds its tuple
 * when asked). Keys and values may become any object (set_value after
 * deserialization), so the type supports GC; but a Message only holding
 * atoms (str, bytes, None) cannot be part of a cycle, so it is tracked only
 * once it holds something that can (a headers list, a KafkaError, a
 * deserialized dict): a fetch of plain records adds nothing for the
 * collector to traverse.
 */
typedef struct {
    PyObject_HEAD
    PyObject *topic, *key, *value, *headers, *error; /* NULL reads as None */
    int64_t offset, timestamp;
    double latency;
    int32_t partition, timestamp_type;
    int has_latency;
} MessageObject;

static PyTypeObject MessageType;

static PyObject *none_if_null(PyObject *o) {
    return Py_NewRef(o != NULL ? o : Py_None);
}

/* Tracks the message once a field may close a reference cycle. */
static void message_maybe_track(MessageObject *m) {
    if (PyObject_GC_IsTracked((PyObject *)m)) return;
    PyObject *fields[] = {m->topic, m->key, m->value, m->headers, m->error};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i] != NULL && PyObject_IS_GC(fields[i])) {
            PyObject_GC_Track((PyObject *)m);
            return;
        }
    }
}

/* A message from owned references (stolen, also on failure); untracked. */
static MessageObject *message_alloc(PyObject *topic, PyObject *key, PyObject *value,
                                    PyObject *headers, PyObject *error) {
    MessageObject *m = PyObject_GC_New(MessageObject, &MessageType);
    if (m == NULL) {
        Py_XDECREF(topic), Py_XDECREF(key), Py_XDECREF(value), Py_XDECREF(headers), Py_XDECREF(error);
        return NULL;
    }
    m->topic = topic, m->key = key, m->value = value, m->headers = headers, m->error = error;
    m->offset = 0, m->timestamp = 0, m->latency = 0.0;
    m->partition = 0, m->timestamp_type = 0, m->has_latency = 0;
    return m;
}

static PyObject *message_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"topic", "partition", "offset", "key", "value", "timestamp",
                            "headers", "error", "latency", NULL};
    PyObject *topic, *key, *value, *headers = Py_None, *error = Py_None, *latency = Py_None;
    int partition, timestamp_type = 0;
    long long offset, timestamp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiLOO|(iL)OOO:Message", names, &topic, &partition,
                                     &offset, &key, &value, &timestamp_type, &timestamp, &headers,
                                     &error, &latency))
        return NULL;
    double seconds = latency == Py_None ? 0.0 : PyFloat_AsDouble(latency);
    if (seconds == -1.0 && PyErr_Occurred()) return NULL;
    MessageObject *m = message_alloc(Py_NewRef(topic), Py_NewRef(key), Py_NewRef(value),
                                     headers == Py_None ? NULL : Py_NewRef(headers),
                                     error == Py_None ? NULL : Py_NewRef(error));
    if (m == NULL) return NULL;
    m->partition = partition, m->offset = offset;
    m->timestamp_type = timestamp_type, m->timestamp = timestamp;
    m->latency = seconds, m->has_latency = latency != Py_None;
    message_maybe_track(m);
    return (PyObject *)m;
}

static int message_traverse(MessageObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->topic);
    Py_VISIT(self->key);
    Py_VISIT(self->value);
    Py_VISIT(self->headers);
    Py_VISIT(self->error);
    return 0;
}

static int message_clear(MessageObject *self) {
    Py_CLEAR(self->topic);
    Py_CLEAR(self->key);
    Py_CLEAR(self->value);
    Py_CLEAR(self->headers);
    Py_CLEAR(self->error);
    return 0;
}

static void message_dealloc(MessageObject *self) {
    PyObject_GC_UnTrack(self); /* a no-op when it never was tracked */
    message_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *message_topic(MessageObject *self, PyObject *unused) { return none_if_null(self->topic); }
static PyObject *message_key(MessageObject *self, PyObject *unused) { return none_if_null(self->key); }
static PyObject *message_value(MessageObject *self, PyObject *unused) { return none_if_null(self->value); }
static PyObject *message_headers(MessageObject *self, PyObject *unused) { return none_if_null(self->headers); }
static PyObject *message_error(MessageObject *self, PyObject *unused) { return none_if_null(self->error); }

static PyObject *message_partition(MessageObject *self, PyObject *unused) {
    return PyLong_FromLong(self->partition);
}

static PyObject *message_offset(MessageObject *self, PyObject *unused) {
    return PyLong_FromLongLong(self->offset);
}

static PyObject *message_timestamp(MessageObject *self, PyObject *unused) {
    PyObject *type = PyLong_FromLong(self->timestamp_type);
    PyObject *ms = type ? PyLong_FromLongLong(self->timestamp) : NULL;
    PyObject *pair = ms ? PyTuple_Pack(2, type, ms) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(ms);
    return pair;
}

static PyObject *message_latency(MessageObject *self, PyObject *unused) {
    if (!self->has_latency) Py_RETURN_NONE;
    return PyFloat_FromDouble(self->latency);
}

static Py_ssize_t message_length(MessageObject *self) {
    if (self->value == NULL || self->value == Py_None) return 0;
    return PyObject_Length(self->value);
}

static PyObject *message_len(MessageObject *self, PyObject *unused) {
    Py_ssize_t n = message_length(self);
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

/* The setters store what they are given, as the Python class did; None
 * headers read back as None either way. */
static PyObject *message_set(MessageObject *self, PyObject **field, PyObject *value) {
    Py_XSETREF(*field, Py_NewRef(value));
    message_maybe_track(self);
    Py_RETURN_NONE;
}

static PyObject *message_set_value(MessageObject *self, PyObject *value) {
    return message_set(self, &self->value, value);
}

static PyObject *message_set_key(MessageObject *self, PyObject *key) {
    return message_set(self, &self->key, key);
}

static PyObject *message_set_headers(MessageObject *self, PyObject *headers) {
    return message_set(self, &self->headers, headers);
}

static PyObject *message_repr(MessageObject *self) {
    PyObject *none = Py_None;
    return PyUnicode_FromFormat("Message(topic=%R, partition=%d, offset=%lld, key=%R, value=%R, error=%S)",
                                self->topic ? self->topic : none, (int)self->partition,
                                (long long)self->offset, self->key ? self->key : none,
                                self->value ? self->value : none, self->error ? self->error : none);
}

static PyObject *message_reduce(MessageObject *self, PyObject *unused) {
    PyObject *timestamp = message_timestamp(self, NULL);
    PyObject *latency = timestamp ? message_latency(self, NULL) : NULL;
    PyObject *result = NULL;
    if (latency != NULL) {
        PyObject *none = Py_None;
        result = Py_BuildValue("(O(OiLOOOOOO))", (PyObject *)&MessageType,
                               self->topic ? self->topic : none, (int)self->partition,
                               (long long)self->offset, self->key ? self->key : none,
                               self->value ? self->value : none, timestamp,
                               self->headers ? self->headers : none,
                               self->error ? self->error : none, latency);
    }
    Py_XDECREF(timestamp);
    Py_XDECREF(latency);
    return result;
}

#define MESSAGE_GETTER(name, doc) {#name, (PyCFunction)message_##name, METH_NOARGS, doc}

static PyMethodDef message_methods[] = {
    MESSAGE_GETTER(topic, "topic() -> str | None"),
    MESSAGE_GETTER(partition, "partition() -> int"),
    MESSAGE_GETTER(offset, "offset() -> int"),
    MESSAGE_GETTER(key, "key() -> bytes | None (or what set_key stored)"),
    MESSAGE_GETTER(value, "value() -> bytes | None (or what set_value stored)"),
    MESSAGE_GETTER(timestamp, "timestamp() -> (type, ms): type 0 none, 1 create time, 2 log append time"),
    MESSAGE_GETTER(headers, "headers() -> list of (str, bytes | None), or None when there are none"),
    MESSAGE_GETTER(error, "error() -> KafkaError | None"),
    MESSAGE_GETTER(latency, "latency() -> float seconds (delivery reports), or None"),
    MESSAGE_GETTER(len, "len() -> int: len(value), 0 for None"),
    {"set_value", (PyCFunction)message_set_value, METH_O, "set_value(value) -> None"},
    {"set_key", (PyCFunction)message_set_key, METH_O, "set_key(key) -> None"},
    {"set_headers", (PyCFunction)message_set_headers, METH_O, "set_headers(headers) -> None"},
    {"__reduce__", (PyCFunction)message_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods message_as_sequence = {.sq_length = (lenfunc)message_length};

static PyTypeObject MessageType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logstore.client.types.Message",
    .tp_basicsize = sizeof(MessageObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Message(topic, partition, offset, key, value, timestamp=(0, 0), headers=None,\n"
              "        error=None, latency=None)\n\n"
              "A consumed record or a delivery report, with confluent-kafka's accessors:\n"
              "topic() partition() offset() key() value() timestamp() headers() error()\n"
              "latency() len(), and set_value/set_key/set_headers. Not subclassable.",
    .tp_new = message_tp_new,
    .tp_dealloc = (destructor)message_dealloc,
    .tp_traverse = (traverseproc)message_traverse,
    .tp_clear = (inquiry)message_clear,
    .tp_repr = (reprfunc)message_repr,
    .tp_as_sequence = &message_as_sequence,
    .tp_methods = message_methods,
};

/* ---------------------------------------------------------------------------
 * Record parsing shared by decode_records, decode_messages, record_at and
 * decode_fetch_batches: one record's fields and header positions
 * (record_fields_t), then the object a sink builds from them.
 */
enum { HEADER_SLOTS_STACK = 32, RECORD_CACHE_BATCHES = 65536 };

typedef struct record_fields {
    ls_record_view_t view;
    const int32_t *hkp, *hkl, *hvp, *hvl; /* view.header_count entries each */
    int32_t stack[4][HEADER_SLOTS_STACK];
    int32_t *heap; /* PyMem block when the headers outnumber the stack slots */
} record_fields_t;

/* Reads one record at *p; re-reads into heap arrays when it has many
 * headers. LS_OK, or a code (with MemoryError set if the heap failed).
 * fields_release frees what it took, whatever it returned. */
static int fields_read(const uint8_t **p, const uint8_t *end, const uint8_t *base, record_fields_t *f) {
    const uint8_t *start = *p;
    f->heap = NULL;
    f->hkp = f->stack[0], f->hkl = f->stack[1], f->hvp = f->stack[2], f->hvl = f->stack[3];
    int rc = ls_record_read(p, end, base, &f->view, f->stack[0], f->stack[1], f->stack[2], f->stack[3],
                            HEADER_SLOTS_STACK);
    if (rc != LS_OK || f->view.header_count <= HEADER_SLOTS_STACK) return rc;
    int32_t n = f->view.header_count;
    f->heap = PyMem_Malloc(sizeof(int32_t) * 4 * (size_t)n);
    if (f->heap == NULL) {
        PyErr_NoMemory();
        return LS_ERR_CAPACITY;
    }
    *p = start;
    rc = ls_record_read(p, end, base, &f->view, f->heap, f->heap + n, f->heap + 2 * n, f->heap + 3 * n, n);
    f->hkp = f->heap, f->hkl = f->heap + n, f->hvp = f->heap + 2 * n, f->hvl = f->heap + 3 * n;
    return rc;
}

static void fields_release(record_fields_t *f) {
    PyMem_Free(f->heap);
    f->heap = NULL;
}

static PyObject *bytes_or_none(const uint8_t *base, int32_t pos, int32_t len) {
    if (len < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)base + pos, len);
}

/* The headers as (str, bytes | None) pairs: a tuple for a Record (the empty
 * tuple for none), a list for a Message (NULL for none: headers() is None,
 * as confluent-kafka has it). 0, or -1 with an error set. */
static int fields_headers(const uint8_t *base, const record_fields_t *f, int as_list, PyObject **out) {
    int32_t n = f->view.header_count;
    *out = NULL;
    if (n == 0) {
        if (!as_list) *out = Py_NewRef(empty_tuple);
        return 0;
    }
    PyObject *headers = as_list ? PyList_New(n) : PyTuple_New(n);
    if (headers == NULL) return -1;
    for (int32_t h = 0; h < n; h++) {
        PyObject *name = PyUnicode_DecodeUTF8((const char *)base + f->hkp[h], f->hkl[h], "strict");
        PyObject *value = name ? bytes_or_none(base, f->hvp[h], f->hvl[h]) : NULL;
        PyObject *pair = value ? PyTuple_Pack(2, name, value) : NULL;
        Py_XDECREF(name);
        Py_XDECREF(value);
        if (pair == NULL) {
            Py_DECREF(headers);
            return -1;
        }
        if (as_list) PyList_SET_ITEM(headers, h, pair);
        else PyTuple_SET_ITEM(headers, h, pair);
    }
    *out = headers;
    return 0;
}

/* What the records of one section become, and the batch fields they need. */
typedef struct record_sink record_sink_t;
struct record_sink {
    /* One object from a record; steals headers, NULL with an error set. */
    PyObject *(*build)(const record_sink_t *sink, const uint8_t *base, const ls_record_view_t *r,
                       PyObject *headers);
    int headers_as_list;
    int64_t min_delta; /* records with a smaller offset delta are skipped */
    long long base_offset, base_timestamp, log_append_time;
    int log_append;
    /* Messages only. */
    PyObject *topic; /* borrowed; each message takes a reference */
    int32_t partition, timestamp_type;
};

/* Unsigned additions: hostile deltas wrap instead of overflowing (UB). */
static inline long long sink_offset(const record_sink_t *s, const ls_record_view_t *r) {
    return (long long)((uint64_t)s->base_offset + (uint64_t)r->offset_delta);
}

static inline long long sink_timestamp(const record_sink_t *s, const ls_record_view_t *r) {
    return s->log_append ? s->log_append_time
                         : (long long)((uint64_t)s->base_timestamp + (uint64_t)r->timestamp_delta);
}

/* The first offset delta at or above min_offset; 0 when the batch starts there. */
static int64_t min_delta_of(long long base_offset, long long min_offset) {
    if (min_offset <= base_offset) return 0;
    /* Exact in uint64_t since min_offset > base_offset; above INT64_MAX only
     * for a (bad) negative base_offset, where it means "skip everything". */
    uint64_t delta = (uint64_t)min_offset - (uint64_t)base_offset;
    return delta > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)delta;
}

static PyObject *record_from_view(const uint8_t *base, const ls_record_view_t *r, PyObject *headers,
                                  long long base_offset, long long base_timestamp, int log_append,
                                  long long log_append_time) {
    const record_sink_t s = {.base_offset = base_offset, .base_timestamp = base_timestamp,
                             .log_append = log_append, .log_append_time = log_append_time};
    PyObject *key = bytes_or_none(base, r->key_pos, r->key_len);
    PyObject *value = key ? bytes_or_none(base, r->value_pos, r->value_len) : NULL;
    PyObject *timestamp = value ? PyLong_FromLongLong(sink_timestamp(&s, r)) : NULL;
    PyObject *offset = timestamp ? PyLong_FromLongLong(sink_offset(&s, r)) : NULL;
    PyObject *record = offset ? record_new_fields(key, value, headers, timestamp, offset) : NULL;
    if (record == NULL) {
        Py_XDECREF(key), Py_XDECREF(value), Py_XDECREF(timestamp), Py_XDECREF(offset);
        Py_DECREF(headers);
    }
    return record;
}

static PyObject *record_build(const record_sink_t *s, const uint8_t *base, const ls_record_view_t *r,
                              PyObject *headers) {
    return record_from_view(base, r, headers, s->base_offset, s->base_timestamp, s->log_append,
                            s->log_append_time);
}

static PyObject *message_build(const record_sink_t *s, const uint8_t *base, const ls_record_view_t *r,
                               PyObject *headers) {
    PyObject *key = bytes_or_none(base, r->key_pos, r->key_len);
    PyObject *value = key ? bytes_or_none(base, r->value_pos, r->value_len) : NULL;
    if (value == NULL) {
        Py_XDECREF(key);
        Py_XDECREF(headers);
        return NULL;
    }
    MessageObject *m = message_alloc(Py_NewRef(s->topic), key, value, headers, NULL);
    if (m == NULL) return NULL;
    m->partition = s->partition, m->offset = sink_offset(s, r);
    m->timestamp_type = s->timestamp_type, m->timestamp = sink_timestamp(s, r);
    if (headers != NULL) PyObject_GC_Track((PyObject *)m); /* a list: see message_maybe_track */
    return (PyObject *)m;
}

/* Reads record index of a batch at *p: fields_read, then its offset delta
 * checked against the batch's last (LS_ERR_OFFSET past it). LS_OK, or a
 * code with nothing raised yet (record_malformed raises it), or
 * LS_ERR_CAPACITY with MemoryError set. */
static int record_read_checked(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                               int32_t delta_max, record_fields_t *f) {
    int rc = fields_read(p, end, base, f);
    if (rc == LS_OK && f->view.offset_delta > delta_max) rc = LS_ERR_OFFSET;
    return rc;
}

/* Raises RECORD_MALFORMED for record index of the batch at base_offset,
 * saying why from the code record_read_checked returned; at_end: the
 * section ended before the record. Leaves an error already set (memory). */
static void record_malformed(long long base_offset, int32_t index, int rc, int at_end) {
    if (PyErr_Occurred()) return;
    const char *why = at_end               ? "the records section ends before it"
                      : rc == LS_ERR_OFFSET ? "its offset delta is past the batch's last offset delta"
                                            : "its length, varints or field sizes do not parse";
    raise_error(SP_ERR_RECORD_MALFORMED, "record %d of the batch at offset %lld is malformed: %s", (int)index,
                base_offset, why);
}

/* The error of a record that parsed but was not built: a header name that
 * is not UTF-8 (raised as HEADER_NAME, the decoder's reason kept), or
 * anything else (memory), left as it is. */
static void record_build_error(long long base_offset, int32_t index) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    raise_error(SP_ERR_HEADER_NAME,
                "record %d of the batch at offset %lld has a header name that is not UTF-8 (%S)", (int)index,
                base_offset, value);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
}

/* Decodes the count records of section[0..len) into out[0..count): the
 * number of objects written (records below sink->min_delta are skipped), or
 * -1 with an error set and out[] left as it was: a CorruptRecordError of the
 * table when the bytes are at fault, another error (memory) otherwise. */
static Py_ssize_t decode_section(const uint8_t *base, Py_ssize_t len, int32_t count, int32_t delta_max,
                                 const record_sink_t *sink, PyObject **out) {
    ls_assert(base != NULL && len >= 0 && count >= 0);
    const uint8_t *p = base, *end = base + len;
    Py_ssize_t written = 0;
    for (int32_t i = 0; i < count; i++) {
        record_fields_t f;
        int at_end = p == end;
        int rc = record_read_checked(&p, end, base, delta_max, &f);
        PyObject *item = NULL, *headers = NULL;
        int skip = rc == LS_OK && f.view.offset_delta < sink->min_delta;
        if (rc == LS_OK && !skip && fields_headers(base, &f, sink->headers_as_list, &headers) == 0)
            item = sink->build(sink, base, &f.view, headers);
        fields_release(&f);
        if (skip) continue;
        if (item == NULL) {
            if (rc != LS_OK) record_malformed(sink->base_offset, i, rc, at_end);
            else record_build_error(sink->base_offset, i);
            for (Py_ssize_t k = 0; k < written; k++) Py_CLEAR(out[k]);
            return -1;
        }
        out[written++] = item;
    }
    ls_assert(written <= count);
    if (p != end) {
        for (Py_ssize_t k = 0; k < written; k++) Py_CLEAR(out[k]);
        raise_error(SP_ERR_TRAILING_BYTES,
                    "%zd bytes left over after record %d, the last of the batch at offset %lld",
                    (Py_ssize_t)(end - p), (int)count - 1, sink->base_offset);
        return -1;
    }
    return written;
}

/* A list for count records of a section of len bytes; a record takes at
 * least 7 bytes, so a count the section cannot hold allocates nothing. */
static PyObject *section_list(int count, Py_ssize_t len, long long base_offset) {
    if (count < 0 || (int64_t)count * 7 > (int64_t)len)
        return raise_error(SP_ERR_RECORD_COUNT,
                           "record count %d does not fit the batch at offset %lld (%zd bytes of records, "
                           "at least 7 a record)", count, base_offset, len);
    return PyList_New(count);
}

/* Drops the slots [n, size) decode_section left empty (skipped records).
 * They get None first, so the slice deletion releases only real objects. */
static int list_truncate(PyObject *list, Py_ssize_t n) {
    Py_ssize_t size = PyList_GET_SIZE(list);
    ls_assert(n >= 0 && n <= size);
    if (n == size) return 0;
    for (Py_ssize_t k = n; k < size; k++) PyList_SET_ITEM(list, k, Py_NewRef(Py_None));
    return PyList_SetSlice(list, n, size, NULL);
}

/* decode_records(section, count, offset_delta_max, base_offset, base_timestamp,
 *                log_append, log_append_time) -> list[Record]
 * One pass over a records section: varints in C, one Record per record.
 * log_append stamps every record with log_append_time (LogAppendTime batches). */
static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer section;
    int count, offset_delta_max, log_append;
    long long base_offset, base_timestamp, log_append_time;
    if (!PyArg_ParseTuple(args, "y*iiLLpL", &section, &count, &offset_delta_max, &base_offset,
                          &base_timestamp, &log_append, &log_append_time))
        return NULL;
    const record_sink_t sink = {
        .build = record_build, .base_offset = base_offset, .base_timestamp = base_timestamp,
        .log_append = log_append, .log_append_time = log_append_time};
    PyObject *list = section_list(count, section.len, base_offset);
    if (list != NULL) {
        Py_ssize_t n = decode_section(section.buf, section.len, count, offset_delta_max, &sink,
                                      PySequence_Fast_ITEMS(list));
        if (n < 0) Py_CLEAR(list);
        else ls_assert(n == count); /* min_delta 0 skips nothing */
    }
    PyBuffer_Release(&section);
    return list;
}

/* decode_messages(section, count, offset_delta_max, base_offset, base_timestamp,
 *                 log_append, log_append_time, timestamp_type, topic, partition,
 *                 min_offset) -> list[Message]
 * decode_records' pass, building Messages; records below min_offset (a fetch
 * may return a batch that starts before its position) are skipped. */
static PyObject *decode_messages(PyObject *self, PyObject *args) {
    Py_buffer section;
    int count, offset_delta_max, log_append, timestamp_type, partition;
    long long base_offset, base_timestamp, log_append_time, min_offset;
    PyObject *topic;
    if (!PyArg_ParseTuple(args, "y*iiLLpLiUiL", &section, &count, &offset_delta_max, &base_offset,
                          &base_timestamp, &log_append, &log_append_time, &timestamp_type, &topic,
                          &partition, &min_offset))
        return NULL;
    const record_sink_t sink = {
        .build = message_build, .headers_as_list = 1, .min_delta = min_delta_of(base_offset, min_offset),
        .base_offset = base_offset, .base_timestamp = base_timestamp, .log_append = log_append,
        .log_append_time = log_append_time, .topic = topic, .partition = partition,
        .timestamp_type = timestamp_type};
    PyObject *list = section_list(count, section.len, base_offset);
    if (list != NULL) {
        Py_ssize_t n = decode_section(section.buf, section.len, count, offset_delta_max, &sink,
                                      PySequence_Fast_ITEMS(list));
        if (n < 0 || list_truncate(list, n) < 0) Py_CLEAR(list);
    }
    PyBuffer_Release(&section);
    return list;
}

/* The fast path's records: a bytes value, or a (key, value) pair of bytes
 * or None; no headers, every record at the batch timestamp. */
typedef struct plain_record {
    const char *key, *value;
    Py_ssize_t key_len, value_len; /* -1: null */
} plain_record_t;

/* Splits item into key and value; 0 if it is not a plain record. */
static inline int plain_fields(PyObject *item, plain_record_t *r) {
    PyObject *key = NULL, *value = item;
    if (PyTuple_CheckExact(item)) {
        if (PyTuple_GET_SIZE(item) != 2) return 0;
        key = PyTuple_GET_ITEM(item, 0);
        value = PyTuple_GET_ITEM(item, 1);
        if (key != Py_None && !PyBytes_CheckExact(key)) return 0;
    }
    if (value != Py_None && !PyBytes_CheckExact(value)) return 0;
    r->key = key && key != Py_None ? PyBytes_AS_STRING(key) : NULL;
    r->key_len = key && key != Py_None ? PyBytes_GET_SIZE(key) : -1;
    r->value = value != Py_None ? PyBytes_AS_STRING(value) : NULL;
    r->value_len = value != Py_None ? PyBytes_GET_SIZE(value) : -1;
    return r->key_len <= INT32_MAX / 4 && r->value_len <= INT32_MAX / 4;
}

static inline int64_t plain_field_size(Py_ssize_t len) {
    return len < 0 ? 1 : varint_size(len) + len;
}

/* Body size of a plain record (after its length varint). */
static inline int64_t plain_body_size(int32_t index, const plain_record_t *r) {
    return 1 + 1 /* timestamp delta 0 */ + varint_size(index) + plain_field_size(r->key_len) +
           plain_field_size(r->value_len) + 1 /* no headers */;
}

/* First pass: the size of the records section, or -1 if an item is not plain. */
static int64_t plain_section_size(PyObject *seq, Py_ssize_t count) {
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int64_t size = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        plain_record_t r;
        if (!plain_fields(items[i], &r)) return -1;
        int64_t body = plain_body_size((int32_t)i, &r);
        size += varint_size(body) + body;
        if (size > LS_BATCH_SIZE_LIMIT) return -1;
    }
    return size;
}

static inline uint8_t *plain_field_write(uint8_t *p, const char *data, Py_ssize_t len) {
    p = varint_write(p, len);
    if (len > 0) {
        memcpy(p, data, (size_t)len);
        p += len;
    }
    return p;
}

static void plain_section_write(PyObject *seq, Py_ssize_t count, uint8_t *out, int64_t size) {
    PyObject **items = PySequence_Fast_ITEMS(seq);
    uint8_t *p = out;
    for (Py_ssize_t i = 0; i < count; i++) {
        plain_record_t r;
        int plain = plain_fields(items[i], &r);
        ls_assert(plain); /* the first pass checked every item, under the same GIL hold */
        int64_t body = plain_body_size((int32_t)i, &r);
        ls_assert(p + varint_size(body) + body <= out + size);
        p = varint_write(p, body);
        *p++ = 0; /* attributes */
        *p++ = 0; /* timestamp delta 0 */
        p = varint_write(p, (int64_t)i);
        p = plain_field_write(p, r.key, r.key_len);
        p = plain_field_write(p, r.value, r.value_len);
        *p++ = 0; /* header count */
    }
    ls_assert(p == out + size);
}

/* encode_plain(records: list|tuple of bytes or (key, value) pairs, base_offset, timestamp,
 *              producer_id, producer_epoch, base_sequence,
 *              partition_leader_epoch, attributes) -> bytes | None
 * A whole uncompressed batch, or None when some record is not plain. */
static PyObject *encode_plain(PyObject *self, PyObject *args) {
    PyObject *values;
    long long base_offset, timestamp, producer_id;
    short producer_epoch, attributes; /* "h" raises OverflowError outside int16 */
    int base_sequence, leader_epoch;
    if (!PyArg_ParseTuple(args, "OLLLhiih", &values, &base_offset, &timestamp, &producer_id,
                          &producer_epoch, &base_sequence, &leader_epoch, &attributes))
        return NULL;
    if (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)) Py_RETURN_NONE;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(values);
    if (count <= 0 || count > INT32_MAX) Py_RETURN_NONE;
    int64_t section = plain_section_size(values, count);
    if (section < 0 || section > LS_BATCH_SIZE_LIMIT - LS_BATCH_HEADER_SIZE) Py_RETURN_NONE;
    if (base_offset < 0)
        return raise_error(SP_ERR_BATCH_FIELDS, "base_offset must be at least 0, got %lld", base_offset);
    if ((attributes & LS_ATTR_COMPRESSION_MASK) != 0)
        return raise_error(SP_ERR_BATCH_FIELDS,
                           "attributes 0x%x name a codec, but encode_plain writes uncompressed records",
                           (unsigned)(uint16_t)attributes);
    int64_t size = LS_BATCH_HEADER_SIZE + section;
    PyObject *batch = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (batch == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(batch);
    plain_section_write(values, count, out + LS_BATCH_HEADER_SIZE, section);
    int rc = ls_batch_seal(out, size, base_offset, leader_epoch, attributes, (int32_t)(count - 1),
                           timestamp, timestamp, producer_id, producer_epoch, base_sequence,
                           (int32_t)count);
    ls_assert(rc == LS_OK); /* its only refusals (size, base_offset, codec) are checked above */
    return batch;
}

/* ---------------------------------------------------------------------------
 * record_at(log, index, index_count, base_offset, offset, cache)
 *   -> Record | None | False
 * One record of a segment by offset, in one call: offset index lookup,
 * position search, then a binary search over the batch's record positions.
 * The first visit to a batch checks its CRC and caches its record positions
 * in `cache` (position -> bytes of int32; cleared past RECORD_CACHE_BATCHES
 * entries), so later lookups touch only the record they return. None: no record has that offset (compacted away).
 * False: the batch is compressed; the caller decodes it whole.
 * A batch that fails its CRC, or records that do not parse, raise
 * RecordDecodeError (BATCH_CORRUPT, RECORD_MALFORMED, HEADER_NAME).
 */
static PyObject *batch_positions(const uint8_t *batch, const ls_batch_t *header) {
    const uint8_t *section = batch + LS_BATCH_HEADER_SIZE;
    const uint8_t *p = section, *end = batch + header->size;
    PyObject *table = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)header->record_count * 4);
    if (table == NULL) return NULL;
    int32_t *positions = (int32_t *)PyBytes_AS_STRING(table);
    for (int32_t i = 0; i < header->record_count; i++) {
        ls_record_view_t r;
        int at_end = p == end;
        positions[i] = (int32_t)(p - section);
        int rc = ls_record_read(&p, end, section, &r, NULL, NULL, NULL, NULL, 0);
        if (rc == LS_OK && r.offset_delta > header->last_offset_delta) rc = LS_ERR_OFFSET;
        if (rc != LS_OK) {
            Py_DECREF(table);
            record_malformed(header->base_offset, i, rc, at_end);
            return NULL;
        }
    }
    return table;
}

static PyObject *cached_positions(PyObject *cache, const uint8_t *batch, int64_t position,
                                  const ls_batch_t *header) {
    PyObject *key = PyLong_FromLongLong(position);
    if (key == NULL) return NULL;
    PyObject *table = PyDict_GetItemWithError(cache, key);
    if (table != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(table);
    }
    if (PyDict_GET_SIZE(cache) >= RECORD_CACHE_BATCHES) PyDict_Clear(cache); /* bounded memory */
    uint32_t crc = ls_crc32c(0, batch + LS_POS_ATTRIBUTES, header->size - LS_POS_ATTRIBUTES);
    if (crc != header->crc) {
        Py_DECREF(key);
        return raise_error(SP_ERR_BATCH_CORRUPT,
                           "the batch at byte %lld (offsets %lld to %lld) failed its CRC-32C check",
                           (long long)position, (long long)header->base_offset,
                           (long long)(header->base_offset + header->last_offset_delta));
    }
    table = batch_positions(batch, header);
    if (table != NULL && PyDict_SetItem(cache, key, table) < 0) Py_CLEAR(table);
    Py_DECREF(key);
    return table;
}

static PyObject *record_in_batch(const uint8_t *batch, const ls_batch_t *header, PyObject *table,
                                 int64_t offset) {
    const uint8_t *section = batch + LS_BATCH_HEADER_SIZE, *end = batch + header->size;
    const int32_t *positions = (const int32_t *)PyBytes_AS_STRING(table);
    int64_t delta = offset - header->base_offset;
    int32_t lo = 0, hi = header->record_count - 1;
    /* Deltas increase with the index. Producers write consecutive deltas, so
     * the first probe is the record at index delta; compacted batches fall
     * back to halving (at most 32 passes over an int32 range). */
    for (int pass = 0; pass < 33 && lo <= hi; pass++) {
        int32_t mid = pass == 0 && delta <= hi ? (int32_t)delta : lo + (hi - lo) / 2;
        const uint8_t *p = section + positions[mid];
        ls_record_view_t r;
        if (ls_record_read(&p, end, section, &r, NULL, NULL, NULL, NULL, 0) != LS_OK) break;
        if (r.offset_delta < delta) {
            lo = mid + 1;
        } else if (r.offset_delta > delta) {
            hi = mid - 1;
        } else {
            p = section + positions[mid];
            record_fields_t f;
            PyObject *headers = NULL;
            int rc = fields_read(&p, end, section, &f);
            if (rc == LS_OK && fields_headers(section, &f, 0, &headers) < 0) {
                record_build_error(header->base_offset, mid);
                rc = LS_ERR_ARGUMENT;
            }
            fields_release(&f);
            if (rc != LS_OK) break;
            int log_append = (header->attributes & LS_ATTR_TIMESTAMP_LOG_APPEND) != 0;
            return record_from_view(section, &f.view, headers, header->base_offset, header->timestamp_base,
                                    log_append, header->timestamp_max);
        }
    }
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* FASTCALL argument helpers: the hot lookups skip PyArg_ParseTuple's tuple. */
static int arg_buffer(PyObject *arg, Py_buffer *view, const char *name) {
    if (PyObject_GetBuffer(arg, view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a bytes-like object", name);
        return -1;
    }
    return 0;
}

static int arg_int64(PyObject *arg, long long *out) {
    *out = PyLong_AsLongLong(arg);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Parses (log, index, index_count, base_offset, offset); the caller releases. */
static int lookup_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t expected, Py_buffer *log,
                       Py_buffer *index, long long ints[3]) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "expected %zd arguments, got %zd", expected, nargs);
        return -1;
    }
    if (arg_int64(args[2], &ints[0]) < 0 || arg_int64(args[3], &ints[1]) < 0 ||
        arg_int64(args[4], &ints[2]) < 0)
        return -1;
    if (arg_buffer(args[0], log, "log") < 0) return -1;
    if (arg_buffer(args[1], index, "index") < 0) {
        PyBuffer_Release(log);
        return -1;
    }
    if (ints[0] < 0 || ints[0] > index->len / LS_OFFSET_INDEX_ENTRY_SIZE) {
        raise_error(SP_ERR_INDEX_COUNT,
                    "index_count %lld does not fit the index buffer (%zd bytes, %d an entry)", ints[0],
                    index->len, (int)LS_OFFSET_INDEX_ENTRY_SIZE);
        PyBuffer_Release(log);
        PyBuffer_Release(index);
        return -1;
    }
    return 0;
}

/* locate(log, index, index_count, base_offset, offset) -> int
 * (position << 32) | size of the batch holding offset (or the first after
 * it), or a negative LS_ERR_* code. */
static PyObject *locate(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer log, index;
    long long ints[3];
    if (lookup_args(args, nargs, 5, &log, &index, ints) < 0) return NULL;
    int64_t found = ls_segment_find(log.buf, log.len, index.buf, ints[0], ints[1], ints[2]);
    PyBuffer_Release(&log);
    PyBuffer_Release(&index);
    return PyLong_FromLongLong(found);
}

/* record_at(log, index, index_count, base_offset, offset, cache) */
static PyObject *record_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer log, index;
    long long ints[3];
    if (nargs != 6 || !PyDict_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "record_at(log, index, index_count, base_offset, offset, cache: dict)");
        return NULL;
    }
    if (lookup_args(args, nargs - 1, 5, &log, &index, ints) < 0) return NULL;
    long long index_count = ints[0], base_offset = ints[1], offset = ints[2];
    PyObject *cache = args[5], *result = NULL;
    int64_t position, size;
    ls_batch_t header;
    if (ls_segment_locate(log.buf, log.len, index.buf, index_count, base_offset, offset, &position,
                          &size) != LS_OK) {
        result = Py_NewRef(Py_None);
    } else if (ls_batch_header((const uint8_t *)log.buf + position, log.len - position, log.len,
                               &header) != LS_OK) {
        /* ls_segment_locate read this header; only a concurrent write (the
         * file, through its mapping) can make it fail here. */
        raise_error(SP_ERR_BATCH_CORRUPT, "the batch header at byte %lld of the segment is malformed",
                    (long long)position);
    } else if ((header.attributes & LS_ATTR_COMPRESSION_MASK) != 0) {
        result = Py_NewRef(Py_False);
    } else {
        const uint8_t *batch = (const uint8_t *)log.buf + position;
        PyObject *table = cached_positions(cache, batch, position, &header);
        if (table != NULL) result = record_in_batch(batch, &header, table, offset);
        Py_XDECREF(table);
    }
    PyBuffer_Release(&log);
    PyBuffer_Release(&index);
    return result;
}

/* ---------------------------------------------------------------------------
 * decode_fetch_batches(buf, position, topic, partition, min_offset)
 *   -> (messages, position, next_offset, stop)
 * The messages of the whole batches of a Fetch partition's record set from
 * byte `position` on, in one call: no Python object per batch. Each batch
 * passes the checks parse_batches applies (ls_batch_header, CRC-32C) before
 * its records are decoded. Control batches are skipped, but consumed.
 * The walk stops at:
 *   - the end of buf (stop LS_OK), or a torn last batch (LS_ERR_INCOMPLETE,
 *     normal in Fetch responses);
 *   - a compressed batch, header and CRC checked (STOP_COMPRESSED): the
 *     caller decompresses it and calls again after it;
 *   - a bad batch (LS_ERR_CORRUPT, LS_ERR_CRC), with the messages before it.
 * `position` comes back at the first batch not consumed; next_offset is
 * one past the highest offset of the batches consumed (the last batch's in
 * a well-formed log), or -1 if none was consumed.
 */
enum { ATTR_CONTROL = 0x20, STOP_COMPRESSED = 1, TIMESTAMP_CREATE_TIME = 1, TIMESTAMP_LOG_APPEND_TIME = 2 };

typedef struct fetch_walk {
    const uint8_t *buf;
    int64_t len;
    int64_t position;    /* the first batch not consumed */
    int64_t next_offset; /* -1 until a batch is consumed, then the highest */
    int stop;
} fetch_walk_t;

static inline int batch_is_data(const ls_batch_t *h) {
    return (h->attributes & ATTR_CONTROL) == 0;
}

/* Pass one, headers only: where the run of batches decoded here ends (a
 * compressed batch, a bad or torn header, or the end of buf; *stop_out says
 * which) and how many records its data batches claim. Claimed counts are
 * bounded by the header check (7 bytes a record), so the sum is <= len / 7. */
static int64_t walk_extent(const fetch_walk_t *w, int64_t *end_out, int *stop_out) {
    int64_t position = w->position, records = 0;
    int64_t iterations_max = (w->len - position) / LS_BATCH_HEADER_SIZE + 1;
    int stop = LS_OK;
    for (int64_t i = 0; i < iterations_max && position < w->len; i++) {
        ls_batch_t h;
        int rc = ls_batch_header(w->buf + position, w->len - position, LS_BATCH_SIZE_LIMIT, &h);
        if (rc != LS_OK) {
            stop = rc;
            break;
        }
        if (batch_is_data(&h) && (h.attributes & LS_ATTR_COMPRESSION_MASK) != 0) {
            stop = STOP_COMPRESSED;
            break;
        }
        if (batch_is_data(&h)) records += h.record_count;
        position += h.size;
    }
    ls_assert(position <= w->len && records <= w->len / 7);
    *end_out = position;
    *stop_out = stop;
    return records;
}

static int batch_crc_ok(const uint8_t *batch, const ls_batch_t *h) {
    return ls_crc32c(0, batch + LS_POS_ATTRIBUTES, h->size - LS_POS_ATTRIBUTES) == h->crc;
}

static record_sink_t message_sink(const ls_batch_t *h, PyObject *topic, int32_t partition,
                                  long long min_offset) {
    int log_append = (h->attributes & LS_ATTR_TIMESTAMP_LOG_APPEND) != 0;
    return (record_sink_t){
        .build = message_build, .headers_as_list = 1, .min_delta = min_delta_of(h->base_offset, min_offset),
        .base_offset = h->base_offset, .base_timestamp = h->timestamp_base, .log_append = log_append,
        .log_append_time = h->timestamp_max, .topic = topic, .partition = partition,
        .timestamp_type = log_append ? TIMESTAMP_LOG_APPEND_TIME : TIMESTAMP_CREATE_TIME};
}

/* Pass two, up to end: CRC then records, batch by batch while its bytes are
 * in cache, into items[*filled..). A batch that fails stops the walk there.
 * 0, or -1 with an error set (out of memory: not the data's fault). */
static int walk_decode(fetch_walk_t *w, int64_t end, PyObject *topic, int32_t partition,
                       long long min_offset, PyObject *list, Py_ssize_t *filled) {
    int64_t iterations_max = (end - w->position) / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && w->position < end; i++) {
        const uint8_t *batch = w->buf + w->position;
        ls_batch_t h;
        /* Re-read, not asserted: allocations below may run a collection,
         * and a finalizer could write to a mutable buffer in between. */
        int rc = ls_batch_header(batch, end - w->position, LS_BATCH_SIZE_LIMIT, &h);
        if (rc == LS_OK && !batch_crc_ok(batch, &h)) rc = LS_ERR_CRC;
        if (rc == LS_OK && batch_is_data(&h) && h.record_count > PyList_GET_SIZE(list) - *filled)
            rc = LS_ERR_CORRUPT;
        if (rc != LS_OK) {
            w->stop = rc;
            return 0;
        }
        if (batch_is_data(&h)) {
            record_sink_t sink = message_sink(&h, topic, partition, min_offset);
            PyObject **items = PySequence_Fast_ITEMS(list) + *filled;
            Py_ssize_t n = decode_section(batch + LS_BATCH_HEADER_SIZE, h.size - LS_BATCH_HEADER_SIZE,
                                          h.record_count, h.last_offset_delta, &sink, items);
            if (n < 0 && !PyErr_ExceptionMatches(corrupt_record_error)) return -1;
            if (n < 0) { /* malformed records: the batch is corrupt, like a CRC failure */
                PyErr_Clear();
                w->stop = LS_ERR_CORRUPT;
                return 0;
            }
            *filled += n;
        }
        /* The header check keeps last <= INT64_MAX; only the + 1 can overflow. */
        int64_t last = h.base_offset + h.last_offset_delta;
        int64_t next = last < INT64_MAX ? last + 1 : INT64_MAX;
        if (next > w->next_offset) w->next_offset = next;
        w->position += h.size;
    }
    return 0;
}

static PyObject *decode_fetch_batches(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long position, min_offset;
    PyObject *topic;
    int partition;
    if (!PyArg_ParseTuple(args, "y*LUiL", &buf, &position, &topic, &partition, &min_offset)) return NULL;
    if (position < 0 || position > buf.len) {
        raise_error(SP_ERR_POSITION, "position %lld is outside the buffer (%zd bytes)", position, buf.len);
        PyBuffer_Release(&buf);
        return NULL;
    }
    fetch_walk_t w = {.buf = buf.buf, .len = buf.len, .position = position, .next_offset = -1, .stop = LS_OK};
    int64_t end;
    int stop;
    int64_t records = walk_extent(&w, &end, &stop);
    Py_ssize_t filled = 0;
    PyObject *list = PyList_New((Py_ssize_t)records);
    if (list != NULL && walk_decode(&w, end, topic, partition, min_offset, list, &filled) < 0) Py_CLEAR(list);
    if (list != NULL && w.stop == LS_OK) {
        w.stop = stop; /* every batch of the run passed: why the run ended */
        if (stop == STOP_COMPRESSED) {
            ls_batch_t h;
            const uint8_t *batch = w.buf + w.position;
            if (ls_batch_header(batch, w.len - w.position, LS_BATCH_SIZE_LIMIT, &h) != LS_OK)
                w.stop = LS_ERR_CORRUPT;
            else if (!batch_crc_ok(batch, &h))
                w.stop = LS_ERR_CRC;
        }
    }
    PyBuffer_Release(&buf);
    if (list == NULL || list_truncate(list, filled) < 0) {
        Py_XDECREF(list);
        return NULL;
    }
    return Py_BuildValue("(NLLi)", list, (long long)w.position, (long long)w.next_offset, w.stop);
}

/* ---------------------------------------------------------------------------
 * Kafka's key partitioning: murmur2(key) -> int, partition_for_key(key, n)
 * -> int, partition_for_keys(keys, n) -> list[int].
 * murmur2 is the Java client's Utils.murmur2 (MurmurHash2, seed 0x9747b28c,
 * little-endian words) and librdkafka's rd_murmur2; a key's partition is
 * (murmur2(key) & 0x7fffffff) % n, Java's toPositive then modulo, so keyed
 * records land where the Java client and librdkafka put them.
 */
/* murmur2: ls_murmur2 in ls_core.h, shared with the Arrow partitioner. */

/* Java's int from the hash's bits; spelled out because converting an
 * out-of-range uint32_t to int32_t is implementation-defined in C. */
static inline long long java_int(uint32_t h) {
    return (long long)h - (h & 0x80000000u ? 0x100000000LL : 0);
}

/* Java's Utils.toPositive(h) % n: clears the sign bit, it does not negate. */
static inline long partition_of(uint32_t h, int32_t num_partitions) {
    ls_assert(num_partitions > 0);
    return (long)((h & 0x7fffffffu) % (uint32_t)num_partitions);
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
        raise_error(SP_ERR_NUM_PARTITIONS, "num_partitions must be between 1 and %d, got %R", INT32_MAX, arg);
        return -1;
    }
    *out = (int32_t)n;
    return 0;
}

/* Hashes a bytes-like key; -1 with an error set. bytes, the common case,
 * skip the buffer protocol: a 10-byte key's partition_for_key takes 29 ns
 * as bytes, 32 ns as a bytearray. */
static int key_hash(PyObject *key, uint32_t *out) {
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
    return PyLong_FromLong(partition_of(h, n));
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
        long p = key == Py_None ? -1 : partition_of(h, n);
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

/* ---------------------------------------------------------------------------
 * The producer's fast path: produce() of a plain record in one C call.
 *
 * logstore.client.accumulator keeps the fields a record touches in C base
 * classes: AccumulatorCore (the record and byte counters, the limits, the
 * lock, the topics dict), TopicStateCore (partition count, sticky partition,
 * open batches) and ProducerBatchCore (records, size estimate, callbacks,
 * closed). Python reads and writes them as attributes; FastProduce reads and
 * writes them as struct fields, with no attribute lookup, dict or int object.
 *
 * FastProduce(accumulator, fallback, max_record, plain) is a Producer's
 * produce(). It appends a plain record (key and value bytes, str or None; no
 * headers or timestamp; a known topic; a partition it can choose without
 * Python: explicit, sticky, or murmur2) to the open batch of its partition
 * when that batch and the accumulator have room. Every other call goes,
 * arguments untouched, to fallback (the general Python path), which opens
 * batches (KIP-480's repartitioning included), waits for room, and raises.
 * So the fast path never starts or closes a batch: a batch it fills is found
 * full by the sender's ready(), or closed when the next record needs a new one.
 *
 * Concurrency: Python changes the accumulator under its Lock and may lose the
 * GIL between bytecodes while holding it. FastProduce tries the lock without
 * waiting (if it is held, the call goes to fallback, which waits with the GIL
 * released), and runs no Python code while holding it: the only object it
 * allocates there is an int, which is not GC-tracked, so no collection (and
 * no finalizer) can run mid-append. Lock is this module's, as threading's
 * lock has no C API to try.
 */
enum { RECORD_OVERHEAD = 21 }; /* accumulator.RECORD_OVERHEAD: a plain record's framing, at most */

/* -- Lock: a non-reentrant lock with threading.Lock's methods ------------- */

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked; /* changed only with the GIL held */
} LockObject;

static PyTypeObject LockType;

/* Takes the lock: 1, or 0 when it is held and !blocking or timeout_us ran
 * out (timeout_us < 0: no limit). A wait releases the GIL. Signals do not
 * cut a wait short (intr_flag 0): holders keep this lock for a few
 * statements, never across a wait. */
static int lock_take(LockObject *self, int blocking, PY_TIMEOUT_T timeout_us) {
    PyLockStatus r = PyThread_acquire_lock_timed(self->lock, 0, 0);
    if (r != PY_LOCK_ACQUIRED && blocking && timeout_us != 0) {
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(self->lock, timeout_us, 0);
        Py_END_ALLOW_THREADS
    }
    if (r != PY_LOCK_ACQUIRED) return 0;
    ls_assert(!self->locked);
    self->locked = 1;
    return 1;
}

static void lock_give(LockObject *self) {
    ls_assert(self->locked);
    self->locked = 0;
    PyThread_release_lock(self->lock);
}

static PyObject *lock_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":Lock", names)) return NULL;
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void lock_dealloc(LockObject *self) {
    if (self->lock != NULL) {
        if (self->locked) PyThread_release_lock(self->lock); /* freeing a held lock is undefined */
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* acquire(blocking=True, timeout=-1) -> bool, as threading.Lock's. */
static PyObject *lock_acquire(LockObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pd:acquire", names, &blocking, &timeout)) return NULL;
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (isnan(timeout) || (timeout < 0 && timeout != -1)) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    if (timeout * 1e6 >= (double)PY_TIMEOUT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    /* Rounded up, as threading rounds a timeout: never wait less than asked. */
    PY_TIMEOUT_T us = timeout < 0 ? -1 : (PY_TIMEOUT_T)ceil(timeout * 1e6);
    return PyBool_FromLong(lock_take(self, blocking, us));
}

static PyObject *lock_enter(LockObject *self, PyObject *unused) {
    lock_take(self, 1, -1);
    Py_RETURN_TRUE;
}

static PyObject *lock_release(LockObject *self, PyObject *unused) {
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    lock_give(self);
    Py_RETURN_NONE;
}

static PyObject *lock_exit(LockObject *self, PyObject *args) {
    return lock_release(self, NULL);
}

static PyObject *lock_locked(LockObject *self, PyObject *unused) {
    return PyBool_FromLong(self->locked);
}

static PyObject *lock_repr(LockObject *self) {
    return PyUnicode_FromFormat("<%s %s>", self->locked ? "locked" : "unlocked", Py_TYPE(self)->tp_name);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool: take the lock (waiting with the GIL released)"},
    {"release", (PyCFunction)lock_release, METH_NOARGS, "release(): RuntimeError if it is not held"},
    {"locked", (PyCFunction)lock_locked, METH_NOARGS, "locked() -> bool"},
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)lock_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logstore._speedups.Lock",
    .tp_basicsize = sizeof(LockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Lock()\n\nthreading.Lock's methods (acquire, release, locked, with), for the producer's\n"
              "accumulator: FastProduce tries it from C without a Python call.",
    .tp_new = lock_tp_new,
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_repr = (reprfunc)lock_repr,
    .tp_methods = lock_methods,
};

/* -- The C base classes of RecordAccumulator, TopicState, ProducerBatch ---- */

typedef struct {
    PyObject_HEAD
    LockObject *lock;  /* made here, read-only: guards everything below and the batches */
    PyObject *topics;  /* made here, read-only: dict, topic name -> TopicState */
    long long records; /* records queued or in flight (or reserved) */
    long long bytes;   /* their size estimate */
    long long batch_size, batch_records, buffer_memory, max_records;
} AccumulatorCoreObject;

typedef struct {
    PyObject_HEAD
    PyObject *open;   /* list: per partition, its open batch or None */
    long long n;      /* partitions */
    long long keyless; /* the sticky partition of keyless records; -1: ask the partitioner */
    char hashed;      /* keyed records go to murmur2(key) % n */
} TopicStateCoreObject;

typedef struct {
    PyObject_HEAD
    PyObject *records;   /* list of items (bytes | None | (key, value) | Record) */
    PyObject *callbacks; /* list of (index, on_delivery), or NULL/None: none */
    long long size;      /* BATCH_HEADER + the records' estimates */
    char closed;
} ProducerBatchCoreObject;

static PyTypeObject AccumulatorCoreType, TopicStateCoreType, ProducerBatchCoreType;

/* The three are subclassed in Python (with __slots__ or a __dict__), so
 * tp_new takes and ignores the subclass's arguments, and dealloc leaves the
 * type's reference to subtype_dealloc. */
static PyObject *core_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    return type->tp_alloc(type, 0);
}

static PyObject *accumulator_core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    AccumulatorCoreObject *self = (AccumulatorCoreObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->lock = (LockObject *)PyObject_CallNoArgs((PyObject *)&LockType);
    self->topics = self->lock != NULL ? PyDict_New() : NULL;
    if (self->topics == NULL) Py_CLEAR(self);
    return (PyObject *)self;
}

static int accumulator_core_traverse(AccumulatorCoreObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->topics);
    return 0;
}

static int accumulator_core_clear(AccumulatorCoreObject *self) {
    Py_CLEAR(self->topics);
    return 0;
}

static void accumulator_core_dealloc(AccumulatorCoreObject *self) {
    PyObject_GC_UnTrack(self);
    accumulator_core_clear(self);
    Py_CLEAR(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int topic_state_core_traverse(TopicStateCoreObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->open);
    return 0;
}

static int topic_state_core_clear(TopicStateCoreObject *self) {
    Py_CLEAR(self->open);
    return 0;
}

static void topic_state_core_dealloc(TopicStateCoreObject *self) {
    PyObject_GC_UnTrack(self);
    topic_state_core_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int batch_core_traverse(ProducerBatchCoreObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->records);
    Py_VISIT(self->callbacks);
    return 0;
}

static int batch_core_clear(ProducerBatchCoreObject *self) {
    Py_CLEAR(self->records);
    Py_CLEAR(self->callbacks);
    return 0;
}

static void batch_core_dealloc(ProducerBatchCoreObject *self) {
    PyObject_GC_UnTrack(self);
    batch_core_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define CORE_FIELD(type, name, kind, flags, doc) {#name, kind, offsetof(type, name), flags, doc}

static PyMemberDef accumulator_core_members[] = {
    CORE_FIELD(AccumulatorCoreObject, lock, T_OBJECT, READONLY, "Lock: guards the accumulator's state"),
    CORE_FIELD(AccumulatorCoreObject, topics, T_OBJECT, READONLY, "dict: topic name -> TopicState"),
    CORE_FIELD(AccumulatorCoreObject, records, T_LONGLONG, 0, "records queued or in flight (or reserved)"),
    CORE_FIELD(AccumulatorCoreObject, bytes, T_LONGLONG, 0, "their estimated size"),
    CORE_FIELD(AccumulatorCoreObject, batch_size, T_LONGLONG, 0, "a batch's size bound, header included"),
    CORE_FIELD(AccumulatorCoreObject, batch_records, T_LONGLONG, 0, "a batch's record bound"),
    CORE_FIELD(AccumulatorCoreObject, buffer_memory, T_LONGLONG, 0, "the bound of bytes"),
    CORE_FIELD(AccumulatorCoreObject, max_records, T_LONGLONG, 0, "the bound of records"),
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef topic_state_core_members[] = {
    CORE_FIELD(TopicStateCoreObject, open, T_OBJECT_EX, 0, "list: per partition, its open batch or None"),
    CORE_FIELD(TopicStateCoreObject, n, T_LONGLONG, 0, "the partition count"),
    CORE_FIELD(TopicStateCoreObject, keyless, T_LONGLONG, 0, "the sticky partition; -1: ask each time"),
    CORE_FIELD(TopicStateCoreObject, hashed, T_BOOL, 0, "keyed records go to murmur2(key) % n"),
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef batch_core_members[] = {
    CORE_FIELD(ProducerBatchCoreObject, records, T_OBJECT_EX, 0, "list of the records' items"),
    CORE_FIELD(ProducerBatchCoreObject, callbacks, T_OBJECT, 0, "list of (index, on_delivery), or None"),
    CORE_FIELD(ProducerBatchCoreObject, size, T_LONGLONG, 0, "BATCH_HEADER + the records' estimates"),
    CORE_FIELD(ProducerBatchCoreObject, closed, T_BOOL, 0, "no record is appended any more"),
    {NULL, 0, 0, 0, NULL},
};

#define CORE_TYPE(var, name, object, prefix, tp_new_, doc)                     \
    static PyTypeObject var = {                                                 \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logstore._speedups." name,  \
        .tp_basicsize = sizeof(object),                                         \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, \
        .tp_doc = doc,                                                          \
        .tp_new = tp_new_,                                                      \
        .tp_dealloc = (destructor)prefix##_dealloc,                             \
        .tp_traverse = (traverseproc)prefix##_traverse,                         \
        .tp_clear = (inquiry)prefix##_clear,                                    \
        .tp_free = PyObject_GC_Del,                                             \
        .tp_members = prefix##_members,                                         \
    }

CORE_TYPE(AccumulatorCoreType, "AccumulatorCore", AccumulatorCoreObject, accumulator_core,
          accumulator_core_new, "The C fields of RecordAccumulator (its base class).");
CORE_TYPE(TopicStateCoreType, "TopicStateCore", TopicStateCoreObject, topic_state_core, core_tp_new,
          "The C fields of the accumulator's TopicState (its base class).");
CORE_TYPE(ProducerBatchCoreType, "ProducerBatchCore", ProducerBatchCoreObject, batch_core, core_tp_new,
          "The C fields of ProducerBatch (its base class).");

/* -- FastProduce ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    AccumulatorCoreObject *acc;
    PyObject *fallback;   /* the general path: produce() with the same arguments */
    long long max_record; /* the largest record estimate (message.max.bytes less the batch header) */
    long long appended;   /* records this path appended (a statistic) */
    char plain;           /* False: every call goes to fallback (interceptors, fatal error, closed) */
} FastProduceObject;

/* produce(topic, value=None, key=None, partition=-1, on_delivery=None,
 *         timestamp=0, headers=None, callback=None) */
enum { P_TOPIC, P_VALUE, P_KEY, P_PARTITION, P_ON_DELIVERY, P_TIMESTAMP, P_HEADERS, P_CALLBACK, P_COUNT };
static const char *const produce_param_names[P_COUNT] = {
    "topic", "value", "key", "partition", "on_delivery", "timestamp", "headers", "callback"};
static PyObject *produce_params[P_COUNT]; /* interned at import */

/* A plain record's fields, the references owned. */
typedef struct produce_record {
    PyObject *key, *value; /* bytes, or NULL for None */
    PyObject *callback;    /* borrowed; NULL for none */
    long long partition;   /* < 0: the partitioner's to choose */
    long long size;        /* the accumulator's estimate */
    uint32_t hash;         /* murmur2(key) */
} produce_record_t;

static int produce_param(PyObject *name) {
    for (int i = 0; i < P_COUNT; i++)
        if (name == produce_params[i]) return i; /* kwnames from code objects are interned */
    for (int i = 0; i < P_COUNT; i++)
        if (PyUnicode_Compare(name, produce_params[i]) == 0) return i;
    return -1;
}

/* Binds the call's arguments to produce()'s parameters (NULL: not given).
 * 0 when they do not bind: the general path raises Python's TypeError. */
static int produce_bind(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **slot) {
    if (nargs > P_COUNT) return 0;
    for (int i = 0; i < P_COUNT; i++) slot[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        int i = produce_param(PyTuple_GET_ITEM(kwnames, k));
        if (i < 0 || slot[i] != NULL) return 0;
        slot[i] = args[nargs + k];
    }
    return slot[P_TOPIC] != NULL;
}

/* A key or value as bytes (a new reference; NULL for None). 0 when the
 * general path must convert it: another type, or a str that does not encode
 * (it raises the error). */
static int plain_bytes(PyObject *obj, PyObject **out) {
    *out = NULL;
    if (obj == NULL || obj == Py_None) return 1;
    if (PyBytes_CheckExact(obj)) {
        *out = Py_NewRef(obj);
        return 1;
    }
    if (!PyUnicode_CheckExact(obj)) return 0;
    *out = PyUnicode_AsUTF8String(obj);
    if (*out == NULL) PyErr_Clear();
    return *out != NULL;
}

static inline int is_int_zero(PyObject *obj) {
    int overflow = 0;
    return PyLong_CheckExact(obj) && PyLong_AsLongLongAndOverflow(obj, &overflow) == 0 && !overflow;
}

/* The record's callback as the general path has it: on_delivery or callback,
 * None for none. Runs on_delivery's __bool__: before anything is taken. */
static int produce_callback(PyObject *on_delivery, PyObject *callback, PyObject **out) {
    PyObject *chosen = callback;
    if (on_delivery != NULL) {
        int truth = PyObject_IsTrue(on_delivery);
        if (truth < 0) return -1;
        if (truth) chosen = on_delivery;
    }
    *out = chosen == Py_None ? NULL : chosen;
    return 0;
}

/* Fills r from the bound arguments: 1 for a plain record, 0 for the general
 * path, -1 with an error set. */
static int produce_record_of(PyObject *const *slot, produce_record_t *r) {
    PyObject *partition = slot[P_PARTITION];
    if (slot[P_HEADERS] != NULL && slot[P_HEADERS] != Py_None) return 0;
    if (slot[P_TIMESTAMP] != NULL && !is_int_zero(slot[P_TIMESTAMP])) return 0;
    if (!PyUnicode_CheckExact(slot[P_TOPIC])) return 0;
    r->partition = -1;
    if (partition != NULL) {
        int overflow = 0;
        if (!PyLong_CheckExact(partition)) return 0; /* bool, numpy ints: as the general path has them */
        r->partition = PyLong_AsLongLongAndOverflow(partition, &overflow);
        if (overflow) return 0;
    }
    if (produce_callback(slot[P_ON_DELIVERY], slot[P_CALLBACK], &r->callback) < 0) return -1;
    if (!plain_bytes(slot[P_VALUE], &r->value) || !plain_bytes(slot[P_KEY], &r->key)) return 0;
    r->size = RECORD_OVERHEAD + (r->key ? PyBytes_GET_SIZE(r->key) : 0) +
              (r->value ? PyBytes_GET_SIZE(r->value) : 0);
    if (r->key != NULL)
        r->hash = ls_murmur2((const uint8_t *)PyBytes_AS_STRING(r->key), (size_t)PyBytes_GET_SIZE(r->key));
    return 1;
}

/* The partition of r (its own, the sticky one, or murmur2's), or -1 when the
 * general path must choose (another partitioner) or refuse (no such
 * partition). Reads state: under the lock, or as a hint. */
static long long produce_partition(const TopicStateCoreObject *state, const produce_record_t *r) {
    long long n = state->n;
    if (n <= 0 || n > INT32_MAX) return -1;
    if (r->partition >= 0) return r->partition < n ? r->partition : -1;
    if (r->key == NULL) return state->keyless < n ? state->keyless : -1;
    return state->hashed ? partition_of(r->hash, (int32_t)n) : -1;
}

/* The open batch of partition p, or NULL (None, closed, or not a batch). */
static ProducerBatchCoreObject *open_batch(const TopicStateCoreObject *state, long long p) {
    PyObject *open = state->open;
    if (p < 0 || open == NULL || !PyList_CheckExact(open) || p >= PyList_GET_SIZE(open)) return NULL;
    PyObject *batch = PyList_GET_ITEM(open, p);
    if (!PyObject_TypeCheck(batch, &ProducerBatchCoreType)) return NULL;
    ProducerBatchCoreObject *b = (ProducerBatchCoreObject *)batch;
    return b->closed || b->records == NULL || !PyList_CheckExact(b->records) ? NULL : b;
}

static inline PyObject *batch_callbacks(const ProducerBatchCoreObject *batch) {
    return batch->callbacks == Py_None ? NULL : batch->callbacks;
}

/* Appends item (and entry, its (index, callback), when it has a callback)
 * to batch and counts it: 1, or -1 with MemoryError and nothing changed.
 * Holds the lock; the batch and the accumulator have room. spare: an empty
 * list for the batch's first callback. */
static int batch_append(AccumulatorCoreObject *acc, ProducerBatchCoreObject *batch, long long size,
                        PyObject *item, PyObject *entry, PyObject *spare) {
    PyObject *records = batch->records, *callbacks = batch_callbacks(batch);
    Py_ssize_t index = PyList_GET_SIZE(records);
    if (entry != NULL) {
        PyObject *number = PyLong_FromSsize_t(index); /* not GC-tracked: no collection here */
        if (number == NULL) return -1;
        PyObject *placeholder = PyTuple_GET_ITEM(entry, 0);
        PyTuple_SET_ITEM(entry, 0, number);
        Py_DECREF(placeholder);
    }
    if (PyList_Append(records, item) < 0) return -1;
    if (entry != NULL && PyList_Append(callbacks != NULL ? callbacks : spare, entry) < 0) {
        /* Cannot fail: right after an append, dropping that item keeps the
         * list's allocation (list_resize only reallocates below half). */
        int undone = PyList_SetSlice(records, index, index + 1, NULL);
        ls_assert(undone == 0);
        return -1;
    }
    if (entry != NULL && callbacks == NULL) Py_XSETREF(batch->callbacks, Py_NewRef(spare));
    batch->size += size;
    acc->records += 1;
    acc->bytes += size;
    ls_assert(acc->records <= acc->max_records && acc->bytes <= acc->buffer_memory);
    return 1;
}

/* The append, the lock held: 1 done, 0 for the general path (no open batch,
 * no room, another partitioner), -1 with an error set. */
static int produce_locked(AccumulatorCoreObject *acc, TopicStateCoreObject *state, const produce_record_t *r,
                          PyObject *item, PyObject *entry, PyObject *spare) {
    ls_assert(acc->lock->locked);
    ProducerBatchCoreObject *batch = open_batch(state, produce_partition(state, r));
    if (batch == NULL || batch->size + r->size > acc->batch_size ||
        PyList_GET_SIZE(batch->records) >= acc->batch_records)
        return 0;
    if (acc->records >= acc->max_records || acc->bytes + r->size > acc->buffer_memory) return 0;
    PyObject *callbacks = batch_callbacks(batch);
    if (entry != NULL && (callbacks != NULL ? !PyList_CheckExact(callbacks) : spare == NULL)) return 0;
    return batch_append(acc, batch, r->size, item, entry, spare);
}

/* Appends r to its topic's open batch: 1, 0 for the general path, -1 with an
 * error set. Everything that allocates a tracked object (the (key, value)
 * item, the callback entry, a first callbacks list) is made before the lock. */
static int produce_append(FastProduceObject *self, PyObject *topic, const produce_record_t *r) {
    AccumulatorCoreObject *acc = self->acc;
    if (r->size > self->max_record) return 0; /* the general path raises MSG_SIZE_TOO_LARGE */
    PyObject *state = PyDict_GetItemWithError(acc->topics, topic);
    if (state == NULL) return PyErr_Occurred() ? -1 : 0; /* no metadata yet: the general path waits */
    if (!PyObject_TypeCheck(state, &TopicStateCoreType)) return 0;
    TopicStateCoreObject *ts = (TopicStateCoreObject *)Py_NewRef(state);
    PyObject *item = r->key == NULL ? Py_NewRef(r->value ? r->value : Py_None)
                                    : PyTuple_Pack(2, r->key, r->value ? r->value : Py_None);
    PyObject *entry = NULL, *spare = NULL;
    int rc = item != NULL ? 0 : -1;
    if (rc == 0 && r->callback != NULL) {
        /* Read without the lock, the open batch is a hint: if it changes
         * meanwhile and lacks a list after all, the general path appends. */
        ProducerBatchCoreObject *hint = open_batch(ts, produce_partition(ts, r));
        int first = hint != NULL && batch_callbacks(hint) == NULL;
        entry = PyTuple_Pack(2, Py_None, r->callback); /* Py_None: the index, set under the lock */
        spare = first && entry != NULL ? PyList_New(0) : NULL;
        if (entry == NULL || (first && spare == NULL)) rc = -1;
    }
    if (rc == 0 && lock_take(acc->lock, 0, 0)) {
        rc = produce_locked(acc, ts, r, item, entry, spare);
        lock_give(acc->lock);
    }
    Py_DECREF(ts);
    Py_XDECREF(item);
    Py_XDECREF(entry);
    Py_XDECREF(spare);
    return rc;
}

static PyObject *fast_produce_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    FastProduceObject *self = (FastProduceObject *)callable;
    PyObject *slot[P_COUNT];
    produce_record_t r = {.key = NULL, .value = NULL, .callback = NULL};
    int rc = 0;
    if (self->plain && produce_bind(args, PyVectorcall_NARGS(nargsf), kwnames, slot))
        rc = produce_record_of(slot, &r);
    if (rc > 0) rc = produce_append(self, slot[P_TOPIC], &r);
    Py_XDECREF(r.key);
    Py_XDECREF(r.value);
    if (rc < 0) return NULL;
    if (rc > 0) {
        self->appended++;
        Py_RETURN_NONE;
    }
    if (self->fallback == NULL) { /* cleared by the collector (a finalizer may still call it) */
        PyErr_SetString(PyExc_ReferenceError, "this producer's produce() was garbage-collected");
        return NULL;
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyObject *fast_produce_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"accumulator", "fallback", "max_record", "plain", NULL};
    PyObject *acc, *fallback;
    long long max_record;
    int plain = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OL|p:FastProduce", names, &AccumulatorCoreType, &acc,
                                     &fallback, &max_record, &plain))
        return NULL;
    if (!PyCallable_Check(fallback)) {
        PyErr_Format(PyExc_TypeError, "fallback must be callable, not %.100s", Py_TYPE(fallback)->tp_name);
        return NULL;
    }
    FastProduceObject *self = (FastProduceObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = fast_produce_call;
    self->acc = (AccumulatorCoreObject *)Py_NewRef(acc);
    self->fallback = Py_NewRef(fallback);
    self->max_record = max_record;
    self->plain = (char)plain;
    return (PyObject *)self;
}

static int fast_produce_traverse(FastProduceObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->acc);
    Py_VISIT(self->fallback);
    return 0;
}

static int fast_produce_clear(FastProduceObject *self) {
    Py_CLEAR(self->acc);
    Py_CLEAR(self->fallback);
    self->plain = 0; /* a cleared object (a cycle being collected) must not be used */
    return 0;
}

static void fast_produce_dealloc(FastProduceObject *self) {
    PyObject_GC_UnTrack(self);
    fast_produce_clear(self);
    PyObject_GC_Del(self);
}

static PyMemberDef fast_produce_members[] = {
    {"plain", T_BOOL, offsetof(FastProduceObject, plain), 0,
     "False: every call takes the general path (set after a fatal error or close)"},
    {"appended", T_LONGLONG, offsetof(FastProduceObject, appended), READONLY,
     "records appended by the fast path so far"},
    {"fallback", T_OBJECT, offsetof(FastProduceObject, fallback), READONLY, "the general path"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FastProduceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logstore._speedups.FastProduce",
    .tp_basicsize = sizeof(FastProduceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "FastProduce(accumulator, fallback, max_record, plain=True)\n\n"
              "A Producer's produce(topic, value=None, key=None, partition=-1, on_delivery=None,\n"
              "timestamp=0, headers=None, callback=None): appends a plain record to its\n"
              "partition's open batch in C, and passes any other call to fallback unchanged.",
    .tp_new = fast_produce_new,
    .tp_dealloc = (destructor)fast_produce_dealloc,
    .tp_traverse = (traverseproc)fast_produce_traverse,
    .tp_clear = (inquiry)fast_produce_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastProduceObject, vectorcall),
    .tp_members = fast_produce_members,
};

/* Readies the section's types and names, and adds them to module. */
static int fast_produce_install(PyObject *module) {
    for (int i = 0; i < P_COUNT; i++) {
        produce_params[i] = PyUnicode_InternFromString(produce_param_names[i]);
        if (produce_params[i] == NULL) return -1;
    }
    PyTypeObject *types[] = {&LockType, &AccumulatorCoreType, &TopicStateCoreType, &ProducerBatchCoreType,
                             &FastProduceType};
    const char *names[] = {"Lock", "AccumulatorCore", "TopicStateCore", "ProducerBatchCore", "FastProduce"};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(module, names[i], (PyObject *)types[i]) < 0)
            return -1;
    }
    return PyModule_AddIntConstant(module, "RECORD_OVERHEAD", RECORD_OVERHEAD);
}

static PyMethodDef speedups_methods[] = {
    {"record_at", (PyCFunction)(void (*)(void))record_at, METH_FASTCALL,
     "record_at(log, index, index_count, base_offset, offset, cache) -> Record | None | False"},
    {"locate", (PyCFunction)(void (*)(void))locate, METH_FASTCALL,
     "locate(log, index, index_count, base_offset, offset) -> (position << 32) | size, or < 0"},
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(section, count, offset_delta_max, base_offset, base_timestamp, log_append, "
     "log_append_time) -> list[Record]"},
    {"decode_messages", decode_messages, METH_VARARGS,
     "decode_messages(section, count, offset_delta_max, base_offset, base_timestamp, log_append, "
     "log_append_time, timestamp_type, topic, partition, min_offset) -> list[Message]"},
    {"decode_fetch_batches", decode_fetch_batches, METH_VARARGS,
     "decode_fetch_batches(buf, position, topic, partition, min_offset) -> (messages, position, "
     "next_offset, stop): the messages of the whole uncompressed batches from position on"},
    {"encode_plain", encode_plain, METH_VARARGS,
     "encode_plain(values, base_offset, timestamp, producer_id, producer_epoch, base_sequence, "
     "partition_leader_epoch, attributes) -> bytes | None"},
    {"murmur2", murmur2, METH_O, "murmur2(data) -> int: Kafka's Utils.murmur2 (signed 32-bit)"},
    {"partition_for_key", (PyCFunction)(void (*)(void))partition_for_key, METH_FASTCALL,
     "partition_for_key(key, num_partitions) -> int: (murmur2(key) & 0x7fffffff) % num_partitions"},
    {"partition_for_keys", (PyCFunction)(void (*)(void))partition_for_keys, METH_FASTCALL,
     "partition_for_keys(keys, num_partitions) -> list[int]: partition_for_key per key, -1 for None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "logstore._speedups",
    "Python-object helpers of the native core (see native/speedups.c).", -1, speedups_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL || PyType_Ready(&RecordType) < 0 || PyType_Ready(&MessageType) < 0) return NULL;
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "Record", (PyObject *)&RecordType) < 0 ||
        PyModule_AddObjectRef(module, "Message", (PyObject *)&MessageType) < 0 ||
        PyModule_AddIntConstant(module, "STOP_COMPRESSED", STOP_COMPRESSED) < 0 ||
        errors_install(module) < 0 || fast_produce_install(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
