// CRC-32C for page and log checksums.
//
// The register is kept reflected and inverted at the ends, as every
// CRC-32C user does, so "123456789" gives 0xE3069283.
//
// Long inputs, with the instruction (x86-64 or AArch64), run three streams over
// three consecutive blocks (the instruction has a latency of three cycles
// and a throughput of one), then fold the three registers together: the
// register of A‖B is the register of A advanced over |B| zero bytes, xored
// with the register of B started from zero. Advancing over a fixed block
// length is linear in the register, so it is four table lookups.

#include "strata_crc32c.h"

#include <string.h>

#define POLY 0x82F63B78u
/// Bytes per stream in the three-stream loop: a 4 KiB page minus its
/// checksum is 4092 bytes, which is 3 x 1360 + 12.
#define BLOCK 1360

static uint32_t table[8][256];
static int hardware;

static uint32_t portable_raw(uint32_t reg, const unsigned char *p, size_t n) {
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        reg = table[0][(reg ^ *p++) & 0xff] ^ (reg >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        word ^= reg;
        reg = table[7][word & 0xff] ^ table[6][(word >> 8) & 0xff] ^ table[5][(word >> 16) & 0xff]
            ^ table[4][(word >> 24) & 0xff] ^ table[3][(word >> 32) & 0xff] ^ table[2][(word >> 40) & 0xff]
            ^ table[1][(word >> 48) & 0xff] ^ table[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        reg = table[0][(reg ^ *p++) & 0xff] ^ (reg >> 8);
        n--;
    }
    return reg;
}

// The instruction, per architecture; one loop below uses either.
#if defined(__x86_64__)
#include <nmmintrin.h>
#define HARDWARE_TARGET __attribute__((target("sse4.2")))
#define CRC_BYTE(reg, byte) _mm_crc32_u8((reg), (byte))
#define CRC_WORD(reg, word) ((uint32_t)_mm_crc32_u64((reg), (word)))
#define HAVE_HARDWARE_RAW 1
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define HARDWARE_TARGET
#define CRC_BYTE(reg, byte) __crc32cb((reg), (byte))
#define CRC_WORD(reg, word) __crc32cd((reg), (word))
#define HAVE_HARDWARE_RAW 1
#endif

#if defined(HAVE_HARDWARE_RAW)
/// shift[k][b]: the register 0 with byte b at position k, advanced over
/// BLOCK zero bytes.
static uint32_t shift[4][256];

static uint32_t advance(uint32_t reg) {
    return shift[0][reg & 0xff] ^ shift[1][(reg >> 8) & 0xff] ^ shift[2][(reg >> 16) & 0xff] ^ shift[3][reg >> 24];
}

HARDWARE_TARGET static uint32_t hardware_raw(uint32_t reg, const unsigned char *p, size_t n) {
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        reg = CRC_BYTE(reg, *p++);
        n--;
    }
    while (n >= 3 * BLOCK) {
        uint32_t a = reg, b = 0, c = 0;
        const unsigned char *end = p + BLOCK;
        while (p < end) {
            uint64_t x, y, z;
            memcpy(&x, p, 8);
            memcpy(&y, p + BLOCK, 8);
            memcpy(&z, p + 2 * BLOCK, 8);
            a = CRC_WORD(a, x);
            b = CRC_WORD(b, y);
            c = CRC_WORD(c, z);
            p += 8;
        }
        reg = advance(advance(a) ^ b) ^ c;
        p += 2 * BLOCK;
        n -= 3 * BLOCK;
    }
    while (n >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        reg = CRC_WORD(reg, x);
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        reg = CRC_BYTE(reg, *p++);
        n--;
    }
    return reg;
}
#endif

/// Builds the tables before main runs, so that no caller races on them.
__attribute__((constructor)) static void strata_crc32c_init(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t r = b;
        for (int k = 0; k < 8; k++) r = (r >> 1) ^ (POLY & (0u - (r & 1)));
        table[0][b] = r;
    }
    for (uint32_t b = 0; b < 256; b++) {
        for (int k = 1; k < 8; k++) table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xff];
    }
#if defined(HAVE_HARDWARE_RAW)
    // Advancing a register over BLOCK zero bytes, for each single bit;
    // every other register is the xor of its bits' images.
    static const unsigned char zeros[BLOCK];
    uint32_t bit[32];
    for (int i = 0; i < 32; i++) bit[i] = portable_raw(1u << i, zeros, BLOCK);
    for (int k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++) {
                if (b & (1u << i)) v ^= bit[8 * k + i];
            }
            shift[k][b] = v;
        }
    }
#endif
#if defined(__x86_64__)
    __builtin_cpu_init();
    hardware = __builtin_cpu_supports("sse4.2") != 0;
#elif defined(HAVE_HARDWARE_RAW)
    hardware = 1;
#endif
}

uint32_t strata_crc32c_portable(uint32_t crc, const void *bytes, size_t count) {
    return ~portable_raw(~crc, (const unsigned char *)bytes, count);
}

uint32_t strata_crc32c(uint32_t crc, const void *bytes, size_t count) {
#if defined(HAVE_HARDWARE_RAW)
    if (hardware) return ~hardware_raw(~crc, (const unsigned char *)bytes, count);
#endif
    return ~portable_raw(~crc, (const unsigned char *)bytes, count);
}

int strata_crc32c_is_hardware(void) { return hardware; }
