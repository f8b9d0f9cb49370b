/*
 * logstore native core: the flat API.
 *
 * This header is parsed twice: by the C compiler (through ls_core.h) and by
 * cffi's cdef, so it holds only declarations cffi understands: no includes,
 * no macros with expressions, fixed-width integer types only.
 *
 * Conventions:
 * - Buffers are (pointer, length) pairs; lengths are int64_t and never negative.
 * - Functions return an int status: LS_OK (0) or a negative LS_ERR_* code.
 *   Bad input is a status, never an abort; an abort means a broken invariant
 *   inside this library.
 * - Record batch fields are big-endian on disk, as in Kafka's v2 format.
 */

enum {
    LS_OK = 0,
    LS_ERR_INCOMPLETE = -1, /* buffer ends inside a batch (torn tail) */
    LS_ERR_CORRUPT = -2,    /* structure invalid: sizes, magic, varints */
    LS_ERR_CRC = -3,        /* CRC-32C mismatch */
    LS_ERR_CAPACITY = -4,   /* caller's output array or buffer too small */
    LS_ERR_ARGUMENT = -5,   /* an argument outside its documented range */
    LS_ERR_NOT_FOUND = -6,  /* no batch satisfies the search */
    LS_ERR_OFFSET = -7,     /* offsets not increasing, or beyond u32 of base */
    LS_ERR_INVALID = -8,    /* a client's batch Kafka refuses (LS_SCAN_CLIENT) */
    LS_ERR_IO = -9          /* a mapped page could not be read in (SIGBUS: guard.c) */
};

enum {
    LS_BATCH_HEADER_SIZE = 61,
    LS_LOG_OVERHEAD = 12,
    LS_OFFSET_INDEX_ENTRY_SIZE = 8,
    LS_TIME_INDEX_ENTRY_SIZE = 12
};

enum {
    LS_SCAN_CRC = 1,       /* verify each batch's CRC-32C */
    LS_SCAN_RECORDS = 2,   /* walk the records of uncompressed batches */
    LS_SCAN_MONOTONIC = 4, /* base offsets must exceed the previous last offset */
    LS_SCAN_DENSE = 8,     /* base offsets must be the previous last offset + 1
                            * (a log that was never compacted) */
    LS_SCAN_EPOCH = 16,    /* leader epochs non-decreasing, at most leader_epoch_max */
    LS_SCAN_FIELDS = 32,   /* with LS_SCAN_RECORDS: per uncompressed batch, its records'
                            * null keys and smallest and largest timestamps (ls_batch_info_t) */
    LS_SCAN_LIMITS = 64,   /* stop cleanly before a batch whose base offset is at or past
                            * offset_limit, or (after the first) one that would pass bytes_max */
    LS_SCAN_CLIENT = 128   /* a producer's batches (Kafka's validateBatch), LS_ERR_INVALID when
                            * the record count is not positive or not last offset delta + 1, for
                            * a control batch, or a producer id with a negative base sequence;
                            * the batch's ls_batch_info_t is filled for the message */
};

/* One batch as the scan saw it (ls_scan_t.batches): what validation, producer
 * state, offset assignment and the segment's indexes need, so none of them
 * reads the batch's bytes again. */
typedef struct ls_batch_info {
    int64_t position;          /* of the batch, from buf[0] */
    int64_t size;              /* bytes, log overhead included */
    int64_t base_offset;       /* as found (a producer's: usually 0) */
    int64_t timestamp_base;    /* the header's first timestamp */
    int64_t timestamp_max;     /* the header's max timestamp */
    int64_t record_timestamp_min; /* LS_SCAN_FIELDS, uncompressed: smallest record timestamp */
    int64_t record_timestamp_max; /* LS_SCAN_FIELDS, uncompressed: largest record timestamp */
    int64_t producer_id;
    int32_t last_offset_delta;
    int32_t record_count;
    int32_t base_sequence;
    int32_t partition_leader_epoch;
    int32_t keyless_count;     /* LS_SCAN_FIELDS, uncompressed: records whose key is null;
                                * -1 when not walked (compressed, or no LS_SCAN_FIELDS) */
    int16_t producer_epoch;
    int16_t attributes;
} ls_batch_info_t;

typedef struct ls_scan {
    /* Inputs, carried from one call to the next for one segment. */
    int64_t position_base;       /* file position of buf[0] */
    int64_t segment_base_offset; /* index entries are relative to this */
    int64_t index_interval;      /* bytes between index entries; <= 0: none */
    int64_t bytes_since_index;   /* bytes appended since the last entry */
    int64_t offset_prev;         /* last offset before buf; -1 if none */
    int64_t timestamp_max;       /* largest batch max timestamp so far; -1 */
    int64_t timestamp_max_offset;/* last offset of that batch; -1 */
    int64_t time_index_last;     /* timestamp of the last time index entry */
    int64_t batch_size_max;      /* largest batch accepted, in bytes */
    int32_t leader_epoch_max;    /* LS_SCAN_EPOCH: the largest epoch known */
    int32_t leader_epoch_prev;   /* LS_SCAN_EPOCH: carried; -1 to start */
    uint32_t flags;              /* LS_SCAN_* */
    /* Outputs. */
    int64_t bytes_valid;   /* bytes of whole valid batches from buf[0] */
    int64_t batch_count;
    int64_t record_count;  /* sum of the batches' record counts */
    int64_t offset_first;  /* base offset of the first valid batch, -1 */
    int64_t offset_last;   /* last offset of the last valid batch, -1 */
    int64_t index_count;   /* offset index entries written */
    int64_t time_index_count; /* time index entries written */
    int32_t stop;          /* LS_OK at a clean end, else why the scan stopped */
    /* Inputs of LS_SCAN_LIMITS (a read's span). */
    int64_t bytes_max;     /* bytes of whole batches wanted (at least one batch) */
    int64_t offset_limit;  /* stop before a batch whose base offset is >= this */
    /* Optional per batch output: NULL, or room for batches_cap batches; a scan
     * with more batches stops (bytes_valid so far) with stop = LS_ERR_CAPACITY. */
    ls_batch_info_t *batches;
    int64_t batches_cap;
    /* More outputs. */
    int64_t size_largest;  /* the largest batch's size, in bytes */
} ls_scan_t;

/* CRC-32C (Castagnoli), chainable like the crc32c package: pass the previous
 * result as crc, 0 to start. */
uint32_t ls_crc32c(uint32_t crc, const uint8_t *buf, int64_t len);
uint32_t ls_crc32c_software(uint32_t crc, const uint8_t *buf, int64_t len);
int ls_crc32c_hardware_available(void);

/* Scans whole batches from buf, validating per scan->flags, stopping at the
 * first invalid or incomplete batch. Writes the index entries due (Kafka's
 * rule: an entry when more than index_interval bytes passed since the last)
 * into the four arrays of capacity index_cap. Returns scan->stop's class:
 * LS_OK when the scan ran (even if it stopped early; see scan->stop), or
 * LS_ERR_ARGUMENT / LS_ERR_CAPACITY. */
int ls_scan_batches(const uint8_t *buf, int64_t len, ls_scan_t *scan,
                    uint32_t *index_offsets, uint32_t *index_positions,
                    int64_t *time_timestamps, uint32_t *time_offsets,
                    int64_t index_cap);

/* The index entries due for whole batches already scanned into batches[0..count)
 * (ls_scan_t.batches), appended at file position scan->position_base: the
 * rule, checks and outputs of ls_scan_batches with index_interval > 0 and
 * LS_SCAN_MONOTONIC, without reading the batches' bytes again. offset_next >= 0:
 * the batches were given offsets from it (ls_assign_offsets), else their own;
 * log_append_time >= 0 replaces their max timestamps (LogAppendTime).
 * Returns LS_OK (scan->stop says whether they may be appended: LS_ERR_OFFSET
 * for offsets not above offset_prev or beyond u32 of the segment base),
 * LS_ERR_ARGUMENT or LS_ERR_CAPACITY. */
int ls_index_batches(const ls_batch_info_t *batches, int64_t count, int64_t offset_next,
                     int64_t log_append_time, ls_scan_t *scan, uint32_t *index_offsets,
                     uint32_t *index_positions, int64_t *time_timestamps,
                     uint32_t *time_offsets, int64_t index_cap);

/* Rewrites base offsets from offset_next on, and partition leader epochs.
 * log_append_time >= 0 stamps LogAppendTime (attribute bit 3, max timestamp)
 * and recomputes the CRC. buf must hold whole batches, already scanned. */
int ls_assign_offsets(uint8_t *buf, int64_t len, int64_t offset_next,
                      int32_t partition_leader_epoch, int64_t log_append_time,
                      int64_t *offset_last_out);

/* Index lookups: the slot of the last entry whose key is <= target, or -1.
 * entries point at big-endian index bytes (memory-mapped files). */
int64_t ls_offset_index_lookup(const uint8_t *entries, int64_t entry_count,
                               uint32_t offset_relative);
int64_t ls_time_index_lookup(const uint8_t *entries, int64_t entry_count,
                             int64_t timestamp);

/* From position_start, the first batch whose last offset >= offset_target. */
int ls_search_offset(const uint8_t *buf, int64_t len, int64_t position_start,
                     int64_t offset_target, int64_t *position_out,
                     int64_t *size_out);

/* Offset index lookup, then ls_search_offset, in one call: the batch of a
 * segment holding offset_target (or the first after it). */
int ls_segment_locate(const uint8_t *log, int64_t log_len,
                      const uint8_t *index, int64_t index_count,
                      int64_t segment_base_offset, int64_t offset_target,
                      int64_t *position_out, int64_t *size_out);

/* From position_start, the first batch whose max timestamp >= timestamp. */
int ls_search_timestamp(const uint8_t *buf, int64_t len, int64_t position_start,
                        int64_t timestamp, int64_t *position_out,
                        int64_t *size_out);

/* Encodes count records into out (the records section of a batch). Keys and
 * values are concatenated in keys/values with lengths (-1 = null); key_lens,
 * timestamps and header_counts may be NULL (all null keys, all timestamp_base,
 * no headers). Headers: header_counts[i] per record; header bytes concatenated
 * key, value, key, value... with header_key_lens / header_value_lens
 * (-1 = null value). out_len gets the bytes written, timestamp_max_out the
 * largest timestamp. */
int ls_encode_records(uint8_t *out, int64_t out_cap, int32_t count,
                      int64_t timestamp_base, const int64_t *timestamps,
                      const uint8_t *keys, const int32_t *key_lens,
                      const uint8_t *values, const int32_t *value_lens,
                      const int32_t *header_counts, const uint8_t *header_data,
                      const int32_t *header_key_lens,
                      const int32_t *header_value_lens, int64_t *out_len,
                      int64_t *timestamp_max_out);

/* Writes the 61-byte header at batch[0] for a records section that follows
 * it (batch_len bytes in all) and computes the CRC. */
int ls_batch_seal(uint8_t *batch, int64_t batch_len, int64_t base_offset,
                  int32_t partition_leader_epoch, int16_t attributes,
                  int32_t last_offset_delta, int64_t timestamp_base,
                  int64_t timestamp_max, int64_t producer_id,
                  int16_t producer_epoch, int32_t base_sequence,
                  int32_t record_count);

/* Decodes a records section into parallel arrays of capacity record_cap;
 * a record whose offset delta exceeds offset_delta_max (the batch's last
 * offset delta) is corrupt;
 * header arrays have capacity header_cap (LS_ERR_CAPACITY with
 * *header_total set to the count needed when short). Positions are relative
 * to records[0]; lengths are -1 for null. */
int ls_decode_records(const uint8_t *records, int64_t len, int32_t count,
                      int32_t offset_delta_max, int64_t *offset_deltas, int64_t *timestamp_deltas,
                      int32_t *key_pos, int32_t *key_lens, int32_t *value_pos,
                      int32_t *value_lens, int32_t *header_first,
                      int32_t *header_counts, int64_t record_cap,
                      int32_t *header_key_pos, int32_t *header_key_lens,
                      int32_t *header_value_pos, int32_t *header_value_lens,
                      int64_t header_cap, int64_t *header_total);


/* Bytes of the whole batches from position on that fit in bytes_max (at
 * least one batch, as Kafka serves a first batch larger than the limit). */
int ls_span_batches(const uint8_t *buf, int64_t len, int64_t position,
                    int64_t bytes_max, int64_t *size_out, int64_t *count_out);

/* Checks a segment's offset index against its log: entries strictly
 * increasing, and each entry's position the start of a batch whose last
 * offset is the entry's offset. Returns LS_OK or LS_ERR_CORRUPT, with the
 * first bad slot in *slot_bad. */
int ls_offset_index_verify(const uint8_t *log, int64_t log_len, const uint8_t *index,
                           int64_t index_count, int64_t segment_base_offset,
                           int64_t *slot_bad);

/* Checks a time index: timestamps strictly increasing, offsets
 * non-decreasing and at most offset_relative_max. */
int ls_time_index_verify(const uint8_t *index, int64_t index_count,
                         int64_t offset_relative_max, int64_t *slot_bad);

/* Checks a time index against its log: each entry (timestamp, offset) must
 * name the last offset of a batch whose max timestamp is the entry's and is
 * the largest of the log up to that batch. */
int ls_time_index_verify_log(const uint8_t *log, int64_t log_len, const uint8_t *index,
                             int64_t index_count, int64_t segment_base_offset,
                             int64_t *slot_bad);

/* Decodes every record of whole uncompressed batches in buf into arrays of
 * capacity record_cap: absolute offsets and timestamps, key and value
 * positions (relative to buf[0]; length -1 = null) and header counts.
 * Stops with LS_ERR_ARGUMENT at a compressed batch (the caller decodes those
 * separately). *count_out gets the records decoded. */
int ls_decode_batches(const uint8_t *buf, int64_t len, int64_t record_cap, int64_t *offsets,
                      int64_t *timestamps, int32_t *key_pos, int32_t *key_lens,
                      int32_t *value_pos, int32_t *value_lens, int32_t *header_counts,
                      int64_t *count_out);

/* The Confluent wire-format schema ids of the keys (which 0) or values
 * (which 1) of every record of whole, validated, uncompressed batches in
 * buf[0..len) (a produced batch, in memory: not guarded for segment maps), in
 * record order into ids (capacity cap): the big-endian int32 after magic byte
 * 0 of a field of at least 5 bytes; LS_SCHEMA_ID_NULL for a null field,
 * LS_SCHEMA_ID_NONE for a field without that framing. *count_out gets the
 * records; *uniform_out the one value every record has (LS_SCHEMA_ID_MIXED if
 * they differ or there are none). LS_ERR_ARGUMENT at a compressed batch,
 * LS_ERR_CAPACITY when cap is short. One pass, no allocation. */
enum { LS_SCHEMA_ID_NULL = -1, LS_SCHEMA_ID_NONE = -2, LS_SCHEMA_ID_MIXED = -3 };
int ls_schema_ids(const uint8_t *buf, int64_t len, int32_t which, int64_t cap, int64_t *ids,
                  int64_t *count_out, int64_t *uniform_out);

/* The producer fields of every batch in buf[0..len) whose producer id is
 * >= 0, in log order, into arrays of capacity cap: producer id, epoch, base
 * sequence, last offset delta, base offset, attributes, and for a control
 * batch its type (0 abort, 1 commit; LS_CONTROL_UNKNOWN if unreadable),
 * LS_CONTROL_NONE for other batches. Stops with the header's error at a bad
 * batch; *count_out gets the batches written. */
enum { LS_CONTROL_NONE = -1, LS_CONTROL_UNKNOWN = -2 };
int ls_producer_batches(const uint8_t *buf, int64_t len, int64_t cap, int64_t *producer_ids,
                        int16_t *epochs, int32_t *sequences_base, int32_t *sequence_deltas,
                        int64_t *offsets_base, int16_t *attributes, int16_t *control_types,
                        int64_t *count_out);

/* ls_segment_locate without out-parameters, for the hottest lookups: returns
 * (position << 32) | size of the batch holding offset_target (or the first
 * after it), or a negative LS_ERR_* code. Positions and sizes fit 31 bits. */
int64_t ls_segment_find(const uint8_t *log, int64_t log_len, const uint8_t *index,
                        int64_t index_count, int64_t segment_base_offset, int64_t offset_target);

/* Request body walk (walk.c). A program is an int32 array of ops, each
 * followed by its operands; an entity's ops end with LS_WALK_END. */
enum {
    LS_WALK_END = 0,             /* end of an entity                                  */
    LS_WALK_FIXED = 1,           /* n: n bytes                                        */
    LS_WALK_STRING = 2,          /* flags: a string, bytes or records field            */
    LS_WALK_ARRAY = 3,           /* flags, item size, exact, item pc                   */
    LS_WALK_STRUCT = 4,          /* pc: a nested entity                                */
    LS_WALK_NULLABLE_STRUCT = 5, /* pc: -1 (null) or 1 (present) and a nested entity   */
    LS_WALK_TAGS = 6,            /* table pc: count, then (tag, pc) pairs of known tags */
    LS_WALK_FLEXIBLE = 1,        /* flag: compact (varint) lengths                     */
    LS_WALK_NULLABLE = 2,        /* flag: a negative length (null) is allowed          */
    LS_WALK_WIDE = 4             /* flag: an int32 length (bytes, records)             */
};

/* Walks the request body at frame[at..frame_len) with program[start..]:
 * returns the offset after the body, or LS_ERR_CORRUPT when a length, count
 * or null breaks the schema (the caller then finds out which, for the error
 * message), or LS_ERR_ARGUMENT. Reads only inside the frame; every loop is
 * bounded by the frame's bytes and the program's length, nesting by 16. */
int64_t ls_request_walk(const int32_t *program, int64_t program_len, int64_t start,
                        const uint8_t *frame, int64_t frame_len, int64_t at);

/* Kafka record batches <-> Apache Arrow columns (arrow.c).
 *
 * Arrow layouts (columnar format 1.0, little-endian hosts): a validity
 * bitmap has bit i (least significant first) of byte i / 8 set when row i
 * is not null; a binary or utf8 column is int32 offsets[n + 1] and data
 * bytes offsets[i]..offsets[i + 1]; headers are list<struct<key utf8,
 * value binary>>: int32 list offsets[n + 1] into the header entries, whose
 * key and value columns are laid out as above. */
enum {
    LS_ARROW_CRC = 1,     /* decode: verify each batch's CRC-32C */
    LS_ARROW_HEADERS = 2  /* decode: fill the header columns */
};

enum {
    LS_ARROW_STOP_COMPRESSED = 1, /* a compressed batch at position: the caller
                                   * decompresses it, then ls_arrow_decode_section */
    LS_ARROW_STOP_END = 2,        /* a batch at or past offset_end */
    LS_ARROW_STOP_ROWS = 3,       /* rows reached rows_max */
    LS_ARROW_STOP_FULL = 4        /* the next batch could pass data_limit */
};

/* The header-only first pass: what the decode of buf will need. */
typedef struct ls_arrow_plan {
    int64_t offset_start; /* in: rows with offset_start <= offset < offset_end */
    int64_t offset_end;
    int64_t bytes;        /* out: bytes walked (whole batches) */
    int64_t rows;         /* out: records of the uncompressed batches with rows in range */
    int64_t data;         /* out: records-section bytes of those batches */
    int64_t section_max;  /* out: the largest of those sections */
    int32_t stop;         /* out: LS_OK, LS_ARROW_STOP_END or the header's LS_ERR_* */
} ls_arrow_plan_t;

/* Decode state: inputs, caller-owned output columns, progress carried from
 * call to call. Capacities: rows_cap rows (bitmaps (rows_cap + 7) / 8 bytes,
 * offsets rows_cap + 1 entries), *_cap bytes of data, headers_cap entries. */
typedef struct ls_arrow_columns {
    int64_t offset_start;    /* rows with offset_start <= offset < offset_end */
    int64_t offset_end;
    int64_t rows_max;        /* stop after the batch that reaches it; <= 0: none */
    int64_t data_limit;      /* bytes one data column may hold (int32 offsets) */
    uint32_t flags;          /* LS_ARROW_CRC | LS_ARROW_HEADERS */
    int64_t *offsets;
    int64_t *timestamps_us;  /* ms * 1000, saturated at the int64 range */
    int32_t *timestamp_types;/* 0 CreateTime, 1 LogAppendTime */
    uint8_t *key_valid;
    int32_t *key_offsets;
    uint8_t *key_data;
    uint8_t *value_valid;
    int32_t *value_offsets;
    uint8_t *value_data;
    int64_t rows_cap;
    int64_t key_cap;
    int64_t value_cap;
    uint8_t *header_valid;   /* a record without headers is a null list (as Spark) */
    int32_t *header_offsets;
    int32_t *hkey_offsets;
    uint8_t *hkey_data;
    uint8_t *hvalue_valid;
    int32_t *hvalue_offsets;
    uint8_t *hvalue_data;
    int64_t headers_cap;
    int64_t hkey_cap;
    int64_t hvalue_cap;
    int64_t position;        /* bytes of buf consumed */
    int64_t next_offset;     /* the next offset to read; start it at offset_start */
    int64_t rows;
    int64_t headers;
    int64_t key_nulls;
    int64_t value_nulls;
    int64_t header_nulls;
    int64_t hvalue_nulls;
    int32_t stop;            /* LS_OK at the end of buf, LS_ARROW_STOP_* or LS_ERR_* */
    int64_t stop_offset;     /* base offset of the batch stopped at; -1 if unreadable */
} ls_arrow_columns_t;

/* Walks the batch headers of buf (no CRC, no records) as ls_arrow_decode
 * will, to size its columns. Returns LS_OK or LS_ERR_ARGUMENT. */
int ls_arrow_plan(const uint8_t *buf, int64_t len, ls_arrow_plan_t *plan);

/* Decodes whole batches from buf + columns->position into the columns until
 * the end of buf or a stop (columns->stop). Returns LS_OK or LS_ERR_ARGUMENT. */
int ls_arrow_decode(const uint8_t *buf, int64_t len, ls_arrow_columns_t *columns);

/* Decodes the decompressed records section of the compressed batch at
 * batch[0..batch_len) (where ls_arrow_decode stopped) and consumes the batch.
 * columns->stop: LS_OK, LS_ARROW_STOP_ROWS or LS_ERR_*. */
int ls_arrow_decode_section(const uint8_t *batch, int64_t batch_len, const uint8_t *section,
                            int64_t section_len, ls_arrow_columns_t *columns);

/* Arrow columns to encode. Offsets pointers start at the array's first row
 * (the array offset applied); validity bitmaps are NULL when no row is null,
 * else read from bit *_valid_bit (the array offset). data_len bounds offsets. */
typedef struct ls_arrow_source {
    int64_t rows;
    const uint8_t *key_valid;      /* key_offsets NULL: every key is null */
    int64_t key_valid_bit;
    const int32_t *key_offsets;
    const uint8_t *key_data;
    int64_t key_data_len;
    const uint8_t *value_valid;    /* a null value is a tombstone */
    int64_t value_valid_bit;
    const int32_t *value_offsets;
    const uint8_t *value_data;
    int64_t value_data_len;
    const int64_t *timestamps;     /* ms; NULL: every record has timestamp */
    int64_t timestamp;
    const uint8_t *header_valid;   /* header_offsets NULL: no headers */
    int64_t header_valid_bit;
    const int32_t *header_offsets; /* list offsets: entries of row i */
    const uint8_t *entry_valid;    /* struct validity (null entries are refused) */
    int64_t entry_valid_bit;
    const uint8_t *hkey_valid;     /* null header keys are refused */
    int64_t hkey_valid_bit;
    const int32_t *hkey_offsets;   /* indexed by entry */
    const uint8_t *hkey_data;
    int64_t hkey_data_len;
    const uint8_t *hvalue_valid;
    int64_t hvalue_valid_bit;
    const int32_t *hvalue_offsets;
    const uint8_t *hvalue_data;
    int64_t hvalue_data_len;
} ls_arrow_source_t;

/* Encoding progress: rows from row on go into whole, sealed v2 batches in
 * out (base offset 0, producer id -1, no compression), each at most
 * batch_bytes_max unless one record is larger; batch_ends[k] is the end of
 * batch k in out. */
typedef struct ls_arrow_encoding {
    int64_t row;             /* in/out: the next row to encode */
    uint8_t *out;
    int64_t out_cap;
    int64_t batch_bytes_max;
    int64_t *batch_ends;
    int64_t batch_cap;
    int64_t batch_count;     /* out */
} ls_arrow_encoding_t;

/* Encodes rows from encoding->row until every row is in, out is full or
 * batch_cap batches are written. LS_ERR_CAPACITY when out cannot hold the
 * next record's batch at all; LS_ERR_ARGUMENT at a bad row (encoding->row
 * names it: null header entry or key, offsets outside their data). */
int ls_arrow_encode(const ls_arrow_source_t *source, ls_arrow_encoding_t *encoding);

/* Kafka's default partitioner over a binary column: (murmur2(key) &
 * 0x7fffffff) % num_partitions per row, -1 for a null key. */
int ls_arrow_partitions(const uint8_t *valid, int64_t valid_bit, const int32_t *offsets,
                        const uint8_t *data, int64_t data_len, int64_t rows,
                        int32_t num_partitions, int32_t *out);

/* Arenas: private anonymous memory for the columns of a whole-table read
 * (arrow.c). The caller reserves an upper bound (only pages written cost
 * memory), then gives the unwritten tail back once a column's length is
 * known. Page-aligned, so 64-byte aligned as Arrow wants. */
enum {
    LS_ARENA_HUGE = 1, /* ask for transparent huge pages (a hint) */
    LS_ARENA_SMALL = 2 /* ask for base pages only (a hint) */
};

/* A mapping of size bytes (size > 0), or NULL when the OS refuses. */
void *ls_arena_map(int64_t size, uint32_t flags);

/* Unmaps the whole pages of a mapping of size bytes past its first keep
 * bytes; returns the size still mapped (>= keep; size when the kernel
 * refuses the cut), or LS_ERR_ARGUMENT. */
int64_t ls_arena_trim(void *base, int64_t size, int64_t keep);

/* Unmaps a mapping of size bytes (as ls_arena_map or ls_arena_trim left it);
 * a refusal (ENOMEM, see arrow.c) leaves it mapped. */
void ls_arena_unmap(void *base, int64_t size);

/* Gives a mapping back: kept (MADV_FREE) for a later ls_arena_map with the
 * same flags while the cache has room (64 arenas, 256 MiB), else unmapped.
 * flags 0: always unmapped. */
void ls_arena_release(void *base, int64_t size, uint32_t flags);

/* Unmaps every kept arena; returns their bytes. */
int64_t ls_arena_drop_cache(void);

/* The mapped-read guard (guard.c). ls_guard_install takes SIGBUS once per
 * process (idempotent; what handled it before still gets the faults outside
 * a guarded call); from then on the functions that read segments or indexes
 * (the scan, searches, spans, producer and decode walks, index lookups and
 * verifications, ls_segment_locate/find) return LS_ERR_IO when a mapped page
 * of their buffer cannot be read in, instead of the process dying. ls_copy copies len bytes; ls_touch reads one
 * byte a page of buf, so that unguarded code may read it afterwards. */
int ls_guard_install(void);
int ls_guard_installed(void);
int ls_copy(uint8_t *dst, const uint8_t *src, int64_t len);
int ls_touch(const uint8_t *buf, int64_t len);
