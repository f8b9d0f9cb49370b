/* Internal header of the native core: includes, assertions, byte order. */
#ifndef LS_CORE_H
#define LS_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ls_api.h"

/* Assertions stay on in release builds: a broken invariant in a storage
 * engine must stop the process before it writes a wrong byte to disk. */
#define ls_assert(cond)                                                       \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "logstore native assertion failed: %s (%s:%d)\n", \
                    #cond, __FILE__, __LINE__);                               \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* Batch header field positions (Kafka RecordBatch v2). */
enum {
    LS_POS_BASE_OFFSET = 0,
    LS_POS_BATCH_LENGTH = 8,
    LS_POS_LEADER_EPOCH = 12,
    LS_POS_MAGIC = 16,
    LS_POS_CRC = 17,
    LS_POS_ATTRIBUTES = 21,
    LS_POS_LAST_OFFSET_DELTA = 23,
    LS_POS_BASE_TIMESTAMP = 27,
    LS_POS_MAX_TIMESTAMP = 35,
    LS_POS_PRODUCER_ID = 43,
    LS_POS_PRODUCER_EPOCH = 51,
    LS_POS_BASE_SEQUENCE = 53,
    LS_POS_RECORD_COUNT = 57
};

enum {
    LS_MAGIC_V2 = 2,
    LS_ATTR_COMPRESSION_MASK = 0x07,
    LS_ATTR_TIMESTAMP_LOG_APPEND = 0x08,
    LS_COMPRESSION_MAX = 4, /* zstd */
    /* Whole batches never exceed this, whatever the caller allows. */
    LS_BATCH_SIZE_LIMIT = 0x7fffffff
};

static inline uint16_t ls_load_u16be(const uint8_t *p) {
    return (uint16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]);
}
static inline uint32_t ls_load_u32be(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}
static inline uint64_t ls_load_u64be(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
static inline void ls_store_u16be(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void ls_store_u32be(uint8_t *p, uint32_t v) {
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}
static inline void ls_store_u64be(uint8_t *p, uint64_t v) {
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* The header view of one batch: fields read once, after bounds checks. */
typedef struct ls_batch {
    int64_t base_offset;
    int32_t batch_length; /* bytes after the length field */
    int64_t size;         /* LS_LOG_OVERHEAD + batch_length */
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t timestamp_base;
    int64_t timestamp_max;
    int32_t record_count;
    uint32_t crc;
} ls_batch_t;

/* Reads and structurally checks the header at buf[0..len). */
int ls_batch_header(const uint8_t *buf, int64_t len, int64_t size_max,
                    ls_batch_t *batch);

/* Zigzag varints of Kafka's record format. */
enum { LS_VARINT_MAX = 5, LS_VARLONG_MAX = 10 };

static inline uint64_t zigzag_encode(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t zigzag_decode(uint64_t v) {
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Bytes of a zigzag varint: 1 + (bits above the first 7) / 7, rounded up. */
static inline int64_t varint_size(int64_t v) {
    uint64_t z = zigzag_encode(v) | 1u;
    int64_t bits = 64 - __builtin_clzll(z);
    return (bits + 6) / 7;
}

static inline uint8_t *varint_write(uint8_t *p, int64_t v) {
    uint64_t z = zigzag_encode(v);
    for (int i = 0; i < LS_VARLONG_MAX && z >= 0x80; i++) {
        *p++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *p++ = (uint8_t)z;
    return p;
}

/* A record field (key, value, header key or value): varint length (-1 =
 * null, written as one byte), then the bytes. */
static inline int64_t field_size(int32_t len) {
    return len < 0 ? 1 : varint_size(len) + len;
}

static inline uint8_t *field_write(uint8_t *p, const uint8_t *src, int32_t len) {
    p = varint_write(p, len < 0 ? -1 : len);
    if (len > 0) {
        memcpy(p, src, (size_t)len);
        p += len;
    }
    return p;
}

/* Kafka's key hash: the Java client's Utils.murmur2 and librdkafka's
 * rd_murmur2 (MurmurHash2, seed 0x9747b28c, little-endian words); a key's
 * partition is (murmur2(key) & 0x7fffffff) % n, Java's toPositive then
 * modulo. Java hashes an int length: a buffer longer than 2^31 has no Java
 * counterpart, and truncating the length is what librdkafka does. */
enum { LS_MURMUR2_SEED = 0x9747b28c, LS_MURMUR2_M = 0x5bd1e995, LS_MURMUR2_R = 24 };

static inline uint32_t ls_murmur2(const uint8_t *data, size_t len) {
    uint32_t h = (uint32_t)LS_MURMUR2_SEED ^ (uint32_t)len;
    size_t words = len / 4;
    for (size_t i = 0; i < words; i++) {
        const uint8_t *w = data + 4 * i;
        /* Byte by byte: keys are unaligned and the order is little-endian on
         * every host; compilers fuse this into one load on x86 and arm64. */
        uint32_t k = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
        k *= LS_MURMUR2_M;
        k ^= k >> LS_MURMUR2_R;
        k *= LS_MURMUR2_M;
        h *= LS_MURMUR2_M;
        h ^= k;
    }
    const uint8_t *tail = data + 4 * words;
    switch (len & 3) { /* falls through, as in Java */
    case 3: h ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)tail[1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)tail[0]; h *= LS_MURMUR2_M;
    }
    h ^= h >> 13;
    h *= LS_MURMUR2_M;
    h ^= h >> 15;
    return h;
}

/* Reads a zigzag varint of at most size_max bytes from [*p, end). */
static inline int varint_read(const uint8_t **p, const uint8_t *end, int size_max,
                              int64_t *out) {
    const uint8_t *q = *p;
    /* Most varints of a record (attributes aside: deltas, lengths, counts)
     * fit one byte: decode those without the loop. */
    if (__builtin_expect(q < end && (*q & 0x80) == 0, 1)) {
        *out = zigzag_decode(*q);
        *p = q + 1;
        return LS_OK;
    }
    if (end - q >= 2 && (q[1] & 0x80) == 0) { /* lengths of 64..8191 bytes */
        *out = zigzag_decode((uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7);
        *p = q + 2;
        return LS_OK;
    }
    uint64_t value = 0;
    for (int i = 0; i < size_max; i++) {
        if (q >= end) return LS_ERR_CORRUPT;
        uint8_t byte = *q++;
        value |= (uint64_t)(byte & 0x7f) << (7 * i);
        if ((byte & 0x80) == 0) {
            *p = q;
            *out = zigzag_decode(value);
            if (size_max == LS_VARINT_MAX && (*out > INT32_MAX || *out < INT32_MIN))
                return LS_ERR_CORRUPT;
            return LS_OK;
        }
    }
    return LS_ERR_CORRUPT;
}


/* One record's fields, positions relative to the section start. */
typedef struct ls_record_view {
    int64_t offset_delta, timestamp_delta;
    int32_t key_pos, key_len, value_pos, value_len, header_count;
} ls_record_view_t;

/* Reads one record at *p (advancing it) within [*p, end); up to header_slots
 * header positions go to the four arrays (which may be NULL when 0). */
int ls_record_read(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                   ls_record_view_t *r, int32_t *hkp, int32_t *hkl, int32_t *hvp,
                   int32_t *hvl, int64_t header_slots);

/* The unguarded bodies of the read functions that guard.c wraps (same
 * arguments and results; see ls_api.h). Core code calls these directly. */
int lsu_scan_batches(const uint8_t *buf, int64_t len, ls_scan_t *scan, uint32_t *index_offsets,
                     uint32_t *index_positions, int64_t *time_timestamps, uint32_t *time_offsets,
                     int64_t index_cap);
int lsu_search_offset(const uint8_t *buf, int64_t len, int64_t position_start, int64_t offset_target,
                      int64_t *position_out, int64_t *size_out);
int lsu_search_timestamp(const uint8_t *buf, int64_t len, int64_t position_start, int64_t timestamp,
                         int64_t *position_out, int64_t *size_out);
int lsu_span_batches(const uint8_t *buf, int64_t len, int64_t position, int64_t bytes_max,
                     int64_t *size_out, int64_t *count_out);
int lsu_producer_batches(const uint8_t *buf, int64_t len, int64_t cap, int64_t *producer_ids,
                         int16_t *epochs, int32_t *sequences_base, int32_t *sequence_deltas,
                         int64_t *offsets_base, int16_t *attributes, int16_t *control_types,
                         int64_t *count_out);
int lsu_decode_batches(const uint8_t *buf, int64_t len, int64_t record_cap, int64_t *offsets,
                       int64_t *timestamps, int32_t *key_pos, int32_t *key_lens, int32_t *value_pos,
                       int32_t *value_lens, int32_t *header_counts, int64_t *count_out);
int64_t lsu_offset_index_lookup(const uint8_t *entries, int64_t entry_count, uint32_t offset_relative);
int64_t lsu_time_index_lookup(const uint8_t *entries, int64_t entry_count, int64_t timestamp);
int lsu_segment_locate(const uint8_t *log, int64_t log_len, const uint8_t *index, int64_t index_count,
                       int64_t segment_base_offset, int64_t offset_target, int64_t *position_out,
                       int64_t *size_out);
int64_t lsu_segment_find(const uint8_t *log, int64_t log_len, const uint8_t *index, int64_t index_count,
                         int64_t segment_base_offset, int64_t offset_target);
int lsu_offset_index_verify(const uint8_t *log, int64_t log_len, const uint8_t *index,
                            int64_t index_count, int64_t segment_base_offset, int64_t *slot_bad);
int lsu_time_index_verify(const uint8_t *index, int64_t index_count, int64_t offset_relative_max,
                          int64_t *slot_bad);
int lsu_time_index_verify_log(const uint8_t *log, int64_t log_len, const uint8_t *index,
                              int64_t index_count, int64_t segment_base_offset, int64_t *slot_bad);

#endif
