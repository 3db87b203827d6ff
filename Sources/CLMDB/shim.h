#ifndef CLMDB_SHIM_H
#define CLMDB_SHIM_H
#include <lmdb.h>
#include <stddef.h>

/// Asks the CPU to bring `length` bytes from `address` into its caches, every cache line at
/// once, without waiting for them (a hint: it never faults, and does nothing where the
/// compiler offers no prefetch).
static inline void healthledger_prefetch(const void *address, size_t length) {
    const char *bytes = (const char *)address;
    for (size_t offset = 0; offset < length; offset += 64) {
        __builtin_prefetch(bytes + offset, 0, 3);
    }
}
#endif
