/*
 * encode_plain: a whole uncompressed batch from a list of plain records
 * (the producer's common case), sized in one pass and written in a second,
 * with no Python object per record.
 */
#include "speedups.h"

/* The fast path's records: a bytes value, or a (key, value) pair of bytes
 * or None; no headers, every record at the batch timestamp. */
typedef struct plain_record {
    const uint8_t *key, *value;
    int32_t key_len, value_len; /* -1: null */
} plain_record_t;

/* One field of a plain record: bytes (at most INT32_MAX / 4 of them, so a
 * record's sizes add up without overflow) or None. 0 if it is neither. */
static inline int plain_field(PyObject *obj, const uint8_t **data, int32_t *len) {
    if (obj == Py_None) {
        *data = NULL, *len = -1;
        return 1;
    }
    if (!PyBytes_CheckExact(obj) || PyBytes_GET_SIZE(obj) > INT32_MAX / 4) return 0;
    *data = (const uint8_t *)PyBytes_AS_STRING(obj), *len = (int32_t)PyBytes_GET_SIZE(obj);
    return 1;
}

/* Splits item into key and value; 0 if it is not a plain record. */
static inline int plain_fields(PyObject *item, plain_record_t *r) {
    PyObject *key = Py_None, *value = item;
    if (PyTuple_CheckExact(item)) {
        if (PyTuple_GET_SIZE(item) != 2) return 0;
        key = PyTuple_GET_ITEM(item, 0);
        value = PyTuple_GET_ITEM(item, 1);
    }
    return plain_field(key, &r->key, &r->key_len) && plain_field(value, &r->value, &r->value_len);
}

/* Body size of a plain record (after its length varint). */
static inline int64_t plain_body_size(int32_t index, const plain_record_t *r) {
    return 1 + 1 /* timestamp delta 0 */ + varint_size(index) + field_size(r->key_len) +
           field_size(r->value_len) + 1 /* no headers */;
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
        p = field_write(p, r.key, r.key_len);
        p = field_write(p, r.value, r.value_len);
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
        return sp_raise_error(SP_ERR_BATCH_FIELDS, "base_offset must be at least 0, got %lld", base_offset);
    if ((attributes & LS_ATTR_COMPRESSION_MASK) != 0)
        return sp_raise_error(SP_ERR_BATCH_FIELDS,
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

static PyMethodDef encode_methods[] = {
    {"encode_plain", encode_plain, METH_VARARGS,
     "encode_plain(values, base_offset, timestamp, producer_id, producer_epoch, base_sequence, "
     "partition_leader_epoch, attributes) -> bytes | None"},
    {NULL, NULL, 0, NULL},
};

int sp_encode_install(PyObject *module) {
    return PyModule_AddFunctions(module, encode_methods);
}
