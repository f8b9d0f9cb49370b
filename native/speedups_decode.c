/*
 * Decoding records into objects: one record's fields and header positions
 * (record_fields_t, in speedups.h; record_at reads them too), then the
 * object a sink builds from them. decode_records and decode_messages decode
 * one records section; decode_fetch_batches walks a Fetch record set.
 */
#include "speedups.h"

/* Reads one record at *p; re-reads into heap arrays when it has many
 * headers. LS_OK, or a code (with MemoryError set if the heap failed).
 * sp_fields_release frees what it took, whatever it returned. */
int sp_fields_read(const uint8_t **p, const uint8_t *end, const uint8_t *base, record_fields_t *f) {
    const uint8_t *start = *p;
    f->heap = NULL;
    f->hkp = f->stack[0], f->hkl = f->stack[1], f->hvp = f->stack[2], f->hvl = f->stack[3];
    int rc = ls_record_read(p, end, base, &f->view, f->stack[0], f->stack[1], f->stack[2], f->stack[3],
                            SP_HEADER_SLOTS_STACK);
    if (rc != LS_OK || f->view.header_count <= SP_HEADER_SLOTS_STACK) return rc;
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

void sp_fields_release(record_fields_t *f) {
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
int sp_fields_headers(const uint8_t *base, const record_fields_t *f, int as_list, PyObject **out) {
    int32_t n = f->view.header_count;
    *out = NULL;
    if (n == 0) {
        if (!as_list) *out = Py_NewRef(sp_empty_tuple);
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

PyObject *sp_record_from_view(const uint8_t *base, const ls_record_view_t *r, PyObject *headers,
                              long long base_offset, long long base_timestamp, int log_append,
                              long long log_append_time) {
    const record_sink_t s = {.base_offset = base_offset, .base_timestamp = base_timestamp,
                             .log_append = log_append, .log_append_time = log_append_time};
    PyObject *key = bytes_or_none(base, r->key_pos, r->key_len);
    PyObject *value = key ? bytes_or_none(base, r->value_pos, r->value_len) : NULL;
    PyObject *timestamp = value ? PyLong_FromLongLong(sink_timestamp(&s, r)) : NULL;
    PyObject *offset = timestamp ? PyLong_FromLongLong(sink_offset(&s, r)) : NULL;
    PyObject *record = offset ? sp_record_new(key, value, headers, timestamp, offset) : NULL;
    if (record == NULL) {
        Py_XDECREF(key), Py_XDECREF(value), Py_XDECREF(timestamp), Py_XDECREF(offset);
        Py_DECREF(headers);
    }
    return record;
}

static PyObject *record_build(const record_sink_t *s, const uint8_t *base, const ls_record_view_t *r,
                              PyObject *headers) {
    return sp_record_from_view(base, r, headers, s->base_offset, s->base_timestamp, s->log_append,
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
    MessageObject *m = sp_message_alloc(Py_NewRef(s->topic), key, value, headers, NULL);
    if (m == NULL) return NULL;
    m->partition = s->partition, m->offset = sink_offset(s, r);
    m->timestamp_type = s->timestamp_type, m->timestamp = sink_timestamp(s, r);
    if (headers != NULL) PyObject_GC_Track((PyObject *)m); /* a list: see message_maybe_track */
    return (PyObject *)m;
}

/* Reads record index of a batch at *p: sp_fields_read, then its offset delta
 * checked against the batch's last (LS_ERR_OFFSET past it). LS_OK, or a
 * code with nothing raised yet (sp_record_malformed raises it), or
 * LS_ERR_CAPACITY with MemoryError set. */
static int record_read_checked(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                               int32_t delta_max, record_fields_t *f) {
    int rc = sp_fields_read(p, end, base, f);
    if (rc == LS_OK && f->view.offset_delta > delta_max) rc = LS_ERR_OFFSET;
    return rc;
}

/* Raises RECORD_MALFORMED for record index of the batch at base_offset,
 * saying why from the code record_read_checked returned; at_end: the
 * section ended before the record. Leaves an error already set (memory). */
void sp_record_malformed(long long base_offset, int32_t index, int rc, int at_end) {
    if (PyErr_Occurred()) return;
    const char *why = at_end               ? "the records section ends before it"
                      : rc == LS_ERR_OFFSET ? "its offset delta is past the batch's last offset delta"
                                            : "its length, varints or field sizes do not parse";
    sp_raise_error(SP_ERR_RECORD_MALFORMED, "record %d of the batch at offset %lld is malformed: %s",
                   (int)index, base_offset, why);
}

/* The error of a record that parsed but was not built: a header name that
 * is not UTF-8 (raised as HEADER_NAME, the decoder's reason kept), or
 * anything else (memory), left as it is. */
void sp_record_build_error(long long base_offset, int32_t index) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    sp_raise_error(SP_ERR_HEADER_NAME,
                   "record %d of the batch at offset %lld has a header name that is not UTF-8 (%S)",
                   (int)index, base_offset, value);
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
        if (rc == LS_OK && !skip && sp_fields_headers(base, &f, sink->headers_as_list, &headers) == 0)
            item = sink->build(sink, base, &f.view, headers);
        sp_fields_release(&f);
        if (skip) continue;
        if (item == NULL) {
            if (rc != LS_OK) sp_record_malformed(sink->base_offset, i, rc, at_end);
            else sp_record_build_error(sink->base_offset, i);
            for (Py_ssize_t k = 0; k < written; k++) Py_CLEAR(out[k]);
            return -1;
        }
        out[written++] = item;
    }
    ls_assert(written <= count);
    if (p != end) {
        for (Py_ssize_t k = 0; k < written; k++) Py_CLEAR(out[k]);
        sp_raise_error(SP_ERR_TRAILING_BYTES,
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
        return sp_raise_error(SP_ERR_RECORD_COUNT,
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

/* decode_records' and decode_messages' list: what sink builds from the
 * count records of section, those below sink->min_delta left out. NULL
 * with an error set (RECORD_COUNT before anything is allocated). */
static PyObject *section_to_list(const Py_buffer *section, int count, int offset_delta_max,
                                 const record_sink_t *sink) {
    PyObject *list = section_list(count, section->len, sink->base_offset);
    if (list == NULL) return NULL;
    Py_ssize_t n = decode_section(section->buf, section->len, count, offset_delta_max, sink,
                                  PySequence_Fast_ITEMS(list));
    if (n < 0 || list_truncate(list, n) < 0) Py_CLEAR(list);
    return list;
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
    PyObject *list = section_to_list(&section, count, offset_delta_max, &sink);
    ls_assert(list == NULL || PyList_GET_SIZE(list) == count); /* min_delta 0 skips nothing */
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
    PyObject *list = section_to_list(&section, count, offset_delta_max, &sink);
    PyBuffer_Release(&section);
    return list;
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
        if (rc == LS_OK && !sp_batch_crc_ok(batch, &h)) rc = LS_ERR_CRC;
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
            if (n < 0 && !PyErr_ExceptionMatches(sp_corrupt_record_error)) return -1;
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
        sp_raise_error(SP_ERR_POSITION, "position %lld is outside the buffer (%zd bytes)", position, buf.len);
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
            else if (!sp_batch_crc_ok(batch, &h))
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

static PyMethodDef decode_methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(section, count, offset_delta_max, base_offset, base_timestamp, log_append, "
     "log_append_time) -> list[Record]"},
    {"decode_messages", decode_messages, METH_VARARGS,
     "decode_messages(section, count, offset_delta_max, base_offset, base_timestamp, log_append, "
     "log_append_time, timestamp_type, topic, partition, min_offset) -> list[Message]"},
    {"decode_fetch_batches", decode_fetch_batches, METH_VARARGS,
     "decode_fetch_batches(buf, position, topic, partition, min_offset) -> (messages, position, "
     "next_offset, stop): the messages of the whole uncompressed batches from position on"},
    {NULL, NULL, 0, NULL},
};

int sp_decode_install(PyObject *module) {
    if (PyModule_AddFunctions(module, decode_methods) < 0) return -1;
    return PyModule_AddIntConstant(module, "STOP_COMPRESSED", STOP_COMPRESSED);
}
