/* The backends (runtime/backend.h): the CPU's, and the CUDA plugin's loader. */
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

#include "runtime/cuda/cuda.h"

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

lmq_code rt_backend_get(const char *name, const rt_backend **out, lmq_err *err)
{
    *out = NULL;
    if (!strcmp(name, rt_cpu_backend.name)) {
        *out = &rt_cpu_backend;
        return LMQ_OK;
    }
    if (strcmp(name, "cuda"))
        return lmq_fail(err, LMQ_E_ARG, "--device '%s' is not cpu or cuda", name);
    const rtc_api *cu = rt_cuda(err);
    if (!cu)
        return err ? err->code : LMQ_E_UNSUPPORTED;
    *out = &cu->backend;
    return LMQ_OK;
}

lmq_code rt_backend_ready(const char *name, const rt_backend **out, lmq_err *err)
{
    lmq_code c = rt_backend_get(name, out, err);
    if (c == LMQ_E_ARG)
        return c;
    if (!c && (*out)->devices() < 1)
        c = lmq_fail(err, LMQ_E_UNSUPPORTED, "no %s device", (*out)->label);
    return c ? lmq_err_prefix(err, "--device %s: ", name) : LMQ_OK;
}
