// libFuzzer's driver, from the runtime that `-sanitize=fuzzer` links
// (libclang_rt.fuzzer). A fuzz target's `main` calls it: SwiftPM gives every
// executable its own `main`, so libFuzzer's cannot be used.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
