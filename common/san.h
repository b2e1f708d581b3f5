/* Hot loops of plain arithmetic over arrays whose extent the caller states: the sanitizer build
 * checks each array once, whole (ASan's shadow of the entire range: the same bounds that a check
 * of every load would hold it to), then runs the loop without per-load checks, which were most of
 * the sanitizer build's time there. Other builds: nothing. */
#ifndef LMQ_COMMON_SAN_H
#define LMQ_COMMON_SAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define SAN_UNCHECKED __attribute__((no_sanitize("address", "undefined")))
/* A bad byte in [p, p + bytes) is read where ASan checks it: its own report, naming the byte. */
static inline void san_check_range(const void *p, size_t bytes)
{
    const volatile char *bad = __asan_region_is_poisoned((void *)(uintptr_t)p, bytes);
    if (bad)
        (void)*bad;
}
#else
#define SAN_UNCHECKED
static inline void san_check_range(const void *p, size_t bytes)
{
    (void)p;
    (void)bytes;
}
#endif

#endif
