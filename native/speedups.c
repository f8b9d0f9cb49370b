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

#include "ls_core.h"

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
 * decode_records(section, count, offset_delta_max, base_offset, base_timestamp,
 *                log_append, log_append_time)
 *   -> list[Record]
 * One pass over a records section: varints in C, one Record per record.
 * log_append stamps every record with log_append_time (LogAppendTime batches).
 */
enum { HEADER_SLOTS_STACK = 32, RECORD_CACHE_BATCHES = 65536 };

static PyObject *bytes_or_none(const uint8_t *base, int32_t pos, int32_t len) {
    if (len < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)base + pos, len);
}

static PyObject *decode_headers(const uint8_t *base, const ls_record_view_t *r, const int32_t *hkp,
                                const int32_t *hkl, const int32_t *hvp, const int32_t *hvl) {
    PyObject *headers = PyTuple_New(r->header_count);
    if (headers == NULL) return NULL;
    for (int32_t h = 0; h < r->header_count; h++) {
        PyObject *name = PyUnicode_DecodeUTF8((const char *)base + hkp[h], hkl[h], "strict");
        PyObject *value = name ? bytes_or_none(base, hvp[h], hvl[h]) : NULL;
        PyObject *pair = value ? PyTuple_Pack(2, name, value) : NULL;
        Py_XDECREF(name);
        Py_XDECREF(value);
        if (pair == NULL) {
            Py_DECREF(headers);
            return NULL;
        }
        PyTuple_SET_ITEM(headers, h, pair);
    }
    return headers;
}

/* Reads one record; re-reads with heap arrays when it has many headers. */
static int read_one(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                    ls_record_view_t *r, PyObject **headers_out) {
    int32_t hkp[HEADER_SLOTS_STACK], hkl[HEADER_SLOTS_STACK], hvp[HEADER_SLOTS_STACK],
        hvl[HEADER_SLOTS_STACK];
    const uint8_t *start = *p;
    int rc = ls_record_read(p, end, base, r, hkp, hkl, hvp, hvl, HEADER_SLOTS_STACK);
    if (rc != LS_OK) return rc;
    if (r->header_count == 0) {
        *headers_out = Py_NewRef(empty_tuple);
        return LS_OK;
    }
    if (r->header_count <= HEADER_SLOTS_STACK) {
        *headers_out = decode_headers(base, r, hkp, hkl, hvp, hvl);
        return *headers_out ? LS_OK : LS_ERR_ARGUMENT;
    }
    int32_t *heap = PyMem_Malloc(sizeof(int32_t) * 4 * (size_t)r->header_count);
    if (heap == NULL) return LS_ERR_CAPACITY;
    int32_t n = r->header_count;
    *p = start;
    rc = ls_record_read(p, end, base, r, heap, heap + n, heap + 2 * n, heap + 3 * n, n);
    if (rc == LS_OK) {
        *headers_out = decode_headers(base, r, heap, heap + n, heap + 2 * n, heap + 3 * n);
        if (*headers_out == NULL) rc = LS_ERR_ARGUMENT;
    }
    PyMem_Free(heap);
    return rc;
}

static PyObject *record_from_view(const uint8_t *base, const ls_record_view_t *r, PyObject *headers,
                                  long long base_offset, long long base_timestamp, int log_append,
                                  long long log_append_time) {
    PyObject *key = bytes_or_none(base, r->key_pos, r->key_len);
    PyObject *value = key ? bytes_or_none(base, r->value_pos, r->value_len) : NULL;
    /* Unsigned addition: a hostile delta wraps instead of overflowing (UB). */
    long long ts = log_append ? log_append_time
                              : (long long)((uint64_t)base_timestamp + (uint64_t)r->timestamp_delta);
    PyObject *timestamp = value ? PyLong_FromLongLong(ts) : NULL;
    PyObject *offset = timestamp ? PyLong_FromLongLong(base_offset + r->offset_delta) : NULL;
    PyObject *record = offset ? record_new_fields(key, value, headers, timestamp, offset) : NULL;
    if (record == NULL) {
        Py_XDECREF(key), Py_XDECREF(value), Py_XDECREF(timestamp), Py_XDECREF(offset);
        Py_DECREF(headers);
    }
    return record;
}

static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer section;
    int count, offset_delta_max, log_append;
    long long base_offset, base_timestamp, log_append_time;
    if (!PyArg_ParseTuple(args, "y*iiLLpL", &section, &count, &offset_delta_max, &base_offset,
                          &base_timestamp, &log_append, &log_append_time))
        return NULL;
    PyObject *list = count >= 0 && count <= section.len ? PyList_New(count) : NULL;
    if (list == NULL) {
        PyBuffer_Release(&section);
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "record count %d does not fit the batch", count);
        return NULL;
    }
    const uint8_t *base = section.buf, *p = base, *end = base + section.len;
    for (int i = 0; i < count; i++) {
        ls_record_view_t r;
        PyObject *headers = NULL;
        int rc = read_one(&p, end, base, &r, &headers);
        if (rc == LS_OK && r.offset_delta > offset_delta_max) {
            Py_DECREF(headers);
            rc = LS_ERR_CORRUPT; /* past the batch's last offset */
        }
        PyObject *record = rc == LS_OK ? record_from_view(base, &r, headers, base_offset, base_timestamp,
                                                          log_append, log_append_time) : NULL;
        if (record == NULL) {
            Py_DECREF(list);
            PyBuffer_Release(&section);
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "record %d of the batch is malformed (code %d)", i, rc);
            }
            return NULL;
        }
        PyList_SET_ITEM(list, i, record);
    }
    int trailing = p != end;
    PyBuffer_Release(&section);
    if (trailing) {
        Py_DECREF(list);
        PyErr_SetString(PyExc_ValueError, "bytes left over after the batch's last record");
        return NULL;
    }
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
    int64_t size = LS_BATCH_HEADER_SIZE + section;
    PyObject *batch = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (batch == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(batch);
    plain_section_write(values, count, out + LS_BATCH_HEADER_SIZE, section);
    int rc = ls_batch_seal(out, size, base_offset, leader_epoch, attributes, (int32_t)(count - 1),
                           timestamp, timestamp, producer_id, producer_epoch, base_sequence,
                           (int32_t)count);
    if (rc != LS_OK) {
        Py_DECREF(batch);
        PyErr_Format(PyExc_ValueError, "sealing the batch failed (%d): check its header fields", rc);
        return NULL;
    }
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
 * A batch that fails its CRC raises ValueError.
 */
static PyObject *batch_positions(const uint8_t *batch, const ls_batch_t *header) {
    const uint8_t *section = batch + LS_BATCH_HEADER_SIZE;
    const uint8_t *p = section, *end = batch + header->size;
    PyObject *table = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)header->record_count * 4);
    if (table == NULL) return NULL;
    int32_t *positions = (int32_t *)PyBytes_AS_STRING(table);
    for (int32_t i = 0; i < header->record_count; i++) {
        ls_record_view_t r;
        positions[i] = (int32_t)(p - section);
        if (ls_record_read(&p, end, section, &r, NULL, NULL, NULL, NULL, 0) != LS_OK ||
            r.offset_delta > header->last_offset_delta) {
            Py_DECREF(table);
            PyErr_SetString(PyExc_ValueError, "a record of the batch is malformed");
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
        PyErr_Format(PyExc_ValueError, "the batch at byte %lld failed its CRC-32C check", (long long)position);
        return NULL;
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
            PyObject *headers = NULL;
            if (read_one(&p, end, section, &r, &headers) != LS_OK) break;
            int log_append = (header->attributes & LS_ATTR_TIMESTAMP_LOG_APPEND) != 0;
            return record_from_view(section, &r, headers, header->base_offset, header->timestamp_base,
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
    if (ints[0] < 0 || ints[0] * LS_OFFSET_INDEX_ENTRY_SIZE > index->len) {
        PyBuffer_Release(log);
        PyBuffer_Release(index);
        PyErr_SetString(PyExc_ValueError, "index_count exceeds the index buffer");
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
        PyErr_SetString(PyExc_ValueError, "a batch header of the segment is malformed");
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
 * Kafka's key partitioning: murmur2(key) -> int, partition_for_key(key, n)
 * -> int, partition_for_keys(keys, n) -> list[int].
 * murmur2 is the Java client's Utils.murmur2 (MurmurHash2, seed 0x9747b28c,
 * little-endian words) and librdkafka's rd_murmur2; a key's partition is
 * (murmur2(key) & 0x7fffffff) % n, Java's toPositive then modulo, so keyed
 * records land where the Java client and librdkafka put them.
 */
enum { MURMUR2_SEED = 0x9747b28c, MURMUR2_M = 0x5bd1e995, MURMUR2_R = 24 };

static uint32_t murmur2_u32(const uint8_t *data, size_t len) {
    /* Java hashes an int length; a Python buffer longer than 2^31 has no
     * Java counterpart, and truncating is what librdkafka does. */
    uint32_t h = (uint32_t)MURMUR2_SEED ^ (uint32_t)len;
    size_t words = len / 4;
    for (size_t i = 0; i < words; i++) {
        const uint8_t *w = data + 4 * i;
        /* Byte by byte: keys are unaligned and the order is little-endian on
         * every host; compilers fuse this into one load on x86 and arm64. */
        uint32_t k = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
        k *= MURMUR2_M;
        k ^= k >> MURMUR2_R;
        k *= MURMUR2_M;
        h *= MURMUR2_M;
        h ^= k;
    }
    const uint8_t *tail = data + 4 * words;
    switch (len & 3) { /* falls through, as in Java */
    case 3: h ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)tail[1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)tail[0]; h *= MURMUR2_M;
    }
    h ^= h >> 13;
    h *= MURMUR2_M;
    h ^= h >> 15;
    return h;
}

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
        PyErr_Format(PyExc_ValueError, "num_partitions must be between 1 and %d, got %R", INT32_MAX, arg);
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
        *out = murmur2_u32((const uint8_t *)PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key));
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "key must be a contiguous bytes-like object, not %.100s",
                     Py_TYPE(key)->tp_name);
        return -1;
    }
    *out = murmur2_u32(view.buf, (size_t)view.len);
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

static PyMethodDef speedups_methods[] = {
    {"record_at", (PyCFunction)(void (*)(void))record_at, METH_FASTCALL,
     "record_at(log, index, index_count, base_offset, offset, cache) -> Record | None | False"},
    {"locate", (PyCFunction)(void (*)(void))locate, METH_FASTCALL,
     "locate(log, index, index_count, base_offset, offset) -> (position << 32) | size, or < 0"},
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(section, count, offset_delta_max, base_offset, base_timestamp, log_append, "
     "log_append_time) -> list[Record]"},
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
    if (empty_tuple == NULL || PyType_Ready(&RecordType) < 0) return NULL;
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "Record", (PyObject *)&RecordType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
