/* The backend table (runtime/backend.h) and the CUDA plugin's loader. */
#define _GNU_SOURCE /* dladdr */
#include "runtime/backend.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "schemes/scheme.h"

#ifdef LMQ_CUDA_PLUGIN
/* Under AddressSanitizer (make check-asan) the CUDA driver must be able to map the range ASan
 * protects as its shadow gap, or it fails to initialise; ASan reads this when the program
 * starts, before any plugin is opened. A plain build never calls it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "protect_shadow_gap=0";
}
#endif

static int cpu_devices(void)
{
    return 1;
}

/* rt_linear's generic path decodes any numeric encoding of the scheme table. */
static int cpu_supports(const rt_weight *W, char *why, size_t size)
{
    const q_scheme *s = q_scheme_get(W->q.dtype);
    if (s && s->decode)
        return 1;
    snprintf(why, size, "%s: not a numeric encoding", W->name ? W->name : "weight");
    return 0;
}

static const rtc_api *cuda_api;
static lmq_err cuda_err;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

#ifdef LMQ_CUDA_PLUGIN
/* The table of the plugin at path, kept open for the life of the process; NULL with why. */
static const rtc_api *open_plugin(const char *path, lmq_err *err)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        lmq_fail(err, LMQ_E_UNSUPPORTED, "cannot load the CUDA plugin: %s", dlerror());
        return NULL;
    }
    rtc_entry entry;
    *(void **)&entry = dlsym(h, RTC_ENTRY); /* POSIX's way to turn dlsym's answer into a function */
    const rtc_api *api = entry ? entry() : NULL;
    if (!api || api->abi != RTC_ABI || api->weight_size != sizeof(rt_weight) || api->err_size != sizeof(lmq_err) ||
        api->model_size != sizeof(rt_model) || api->layer_size != sizeof(rt_layer)) {
        dlclose(h);
        lmq_fail(err, LMQ_E_FORMAT, "%s is not this build's CUDA plugin (rebuild lmq)", path);
        return NULL;
    }
    return api;
}

static void load_cuda(void)
{
    const char *env = getenv("LMQ_CUDA_PLUGIN");
    if (env && *env) {
        cuda_api = open_plugin(env, &cuda_err);
        return;
    }
    /* Where make put it; then lib/lmq/ beside this code's object: liblmq.so in lib/, or a
     * command in bin/ with liblmq.a inside it. */
    char paths[3][PATH_MAX + 32], self[PATH_MAX];
    int n = 0;
    snprintf(paths[n++], sizeof paths[0], "%s", LMQ_CUDA_PLUGIN);
    Dl_info info;
    if (dladdr((void *)rt_cuda, &info) && info.dli_fname && realpath(info.dli_fname, self)) {
        const char *dir = dirname(self);
        snprintf(paths[n++], sizeof paths[0], "%s/lmq/liblmq_cuda.so", dir);
        snprintf(paths[n++], sizeof paths[0], "%s/../lib/lmq/liblmq_cuda.so", dir);
    }
    for (int i = 0; i < n; i++)
        if (access(paths[i], R_OK) == 0) {
            cuda_api = open_plugin(paths[i], &cuda_err);
            return;
        }
    lmq_fail(&cuda_err, LMQ_E_UNSUPPORTED, "the CUDA plugin is not at %s%s%s (set LMQ_CUDA_PLUGIN to its path)",
             paths[0], n > 1 ? " nor in lib/lmq/ beside " : "", n > 1 ? self : "");
}
#else
static void load_cuda(void)
{
    lmq_fail(&cuda_err, LMQ_E_UNSUPPORTED, "lmq was built without CUDA (nvcc and cuBLAS not found)");
}
#endif

const rtc_api *rt_cuda(lmq_err *err)
{
    pthread_once(&cuda_once, load_cuda);
    if (!cuda_api && err)
        *err = cuda_err;
    return cuda_api;
}

static int cuda_devices(void)
{
    const rtc_api *cu = rt_cuda(NULL);
    return cu ? cu->device_count() : 0;
}

static int cuda_supports(const rt_weight *W, char *why, size_t size)
{
    lmq_err err;
    const rtc_api *cu = rt_cuda(&err);
    if (cu)
        return cu->supports(W, why, size);
    snprintf(why, size, "%s", err.msg);
    return 0;
}

static lmq_code cuda_probe(size_t bytes, int rounds, double *gbps, char *desc, size_t desc_size, size_t *cache_bytes,
                           lmq_err *err)
{
    *gbps = 0;
    *desc = 0;
    *cache_bytes = 0;
    const rtc_api *cu = rt_cuda(err);
    rtc_ctx *c;
    lmq_code code = cu ? cu->open(0, &c, err) : LMQ_E_UNSUPPORTED;
    if (code)
        return code;
    cu->describe(c, desc, desc_size);
    *cache_bytes = cu->l2_bytes(c);
    code = cu->probe_copy(c, bytes, rounds, gbps, err);
    cu->close(c);
    return code;
}

#ifdef LMQ_CUDA_PLUGIN
#define CUDA_BUILT 1
#else
#define CUDA_BUILT 0
#endif

const rt_backend rt_backends[] = {
    { "cpu", 1, cpu_devices, cpu_supports, NULL, RT_DEVICE_CPU },
    { "cuda", CUDA_BUILT, cuda_devices, cuda_supports, cuda_probe, RT_DEVICE_CUDA },
};
const int rt_n_backends = sizeof rt_backends / sizeof rt_backends[0];

const rt_backend *rt_backend_find(const char *name)
{
    for (int i = 0; i < rt_n_backends; i++)
        if (!strcmp(rt_backends[i].name, name))
            return &rt_backends[i];
    return NULL;
}

lmq_code rt_backend_ready(const char *name, const rt_backend **out, lmq_err *err)
{
    const rt_backend *b = *out = rt_backend_find(name);
    if (!b)
        return lmq_fail(err, LMQ_E_ARG, "--device '%s' is not cpu or cuda", name);
    if (b->device == RT_DEVICE_CUDA && !rt_cuda(err))
        return lmq_err_prefix(err, "--device %s: ", name);
    if (b->devices() < 1)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "--device %s: no CUDA device", name);
    return LMQ_OK;
}
