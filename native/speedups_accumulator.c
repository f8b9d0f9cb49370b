/*
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
 * no finalizer) can run mid-append. Lock is this module's (speedups_lock.c),
 * as threading's lock has no C API to try.
 */
#include "speedups.h"

#include <structmember.h>
#include <string.h>
#include <time.h>

enum { RECORD_OVERHEAD = 21 }; /* accumulator.RECORD_OVERHEAD: a plain record's framing, at most */

/* -- The C base classes of RecordAccumulator, TopicState, ProducerBatch ---- */

typedef struct {
    PyObject_HEAD
    LockObject *lock;  /* made here, read-only: guards everything below and the batches */
    PyObject *topics;  /* made here, read-only: dict, topic name -> TopicState */
    long long records; /* records queued or in flight (or reserved) */
    long long bytes;   /* their size estimate */
    long long batch_size, batch_records, buffer_memory, max_records;
    char times;             /* new batches keep their records' enqueue times */
    char times_on_callback; /* times turns on at the first record with a delivery callback */
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
    PyObject *times;     /* bytearray: each record's enqueue time (a C double, time.monotonic()), or None */
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
    self->lock = sp_lock_new();
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
    Py_VISIT(self->times);
    return 0;
}

static int batch_core_clear(ProducerBatchCoreObject *self) {
    Py_CLEAR(self->records);
    Py_CLEAR(self->callbacks);
    Py_CLEAR(self->times);
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
    CORE_FIELD(AccumulatorCoreObject, times, T_BOOL, 0, "new batches keep their records' enqueue times"),
    CORE_FIELD(AccumulatorCoreObject, times_on_callback, T_BOOL, 0,
               "times turns on at the first record with a delivery callback"),
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
    CORE_FIELD(ProducerBatchCoreObject, times, T_OBJECT, 0,
               "bytearray of each record's enqueue time (native doubles, time.monotonic()), or None"),
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
    return state->hashed ? sp_partition_of(r->hash, (int32_t)n) : -1;
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

/* Appends now (time.monotonic()'s clock) to the batch's enqueue times, when it keeps them or
 * the accumulator has just turned them on (the records before get 0.0: none of them has a
 * delivery report, or times would have been on): 0, or -1 with MemoryError. Holds the lock. */
static int batch_append_time(const AccumulatorCoreObject *acc, ProducerBatchCoreObject *batch,
                             Py_ssize_t index) {
    PyObject *times = batch->times;
    if (times == NULL || times == Py_None) {
        if (!acc->times) return 0;
        times = PyByteArray_FromStringAndSize(NULL, index * (Py_ssize_t)sizeof(double));
        if (times == NULL) return -1;
        memset(PyByteArray_AS_STRING(times), 0, (size_t)index * sizeof(double));
        Py_XSETREF(batch->times, times);
    }
    if (!PyByteArray_CheckExact(times)) return 0;
    ls_assert(PyByteArray_GET_SIZE(times) == index * (Py_ssize_t)sizeof(double));
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double seconds = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
    if (PyByteArray_Resize(times, (index + 1) * (Py_ssize_t)sizeof(double)) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(times) + index * sizeof(double), &seconds, sizeof(double));
    return 0;
}

/* Undoes batch_append_time's append of record index (shrinking cannot fail). */
static void batch_drop_time(ProducerBatchCoreObject *batch, Py_ssize_t index) {
    PyObject *times = batch->times;
    if (times == NULL || !PyByteArray_CheckExact(times)) return;
    int undone = PyByteArray_Resize(times, index * (Py_ssize_t)sizeof(double));
    ls_assert(undone == 0);
}

/* Appends item (and entry, its (index, callback), when it has a callback)
 * to batch, with its enqueue time, and counts it: 1, or -1 with MemoryError
 * and nothing changed. Holds the lock; the batch and the accumulator have
 * room. spare: an empty list for the batch's first callback. */
static int batch_append(AccumulatorCoreObject *acc, ProducerBatchCoreObject *batch, long long size,
                        PyObject *item, PyObject *entry, PyObject *spare) {
    PyObject *records = batch->records, *callbacks = batch_callbacks(batch);
    Py_ssize_t index = PyList_GET_SIZE(records);
    if (batch_append_time(acc, batch, index) < 0) return -1;
    if (entry != NULL) {
        PyObject *number = PyLong_FromSsize_t(index); /* not GC-tracked: no collection here */
        if (number == NULL) return -1;
        PyObject *placeholder = PyTuple_GET_ITEM(entry, 0);
        PyTuple_SET_ITEM(entry, 0, number);
        Py_DECREF(placeholder);
    }
    if (PyList_Append(records, item) < 0) {
        batch_drop_time(batch, index);
        return -1;
    }
    if (entry != NULL && PyList_Append(callbacks != NULL ? callbacks : spare, entry) < 0) {
        /* Cannot fail: right after an append, dropping that item keeps the
         * list's allocation (list_resize only reallocates below half). */
        int undone = PyList_SetSlice(records, index, index + 1, NULL);
        ls_assert(undone == 0);
        batch_drop_time(batch, index);
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
    if (r->callback != NULL && acc->times_on_callback) acc->times = 1; /* batches from the next on */
    if (rc == 0 && r->callback != NULL) {
        /* Read without the lock, the open batch is a hint: if it changes
         * meanwhile and lacks a list after all, the general path appends. */
        ProducerBatchCoreObject *hint = open_batch(ts, produce_partition(ts, r));
        int first = hint != NULL && batch_callbacks(hint) == NULL;
        entry = PyTuple_Pack(2, Py_None, r->callback); /* Py_None: the index, set under the lock */
        spare = first && entry != NULL ? PyList_New(0) : NULL;
        if (entry == NULL || (first && spare == NULL)) rc = -1;
    }
    if (rc == 0 && sp_lock_take(acc->lock, 0, 0)) {
        rc = produce_locked(acc, ts, r, item, entry, spare);
        sp_lock_give(acc->lock);
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

/* Interns produce()'s parameter names; readies the types and adds them. */
int sp_accumulator_install(PyObject *module) {
    for (int i = 0; i < P_COUNT; i++) {
        produce_params[i] = PyUnicode_InternFromString(produce_param_names[i]);
        if (produce_params[i] == NULL) return -1;
    }
    PyTypeObject *types[] = {&AccumulatorCoreType, &TopicStateCoreType, &ProducerBatchCoreType,
                             &FastProduceType};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyModule_AddType(module, types[i]) < 0) return -1;
    }
    return PyModule_AddIntConstant(module, "RECORD_OVERHEAD", RECORD_OVERHEAD);
}
