#include "strata_futex.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

int strata_futex_wait(const void *word, uint32_t expected) {
    return (int)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void strata_futex_wake(const void *word, int32_t count) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}
#endif
