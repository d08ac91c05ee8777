#ifndef STRATA_CRC32C_H
#define STRATA_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, as in iSCSI, ext4
/// and RocksDB) of `count` bytes at `bytes`, continuing from `crc` (0 to
/// start). Uses the processor's CRC-32C instruction when it has one
/// (x86-64 SSE4.2, checked at run time; AArch64 when compiled with the CRC
/// extension), three interleaved streams on long inputs, and a table
/// otherwise. Every path returns the same value.
uint32_t strata_crc32c(uint32_t crc, const void *bytes, size_t count);

/// The table-driven path alone, for tests that compare it with the
/// hardware path.
uint32_t strata_crc32c_portable(uint32_t crc, const void *bytes, size_t count);

/// 1 when `strata_crc32c` uses a CRC instruction on this machine.
int strata_crc32c_is_hardware(void);

/// Asks the processor to bring the cache line at `p` in for reading. Never
/// faults, whatever `p` is.
static inline void strata_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

#endif
