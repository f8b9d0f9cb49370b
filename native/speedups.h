/*
 * Private header of logstore._speedups (native/speedups_*.c, one extension):
 * what its files share. Every name here is sp_-prefixed, or a struct type a
 * file other than its owner reads; everything else stays static in its file.
 * Each file adds its types and functions to the module in its sp_*_install,
 * which speedups_module.c calls at import.
 */
#ifndef SPEEDUPS_H
#define SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_core.h"

/* The names below are the extension's own: hidden, so a call from one of
 * its files to another is direct (no PLT stub, as between static functions
 * of one file: decode_records paid ~6 ns a record through sp_record_new's
 * stub), and the .so does not export them. */
#pragma GCC visibility push(hidden)

/* -- speedups_errors.c: the error table ------------------------------------ */

typedef enum {
    SP_ERR_BATCH_CORRUPT = 1,
    SP_ERR_RECORD_MALFORMED,
    SP_ERR_RECORD_COUNT,
    SP_ERR_TRAILING_BYTES,
    SP_ERR_HEADER_NAME,
    SP_ERR_NUM_PARTITIONS,
    SP_ERR_POSITION,
    SP_ERR_INDEX_COUNT,
    SP_ERR_BATCH_FIELDS,
    SP_ERR_MAPPED_READ,
    SP_ERR_END_ /* one past the last code */
} sp_error_t;

extern PyObject *sp_corrupt_record_error; /* logstore.errors.CorruptRecordError */

/* Raises the class of code with "message; hint"; returns NULL to return. */
PyObject *sp_raise_error(sp_error_t code, const char *format, ...);
int sp_errors_install(PyObject *module);

/* -- speedups_record.c: Record --------------------------------------------- */

extern PyObject *sp_empty_tuple; /* a Record's headers when it has none */

/* A Record from owned references (all five non-NULL); NULL on failure, the
 * references still the caller's. */
PyObject *sp_record_new(PyObject *key, PyObject *value, PyObject *headers, PyObject *timestamp,
                        PyObject *offset);
int sp_record_install(PyObject *module);

/* -- speedups_message.c: Message ------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *topic, *key, *value, *headers, *error; /* NULL reads as None */
    int64_t offset, timestamp;
    double latency;
    int32_t partition, timestamp_type;
    int has_latency;
} MessageObject;

/* A message from owned references (stolen, also on failure); untracked. */
MessageObject *sp_message_alloc(PyObject *topic, PyObject *key, PyObject *value, PyObject *headers,
                                PyObject *error);
int sp_message_install(PyObject *module);

/* -- speedups_decode.c: records sections and Fetch record sets ------------- */

/* Whether the batch's CRC-32C (over attributes to the end) is the header's. */
static inline int sp_batch_crc_ok(const uint8_t *batch, const ls_batch_t *header) {
    ls_assert(header->size >= LS_BATCH_HEADER_SIZE);
    return ls_crc32c(0, batch + LS_POS_ATTRIBUTES, header->size - LS_POS_ATTRIBUTES) == header->crc;
}

enum { SP_HEADER_SLOTS_STACK = 32 };

/* One record's fields and header positions, read by sp_fields_read. */
typedef struct record_fields {
    ls_record_view_t view;
    const int32_t *hkp, *hkl, *hvp, *hvl; /* view.header_count entries each */
    int32_t stack[4][SP_HEADER_SLOTS_STACK];
    int32_t *heap; /* PyMem block when the headers outnumber the stack slots */
} record_fields_t;

/* Reads one record at *p: LS_OK or a code (MemoryError set when the heap
 * failed); sp_fields_release frees what it took, whatever it returned. */
int sp_fields_read(const uint8_t **p, const uint8_t *end, const uint8_t *base, record_fields_t *f);
void sp_fields_release(record_fields_t *f);
/* The headers as (str, bytes | None) pairs: a tuple (as_list 0) or a list
 * (NULL for none). 0, or -1 with an error set. */
int sp_fields_headers(const uint8_t *base, const record_fields_t *f, int as_list, PyObject **out);
/* A Record of a parsed record; steals headers (also on failure). */
PyObject *sp_record_from_view(const uint8_t *base, const ls_record_view_t *r, PyObject *headers,
                              long long base_offset, long long base_timestamp, int log_append,
                              long long log_append_time);
/* Raise RECORD_MALFORMED (from a read's code), HEADER_NAME (from a build's
 * UnicodeDecodeError) for record index of the batch at base_offset. */
void sp_record_malformed(long long base_offset, int32_t index, int rc, int at_end);
void sp_record_build_error(long long base_offset, int32_t index);
int sp_decode_install(PyObject *module);

/* -- speedups_lookup.c, speedups_encode.c ---------------------------------- */

int sp_lookup_install(PyObject *module);
int sp_encode_install(PyObject *module);

/* -- speedups_partitioner.c: Kafka's key partitioning ---------------------- */

/* Java's Utils.toPositive(h) % n: clears the sign bit, it does not negate. */
static inline long sp_partition_of(uint32_t h, int32_t num_partitions) {
    ls_assert(num_partitions > 0);
    return (long)((h & 0x7fffffffu) % (uint32_t)num_partitions);
}

int sp_partitioner_install(PyObject *module);

/* -- speedups_lock.c: Lock ------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked; /* changed only with the GIL held */
} LockObject;

/* A new unlocked Lock; NULL with an error set. */
LockObject *sp_lock_new(void);

/* Takes the lock: 1, or 0 when it is held and !blocking or timeout_us ran
 * out (timeout_us < 0: no limit). A wait releases the GIL. */
int sp_lock_take(LockObject *self, int blocking, PY_TIMEOUT_T timeout_us);
void sp_lock_give(LockObject *self); /* the holder's only */
int sp_lock_install(PyObject *module);

/* -- speedups_accumulator.c: the producer's fast path ---------------------- */

int sp_accumulator_install(PyObject *module);

#pragma GCC visibility pop

#endif
