/*
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
 *
 * MessageObject is in speedups.h: speedups_decode.c fills in the messages
 * it allocates with sp_message_alloc.
 */
#include "speedups.h"

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
MessageObject *sp_message_alloc(PyObject *topic, PyObject *key, PyObject *value, PyObject *headers,
                                PyObject *error) {
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
    MessageObject *m = sp_message_alloc(Py_NewRef(topic), Py_NewRef(key), Py_NewRef(value),
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

int sp_message_install(PyObject *module) {
    return PyModule_AddType(module, &MessageType);
}
