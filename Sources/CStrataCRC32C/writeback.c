#if defined(__linux__)
#define _GNU_SOURCE
#include <fcntl.h>
#endif

#include "strata_writeback.h"

int strata_start_writeback(int fd, int64_t offset, int64_t count) {
#if defined(__linux__)
    return sync_file_range(fd, (off_t)offset, (off_t)count, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd;
    (void)offset;
    (void)count;
    return 0;
#endif
}
