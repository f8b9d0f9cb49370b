/* Bounds walk of a Kafka request body against a compiled schema program.
 *
 * kio's native reader sizes an array's storage from the count on the wire
 * before it reads the items, so a 20-byte request claiming 2**31 items makes
 * it allocate gigabytes and abort the process. Every request body is walked
 * first: each array must fit in the bytes left (at its items' minimum size),
 * each string in the frame, and a null may only stand where the schema allows.
 * logstore/broker/protocol.py compiles each kio request class into a program
 * (the LS_WALK_* ops in ls_api.h) and keeps a Python walker with the same rules
 * for the error message when this one refuses a body. */

#include "ls_core.h"

/* Schemas nest a few levels; anything deeper is a broken program. */
#define LS_WALK_DEPTH_MAX 16

static int64_t walk_program(const int32_t *program, int64_t program_len, int64_t pc,
                            const uint8_t *frame, int64_t at, int64_t end, int depth);

static int64_t uvarint_read(const uint8_t *frame, int64_t *at, int64_t end) {
    uint64_t value = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (*at >= end) return -1;
        uint8_t byte = frame[(*at)++];
        value |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) return (int64_t)value;
    }
    return -1; /* longer than 5 bytes */
}

static int64_t be_read(const uint8_t *frame, int64_t at, int width) {
    /* Signed big-endian int16 or int32. */
    if (width == 2) return (int16_t)ls_load_u16be(frame + at);
    return (int32_t)ls_load_u32be(frame + at);
}

/* A string, bytes or records field; -1 when it breaks the rules. */
static int64_t walk_string(int32_t flags, const uint8_t *frame, int64_t at, int64_t end) {
    int64_t length;
    if (flags & LS_WALK_FLEXIBLE) {
        length = uvarint_read(frame, &at, end);
        if (length < 0) return -1;
        length -= 1;
    } else {
        int width = (flags & LS_WALK_WIDE) ? 4 : 2;
        if (at + width > end) return -1;
        length = be_read(frame, at, width);
        at += width;
    }
    if (length < 0) return (flags & LS_WALK_NULLABLE) ? at : -1;
    return length > end - at ? -1 : at + length;
}

static int64_t walk_array(const int32_t *op, const int32_t *program, int64_t program_len,
                          const uint8_t *frame, int64_t at, int64_t end, int depth) {
    int32_t flags = op[1], item_size = op[2], exact = op[3], item_pc = op[4];
    int64_t count;
    if (flags & LS_WALK_FLEXIBLE) {
        count = uvarint_read(frame, &at, end);
        if (count < 0) return -1;
        count -= 1;
    } else {
        if (at + 4 > end) return -1;
        count = be_read(frame, at, 4);
        at += 4;
    }
    if (count < 0) return (flags & LS_WALK_NULLABLE) ? at : -1;
    /* Storage for count items is allocated up front: they must fit. */
    if (count * (item_size > 1 ? item_size : 1) > end - at) return -1;
    if (exact) return at + count * item_size;
    for (int64_t i = 0; i < count; i++) { /* bounded: count <= end - at */
        at = walk_program(program, program_len, item_pc, frame, at, end, depth + 1);
        if (at < 0) return -1;
    }
    return at;
}

static int64_t walk_tags(const int32_t *op, const int32_t *program, int64_t program_len,
                         const uint8_t *frame, int64_t at, int64_t end, int depth) {
    int64_t table = op[1];
    ls_assert(table >= 0 && table < program_len);
    int32_t known = program[table];
    ls_assert(known >= 0 && table + 1 + 2 * (int64_t)known <= program_len);
    int64_t count = uvarint_read(frame, &at, end);
    if (count < 0 || count > end - at) return -1;
    for (int64_t i = 0; i < count; i++) {
        int64_t tag = uvarint_read(frame, &at, end);
        int64_t size = tag < 0 ? -1 : uvarint_read(frame, &at, end);
        if (size < 0 || size > end - at) return -1;
        for (int32_t k = 0; k < known; k++) {
            if (program[table + 1 + 2 * k] != tag) continue;
            if (walk_program(program, program_len, program[table + 2 + 2 * k], frame, at, at + size,
                             depth + 1) < 0)
                return -1;
        }
        at += size;
    }
    return at;
}

/* Walks the ops from pc to LS_WALK_END; returns the offset after them or -1. */
static int64_t walk_program(const int32_t *program, int64_t program_len, int64_t pc,
                            const uint8_t *frame, int64_t at, int64_t end, int depth) {
    if (depth > LS_WALK_DEPTH_MAX) return -1;
    /* Each op advances pc by at least one int: the loop ends within program_len. */
    for (int64_t steps = 0; steps < program_len; steps++) {
        ls_assert(pc >= 0 && pc < program_len);
        const int32_t *op = program + pc;
        switch (op[0]) {
        case LS_WALK_END:
            return at;
        case LS_WALK_FIXED:
            at += op[1];
            if (at > end) return -1;
            pc += 2;
            break;
        case LS_WALK_STRING:
            at = walk_string(op[1], frame, at, end);
            pc += 2;
            break;
        case LS_WALK_ARRAY:
            at = walk_array(op, program, program_len, frame, at, end, depth);
            pc += 5;
            break;
        case LS_WALK_STRUCT:
            at = walk_program(program, program_len, op[1], frame, at, end, depth + 1);
            pc += 2;
            break;
        case LS_WALK_NULLABLE_STRUCT:
            if (at >= end) return -1;
            at = frame[at] == 0xff ? at + 1
                                   : walk_program(program, program_len, op[1], frame, at + 1, end, depth + 1);
            pc += 2;
            break;
        case LS_WALK_TAGS:
            if (at < end && frame[at] == 0) { /* no tagged fields: the usual case */
                at += 1;
            } else {
                at = walk_tags(op, program, program_len, frame, at, end, depth);
            }
            pc += 2;
            break;
        default:
            ls_assert(0 && "unknown walk op");
        }
        if (at < 0) return -1;
    }
    ls_assert(0 && "walk program without an end");
    return -1;
}

int64_t ls_request_walk(const int32_t *program, int64_t program_len, int64_t start,
                        const uint8_t *frame, int64_t frame_len, int64_t at) {
    if (program == NULL || frame == NULL || program_len <= 0 || start < 0 || start >= program_len ||
        frame_len < 0 || at < 0 || at > frame_len)
        return LS_ERR_ARGUMENT;
    int64_t after = walk_program(program, program_len, start, frame, at, frame_len, 0);
    ls_assert(after <= frame_len);
    return after < 0 ? LS_ERR_CORRUPT : after;
}
