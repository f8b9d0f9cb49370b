/*
 * Records inside a v2 batch: zigzag varints, encoding from flat buffers,
 * decoding into parallel arrays.
 *
 * Record layout: length varint, attributes i8, timestampDelta varlong,
 * offsetDelta varint, key (varint length, -1 = null, bytes), value (same),
 * header count varint, headers (key: varint length >= 0 and bytes; value:
 * varint length, -1 = null, bytes).
 */
#include "ls_core.h"

/* Size of a record's body (after its length varint); -1 on a bad length. */
static int64_t record_body_size(int64_t timestamp_delta, int32_t offset_delta,
                                int32_t key_len, int32_t value_len,
                                int32_t header_count, const int32_t *hkey_lens,
                                const int32_t *hvalue_lens) {
    if (key_len < -1 || value_len < -1 || header_count < 0) return -1;
    int64_t size = 1 + varint_size(timestamp_delta) + varint_size(offset_delta) +
                   field_size(key_len) + field_size(value_len) + varint_size(header_count);
    for (int32_t h = 0; h < header_count; h++) {
        if (hkey_lens[h] < 0 || hvalue_lens[h] < -1) return -1;
        size += field_size(hkey_lens[h]) + field_size(hvalue_lens[h]);
    }
    return size;
}

int ls_encode_records(uint8_t *out, int64_t out_cap, int32_t count,
                      int64_t timestamp_base, const int64_t *timestamps,
                      const uint8_t *keys, const int32_t *key_lens,
                      const uint8_t *values, const int32_t *value_lens,
                      const int32_t *header_counts, const uint8_t *header_data,
                      const int32_t *header_key_lens, const int32_t *header_value_lens,
                      int64_t *out_len, int64_t *timestamp_max_out) {
    if (out == NULL || out_cap < 0 || count < 0 || value_lens == NULL || out_len == NULL ||
        timestamp_max_out == NULL)
        return LS_ERR_ARGUMENT;
    uint8_t *p = out, *end = out + out_cap;
    int64_t timestamp_max = timestamp_base;
    int64_t header_index = 0;
    for (int32_t i = 0; i < count; i++) {
        int64_t timestamp = timestamps ? timestamps[i] : timestamp_base;
        if (timestamp > timestamp_max) timestamp_max = timestamp;
        int32_t key_len = key_lens ? key_lens[i] : -1;
        int32_t header_count = header_counts ? header_counts[i] : 0;
        const int32_t *hk = header_key_lens ? header_key_lens + header_index : NULL;
        const int32_t *hv = header_value_lens ? header_value_lens + header_index : NULL;
        if (header_count > 0 && (hk == NULL || hv == NULL || header_data == NULL))
            return LS_ERR_ARGUMENT;
        int64_t body = record_body_size(timestamp - timestamp_base, i, key_len, value_lens[i],
                                        header_count, hk, hv);
        if (body < 0 || body > INT32_MAX) return LS_ERR_ARGUMENT;
        if (end - p < varint_size(body) + body) return LS_ERR_CAPACITY;
        uint8_t *record_start = p;
        p = varint_write(p, body);
        uint8_t *body_start = p;
        *p++ = 0; /* attributes: unused in v2 records */
        p = varint_write(p, timestamp - timestamp_base);
        p = varint_write(p, i);
        p = field_write(p, keys, key_len);
        if (key_len > 0) keys += key_len;
        p = field_write(p, values, value_lens[i]);
        if (value_lens[i] > 0) values += value_lens[i];
        p = varint_write(p, header_count);
        for (int32_t h = 0; h < header_count; h++) {
            p = field_write(p, header_data, hk[h]);
            header_data += hk[h];
            p = field_write(p, header_data, hv[h]);
            if (hv[h] > 0) header_data += hv[h];
        }
        header_index += header_count;
        ls_assert(p - body_start == body);
        ls_assert(p > record_start && p <= end);
    }
    *out_len = p - out;
    *timestamp_max_out = timestamp_max;
    return LS_OK;
}

/* Reads a nullable byte field; sets position (relative to base) and length. */
static inline int field_read(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                             int nullable, int32_t *pos, int32_t *len) {
    int64_t n;
    int rc = varint_read(p, end, LS_VARINT_MAX, &n);
    if (rc != LS_OK) return rc;
    if (n < (nullable ? -1 : 0)) return LS_ERR_CORRUPT;
    if (n > end - *p) return LS_ERR_CORRUPT;
    *pos = (int32_t)(*p - base);
    *len = (int32_t)n;
    if (n > 0) *p += n;
    return LS_OK;
}

/* The common record shape, parsed with fewer checks: every varint of one or
 * two bytes, no headers. Returns 0 when it does not apply or something looks
 * wrong, and the full reader (ls_record_read) then decides. */
#define LS_VARINT_SHORT(q, limit, out)                                        \
    do {                                                                       \
        if ((q) >= (limit)) return 0;                                          \
        uint8_t b0_ = (q)[0];                                                  \
        if ((b0_ & 0x80) == 0) {                                               \
            (out) = zigzag_decode(b0_);                                        \
            (q) += 1;                                                          \
        } else {                                                               \
            if ((q) + 1 >= (limit) || ((q)[1] & 0x80) != 0) return 0;          \
            (out) = zigzag_decode((uint64_t)(b0_ & 0x7f) | (uint64_t)(q)[1] << 7); \
            (q) += 2;                                                          \
        }                                                                      \
    } while (0)

static inline int record_read_short(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                                    ls_record_view_t *r) {
    const uint8_t *q = *p;
    int64_t length, timestamp_delta, offset_delta, key_len, value_len, header_count;
    LS_VARINT_SHORT(q, end, length);
    if (length < 6 || length > end - q) return 0;
    const uint8_t *record_end = q + length;
    q++; /* attributes */
    LS_VARINT_SHORT(q, record_end, timestamp_delta);
    LS_VARINT_SHORT(q, record_end, offset_delta);
    LS_VARINT_SHORT(q, record_end, key_len);
    const uint8_t *key = q;
    if (key_len < -1 || key_len > record_end - q) return 0;
    if (key_len > 0) q += key_len;
    LS_VARINT_SHORT(q, record_end, value_len);
    const uint8_t *value = q;
    if (value_len < -1 || value_len > record_end - q) return 0;
    if (value_len > 0) q += value_len;
    LS_VARINT_SHORT(q, record_end, header_count);
    if (header_count != 0 || q != record_end || offset_delta < 0) return 0;
    r->timestamp_delta = timestamp_delta, r->offset_delta = offset_delta;
    r->key_pos = (int32_t)(key - base), r->key_len = (int32_t)key_len;
    r->value_pos = (int32_t)(value - base), r->value_len = (int32_t)value_len;
    r->header_count = 0;
    *p = q;
    return 1;
}

/* The fields are parsed through a local cursor and kept in locals until the
 * end: stores through `r` then cannot force reloads of the cursor. */
int ls_record_read(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                   ls_record_view_t *r, int32_t *hkp, int32_t *hkl, int32_t *hvp,
                   int32_t *hvl, int64_t header_slots) {
    const uint8_t *q = *p;
    int64_t length, timestamp_delta, offset_delta, header_count;
    int32_t key_pos, key_len, value_pos, value_len;
    int rc = varint_read(&q, end, LS_VARINT_MAX, &length);
    if (rc != LS_OK) return rc;
    if (length < 6 || length > end - q) return LS_ERR_CORRUPT;
    const uint8_t *record_end = q + length;
    q++; /* attributes */
    if ((rc = varint_read(&q, record_end, LS_VARLONG_MAX, &timestamp_delta)) != LS_OK) return rc;
    if ((rc = varint_read(&q, record_end, LS_VARINT_MAX, &offset_delta)) != LS_OK) return rc;
    if (offset_delta < 0) return LS_ERR_CORRUPT;
    if ((rc = field_read(&q, record_end, base, 1, &key_pos, &key_len)) != LS_OK) return rc;
    if ((rc = field_read(&q, record_end, base, 1, &value_pos, &value_len)) != LS_OK) return rc;
    if ((rc = varint_read(&q, record_end, LS_VARINT_MAX, &header_count)) != LS_OK) return rc;
    /* Each header takes at least two bytes. */
    if (header_count < 0 || header_count * 2 > record_end - q) return LS_ERR_CORRUPT;
    for (int32_t h = 0; h < header_count; h++) {
        int32_t kp, kl, vp, vl;
        if ((rc = field_read(&q, record_end, base, 0, &kp, &kl)) != LS_OK) return rc;
        if ((rc = field_read(&q, record_end, base, 1, &vp, &vl)) != LS_OK) return rc;
        if (h < header_slots) {
            hkp[h] = kp, hkl[h] = kl, hvp[h] = vp, hvl[h] = vl;
        }
    }
    if (q != record_end) return LS_ERR_CORRUPT;
    r->timestamp_delta = timestamp_delta, r->offset_delta = offset_delta;
    r->key_pos = key_pos, r->key_len = key_len, r->value_pos = value_pos, r->value_len = value_len;
    r->header_count = (int32_t)header_count;
    *p = q;
    return LS_OK;
}

int ls_decode_records(const uint8_t *records, int64_t len, int32_t count,
                      int32_t offset_delta_max, int64_t *offset_deltas, int64_t *timestamp_deltas,
                      int32_t *key_pos, int32_t *key_lens, int32_t *value_pos,
                      int32_t *value_lens, int32_t *header_first, int32_t *header_counts,
                      int64_t record_cap, int32_t *header_key_pos,
                      int32_t *header_key_lens, int32_t *header_value_pos,
                      int32_t *header_value_lens, int64_t header_cap,
                      int64_t *header_total) {
    if (records == NULL || len < 0 || len > INT32_MAX || count < 0 || header_total == NULL)
        return LS_ERR_ARGUMENT;
    int store = offset_deltas != NULL;
    if (store && record_cap < count) return LS_ERR_CAPACITY;
    const uint8_t *p = records, *end = records + len;
    int64_t headers = 0;
    for (int32_t i = 0; i < count; i++) {
        ls_record_view_t r;
        /* Header slots left; pointers formed only inside the arrays. */
        int64_t slots = store && headers < header_cap ? header_cap - headers : 0;
        int rc = ls_record_read(&p, end, records, &r, slots ? header_key_pos + headers : NULL,
                             slots ? header_key_lens + headers : NULL,
                             slots ? header_value_pos + headers : NULL,
                             slots ? header_value_lens + headers : NULL, slots);
        if (rc != LS_OK) return rc;
        if (r.offset_delta > offset_delta_max) return LS_ERR_CORRUPT;
        ls_assert(p <= end);
        if (store) {
            offset_deltas[i] = r.offset_delta;
            timestamp_deltas[i] = r.timestamp_delta;
            key_pos[i] = r.key_pos, key_lens[i] = r.key_len;
            value_pos[i] = r.value_pos, value_lens[i] = r.value_len;
            header_first[i] = (int32_t)headers;
            header_counts[i] = r.header_count;
        }
        headers += r.header_count;
    }
    if (p != end) return LS_ERR_CORRUPT;
    *header_total = headers;
    if (headers > header_cap) return LS_ERR_CAPACITY;
    return LS_OK;
}

/* Decodes the records of one uncompressed batch at batch[0] into the arrays
 * at slot `at`; positions are made relative to `origin`. */
static int decode_batch_records(const uint8_t *batch, const ls_batch_t *header, const uint8_t *origin,
                                int64_t at, int64_t *offsets, int64_t *timestamps, int32_t *key_pos,
                                int32_t *key_lens, int32_t *value_pos, int32_t *value_lens,
                                int32_t *header_counts) {
    const uint8_t *section = batch + LS_BATCH_HEADER_SIZE, *p = section, *end = batch + header->size;
    int32_t shift = (int32_t)(section - origin);
    int log_append = (header->attributes & LS_ATTR_TIMESTAMP_LOG_APPEND) != 0;
    for (int32_t i = 0; i < header->record_count; i++) {
        ls_record_view_t r;
        if (!record_read_short(&p, end, section, &r)) {
            int rc = ls_record_read(&p, end, section, &r, NULL, NULL, NULL, NULL, 0);
            if (rc != LS_OK) return rc;
        }
        if (r.offset_delta > header->last_offset_delta) return LS_ERR_CORRUPT;
        offsets[at + i] = header->base_offset + r.offset_delta;
        timestamps[at + i] = log_append ? header->timestamp_max
                                        : (int64_t)((uint64_t)header->timestamp_base + (uint64_t)r.timestamp_delta);
        key_pos[at + i] = r.key_pos + shift, key_lens[at + i] = r.key_len;
        value_pos[at + i] = r.value_pos + shift, value_lens[at + i] = r.value_len;
        header_counts[at + i] = r.header_count;
    }
    return p == end ? LS_OK : LS_ERR_CORRUPT;
}

int lsu_decode_batches(const uint8_t *buf, int64_t len, int64_t record_cap, int64_t *offsets,
                      int64_t *timestamps, int32_t *key_pos, int32_t *key_lens,
                      int32_t *value_pos, int32_t *value_lens, int32_t *header_counts,
                      int64_t *count_out) {
    if (buf == NULL || len < 0 || len > INT32_MAX || record_cap < 0 || count_out == NULL)
        return LS_ERR_ARGUMENT;
    int64_t position = 0, count = 0;
    int64_t iterations_max = len / LS_BATCH_HEADER_SIZE + 1;
    *count_out = 0;
    for (int64_t i = 0; i < iterations_max && position < len; i++) {
        ls_batch_t header;
        int rc = ls_batch_header(buf + position, len - position, len, &header);
        if (rc != LS_OK) return rc;
        if ((header.attributes & LS_ATTR_COMPRESSION_MASK) != 0) return LS_ERR_ARGUMENT;
        if (count + header.record_count > record_cap) return LS_ERR_CAPACITY;
        rc = decode_batch_records(buf + position, &header, buf, count, offsets, timestamps, key_pos,
                                  key_lens, value_pos, value_lens, header_counts);
        if (rc != LS_OK) return rc;
        count += header.record_count;
        position += header.size;
        *count_out = count;
    }
    ls_assert(position <= len);
    return LS_OK;
}

/* The Confluent wire-format schema id of a field: the big-endian int32 after
 * magic byte 0 in a field of at least 5 bytes. */
static inline int64_t schema_id_of(const uint8_t *section, int32_t pos, int32_t len) {
    if (len < 0) return LS_SCHEMA_ID_NULL;
    if (len < 5 || section[pos] != 0) return LS_SCHEMA_ID_NONE;
    const uint8_t *q = section + pos + 1;
    return (int64_t)(((uint32_t)q[0] << 24) | ((uint32_t)q[1] << 16) | ((uint32_t)q[2] << 8) | (uint32_t)q[3]);
}

int ls_schema_ids(const uint8_t *buf, int64_t len, int32_t which, int64_t cap, int64_t *ids,
                  int64_t *count_out, int64_t *uniform_out) {
    if (buf == NULL || len < 0 || len > INT32_MAX || cap < 0 || ids == NULL || count_out == NULL ||
        uniform_out == NULL || (which != 0 && which != 1))
        return LS_ERR_ARGUMENT;
    int64_t position = 0, count = 0, uniform = LS_SCHEMA_ID_MIXED;
    int64_t iterations_max = len / LS_BATCH_HEADER_SIZE + 1;
    *count_out = 0;
    *uniform_out = LS_SCHEMA_ID_MIXED;
    for (int64_t b = 0; b < iterations_max && position < len; b++) {
        ls_batch_t header;
        int rc = ls_batch_header(buf + position, len - position, len, &header);
        if (rc != LS_OK) return rc;
        if ((header.attributes & LS_ATTR_COMPRESSION_MASK) != 0) return LS_ERR_ARGUMENT;
        if (count + header.record_count > cap) return LS_ERR_CAPACITY;
        const uint8_t *section = buf + position + LS_BATCH_HEADER_SIZE, *p = section;
        const uint8_t *end = buf + position + header.size;
        for (int32_t i = 0; i < header.record_count; i++) {
            ls_record_view_t r;
            if (!record_read_short(&p, end, section, &r)) {
                rc = ls_record_read(&p, end, section, &r, NULL, NULL, NULL, NULL, 0);
                if (rc != LS_OK) return rc;
            }
            int64_t id = which == 0 ? schema_id_of(section, r.key_pos, r.key_len)
                                    : schema_id_of(section, r.value_pos, r.value_len);
            ids[count + i] = id;
            if (count + i == 0) uniform = id;
            else if (id != uniform) uniform = LS_SCHEMA_ID_MIXED;
        }
        if (p != end) return LS_ERR_CORRUPT;
        count += header.record_count;
        position += header.size;
        *count_out = count;
    }
    ls_assert(position <= len);
    *uniform_out = count > 0 ? uniform : LS_SCHEMA_ID_MIXED;
    return LS_OK;
}
