/* Which kernel set runs (runtime/kernels.h): the sets themselves are runtime/kernels_*.c. */
#include "runtime/kernels_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const rt_kernels *const SETS[] = { &rt_kernels_scalar, &rt_kernels_avx2, &rt_kernels_avx512,
                                          &rt_kernels_avx512vnni };
#define N_SETS (int)(sizeof SETS / sizeof SETS[0])

static int best;
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const unsigned have = lmq_cpu_features();
    while (best + 1 < N_SETS && !(SETS[best + 1]->needs & ~have))
        best++;
    const char *want = getenv("LMQ_ISA");
    for (int i = 0; want && i < best; i++)
        if (!strcmp(want, SETS[i]->name))
            best = i;
}

const rt_kernels *rt_isa_best(void)
{
    pthread_once(&best_once, choose);
    return SETS[best];
}

const rt_kernels *rt_isa_nth(int i)
{
    pthread_once(&best_once, choose);
    return i >= 0 && i <= best ? SETS[i] : NULL;
}
