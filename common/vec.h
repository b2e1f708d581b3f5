/* Eight-lane vectors (and v4d, four doubles) in GCC's vector extension, for sums and conversions
 * whose order must not depend on the machine: each operation is one lane-wise IEEE operation
 * whatever width the compiler lowers it to (SSE2 pairs by default, one register in a target_clones
 * copy), so a loop over them gives the same bits everywhere. Pass them by pointer, never by value:
 * the calling convention for 32- and 64-byte vectors depends on the ISA a clone is built for. */
#ifndef LMQ_COMMON_VEC_H
#define LMQ_COMMON_VEC_H

#include <stdint.h>

#define VEC_LANES 8
typedef uint8_t v8b __attribute__((vector_size(8)));
typedef uint16_t v8h __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8l __attribute__((vector_size(64)));

/* Where a hot loop is worth a copy per ISA (the dispatch costs a call through a pointer). */
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

#endif
