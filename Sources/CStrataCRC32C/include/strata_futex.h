#ifndef STRATA_FUTEX_H
#define STRATA_FUTEX_H

#include <stdint.h>

#if defined(__linux__)
/// Sleeps while the 32-bit word at `word` holds `expected` (Linux's
/// `FUTEX_WAIT_PRIVATE`): returns at once when it holds another value,
/// else when woken or on a signal. The caller checks the word again.
int strata_futex_wait(const void *word, uint32_t expected);

/// Wakes up to `count` threads sleeping on `word` (`FUTEX_WAKE_PRIVATE`).
void strata_futex_wake(const void *word, int32_t count);
#endif

#endif
