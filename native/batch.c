/*
 * Record batches (Kafka v2): header checks, scanning, offset assignment,
 * searches by offset and timestamp, sealing a built batch.
 *
 * Every loop over batches advances by a whole batch of at least
 * LS_BATCH_HEADER_SIZE bytes, so it runs at most len / 61 times.
 */
#include "ls_core.h"

int ls_batch_header(const uint8_t *buf, int64_t len, int64_t size_max,
                    ls_batch_t *batch) {
    ls_assert(len >= 0);
    ls_assert(batch != NULL);
    if (len < LS_LOG_OVERHEAD) return LS_ERR_INCOMPLETE;
    int64_t batch_length = (int32_t)ls_load_u32be(buf + LS_POS_BATCH_LENGTH);
    /* A length below the header is garbage, not a torn write. */
    if (batch_length < LS_BATCH_HEADER_SIZE - LS_LOG_OVERHEAD) return LS_ERR_CORRUPT;
    int64_t size = LS_LOG_OVERHEAD + batch_length;
    if (size > size_max) return LS_ERR_CORRUPT;
    if (len < LS_BATCH_HEADER_SIZE) return LS_ERR_INCOMPLETE;
    if (buf[LS_POS_MAGIC] != LS_MAGIC_V2) return LS_ERR_CORRUPT;
    batch->base_offset = (int64_t)ls_load_u64be(buf + LS_POS_BASE_OFFSET);
    batch->batch_length = (int32_t)batch_length;
    batch->size = size;
    batch->attributes = (int16_t)ls_load_u16be(buf + LS_POS_ATTRIBUTES);
    batch->last_offset_delta = (int32_t)ls_load_u32be(buf + LS_POS_LAST_OFFSET_DELTA);
    batch->timestamp_base = (int64_t)ls_load_u64be(buf + LS_POS_BASE_TIMESTAMP);
    batch->timestamp_max = (int64_t)ls_load_u64be(buf + LS_POS_MAX_TIMESTAMP);
    batch->record_count = (int32_t)ls_load_u32be(buf + LS_POS_RECORD_COUNT);
    batch->crc = ls_load_u32be(buf + LS_POS_CRC);
    if (batch->base_offset < 0) return LS_ERR_CORRUPT;
    if (batch->last_offset_delta < 0) return LS_ERR_CORRUPT;
    if (batch->record_count < 0) return LS_ERR_CORRUPT;
    if ((batch->attributes & LS_ATTR_COMPRESSION_MASK) > LS_COMPRESSION_MAX) return LS_ERR_CORRUPT;
    if (batch->base_offset > INT64_MAX - batch->last_offset_delta) return LS_ERR_CORRUPT;
    /* Each record takes at least 7 bytes; a count beyond that is a lie. */
    if ((batch->attributes & LS_ATTR_COMPRESSION_MASK) == 0 &&
        (int64_t)batch->record_count * 7 > size - LS_BATCH_HEADER_SIZE)
        return LS_ERR_CORRUPT;
    if (len < size) return LS_ERR_INCOMPLETE;
    return LS_OK;
}

static int batch_check_crc(const uint8_t *buf, const ls_batch_t *batch) {
    uint32_t crc = ls_crc32c(0, buf + LS_POS_ATTRIBUTES, batch->size - LS_POS_ATTRIBUTES);
    return crc == batch->crc ? LS_OK : LS_ERR_CRC;
}

/* Walks the records section of an uncompressed batch: its structure (the
 * checks of ls_decode_records into no arrays) and, into info when given, the
 * records with a null key and the smallest and largest record timestamps. */
static int batch_walk_records(const uint8_t *buf, const ls_batch_t *batch, ls_batch_info_t *info) {
    const uint8_t *records = buf + LS_BATCH_HEADER_SIZE, *p = records, *end = buf + batch->size;
    int64_t keyless = 0, delta_min = INT64_MAX, delta_max = INT64_MIN;
    /* Bounded by the header's count, itself bounded by the batch's bytes. */
    for (int32_t i = 0; i < batch->record_count; i++) {
        ls_record_view_t r;
        int rc = ls_record_read(&p, end, records, &r, NULL, NULL, NULL, NULL, 0);
        if (rc != LS_OK) return rc;
        if (r.offset_delta > batch->last_offset_delta) return LS_ERR_CORRUPT;
        ls_assert(p <= end);
        keyless += r.key_len < 0;
        if (r.timestamp_delta < delta_min) delta_min = r.timestamp_delta;
        if (r.timestamp_delta > delta_max) delta_max = r.timestamp_delta;
    }
    if (p != end) return LS_ERR_CORRUPT;
    if (info == NULL) return LS_OK;
    info->keyless_count = (int32_t)keyless;
    if (batch->attributes & LS_ATTR_TIMESTAMP_LOG_APPEND) {
        /* LogAppendTime: every record's timestamp is the batch's max (as the decoders say). */
        info->record_timestamp_min = info->record_timestamp_max = batch->timestamp_max;
    } else if (batch->record_count > 0) {
        /* As the decoders: base + delta, wrapping (a producer's garbage is not UB). */
        info->record_timestamp_min = (int64_t)((uint64_t)batch->timestamp_base + (uint64_t)delta_min);
        info->record_timestamp_max = (int64_t)((uint64_t)batch->timestamp_base + (uint64_t)delta_max);
    }
    return LS_OK;
}

/* Kafka's index rule for one batch appended at file position `position`
 * (offset_last its last offset): an offset entry when more than
 * index_interval bytes passed since the last one, with a time entry when the
 * largest timestamp so far grew. */
static int scan_account(ls_scan_t *scan, int64_t position, int64_t offset_first, int64_t offset_last,
                        int64_t timestamp_max, int64_t size, int64_t record_count,
                        uint32_t *index_offsets, uint32_t *index_positions,
                        int64_t *time_timestamps, uint32_t *time_offsets, int64_t index_cap) {
    if (timestamp_max > scan->timestamp_max) {
        scan->timestamp_max = timestamp_max;
        scan->timestamp_max_offset = offset_last;
    }
    if (scan->index_interval > 0 && scan->bytes_since_index > scan->index_interval) {
        if (scan->index_count >= index_cap || scan->time_index_count >= index_cap)
            return LS_ERR_CAPACITY;
        index_offsets[scan->index_count] = (uint32_t)(offset_last - scan->segment_base_offset);
        index_positions[scan->index_count] = (uint32_t)position;
        scan->index_count++;
        /* Kafka's TimeIndex.maybeAppend: only a strictly larger timestamp. */
        if (scan->timestamp_max > scan->time_index_last) {
            time_timestamps[scan->time_index_count] = scan->timestamp_max;
            time_offsets[scan->time_index_count] =
                (uint32_t)(scan->timestamp_max_offset - scan->segment_base_offset);
            scan->time_index_count++;
            scan->time_index_last = scan->timestamp_max;
        }
        scan->bytes_since_index = 0;
    }
    scan->bytes_since_index += size;
    if (scan->offset_first < 0) scan->offset_first = offset_first;
    scan->offset_last = offset_last;
    scan->offset_prev = offset_last;
    scan->batch_count++;
    scan->record_count += record_count;
    if (size > scan->size_largest) scan->size_largest = size;
    return LS_OK;
}

/* The offset rules of a scan for a batch of [base, last]. */
static int scan_check_offsets(const ls_scan_t *scan, int64_t base, int64_t last) {
    if ((scan->flags & LS_SCAN_MONOTONIC) && base <= scan->offset_prev) return LS_ERR_OFFSET;
    if ((scan->flags & LS_SCAN_DENSE) && scan->offset_prev >= 0 && base != scan->offset_prev + 1)
        return LS_ERR_OFFSET;
    if (scan->index_interval > 0) {
        /* Index entries hold u32 offsets relative to the segment base. */
        if (base < scan->segment_base_offset) return LS_ERR_OFFSET;
        if (last - scan->segment_base_offset > UINT32_MAX) return LS_ERR_OFFSET;
    }
    return LS_OK;
}

/* A clean stop of an LS_SCAN_LIMITS scan (internal: never a status). */
#define LS_SCAN_STOPPED 1
#define LS_ATTR_IS_CONTROL 0x20

/* Kafka's LogValidator.validateBatch for a client's v2 batch. */
static int batch_check_client(const uint8_t *buf, const ls_batch_t *batch) {
    if (batch->record_count <= 0 || (int64_t)batch->record_count != (int64_t)batch->last_offset_delta + 1)
        return LS_ERR_INVALID;
    if (batch->attributes & LS_ATTR_IS_CONTROL) return LS_ERR_INVALID;
    int64_t producer_id = (int64_t)ls_load_u64be(buf + LS_POS_PRODUCER_ID);
    int32_t base_sequence = (int32_t)ls_load_u32be(buf + LS_POS_BASE_SEQUENCE);
    if (producer_id >= 0 && base_sequence < 0) return LS_ERR_INVALID;
    return LS_OK;
}

static int scan_check_batch(const uint8_t *buf, int64_t len, ls_scan_t *scan,
                            ls_batch_t *batch, ls_batch_info_t *info) {
    int rc = ls_batch_header(buf, len, scan->batch_size_max, batch);
    if (rc != LS_OK) return rc;
    if (scan->flags & LS_SCAN_LIMITS) {
        if (batch->base_offset >= scan->offset_limit) return LS_SCAN_STOPPED;
        if (scan->batch_count > 0 && scan->bytes_valid + batch->size > scan->bytes_max) return LS_SCAN_STOPPED;
    }
    int64_t offset_last = batch->base_offset + batch->last_offset_delta;
    rc = scan_check_offsets(scan, batch->base_offset, offset_last);
    if (rc != LS_OK) return rc;
    if (scan->flags & LS_SCAN_EPOCH) {
        /* The epoch is not CRC-covered: its range is all that guards it. */
        int32_t epoch = (int32_t)ls_load_u32be(buf + LS_POS_LEADER_EPOCH);
        if (epoch > scan->leader_epoch_max || epoch < scan->leader_epoch_prev) return LS_ERR_CORRUPT;
    }
    if (scan->flags & LS_SCAN_CRC) {
        rc = batch_check_crc(buf, batch);
        if (rc != LS_OK) return rc;
    }
    if (info != NULL) {
        info->size = batch->size;
        info->base_offset = batch->base_offset;
        info->timestamp_base = batch->timestamp_base;
        info->timestamp_max = batch->timestamp_max;
        info->record_timestamp_min = batch->timestamp_base;
        info->record_timestamp_max = batch->timestamp_max;
        info->producer_id = (int64_t)ls_load_u64be(buf + LS_POS_PRODUCER_ID);
        info->last_offset_delta = batch->last_offset_delta;
        info->record_count = batch->record_count;
        info->base_sequence = (int32_t)ls_load_u32be(buf + LS_POS_BASE_SEQUENCE);
        info->partition_leader_epoch = (int32_t)ls_load_u32be(buf + LS_POS_LEADER_EPOCH);
        info->keyless_count = -1;
        info->producer_epoch = (int16_t)ls_load_u16be(buf + LS_POS_PRODUCER_EPOCH);
        info->attributes = batch->attributes;
    }
    if (scan->flags & LS_SCAN_CLIENT) {
        rc = batch_check_client(buf, batch);
        if (rc != LS_OK) return rc;
    }
    if ((scan->flags & LS_SCAN_RECORDS) && (batch->attributes & LS_ATTR_COMPRESSION_MASK) == 0) {
        rc = batch_walk_records(buf, batch, (scan->flags & LS_SCAN_FIELDS) ? info : NULL);
        if (rc != LS_OK) return rc;
    }
    return LS_OK;
}

static void scan_reset(ls_scan_t *scan) {
    scan->bytes_valid = 0;
    scan->batch_count = 0;
    scan->record_count = 0;
    scan->offset_first = -1;
    scan->offset_last = -1;
    scan->index_count = 0;
    scan->time_index_count = 0;
    scan->size_largest = 0;
    scan->stop = LS_OK;
}

int lsu_scan_batches(const uint8_t *buf, int64_t len, ls_scan_t *scan,
                    uint32_t *index_offsets, uint32_t *index_positions,
                    int64_t *time_timestamps, uint32_t *time_offsets,
                    int64_t index_cap) {
    if (scan == NULL || len < 0 || (buf == NULL && len > 0)) return LS_ERR_ARGUMENT;
    if (scan->batches_cap < 0 || (scan->batches == NULL && scan->batches_cap > 0)) return LS_ERR_ARGUMENT;
    if (scan->batch_size_max <= 0) scan->batch_size_max = LS_BATCH_SIZE_LIMIT;
    /* Index positions are u32: an indexed segment stays below 4 GiB. */
    if (scan->index_interval > 0 &&
        (scan->position_base < 0 || scan->position_base + len > (int64_t)UINT32_MAX + 1))
        return LS_ERR_ARGUMENT;
    scan_reset(scan);
    int64_t position = 0;
    int64_t iterations_max = len / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && position < len; i++) {
        ls_batch_t batch;
        ls_batch_info_t *info = NULL;
        if (scan->batches != NULL) {
            if (scan->batch_count >= scan->batches_cap) {
                scan->stop = LS_ERR_CAPACITY;
                break;
            }
            info = scan->batches + scan->batch_count;
        }
        int rc = scan_check_batch(buf + position, len - position, scan, &batch, info);
        if (rc != LS_OK) {
            scan->stop = rc == LS_SCAN_STOPPED ? LS_OK : rc;
            break;
        }
        ls_assert(batch.size >= LS_BATCH_HEADER_SIZE && position + batch.size <= len);
        if (info != NULL) info->position = position;
        int64_t offset_last = batch.base_offset + batch.last_offset_delta;
        rc = scan_account(scan, scan->position_base + position, batch.base_offset, offset_last,
                          batch.timestamp_max, batch.size, batch.record_count, index_offsets,
                          index_positions, time_timestamps, time_offsets, index_cap);
        if (rc != LS_OK) return rc;
        if (scan->flags & LS_SCAN_EPOCH)
            scan->leader_epoch_prev = (int32_t)ls_load_u32be(buf + position + LS_POS_LEADER_EPOCH);
        position += batch.size;
        scan->bytes_valid = position;
    }
    ls_assert(scan->bytes_valid <= len);
    return LS_OK;
}

int ls_index_batches(const ls_batch_info_t *batches, int64_t count, int64_t offset_next,
                     int64_t log_append_time, ls_scan_t *scan, uint32_t *index_offsets,
                     uint32_t *index_positions, int64_t *time_timestamps,
                     uint32_t *time_offsets, int64_t index_cap) {
    if (scan == NULL || count < 0 || (batches == NULL && count > 0)) return LS_ERR_ARGUMENT;
    if (scan->index_interval > 0 && scan->position_base < 0) return LS_ERR_ARGUMENT;
    scan_reset(scan);
    int64_t position = 0;
    for (int64_t i = 0; i < count; i++) {
        const ls_batch_info_t *b = batches + i;
        if (b->position != position || b->size < LS_BATCH_HEADER_SIZE || b->size > LS_BATCH_SIZE_LIMIT ||
            b->last_offset_delta < 0 || b->record_count < 0)
            return LS_ERR_ARGUMENT;
        if (scan->index_interval > 0 && scan->position_base + position + b->size > (int64_t)UINT32_MAX + 1)
            return LS_ERR_ARGUMENT;
        int64_t base = offset_next >= 0 ? offset_next : b->base_offset;
        if (base < 0 || base > INT64_MAX - b->last_offset_delta - 1) return LS_ERR_ARGUMENT;
        int64_t offset_last = base + b->last_offset_delta;
        int rc = scan_check_offsets(scan, base, offset_last);
        if (rc != LS_OK) {
            scan->stop = rc;
            break;
        }
        int64_t timestamp = log_append_time >= 0 ? log_append_time : b->timestamp_max;
        rc = scan_account(scan, scan->position_base + position, base, offset_last, timestamp, b->size,
                          b->record_count, index_offsets, index_positions, time_timestamps,
                          time_offsets, index_cap);
        if (rc != LS_OK) return rc;
        if (offset_next >= 0) offset_next = offset_last + 1;
        position += b->size;
        scan->bytes_valid = position;
    }
    return LS_OK;
}

int ls_assign_offsets(uint8_t *buf, int64_t len, int64_t offset_next,
                      int32_t partition_leader_epoch, int64_t log_append_time,
                      int64_t *offset_last_out) {
    if (buf == NULL || len < 0 || offset_next < 0 || offset_last_out == NULL)
        return LS_ERR_ARGUMENT;
    int64_t position = 0;
    int64_t iterations_max = len / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && position < len; i++) {
        ls_batch_t batch;
        int rc = ls_batch_header(buf + position, len - position, len, &batch);
        if (rc != LS_OK) return rc;
        uint8_t *b = buf + position;
        ls_store_u64be(b + LS_POS_BASE_OFFSET, (uint64_t)offset_next);
        ls_store_u32be(b + LS_POS_LEADER_EPOCH, (uint32_t)partition_leader_epoch);
        if (log_append_time >= 0) {
            uint16_t attributes = (uint16_t)batch.attributes | LS_ATTR_TIMESTAMP_LOG_APPEND;
            ls_store_u16be(b + LS_POS_ATTRIBUTES, attributes);
            ls_store_u64be(b + LS_POS_MAX_TIMESTAMP, (uint64_t)log_append_time);
            uint32_t crc = ls_crc32c(0, b + LS_POS_ATTRIBUTES, batch.size - LS_POS_ATTRIBUTES);
            ls_store_u32be(b + LS_POS_CRC, crc);
        }
        offset_next += (int64_t)batch.last_offset_delta + 1;
        position += batch.size;
    }
    if (position != len) return LS_ERR_CORRUPT;
    *offset_last_out = offset_next - 1;
    return LS_OK;
}

/* Shared walk of the searches: the first batch for which the predicate holds.
 * Only headers are read; CRCs are the reader's business. */
static int search_batches(const uint8_t *buf, int64_t len, int64_t position_start,
                          int64_t target, int by_timestamp, int64_t *position_out,
                          int64_t *size_out) {
    if (buf == NULL || len < 0 || position_start < 0 || position_out == NULL || size_out == NULL)
        return LS_ERR_ARGUMENT;
    if (position_start > len) return LS_ERR_ARGUMENT;
    int64_t position = position_start;
    int64_t iterations_max = (len - position_start) / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && position < len; i++) {
        ls_batch_t batch;
        int rc = ls_batch_header(buf + position, len - position, len, &batch);
        if (rc != LS_OK) return rc;
        int64_t key = by_timestamp ? batch.timestamp_max
                                   : batch.base_offset + batch.last_offset_delta;
        if (key >= target) {
            *position_out = position;
            *size_out = batch.size;
            return LS_OK;
        }
        position += batch.size;
    }
    return LS_ERR_NOT_FOUND;
}

int lsu_search_offset(const uint8_t *buf, int64_t len, int64_t position_start,
                     int64_t offset_target, int64_t *position_out, int64_t *size_out) {
    return search_batches(buf, len, position_start, offset_target, 0, position_out, size_out);
}

int lsu_search_timestamp(const uint8_t *buf, int64_t len, int64_t position_start,
                        int64_t timestamp, int64_t *position_out, int64_t *size_out) {
    return search_batches(buf, len, position_start, timestamp, 1, position_out, size_out);
}

int ls_batch_seal(uint8_t *batch, int64_t batch_len, int64_t base_offset,
                  int32_t partition_leader_epoch, int16_t attributes,
                  int32_t last_offset_delta, int64_t timestamp_base,
                  int64_t timestamp_max, int64_t producer_id, int16_t producer_epoch,
                  int32_t base_sequence, int32_t record_count) {
    if (batch == NULL || batch_len < LS_BATCH_HEADER_SIZE || batch_len > LS_BATCH_SIZE_LIMIT)
        return LS_ERR_ARGUMENT;
    if (base_offset < 0 || last_offset_delta < 0 || record_count < 0) return LS_ERR_ARGUMENT;
    if ((attributes & LS_ATTR_COMPRESSION_MASK) > LS_COMPRESSION_MAX) return LS_ERR_ARGUMENT;
    ls_store_u64be(batch + LS_POS_BASE_OFFSET, (uint64_t)base_offset);
    ls_store_u32be(batch + LS_POS_BATCH_LENGTH, (uint32_t)(batch_len - LS_LOG_OVERHEAD));
    ls_store_u32be(batch + LS_POS_LEADER_EPOCH, (uint32_t)partition_leader_epoch);
    batch[LS_POS_MAGIC] = LS_MAGIC_V2;
    ls_store_u16be(batch + LS_POS_ATTRIBUTES, (uint16_t)attributes);
    ls_store_u32be(batch + LS_POS_LAST_OFFSET_DELTA, (uint32_t)last_offset_delta);
    ls_store_u64be(batch + LS_POS_BASE_TIMESTAMP, (uint64_t)timestamp_base);
    ls_store_u64be(batch + LS_POS_MAX_TIMESTAMP, (uint64_t)timestamp_max);
    ls_store_u64be(batch + LS_POS_PRODUCER_ID, (uint64_t)producer_id);
    ls_store_u16be(batch + LS_POS_PRODUCER_EPOCH, (uint16_t)producer_epoch);
    ls_store_u32be(batch + LS_POS_BASE_SEQUENCE, (uint32_t)base_sequence);
    ls_store_u32be(batch + LS_POS_RECORD_COUNT, (uint32_t)record_count);
    uint32_t crc = ls_crc32c(0, batch + LS_POS_ATTRIBUTES, batch_len - LS_POS_ATTRIBUTES);
    ls_store_u32be(batch + LS_POS_CRC, crc);
    /* Read back what we wrote: the header must now pass our own checks. */
    ls_batch_t check;
    ls_assert(ls_batch_header(batch, batch_len, batch_len, &check) == LS_OK);
    ls_assert(check.size == batch_len && check.crc == crc);
    return LS_OK;
}

int lsu_span_batches(const uint8_t *buf, int64_t len, int64_t position, int64_t bytes_max,
                    int64_t *size_out, int64_t *count_out) {
    if (buf == NULL || len < 0 || position < 0 || position > len || size_out == NULL ||
        count_out == NULL)
        return LS_ERR_ARGUMENT;
    int64_t end = position, count = 0;
    int64_t iterations_max = (len - position) / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && end < len; i++) {
        ls_batch_t batch;
        int rc = ls_batch_header(buf + end, len - end, len, &batch);
        if (rc != LS_OK) return rc;
        if (count > 0 && end - position + batch.size > bytes_max) break;
        end += batch.size;
        count++;
    }
    ls_assert(end <= len);
    *size_out = end - position;
    *count_out = count;
    return LS_OK;
}

/* Producer fields of batches at fixed header positions (v2 format). */
#define LS_ATTRIBUTES_AT 21
#define LS_PRODUCER_ID_AT 43
#define LS_PRODUCER_EPOCH_AT 51
#define LS_BASE_SEQUENCE_AT 53
#define LS_ATTR_COMPRESSION 0x07
#define LS_ATTR_CONTROL 0x20

/* The type of a control batch's one record: its key is (version int16,
 * type int16), 0 = ABORT and 1 = COMMIT (Kafka's ControlRecordType).
 * LS_CONTROL_UNKNOWN for a compressed control batch or a key too short:
 * Kafka never writes either, and callers treat them as no marker. */
static int16_t control_type(const uint8_t *batch, int64_t size) {
    if ((ls_load_u16be(batch + LS_ATTRIBUTES_AT) & LS_ATTR_COMPRESSION) != 0) return LS_CONTROL_UNKNOWN;
    const uint8_t *p = batch + LS_BATCH_HEADER_SIZE, *end = batch + size;
    int64_t length, timestamp_delta, offset_delta, key_len;
    if (varint_read(&p, end, 5, &length) != LS_OK) return LS_CONTROL_UNKNOWN;
    if (p >= end) return LS_CONTROL_UNKNOWN;
    p++; /* record attributes */
    if (varint_read(&p, end, 10, &timestamp_delta) != LS_OK) return LS_CONTROL_UNKNOWN;
    if (varint_read(&p, end, 5, &offset_delta) != LS_OK) return LS_CONTROL_UNKNOWN;
    if (varint_read(&p, end, 5, &key_len) != LS_OK) return LS_CONTROL_UNKNOWN;
    if (key_len < 4 || end - p < 4) return LS_CONTROL_UNKNOWN;
    return (int16_t)ls_load_u16be(p + 2);
}

int lsu_producer_batches(const uint8_t *buf, int64_t len, int64_t cap, int64_t *producer_ids,
                        int16_t *epochs, int32_t *sequences_base, int32_t *sequence_deltas,
                        int64_t *offsets_base, int16_t *attributes, int16_t *control_types,
                        int64_t *count_out) {
    if (buf == NULL || len < 0 || cap < 0 || producer_ids == NULL || epochs == NULL ||
        sequences_base == NULL || sequence_deltas == NULL || offsets_base == NULL ||
        attributes == NULL || control_types == NULL || count_out == NULL)
        return LS_ERR_ARGUMENT;
    int64_t at = 0, count = 0;
    /* Each batch is at least a header long, so this bounds the walk. */
    int64_t iterations_max = len / LS_BATCH_HEADER_SIZE + 1;
    for (int64_t i = 0; i < iterations_max && at < len; i++) {
        ls_batch_t batch;
        int rc = ls_batch_header(buf + at, len - at, len - at, &batch);
        if (rc != LS_OK) return rc;
        int64_t producer_id = (int64_t)ls_load_u64be(buf + at + LS_PRODUCER_ID_AT);
        if (producer_id >= 0) {
            /* Callers size cap from the scan's batch count; overflow is their bug. */
            if (count >= cap) return LS_ERR_CAPACITY;
            producer_ids[count] = producer_id;
            epochs[count] = (int16_t)ls_load_u16be(buf + at + LS_PRODUCER_EPOCH_AT);
            sequences_base[count] = (int32_t)ls_load_u32be(buf + at + LS_BASE_SEQUENCE_AT);
            sequence_deltas[count] = batch.last_offset_delta;
            offsets_base[count] = batch.base_offset;
            int16_t attrs = (int16_t)ls_load_u16be(buf + at + LS_ATTRIBUTES_AT);
            attributes[count] = attrs;
            control_types[count] = (attrs & LS_ATTR_CONTROL) ? control_type(buf + at, batch.size) : LS_CONTROL_NONE;
            count++;
        }
        at += batch.size;
        ls_assert(at <= len);
    }
    *count_out = count;
    return LS_OK;
}
