/* What this CPU and its OS give the kernels that need more than portable C: common/fp.c's F16C
 * conversions and runtime/kernels.h's kernel sets. Asked once a process (CPUID traps to the
 * hypervisor in a virtual machine). */
#ifndef LMQ_CPU_H
#define LMQ_CPU_H

/* Whether the compiler targets x86, the one architecture with kernels beyond the portable ones:
 * the files that hold such kernels test it once each. */
#if defined(__x86_64__) || defined(__i386__)
#define LMQ_X86 1
#else
#define LMQ_X86 0
#endif

enum {
    LMQ_CPU_AVX2 = 1u << 0,
    LMQ_CPU_FMA = 1u << 1,
    LMQ_CPU_F16C = 1u << 2,       /* and AVX enabled by the OS: its instructions are VEX-encoded */
    LMQ_CPU_AVX512 = 1u << 3,     /* F, BW, VL and DQ */
    LMQ_CPU_AVX512VNNI = 1u << 4,
};

/* The LMQ_CPU_ bits this CPU has (none off x86). */
unsigned lmq_cpu_features(void);

#endif
