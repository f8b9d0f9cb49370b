/*
 * record_at(log, index, index_count, base_offset, offset, cache)
 *   -> Record | None | False
 * One record of a segment by offset, in one call: offset index lookup,
 * position search, then a binary search over the batch's record positions.
 * The first visit to a batch checks its CRC and caches its record positions
 * in `cache` (position -> bytes of int32; cleared past RECORD_CACHE_BATCHES
 * entries), so later lookups touch only the record they return. None: no
 * record has that offset (compacted away). False: the batch is compressed;
 * the caller decodes it whole. A batch that fails its CRC, or records that
 * do not parse, raise RecordDecodeError (BATCH_CORRUPT, RECORD_MALFORMED,
 * HEADER_NAME). locate(...) does the index lookup and position search alone.
 */
#include "speedups.h"

enum { RECORD_CACHE_BATCHES = 65536 };

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
            sp_record_malformed(header->base_offset, i, rc, at_end);
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
    if (!sp_batch_crc_ok(batch, header)) {
        Py_DECREF(key);
        return sp_raise_error(SP_ERR_BATCH_CORRUPT,
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
            int rc = sp_fields_read(&p, end, section, &f);
            if (rc == LS_OK && sp_fields_headers(section, &f, 0, &headers) < 0) {
                sp_record_build_error(header->base_offset, mid);
                rc = LS_ERR_ARGUMENT;
            }
            sp_fields_release(&f);
            if (rc != LS_OK) break;
            int log_append = (header->attributes & LS_ATTR_TIMESTAMP_LOG_APPEND) != 0;
            return sp_record_from_view(section, &f.view, headers, header->base_offset, header->timestamp_base,
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
        sp_raise_error(SP_ERR_INDEX_COUNT,
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
    int rc = ls_segment_locate(log.buf, log.len, index.buf, index_count, base_offset, offset, &position,
                               &size);
    /* The batch's pages read in under the guard: what follows builds Python objects, which a
     * SIGBUS must not interrupt (guard.c), and reads only pages just read. */
    if (rc == LS_OK) rc = ls_touch((const uint8_t *)log.buf + position, size);
    if (rc == LS_ERR_IO) {
        sp_raise_error(SP_ERR_MAPPED_READ, "reading the batch of offset %lld", offset);
    } else if (rc != LS_OK) {
        result = Py_NewRef(Py_None);
    } else if (ls_batch_header((const uint8_t *)log.buf + position, log.len - position, log.len,
                               &header) != LS_OK) {
        /* ls_segment_locate read this header; only a concurrent write (the
         * file, through its mapping) can make it fail here. */
        sp_raise_error(SP_ERR_BATCH_CORRUPT, "the batch header at byte %lld of the segment is malformed",
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

static PyMethodDef lookup_methods[] = {
    {"record_at", (PyCFunction)(void (*)(void))record_at, METH_FASTCALL,
     "record_at(log, index, index_count, base_offset, offset, cache) -> Record | None | False"},
    {"locate", (PyCFunction)(void (*)(void))locate, METH_FASTCALL,
     "locate(log, index, index_count, base_offset, offset) -> (position << 32) | size, or < 0"},
    {NULL, NULL, 0, NULL},
};

int sp_lookup_install(PyObject *module) {
    return PyModule_AddFunctions(module, lookup_methods);
}
