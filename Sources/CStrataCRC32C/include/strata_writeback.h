#ifndef STRATA_WRITEBACK_H
#define STRATA_WRITEBACK_H

#include <stdint.h>

/// Asks the kernel to start writing the dirty pages of `count` bytes at
/// `offset` of file `fd` to the device, without waiting for them (Linux's
/// `sync_file_range` with `SYNC_FILE_RANGE_WRITE`): a hint that makes a
/// later `fdatasync` find less to write. It makes nothing durable. Returns
/// 0, or -1 with `errno` set; does nothing and returns 0 elsewhere.
int strata_start_writeback(int fd, int64_t offset, int64_t count);

#endif
