/*
 * The mapped-read guard: a read through a memory-mapped file whose page
 * cannot be read in returns LS_ERR_IO from the call that read it, instead of
 * killing the process.
 *
 * Segments and indexes are read through memory maps. When the kernel cannot
 * bring a mapped page in (a bad block: the disk answers EIO; a file truncated
 * under its map by another process), the reading thread gets SIGBUS, whose
 * default action kills the broker with every healthy partition it serves.
 * Kafka's JVM turns the same fault into an InternalError for the access that
 * made it; this file does the same for the core's read functions:
 *
 * - each public function below that may read a mapped file runs its body
 *   (the lsu_ function of the same name) under sigsetjmp; a SIGBUS taken by
 *   that thread while the body runs jumps back and the call returns
 *   LS_ERR_IO (the Python side raises an OSError, EIO, and the log's
 *   directory fails as for any I/O error);
 * - a SIGBUS outside a guarded call goes to whatever handled it before
 *   ls_guard_install (faulthandler, or the default action: the process dies
 *   as it did without the guard);
 * - a SIGBUS handler installed after the guard takes every SIGBUS first:
 *   faulthandler.enable() after importing logstore ends the process on a
 *   fault the guard would have turned into an error. Enable faulthandler
 *   first (python -X faulthandler; the suite does in tests/__init__.py).
 *
 * Safety: a guarded body touches only its arguments' memory and the stack
 * (no allocation, no lock, no Python object), so abandoning it mid-way leaves
 * nothing half-done; its outputs are unspecified after LS_ERR_IO. The jump
 * target is per thread (cffi calls run without the GIL, on any thread).
 * Both extension modules compile this file, each with its own state; their
 * handlers chain, so whichever installs second hands on what it does not own.
 */
#define _XOPEN_SOURCE 700 /* sigaction, sigsetjmp, SA_ONSTACK (not C11) */
#include "ls_core.h"

#include <setjmp.h>
#include <signal.h>

static _Thread_local sigjmp_buf *volatile guard_target; /* the innermost guarded call's, or NULL;
                                                       * volatile: its stores around the body are not dead */
static struct sigaction guard_previous;        /* the handler before ours */
static volatile sig_atomic_t guard_installed;

static void guard_hand_on(int sig, siginfo_t *info, void *context) {
    if (guard_previous.sa_flags & SA_SIGINFO) {
        guard_previous.sa_sigaction(sig, info, context);
        return;
    }
    if (guard_previous.sa_handler == SIG_IGN) return;
    if (guard_previous.sa_handler != SIG_DFL) {
        guard_previous.sa_handler(sig);
        return;
    }
    /* The default action: restore it. A fault recurs when the handler
     * returns (and kills, as without us); a sent signal is sent again. */
    sigaction(sig, &guard_previous, NULL);
    if (info == NULL || info->si_code <= 0) raise(sig);
}

static void guard_handler(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *target = guard_target;
    if (target != NULL && info != NULL && info->si_code > 0) {
        guard_target = NULL;
        siglongjmp(*target, 1);
    }
    guard_hand_on(sig, info, context);
}

int ls_guard_install(void) {
    if (guard_installed) return LS_OK;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = guard_handler;
    /* NODEFER: the jump leaves the handler without unblocking SIGBUS. */
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &guard_previous) != 0) return LS_ERR_IO;
    guard_installed = 1;
    return LS_OK;
}

int ls_guard_installed(void) { return guard_installed != 0; }

/* GUARDED(type, call): run call with the guard on; LS_ERR_IO on a fault. The
 * outer target is read back after a jump, but never written after sigsetjmp. */
#define GUARDED(type, call)                                 \
    do {                                                    \
        sigjmp_buf here;                                    \
        sigjmp_buf *outer = guard_target;                \
        if (sigsetjmp(here, 0) != 0) {                      \
            guard_target = outer;                           \
            return (type)LS_ERR_IO;                         \
        }                                                   \
        guard_target = &here;                               \
        type result = (call);                               \
        guard_target = outer;                               \
        return result;                                      \
    } while (0)

static int copy_pages(uint8_t *dst, const uint8_t *src, int64_t len) {
    memcpy(dst, src, (size_t)len);
    return LS_OK;
}

int ls_copy(uint8_t *dst, const uint8_t *src, int64_t len) {
    if (len < 0 || (len > 0 && (dst == NULL || src == NULL))) return LS_ERR_ARGUMENT;
    GUARDED(int, copy_pages(dst, src, len));
}

static int touch_pages(const uint8_t *buf, int64_t len) {
    volatile uint8_t sink = 0;
    /* One read a page brings each in; the last byte covers a short tail. */
    for (int64_t at = 0; at < len; at += 4096) sink ^= buf[at];
    if (len > 0) sink ^= buf[len - 1];
    (void)sink;
    return LS_OK;
}

int ls_touch(const uint8_t *buf, int64_t len) {
    if (len < 0 || (len > 0 && buf == NULL)) return LS_ERR_ARGUMENT;
    GUARDED(int, touch_pages(buf, len));
}

int ls_scan_batches(const uint8_t *buf, int64_t len, ls_scan_t *scan, uint32_t *index_offsets,
                    uint32_t *index_positions, int64_t *time_timestamps, uint32_t *time_offsets,
                    int64_t index_cap) {
    GUARDED(int, lsu_scan_batches(buf, len, scan, index_offsets, index_positions, time_timestamps,
                                  time_offsets, index_cap));
}

int ls_search_offset(const uint8_t *buf, int64_t len, int64_t position_start, int64_t offset_target,
                     int64_t *position_out, int64_t *size_out) {
    GUARDED(int, lsu_search_offset(buf, len, position_start, offset_target, position_out, size_out));
}

int ls_search_timestamp(const uint8_t *buf, int64_t len, int64_t position_start, int64_t timestamp,
                        int64_t *position_out, int64_t *size_out) {
    GUARDED(int, lsu_search_timestamp(buf, len, position_start, timestamp, position_out, size_out));
}

int ls_span_batches(const uint8_t *buf, int64_t len, int64_t position, int64_t bytes_max,
                    int64_t *size_out, int64_t *count_out) {
    GUARDED(int, lsu_span_batches(buf, len, position, bytes_max, size_out, count_out));
}

int ls_producer_batches(const uint8_t *buf, int64_t len, int64_t cap, int64_t *producer_ids,
                        int16_t *epochs, int32_t *sequences_base, int32_t *sequence_deltas,
                        int64_t *offsets_base, int16_t *attributes, int16_t *control_types,
                        int64_t *count_out) {
    GUARDED(int, lsu_producer_batches(buf, len, cap, producer_ids, epochs, sequences_base,
                                      sequence_deltas, offsets_base, attributes, control_types,
                                      count_out));
}

int64_t ls_offset_index_lookup(const uint8_t *entries, int64_t entry_count, uint32_t offset_relative) {
    GUARDED(int64_t, lsu_offset_index_lookup(entries, entry_count, offset_relative));
}

int64_t ls_time_index_lookup(const uint8_t *entries, int64_t entry_count, int64_t timestamp) {
    GUARDED(int64_t, lsu_time_index_lookup(entries, entry_count, timestamp));
}

int ls_segment_locate(const uint8_t *log, int64_t log_len, const uint8_t *index, int64_t index_count,
                      int64_t segment_base_offset, int64_t offset_target, int64_t *position_out,
                      int64_t *size_out) {
    GUARDED(int, lsu_segment_locate(log, log_len, index, index_count, segment_base_offset,
                                    offset_target, position_out, size_out));
}

int64_t ls_segment_find(const uint8_t *log, int64_t log_len, const uint8_t *index, int64_t index_count,
                        int64_t segment_base_offset, int64_t offset_target) {
    GUARDED(int64_t, lsu_segment_find(log, log_len, index, index_count, segment_base_offset,
                                      offset_target));
}

int ls_offset_index_verify(const uint8_t *log, int64_t log_len, const uint8_t *index,
                           int64_t index_count, int64_t segment_base_offset, int64_t *slot_bad) {
    GUARDED(int, lsu_offset_index_verify(log, log_len, index, index_count, segment_base_offset,
                                         slot_bad));
}

int ls_time_index_verify(const uint8_t *index, int64_t index_count, int64_t offset_relative_max,
                         int64_t *slot_bad) {
    GUARDED(int, lsu_time_index_verify(index, index_count, offset_relative_max, slot_bad));
}

int ls_time_index_verify_log(const uint8_t *log, int64_t log_len, const uint8_t *index,
                             int64_t index_count, int64_t segment_base_offset, int64_t *slot_bad) {
    GUARDED(int, lsu_time_index_verify_log(log, log_len, index, index_count, segment_base_offset,
                                           slot_bad));
}

int ls_decode_batches(const uint8_t *buf, int64_t len, int64_t record_cap, int64_t *offsets,
                      int64_t *timestamps, int32_t *key_pos, int32_t *key_lens, int32_t *value_pos,
                      int32_t *value_lens, int32_t *header_counts, int64_t *count_out) {
    GUARDED(int, lsu_decode_batches(buf, len, record_cap, offsets, timestamps, key_pos, key_lens,
                                    value_pos, value_lens, header_counts, count_out));
}
