/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82f63b78).
 *
 * Hardware path: the SSE4.2 crc32 instruction has a latency of about three
 * cycles but a throughput of one per cycle, so one dependent chain uses a
 * third of the unit. We run three chains over three adjacent blocks and
 * combine them by "shifting" a CRC over a block of zeros, which is a linear
 * map done with four 256-entry tables per block size.
 *
 * Software path: slicing-by-8 tables, for machines without SSE4.2.
 * All tables are built once at load time (a constructor), before any call.
 */
#include "ls_core.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#define LS_HAVE_X86 1
#else
#define LS_HAVE_X86 0
#endif

#define LS_CRC32C_POLY 0x82f63b78u
enum { LS_CRC_BLOCK_LONG = 8192, LS_CRC_BLOCK_SHORT = 256 };

static uint32_t crc_table[8][256];
static uint32_t crc_shift_long[4][256];
static uint32_t crc_shift_short[4][256];
static int crc_hardware;
static int crc_ready;

/* Multiplies a 32x32 GF(2) matrix (given as 32 column vectors) by vec. */
static uint32_t gf2_times(const uint32_t *matrix, uint32_t vec) {
    uint32_t sum = 0;
    for (int bit = 0; bit < 32 && vec != 0; bit++, vec >>= 1) {
        if (vec & 1u) sum ^= matrix[bit];
    }
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *matrix) {
    for (int n = 0; n < 32; n++) square[n] = gf2_times(matrix, matrix[n]);
}

/* The operator that advances a raw CRC over bytes_zero zero bytes.
 * bytes_zero must be a power of two: the operator is squared log2 times. */
static void crc_zeros_operator(uint32_t *operator, uint32_t bytes_zero) {
    ls_assert(bytes_zero > 0 && (bytes_zero & (bytes_zero - 1)) == 0);
    uint32_t a[32], b[32];
    a[0] = LS_CRC32C_POLY; /* one zero bit */
    for (int n = 1; n < 32; n++) a[n] = 1u << (n - 1);
    gf2_square(b, a); /* two bits */
    gf2_square(a, b); /* four bits */
    gf2_square(b, a); /* eight bits: one byte */
    uint32_t *current = b, *spare = a;
    for (uint32_t bytes = 1; bytes < bytes_zero; bytes <<= 1) {
        gf2_square(spare, current);
        uint32_t *swap = current;
        current = spare;
        spare = swap;
    }
    memcpy(operator, current, sizeof(uint32_t) * 32);
}

static void crc_shift_tables(uint32_t table[4][256], uint32_t bytes_zero) {
    uint32_t op[32];
    crc_zeros_operator(op, bytes_zero);
    for (uint32_t n = 0; n < 256; n++) {
        table[0][n] = gf2_times(op, n);
        table[1][n] = gf2_times(op, n << 8);
        table[2][n] = gf2_times(op, n << 16);
        table[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t crc_shift(uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^
           table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}

__attribute__((constructor)) static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1u) ? (crc >> 1) ^ LS_CRC32C_POLY : crc >> 1;
        crc_table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = crc_table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = crc_table[0][crc & 0xff] ^ (crc >> 8);
            crc_table[k][n] = crc;
        }
    }
    crc_shift_tables(crc_shift_long, LS_CRC_BLOCK_LONG);
    crc_shift_tables(crc_shift_short, LS_CRC_BLOCK_SHORT);
#if LS_HAVE_X86
    __builtin_cpu_init();
    crc_hardware = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    crc_ready = 1;
}

/* Raw (non-inverted) software CRC. */
static uint32_t crc_software_raw(uint32_t crc, const uint8_t *buf, int64_t len) {
    while (len > 0 && ((uintptr_t)buf & 7) != 0) {
        crc = crc_table[0][(crc ^ *buf++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, buf, 8);
        word ^= crc; /* little-endian: the CRC meets the first four bytes */
        crc = crc_table[7][word & 0xff] ^ crc_table[6][(word >> 8) & 0xff] ^
              crc_table[5][(word >> 16) & 0xff] ^ crc_table[4][(word >> 24) & 0xff] ^
              crc_table[3][(word >> 32) & 0xff] ^ crc_table[2][(word >> 40) & 0xff] ^
              crc_table[1][(word >> 48) & 0xff] ^ crc_table[0][word >> 56];
        buf += 8;
        len -= 8;
    }
    while (len > 0) {
        crc = crc_table[0][(crc ^ *buf++) & 0xff] ^ (crc >> 8);
        len--;
    }
    return crc;
}

#if LS_HAVE_X86
__attribute__((target("sse4.2"))) static inline uint64_t crc_hw_load(
    uint64_t crc, const uint8_t *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return _mm_crc32_u64(crc, word);
}

/* Three interleaved chains over blocks of block bytes, then combined. */
__attribute__((target("sse4.2"))) static uint64_t crc_hw_triple(
    uint64_t crc0, const uint8_t **bufp, int64_t *lenp, int64_t block,
    uint32_t shift[4][256]) {
    const uint8_t *buf = *bufp;
    int64_t len = *lenp;
    while (len >= block * 3) {
        uint64_t crc1 = 0, crc2 = 0;
        const uint8_t *end = buf + block;
        do {
            crc0 = crc_hw_load(crc0, buf);
            crc1 = crc_hw_load(crc1, buf + block);
            crc2 = crc_hw_load(crc2, buf + block * 2);
            buf += 8;
        } while (buf < end);
        crc0 = crc_shift(shift, (uint32_t)crc0) ^ crc1;
        crc0 = crc_shift(shift, (uint32_t)crc0) ^ crc2;
        buf += block * 2;
        len -= block * 3;
    }
    *bufp = buf;
    *lenp = len;
    return crc0;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hardware_raw(
    uint32_t crc, const uint8_t *buf, int64_t len) {
    while (len > 0 && ((uintptr_t)buf & 7) != 0) {
        crc = _mm_crc32_u8(crc, *buf++);
        len--;
    }
    uint64_t crc0 = crc;
    crc0 = crc_hw_triple(crc0, &buf, &len, LS_CRC_BLOCK_LONG, crc_shift_long);
    crc0 = crc_hw_triple(crc0, &buf, &len, LS_CRC_BLOCK_SHORT, crc_shift_short);
    while (len >= 8) {
        crc0 = crc_hw_load(crc0, buf);
        buf += 8;
        len -= 8;
    }
    crc = (uint32_t)crc0;
    while (len > 0) {
        crc = _mm_crc32_u8(crc, *buf++);
        len--;
    }
    return crc;
}
#endif

uint32_t ls_crc32c(uint32_t crc, const uint8_t *buf, int64_t len) {
    ls_assert(crc_ready);
    ls_assert(len >= 0);
    ls_assert(buf != NULL || len == 0);
#if LS_HAVE_X86
    if (crc_hardware) return ~crc_hardware_raw(~crc, buf, len);
#endif
    return ~crc_software_raw(~crc, buf, len);
}

uint32_t ls_crc32c_software(uint32_t crc, const uint8_t *buf, int64_t len) {
    ls_assert(crc_ready);
    ls_assert(len >= 0);
    ls_assert(buf != NULL || len == 0);
    return ~crc_software_raw(~crc, buf, len);
}

int ls_crc32c_hardware_available(void) { return crc_hardware; }
