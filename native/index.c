/*
 * Sparse index lookups over memory-mapped, big-endian index files.
 *
 * Offset index entry (8 bytes): relative offset u32, position u32.
 * Time index entry (12 bytes): timestamp i64, relative offset u32.
 *
 * Like Kafka's AbstractIndex, the search looks first in the warm section
 * (the last 8 KiB of entries), where nearly all lookups of a tailing reader
 * land, so the pages it touches stay in memory; a miss searches the rest.
 */
#include "ls_core.h"

enum { LS_INDEX_WARM_BYTES = 8192 };

static inline int64_t offset_key(const uint8_t *entries, int64_t slot) {
    return (int64_t)ls_load_u32be(entries + slot * LS_OFFSET_INDEX_ENTRY_SIZE);
}
static inline int64_t time_key(const uint8_t *entries, int64_t slot) {
    return (int64_t)ls_load_u64be(entries + slot * LS_TIME_INDEX_ENTRY_SIZE);
}

/* Largest slot in [lo, hi] whose key <= target, given key(lo) <= target. */
static int64_t search_range(const uint8_t *entries, int64_t lo, int64_t hi, int64_t target,
                            int64_t (*key)(const uint8_t *, int64_t)) {
    /* Each pass halves [lo, hi]; 64 passes cover any int64 range. */
    for (int pass = 0; pass < 64 && lo < hi; pass++) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (key(entries, mid) <= target)
            lo = mid;
        else
            hi = mid - 1;
    }
    ls_assert(lo == hi || lo > hi);
    return lo;
}

static int64_t index_lookup(const uint8_t *entries, int64_t count, int64_t entry_size,
                            int64_t target, int64_t (*key)(const uint8_t *, int64_t)) {
    ls_assert(count >= 0);
    ls_assert(entries != NULL || count == 0);
    if (count == 0 || key(entries, 0) > target) return -1;
    int64_t warm_first = count - LS_INDEX_WARM_BYTES / entry_size;
    if (warm_first < 0) warm_first = 0;
    int64_t slot;
    if (key(entries, warm_first) <= target)
        slot = search_range(entries, warm_first, count - 1, target, key);
    else
        slot = search_range(entries, 0, warm_first, target, key);
    ls_assert(slot >= 0 && slot < count && key(entries, slot) <= target);
    return slot;
}

int64_t lsu_offset_index_lookup(const uint8_t *entries, int64_t entry_count,
                               uint32_t offset_relative) {
    return index_lookup(entries, entry_count, LS_OFFSET_INDEX_ENTRY_SIZE,
                        (int64_t)offset_relative, offset_key);
}

int64_t lsu_time_index_lookup(const uint8_t *entries, int64_t entry_count, int64_t timestamp) {
    return index_lookup(entries, entry_count, LS_TIME_INDEX_ENTRY_SIZE, timestamp, time_key);
}

int lsu_segment_locate(const uint8_t *log, int64_t log_len, const uint8_t *index,
                      int64_t index_count, int64_t segment_base_offset,
                      int64_t offset_target, int64_t *position_out, int64_t *size_out) {
    if (offset_target < segment_base_offset || index_count < 0) return LS_ERR_ARGUMENT;
    int64_t position = 0;
    int64_t relative = offset_target - segment_base_offset;
    if (relative > UINT32_MAX) relative = UINT32_MAX;
    int64_t slot = lsu_offset_index_lookup(index, index_count, (uint32_t)relative);
    if (slot >= 0) {
        position = (int64_t)ls_load_u32be(index + slot * LS_OFFSET_INDEX_ENTRY_SIZE + 4);
        /* A hint past the end means a damaged index; the caller rebuilds. */
        if (position > log_len) return LS_ERR_CORRUPT;
    }
    return lsu_search_offset(log, log_len, position, offset_target, position_out, size_out);
}

int lsu_offset_index_verify(const uint8_t *log, int64_t log_len, const uint8_t *index,
                           int64_t index_count, int64_t segment_base_offset, int64_t *slot_bad) {
    if (log_len < 0 || index_count < 0 || slot_bad == NULL) return LS_ERR_ARGUMENT;
    if ((log == NULL && log_len > 0) || (index == NULL && index_count > 0)) return LS_ERR_ARGUMENT;
    int64_t offset_prev = -1, position_prev = -1;
    for (int64_t slot = 0; slot < index_count; slot++) {
        const uint8_t *entry = index + slot * LS_OFFSET_INDEX_ENTRY_SIZE;
        int64_t relative = (int64_t)ls_load_u32be(entry);
        int64_t position = (int64_t)ls_load_u32be(entry + 4);
        *slot_bad = slot;
        if (relative <= offset_prev || position <= position_prev) return LS_ERR_CORRUPT;
        if (position >= log_len) return LS_ERR_CORRUPT;
        ls_batch_t batch;
        if (ls_batch_header(log + position, log_len - position, log_len, &batch) != LS_OK)
            return LS_ERR_CORRUPT;
        if (batch.base_offset + batch.last_offset_delta != segment_base_offset + relative)
            return LS_ERR_CORRUPT;
        offset_prev = relative;
        position_prev = position;
    }
    *slot_bad = -1;
    return LS_OK;
}

int lsu_time_index_verify(const uint8_t *index, int64_t index_count,
                         int64_t offset_relative_max, int64_t *slot_bad) {
    if (index_count < 0 || slot_bad == NULL || (index == NULL && index_count > 0))
        return LS_ERR_ARGUMENT;
    int64_t timestamp_prev = INT64_MIN, offset_prev = -1;
    for (int64_t slot = 0; slot < index_count; slot++) {
        const uint8_t *entry = index + slot * LS_TIME_INDEX_ENTRY_SIZE;
        int64_t timestamp = (int64_t)ls_load_u64be(entry);
        int64_t relative = (int64_t)ls_load_u32be(entry + 8);
        *slot_bad = slot;
        if (slot > 0 && timestamp <= timestamp_prev) return LS_ERR_CORRUPT;
        if (relative < offset_prev || relative > offset_relative_max) return LS_ERR_CORRUPT;
        timestamp_prev = timestamp;
        offset_prev = relative;
    }
    *slot_bad = -1;
    return LS_OK;
}

int lsu_time_index_verify_log(const uint8_t *log, int64_t log_len, const uint8_t *index,
                             int64_t index_count, int64_t segment_base_offset,
                             int64_t *slot_bad) {
    if (log_len < 0 || index_count < 0 || slot_bad == NULL) return LS_ERR_ARGUMENT;
    if ((log == NULL && log_len > 0) || (index == NULL && index_count > 0)) return LS_ERR_ARGUMENT;
    int64_t slot = 0, position = 0, running_max = -1;
    int64_t iterations_max = log_len / LS_BATCH_HEADER_SIZE + 1;
    *slot_bad = 0;
    for (int64_t i = 0; i < iterations_max && position < log_len && slot < index_count; i++) {
        ls_batch_t batch;
        if (ls_batch_header(log + position, log_len - position, log_len, &batch) != LS_OK)
            return LS_ERR_CORRUPT;
        if (batch.timestamp_max > running_max) running_max = batch.timestamp_max;
        int64_t last = batch.base_offset + batch.last_offset_delta;
        /* Entries name batches in order; several entries never name one batch. */
        const uint8_t *entry = index + slot * LS_TIME_INDEX_ENTRY_SIZE;
        int64_t entry_offset = segment_base_offset + (int64_t)ls_load_u32be(entry + 8);
        if (entry_offset < last) return LS_ERR_CORRUPT; /* names no batch's last offset */
        if (entry_offset == last) {
            int64_t timestamp = (int64_t)ls_load_u64be(entry);
            if (timestamp != batch.timestamp_max || timestamp != running_max) return LS_ERR_CORRUPT;
            *slot_bad = ++slot;
        }
        position += batch.size;
    }
    if (slot != index_count) return LS_ERR_CORRUPT;
    *slot_bad = -1;
    return LS_OK;
}

int64_t lsu_segment_find(const uint8_t *log, int64_t log_len, const uint8_t *index,
                        int64_t index_count, int64_t segment_base_offset, int64_t offset_target) {
    int64_t position, size;
    if (offset_target < segment_base_offset) offset_target = segment_base_offset;
    int rc = lsu_segment_locate(log, log_len, index, index_count, segment_base_offset, offset_target,
                               &position, &size);
    if (rc != LS_OK) return rc;
    ls_assert(position >= 0 && position <= INT32_MAX && size > 0 && size <= INT32_MAX);
    return position << 32 | size;
}
