/*
 * Kafka record batches <-> Apache Arrow columns, with no per-record Python.
 *
 * Decoding writes the rows of v2 batches straight into Arrow buffers that
 * the caller allocated (numpy arrays, in logstore/records/arrow.py); the
 * layouts are described in ls_api.h. A decode is two walks: ls_arrow_plan
 * reads batch headers only, to size the columns; ls_arrow_decode then checks
 * each batch (CRC-32C) and copies its keys, values and headers out while the
 * batch is still in cache. Compressed batches stop the walk: the caller
 * decompresses the section (Python's codecs) and hands it to
 * ls_arrow_decode_section, which decodes it with the same routine.
 *
 * Capacity is checked per batch, before its records are read, against upper
 * bounds from the batch itself (record count; keys, values and header bytes
 * all lie inside the records section; a header takes at least two bytes), so
 * the per-record path has no capacity branches.
 *
 * Encoding reads Arrow binary columns and writes sealed v2 batches; the
 * partitioner hashes a binary column with Kafka's murmur2.
 *
 * Every loop over batches advances by at least LS_BATCH_HEADER_SIZE bytes;
 * every loop over records is bounded by a record count or a row count.
 */
/* mmap's MAP_ANONYMOUS and MAP_NORESERVE and madvise's advice are not C11. */
#define _GNU_SOURCE
#include "ls_core.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
    ATTR_CONTROL = 0x20,
    /* A header is a key length and a value length, one byte each at least. */
    HEADER_SIZE_MIN = 2,
    TIMESTAMP_TYPE_CREATE = 0,
    TIMESTAMP_TYPE_LOG_APPEND = 1
};

/* ---------------------------------------------------------------------------
 * Bitmaps and binary columns.
 */

/* Clears then sets the bit: the byte may be fresh (uninitialized) memory, or
 * hold bits of rows a failed batch wrote and rolled back. */
static inline void bit_put(uint8_t *bits, int64_t i, int set) {
    uint8_t mask = (uint8_t)(1u << (i & 7));
    uint8_t byte = (uint8_t)(bits[i >> 3] & (uint8_t)~mask);
    bits[i >> 3] = set ? (uint8_t)(byte | mask) : byte;
}

static inline int bit_get(const uint8_t *bits, int64_t bit, int64_t i) {
    if (bits == NULL) return 1; /* Arrow: no bitmap means no nulls */
    int64_t at = bit + i;
    return (bits[at >> 3] >> (at & 7)) & 1;
}

/* Appends slot i of a binary column: len bytes at src, or null (len -1). The
 * caller checked capacity for the whole batch. */
static inline void binary_put(uint8_t *valid, int32_t *offsets, uint8_t *data, int64_t i,
                              const uint8_t *src, int32_t len, int64_t *nulls) {
    int32_t at = offsets[i];
    if (len < 0) {
        if (valid != NULL) bit_put(valid, i, 0);
        *nulls += 1;
        offsets[i + 1] = at;
        return;
    }
    if (valid != NULL) bit_put(valid, i, 1);
    if (len > 0) memcpy(data + at, src, (size_t)len);
    offsets[i + 1] = at + len;
}

/* ---------------------------------------------------------------------------
 * Decoding: which batches hold rows, capacity, one record, one batch.
 */

/* A data batch with records in [offset_start, offset_end); the walk has
 * already stopped at batches starting at or past offset_end. */
static int batch_has_rows(const ls_batch_t *b, int64_t offset_start) {
    if (b->attributes & ATTR_CONTROL) return 0; /* transaction markers: no rows */
    if (b->record_count == 0) return 0;         /* emptied by compaction */
    return b->base_offset + b->last_offset_delta >= offset_start;
}

int ls_arrow_plan(const uint8_t *buf, int64_t len, ls_arrow_plan_t *plan) {
    if (plan == NULL || len < 0 || (buf == NULL && len > 0)) return LS_ERR_ARGUMENT;
    if (plan->offset_start < 0 || plan->offset_end < plan->offset_start) return LS_ERR_ARGUMENT;
    plan->bytes = plan->rows = plan->data = plan->section_max = 0;
    plan->stop = LS_OK;
    int64_t iterations_max = len / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && plan->bytes < len; i++) {
        ls_batch_t b;
        int rc = ls_batch_header(buf + plan->bytes, len - plan->bytes, LS_BATCH_SIZE_LIMIT, &b);
        if (rc != LS_OK) {
            plan->stop = rc;
            break;
        }
        if (b.base_offset >= plan->offset_end) {
            plan->stop = LS_ARROW_STOP_END;
            break;
        }
        /* Compressed batches are sized once decompressed (the caller grows the
         * columns then): their record counts are not bounded by their bytes. */
        if (batch_has_rows(&b, plan->offset_start) && (b.attributes & LS_ATTR_COMPRESSION_MASK) == 0) {
            int64_t section = b.size - LS_BATCH_HEADER_SIZE;
            plan->rows += b.record_count;
            plan->data += section;
            if (section > plan->section_max) plan->section_max = section;
        }
        plan->bytes += b.size;
    }
    ls_assert(plan->bytes <= len);
    return LS_OK;
}

/* Whether a column of `cap` bytes holding `used` can take `more`: LS_OK,
 * LS_ARROW_STOP_FULL past the Arrow limit, or LS_ERR_CAPACITY. */
static int data_room(int64_t used, int64_t more, int64_t cap, int64_t limit) {
    if (more > limit - used) return LS_ARROW_STOP_FULL;
    return more <= cap - used ? LS_OK : LS_ERR_CAPACITY;
}

/* Room for a batch of `count` records in a section of `len` bytes. */
static int columns_room(const ls_arrow_columns_t *c, int32_t count, int64_t len) {
    if (count > c->rows_cap - c->rows) return LS_ERR_CAPACITY;
    int rc = data_room(c->key_offsets[c->rows], len, c->key_cap, c->data_limit);
    if (rc == LS_OK) rc = data_room(c->value_offsets[c->rows], len, c->value_cap, c->data_limit);
    if (rc != LS_OK || (c->flags & LS_ARROW_HEADERS) == 0) return rc;
    rc = data_room(c->headers, len / HEADER_SIZE_MIN, c->headers_cap, INT32_MAX);
    if (rc == LS_OK) rc = data_room(c->hkey_offsets[c->headers], len, c->hkey_cap, c->data_limit);
    if (rc == LS_OK) rc = data_room(c->hvalue_offsets[c->headers], len, c->hvalue_cap, c->data_limit);
    return rc;
}

/* Reads a header field (length varint and bytes) inside [*p, end); a key
 * (nullable 0) has length >= 0, a value may be -1. */
static int header_field(const uint8_t **p, const uint8_t *end, int nullable, const uint8_t **src,
                        int32_t *len) {
    int64_t n;
    int rc = varint_read(p, end, LS_VARINT_MAX, &n);
    if (rc != LS_OK) return rc;
    if (n < (nullable ? -1 : 0) || n > end - *p) return LS_ERR_CORRUPT;
    *src = *p;
    *len = (int32_t)n;
    if (n > 0) *p += n;
    return LS_OK;
}

/* Appends row `row`'s headers, which ls_record_read already validated: they
 * start at `at` (the header count) and end at `end` (the record's end). */
static int headers_put(ls_arrow_columns_t *c, int64_t row, const uint8_t *at, const uint8_t *end,
                       int32_t count) {
    int32_t first = c->header_offsets[row];
    ls_assert(first == c->headers);
    if (count == 0) {
        bit_put(c->header_valid, row, 0);
        c->header_nulls++;
        c->header_offsets[row + 1] = first;
        return LS_OK;
    }
    bit_put(c->header_valid, row, 1);
    int64_t count_again, key_nulls = 0; /* header keys are never null */
    int rc = varint_read(&at, end, LS_VARINT_MAX, &count_again);
    if (rc != LS_OK || count_again != count) return LS_ERR_CORRUPT;
    for (int32_t h = 0; h < count; h++) {
        const uint8_t *key, *value;
        int32_t key_len, value_len;
        if ((rc = header_field(&at, end, 0, &key, &key_len)) != LS_OK) return rc;
        if ((rc = header_field(&at, end, 1, &value, &value_len)) != LS_OK) return rc;
        int64_t e = c->headers;
        binary_put(NULL, c->hkey_offsets, c->hkey_data, e, key, key_len, &key_nulls);
        binary_put(c->hvalue_valid, c->hvalue_offsets, c->hvalue_data, e, value, value_len,
                   &c->hvalue_nulls);
        c->headers++;
    }
    c->header_offsets[row + 1] = (int32_t)c->headers;
    return at == end ? LS_OK : LS_ERR_CORRUPT;
}

/* Kafka stores milliseconds; Arrow's column is microseconds. A timestamp
 * beyond +-292,000 years saturates rather than wrapping. */
static inline int64_t micros_of(int64_t ms) {
    int64_t us;
    if (__builtin_mul_overflow(ms, (int64_t)1000, &us)) return ms < 0 ? INT64_MIN : INT64_MAX;
    return us;
}

/* Appends one decoded record as row c->rows. */
static int row_put(ls_arrow_columns_t *c, const ls_batch_t *b, const uint8_t *section,
                   const ls_record_view_t *r, const uint8_t *record_end, int64_t offset) {
    int64_t row = c->rows;
    int log_append = (b->attributes & LS_ATTR_TIMESTAMP_LOG_APPEND) != 0;
    /* Kafka's rule: under LogAppendTime every record has the batch's max. */
    int64_t ms = log_append ? b->timestamp_max
                            : (int64_t)((uint64_t)b->timestamp_base + (uint64_t)r->timestamp_delta);
    c->offsets[row] = offset;
    c->timestamps_us[row] = micros_of(ms);
    c->timestamp_types[row] = log_append ? TIMESTAMP_TYPE_LOG_APPEND : TIMESTAMP_TYPE_CREATE;
    binary_put(c->key_valid, c->key_offsets, c->key_data, row, section + r->key_pos, r->key_len,
               &c->key_nulls);
    binary_put(c->value_valid, c->value_offsets, c->value_data, row, section + r->value_pos,
               r->value_len, &c->value_nulls);
    if (c->flags & LS_ARROW_HEADERS) {
        /* A null value's position is where its length varint ended. */
        const uint8_t *at = section + r->value_pos + (r->value_len > 0 ? r->value_len : 0);
        int rc = headers_put(c, row, at, record_end, r->header_count);
        if (rc != LS_OK) return rc;
    }
    c->rows = row + 1;
    return LS_OK;
}

/* Decodes every record of a records section (validating all of them) and
 * keeps those in [offset_start, offset_end). */
static int section_decode(ls_arrow_columns_t *c, const ls_batch_t *b, const uint8_t *section,
                          int64_t len) {
    const uint8_t *p = section, *end = section + len;
    for (int32_t i = 0; i < b->record_count; i++) {
        ls_record_view_t r;
        int rc = ls_record_read(&p, end, section, &r, NULL, NULL, NULL, NULL, 0);
        if (rc != LS_OK) return rc;
        if (r.offset_delta > b->last_offset_delta) return LS_ERR_CORRUPT;
        int64_t offset = b->base_offset + r.offset_delta;
        if (offset < c->offset_start || offset >= c->offset_end) continue;
        rc = row_put(c, b, section, &r, p, offset);
        if (rc != LS_OK) return rc;
    }
    return p == end ? LS_OK : LS_ERR_CORRUPT;
}

/* A batch's rows go in whole or not at all: a failure rolls the counters
 * back, so the columns always end at a batch boundary. */
static int batch_decode(ls_arrow_columns_t *c, const ls_batch_t *b, const uint8_t *section,
                        int64_t len) {
    int rc = columns_room(c, b->record_count, len);
    if (rc != LS_OK) return rc;
    ls_arrow_columns_t mark = *c;
    rc = section_decode(c, b, section, len);
    if (rc != LS_OK) {
        c->rows = mark.rows, c->headers = mark.headers;
        c->key_nulls = mark.key_nulls, c->value_nulls = mark.value_nulls;
        c->header_nulls = mark.header_nulls, c->hvalue_nulls = mark.hvalue_nulls;
    }
    ls_assert(c->rows <= c->rows_cap && c->headers <= c->headers_cap);
    return rc;
}

/* The batch is done: the next offset moves past it, never past offset_end. */
static void batch_consume(ls_arrow_columns_t *c, const ls_batch_t *b) {
    int64_t last = b->base_offset + b->last_offset_delta;
    int64_t next = last >= c->offset_end ? c->offset_end : last + 1;
    if (next > c->next_offset) c->next_offset = next;
    c->position += b->size;
}

/* One step of the walk over the batch at buf: LS_OK to go on, else why to
 * stop (LS_ARROW_STOP_* or LS_ERR_*). */
static int walk_step(ls_arrow_columns_t *c, const uint8_t *buf, int64_t len) {
    ls_batch_t b;
    int rc = ls_batch_header(buf, len, LS_BATCH_SIZE_LIMIT, &b);
    if (rc != LS_OK) return rc;
    if (b.base_offset >= c->offset_end) {
        c->next_offset = c->offset_end; /* nothing below end is left to read */
        return LS_ARROW_STOP_END;
    }
    if (!batch_has_rows(&b, c->offset_start)) {
        batch_consume(c, &b);
        return LS_OK;
    }
    if ((c->flags & LS_ARROW_CRC) &&
        ls_crc32c(0, buf + LS_POS_ATTRIBUTES, b.size - LS_POS_ATTRIBUTES) != b.crc)
        return LS_ERR_CRC;
    if (b.attributes & LS_ATTR_COMPRESSION_MASK) return LS_ARROW_STOP_COMPRESSED;
    rc = batch_decode(c, &b, buf + LS_BATCH_HEADER_SIZE, b.size - LS_BATCH_HEADER_SIZE);
    if (rc != LS_OK) return rc;
    batch_consume(c, &b);
    if (c->rows_max > 0 && c->rows >= c->rows_max) return LS_ARROW_STOP_ROWS;
    return LS_OK;
}

/* Argument checks shared by both decode entry points; sets the first
 * offsets of empty columns (Arrow offsets start at 0). */
static int columns_check(ls_arrow_columns_t *c) {
    if (c == NULL || c->offset_start < 0 || c->offset_end < c->offset_start) return LS_ERR_ARGUMENT;
    if (c->rows < 0 || c->rows > c->rows_cap || c->headers < 0 || c->headers > c->headers_cap)
        return LS_ERR_ARGUMENT;
    if (c->data_limit <= 0 || c->data_limit > INT32_MAX) return LS_ERR_ARGUMENT;
    if (c->offsets == NULL || c->timestamps_us == NULL || c->timestamp_types == NULL ||
        c->key_valid == NULL || c->key_offsets == NULL || c->value_valid == NULL ||
        c->value_offsets == NULL || c->key_data == NULL || c->value_data == NULL)
        return LS_ERR_ARGUMENT;
    int headers = (c->flags & LS_ARROW_HEADERS) != 0;
    if (headers && (c->header_valid == NULL || c->header_offsets == NULL ||
                    c->hkey_offsets == NULL || c->hkey_data == NULL || c->hvalue_valid == NULL ||
                    c->hvalue_offsets == NULL || c->hvalue_data == NULL))
        return LS_ERR_ARGUMENT;
    if (c->rows == 0) {
        c->key_offsets[0] = c->value_offsets[0] = 0;
        if (headers) c->header_offsets[0] = 0;
    }
    if (headers && c->headers == 0) c->hkey_offsets[0] = c->hvalue_offsets[0] = 0;
    return LS_OK;
}

/* Base offset of the (possibly broken) batch at buf, for error messages. */
static int64_t stop_offset_at(const uint8_t *buf, int64_t len) {
    return len >= 8 ? (int64_t)ls_load_u64be(buf) : -1;
}

int ls_arrow_decode(const uint8_t *buf, int64_t len, ls_arrow_columns_t *c) {
    if (len < 0 || (buf == NULL && len > 0)) return LS_ERR_ARGUMENT;
    int rc = columns_check(c);
    if (rc != LS_OK) return rc;
    if (c->position < 0 || c->position > len) return LS_ERR_ARGUMENT;
    c->stop = LS_OK;
    c->stop_offset = -1;
    int64_t iterations_max = (len - c->position) / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && c->position < len; i++) {
        rc = walk_step(c, buf + c->position, len - c->position);
        if (rc != LS_OK) {
            c->stop = rc;
            c->stop_offset = stop_offset_at(buf + c->position, len - c->position);
            break;
        }
    }
    ls_assert(c->position <= len);
    return LS_OK;
}

int ls_arrow_decode_section(const uint8_t *batch, int64_t batch_len, const uint8_t *section,
                            int64_t section_len, ls_arrow_columns_t *c) {
    if (batch == NULL || batch_len < 0 || section_len < 0 || (section == NULL && section_len > 0))
        return LS_ERR_ARGUMENT;
    int rc = columns_check(c);
    if (rc != LS_OK) return rc;
    ls_batch_t b;
    /* Only the batch the walk stopped at: whole, compressed, with rows. */
    if (ls_batch_header(batch, batch_len, LS_BATCH_SIZE_LIMIT, &b) != LS_OK) return LS_ERR_ARGUMENT;
    if ((b.attributes & LS_ATTR_COMPRESSION_MASK) == 0 || !batch_has_rows(&b, c->offset_start) ||
        b.base_offset >= c->offset_end)
        return LS_ERR_ARGUMENT;
    c->stop = LS_OK;
    c->stop_offset = -1;
    if ((int64_t)b.record_count * 7 > section_len) {
        rc = LS_ERR_CORRUPT; /* each record takes at least 7 bytes */
    } else {
        rc = batch_decode(c, &b, section, section_len);
    }
    if (rc != LS_OK) {
        c->stop = rc;
        c->stop_offset = b.base_offset;
        return LS_OK;
    }
    batch_consume(c, &b);
    if (c->rows_max > 0 && c->rows >= c->rows_max) c->stop = LS_ARROW_STOP_ROWS;
    return LS_OK;
}

/* ---------------------------------------------------------------------------
 * Encoding: Arrow columns -> sealed v2 batches.
 */

/* One row's fields, read from the source columns. */
typedef struct row_fields {
    const uint8_t *key, *value;
    int32_t key_len, value_len; /* -1: null */
    int64_t timestamp;
    int64_t entry_first;        /* first header entry */
    int32_t header_count;
} row_fields_t;

/* Slot i of a binary column as (pointer, length or -1); LS_ERR_ARGUMENT when
 * its offsets run backwards or outside the data. */
static int binary_get(const uint8_t *valid, int64_t valid_bit, const int32_t *offsets,
                      const uint8_t *data, int64_t data_len, int64_t i, const uint8_t **src,
                      int32_t *len) {
    if (offsets == NULL || !bit_get(valid, valid_bit, i)) {
        *src = NULL, *len = -1;
        return LS_OK;
    }
    int32_t start = offsets[i], end = offsets[i + 1];
    if (start < 0 || end < start || end > data_len) return LS_ERR_ARGUMENT;
    *src = data + start, *len = end - start;
    return LS_OK;
}

static int row_get(const ls_arrow_source_t *s, int64_t i, row_fields_t *f) {
    int rc = binary_get(s->key_valid, s->key_valid_bit, s->key_offsets, s->key_data,
                        s->key_data_len, i, &f->key, &f->key_len);
    if (rc != LS_OK) return rc;
    if (s->value_offsets == NULL) return LS_ERR_ARGUMENT;
    rc = binary_get(s->value_valid, s->value_valid_bit, s->value_offsets, s->value_data,
                    s->value_data_len, i, &f->value, &f->value_len);
    if (rc != LS_OK) return rc;
    f->timestamp = s->timestamps ? s->timestamps[i] : s->timestamp;
    f->entry_first = 0, f->header_count = 0;
    if (s->header_offsets == NULL || !bit_get(s->header_valid, s->header_valid_bit, i))
        return LS_OK; /* a null list: no headers */
    int32_t first = s->header_offsets[i], end = s->header_offsets[i + 1];
    if (first < 0 || end < first) return LS_ERR_ARGUMENT;
    f->entry_first = first, f->header_count = end - first;
    return LS_OK;
}

/* Header entry e as (key, value); Kafka has no null header or header key. */
static int entry_get(const ls_arrow_source_t *s, int64_t e, const uint8_t **key, int32_t *key_len,
                     const uint8_t **value, int32_t *value_len) {
    if (!bit_get(s->entry_valid, s->entry_valid_bit, e)) return LS_ERR_ARGUMENT;
    int rc = binary_get(s->hkey_valid, s->hkey_valid_bit, s->hkey_offsets, s->hkey_data,
                        s->hkey_data_len, e, key, key_len);
    if (rc != LS_OK || *key_len < 0) return LS_ERR_ARGUMENT;
    return binary_get(s->hvalue_valid, s->hvalue_valid_bit, s->hvalue_offsets, s->hvalue_data,
                      s->hvalue_data_len, e, value, value_len);
}

/* The record's body size (after its length varint), or a negative code. */
static int64_t record_body_size(const ls_arrow_source_t *s, const row_fields_t *f,
                                int64_t timestamp_delta, int32_t offset_delta) {
    int64_t size = 1 + varint_size(timestamp_delta) + varint_size(offset_delta) +
                   field_size(f->key_len) + field_size(f->value_len) + varint_size(f->header_count);
    for (int32_t h = 0; h < f->header_count; h++) {
        const uint8_t *key, *value;
        int32_t key_len, value_len;
        int rc = entry_get(s, f->entry_first + h, &key, &key_len, &value, &value_len);
        if (rc != LS_OK) return rc;
        size += field_size(key_len) + field_size(value_len);
    }
    return size;
}

/* Writes the record (length varint and body of `body` bytes) at p. */
static uint8_t *record_write(uint8_t *p, const ls_arrow_source_t *s, const row_fields_t *f,
                             int64_t timestamp_delta, int32_t offset_delta, int64_t body) {
    p = varint_write(p, body);
    uint8_t *body_start = p;
    *p++ = 0; /* record attributes: unused in v2 */
    p = varint_write(p, timestamp_delta);
    p = varint_write(p, offset_delta);
    p = field_write(p, f->key, f->key_len);
    p = field_write(p, f->value, f->value_len);
    p = varint_write(p, f->header_count);
    for (int32_t h = 0; h < f->header_count; h++) {
        const uint8_t *key, *value;
        int32_t key_len, value_len;
        int rc = entry_get(s, f->entry_first + h, &key, &key_len, &value, &value_len);
        ls_assert(rc == LS_OK); /* record_body_size read the same entries */
        p = field_write(p, key, key_len);
        p = field_write(p, value, value_len);
    }
    ls_assert(p - body_start == body);
    return p;
}

/* The batch being filled. */
typedef struct open_batch {
    int64_t at;            /* position in out; -1: none open */
    int64_t len;           /* bytes so far, header included */
    int64_t timestamp_base, timestamp_max;
    int32_t count;
} open_batch_t;

static void batch_close(ls_arrow_encoding_t *e, open_batch_t *o) {
    if (o->at < 0) return;
    ls_assert(o->count > 0 && e->batch_count < e->batch_cap);
    int rc = ls_batch_seal(e->out + o->at, o->len, 0, -1, 0, o->count - 1, o->timestamp_base,
                           o->timestamp_max, -1, -1, -1, o->count);
    ls_assert(rc == LS_OK);
    e->batch_ends[e->batch_count++] = o->at + o->len;
    o->at = -1;
}

/* Record size (length varint included) in the open batch, or negative. */
static int64_t record_size(const ls_arrow_source_t *s, const row_fields_t *f, const open_batch_t *o,
                           int64_t *body) {
    int64_t delta = (int64_t)((uint64_t)f->timestamp - (uint64_t)o->timestamp_base);
    *body = record_body_size(s, f, delta, o->count);
    if (*body < 0) return *body;
    if (*body > INT32_MAX) return LS_ERR_ARGUMENT;
    return varint_size(*body) + *body;
}

/* Puts row f into the open batch or a new one. LS_OK, LS_ERR_CAPACITY when
 * out (or batch_ends) is full, LS_ERR_ARGUMENT at a bad row. */
static int row_encode(const ls_arrow_source_t *s, ls_arrow_encoding_t *e, open_batch_t *o,
                      const row_fields_t *f, int64_t *end) {
    int64_t body, size = 0;
    if (o->at >= 0) {
        size = record_size(s, f, o, &body);
        if (size < 0) return (int)size;
        int full = o->len + size > e->batch_bytes_max || o->at + o->len + size > e->out_cap ||
                   o->count == INT32_MAX;
        if (full) {
            *end = o->at + o->len;
            batch_close(e, o);
        }
    }
    if (o->at < 0) {
        if (e->batch_count >= e->batch_cap) return LS_ERR_CAPACITY;
        open_batch_t fresh = {*end, LS_BATCH_HEADER_SIZE, f->timestamp, f->timestamp, 0};
        size = record_size(s, f, &fresh, &body);
        if (size < 0) return (int)size;
        if (fresh.at + fresh.len + size > e->out_cap) return LS_ERR_CAPACITY;
        *o = fresh;
    }
    int64_t delta = (int64_t)((uint64_t)f->timestamp - (uint64_t)o->timestamp_base);
    uint8_t *p = record_write(e->out + o->at + o->len, s, f, delta, o->count, body);
    ls_assert(p == e->out + o->at + o->len + size);
    o->len += size;
    o->count++;
    if (f->timestamp > o->timestamp_max) o->timestamp_max = f->timestamp;
    return LS_OK;
}

int ls_arrow_encode(const ls_arrow_source_t *s, ls_arrow_encoding_t *e) {
    if (s == NULL || e == NULL || e->out == NULL || e->out_cap < 0 || e->batch_ends == NULL ||
        e->batch_cap < 0 || s->rows < 0 || e->row < 0 || e->row > s->rows)
        return LS_ERR_ARGUMENT;
    if (e->batch_bytes_max < LS_BATCH_HEADER_SIZE || e->batch_bytes_max > LS_BATCH_SIZE_LIMIT)
        return LS_ERR_ARGUMENT;
    e->batch_count = 0;
    open_batch_t o = {-1, 0, 0, 0, 0};
    int64_t end = 0, row_start = e->row, rows_left = s->rows - e->row;
    int rc = LS_OK;
    for (int64_t i = 0; i < rows_left; i++) {
        row_fields_t f;
        rc = row_get(s, e->row, &f);
        if (rc == LS_OK) rc = row_encode(s, e, &o, &f, &end);
        if (rc != LS_OK) break;
        e->row++;
    }
    batch_close(e, &o);
    if (rc == LS_ERR_CAPACITY && e->row > row_start) rc = LS_OK; /* progress: call again */
    return rc;
}

/* Kafka's default partitioner over a binary column (ls_murmur2, ls_core.h). */

int ls_arrow_partitions(const uint8_t *valid, int64_t valid_bit, const int32_t *offsets,
                        const uint8_t *data, int64_t data_len, int64_t rows,
                        int32_t num_partitions, int32_t *out) {
    if (offsets == NULL || out == NULL || rows < 0 || valid_bit < 0 || num_partitions <= 0 ||
        data_len < 0 || (data == NULL && data_len > 0))
        return LS_ERR_ARGUMENT;
    for (int64_t i = 0; i < rows; i++) {
        const uint8_t *key;
        int32_t len;
        int rc = binary_get(valid, valid_bit, offsets, data, data_len, i, &key, &len);
        if (rc != LS_OK) return rc;
        /* Java's Utils.toPositive(h) % n: clears the sign bit, no negation. */
        out[i] = len < 0 ? -1 : (int32_t)((ls_murmur2(key, (size_t)len) & 0x7fffffffu) % (uint32_t)num_partitions);
    }
    return LS_OK;
}

/* ---------------------------------------------------------------------------
 * Arenas: the columns of a whole-table read.
 *
 * A table read in a fresh process writes every output byte for the first
 * time, so its cost is page faults, not allocation. A private anonymous map
 * lets the caller reserve a column's upper bound and pay only for the pages
 * written (MAP_NORESERVE: nothing is committed up front), choose the page
 * size, and unmap the unwritten tail once the column's length is known: no
 * copy, no regrowth.
 *
 * munmap may fail with ENOMEM when the kernel merged neighbouring mappings
 * and the cut would split one past vm.max_map_count: a trim then keeps the
 * mapping whole and an unmap leaves it mapped, rather than stopping the
 * process over memory that is only reserved or is released at exit.
 */

static int64_t page_size(void) {
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (int64_t)page : 4096;
}

/* Released arenas kept mapped for the next read (an allocator's retention):
 * a repeated table read then writes pages it already has instead of
 * faulting fresh zeroed ones, which is most of a read's cost. Bounded in
 * slots and bytes; kept pages are MADV_FREE, so the kernel may take them
 * back under memory pressure (a reuse then faults zeroed pages, which is
 * just as correct: every byte a column exposes is written by its decode). */
enum { ARENA_CACHE_SLOTS = 64 };
#define ARENA_CACHE_BYTES ((int64_t)256 << 20)

static struct {
    void *base;
    int64_t size;
    uint32_t flags;
} arena_cache[ARENA_CACHE_SLOTS];
static int64_t arena_cache_bytes;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;

static void arena_hint(void *base, int64_t size, uint32_t flags) {
    /* Hints: a kernel without transparent huge pages refuses them, and that is fine. */
#ifdef MADV_HUGEPAGE
    if (flags & LS_ARENA_HUGE) (void)madvise(base, (size_t)size, MADV_HUGEPAGE);
#endif
#ifdef MADV_NOHUGEPAGE
    if (flags & LS_ARENA_SMALL) (void)madvise(base, (size_t)size, MADV_NOHUGEPAGE);
#endif
}

/* Prefers the smallest arena that holds size (no remap), else the largest (the most pages kept). */
static int arena_better(int64_t candidate, int64_t best, int64_t size) {
    if (candidate >= size) return best < size || candidate < best;
    return best < size && candidate > best;
}

/* Takes the best cached arena of these flags for size, or returns 0. */
static int arena_take(int64_t size, uint32_t flags, void **base, int64_t *had) {
    int best = -1;
    pthread_mutex_lock(&arena_lock);
    for (int i = 0; i < ARENA_CACHE_SLOTS; i++) {
        if (arena_cache[i].base == NULL || arena_cache[i].flags != flags) continue;
        if (best < 0 || arena_better(arena_cache[i].size, arena_cache[best].size, size)) best = i;
    }
    if (best >= 0) {
        *base = arena_cache[best].base, *had = arena_cache[best].size;
        arena_cache_bytes -= *had;
        arena_cache[best].base = NULL;
    }
    ls_assert(arena_cache_bytes >= 0);
    pthread_mutex_unlock(&arena_lock);
    return best >= 0;
}

void *ls_arena_map(int64_t size, uint32_t flags) {
    if (size <= 0 || (uint64_t)size > (uint64_t)SIZE_MAX / 2) return NULL;
    size = (size + page_size() - 1) / page_size() * page_size();
    void *base = NULL;
    int64_t had = 0;
    if (arena_take(size, flags, &base, &had)) {
        void *moved = had == size ? base : mremap(base, (size_t)had, (size_t)size, MREMAP_MAYMOVE);
        if (moved != MAP_FAILED) {
            if (size > had) arena_hint(moved, size, flags);
            ls_assert(((uintptr_t)moved & 63) == 0);
            return moved;
        }
        (void)munmap(base, (size_t)had);
    }
    base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return NULL;
    arena_hint(base, size, flags);
    ls_assert(((uintptr_t)base & 63) == 0);
    return base;
}

int64_t ls_arena_trim(void *base, int64_t size, int64_t keep) {
    if (base == NULL || size <= 0 || keep < 0 || keep > size) return LS_ERR_ARGUMENT;
    int64_t page = page_size();
    int64_t kept = (keep + page - 1) / page * page;
    if (kept == 0) kept = page; /* one page stays: the address remains the mapping's */
    if (kept >= size) return size;
    if (munmap((uint8_t *)base + kept, (size_t)(size - kept)) != 0) return size;
    return kept;
}

void ls_arena_unmap(void *base, int64_t size) {
    if (base == NULL || size <= 0) return;
    ls_arena_release(base, size, 0);
}

void ls_arena_release(void *base, int64_t size, uint32_t flags) {
    if (base == NULL || size <= 0) return;
    size = (size + page_size() - 1) / page_size() * page_size(); /* as mmap and trim left it */
    int kept = 0;
    if (flags != 0) {
        pthread_mutex_lock(&arena_lock);
        for (int i = 0; i < ARENA_CACHE_SLOTS && !kept; i++) {
            if (arena_cache[i].base != NULL || arena_cache_bytes + size > ARENA_CACHE_BYTES) continue;
            arena_cache[i].base = base, arena_cache[i].size = size, arena_cache[i].flags = flags;
            arena_cache_bytes += size;
            kept = 1;
        }
        pthread_mutex_unlock(&arena_lock);
    }
#ifdef MADV_FREE
    if (kept) (void)madvise(base, (size_t)size, MADV_FREE);
#endif
    if (!kept) (void)munmap(base, (size_t)size);
}

int64_t ls_arena_drop_cache(void) {
    int64_t dropped = 0;
    for (int i = 0; i < ARENA_CACHE_SLOTS; i++) {
        pthread_mutex_lock(&arena_lock);
        void *base = arena_cache[i].base;
        int64_t size = arena_cache[i].size;
        arena_cache[i].base = NULL;
        if (base != NULL) arena_cache_bytes -= size;
        pthread_mutex_unlock(&arena_lock);
        if (base != NULL) (void)munmap(base, (size_t)size), dropped += size;
    }
    return dropped;
}
