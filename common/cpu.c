#include "common/cpu.h"

#include <pthread.h>

static unsigned features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

#if LMQ_X86
#include <cpuid.h>

/* F16C is CPUID leaf 1's ECX bit 29 (clang's __builtin_cpu_supports does not know the name). */
static void detect(void)
{
    unsigned a, b, c, d;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        features |= LMQ_CPU_AVX2;
    if (__builtin_cpu_supports("fma"))
        features |= LMQ_CPU_FMA;
    if (__builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1))
        features |= LMQ_CPU_F16C;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        features |= LMQ_CPU_AVX512;
    if (__builtin_cpu_supports("avx512vnni"))
        features |= LMQ_CPU_AVX512VNNI;
}
#else
static void detect(void)
{
}
#endif

unsigned lmq_cpu_features(void)
{
    pthread_once(&features_once, detect);
    return features;
}
