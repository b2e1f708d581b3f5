#include "tools/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kv.h"

static const arg_opt *find(const arg_opt *opts, const char *arg, size_t len)
{
    for (const arg_opt *o = opts; o && o->name; o++)
        if ((strlen(o->name) == len && !strncmp(o->name, arg, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(o->alias, arg, len)))
            return o;
    return NULL;
}

int args_parse(int argc, char **argv, const arg_opt *opts, const char **pos, int max_pos, int *n_pos,
               const char *usage)
{
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (a[0] != '-' || !a[1]) {
            if (*n_pos == max_pos) {
                fprintf(stderr, "lmq %s: unexpected argument '%s'\n%s", argv[0], a, usage);
                return 2;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        const arg_opt *o = find(opts, a, eq ? (size_t)(eq - a) : strlen(a));
        if (!o) {
            fprintf(stderr, "lmq %s: unknown option '%s'\n%s", argv[0], a, usage);
            return 2;
        }
        if (o->flag) {
            if (eq) {
                fprintf(stderr, "lmq %s: %s takes no value\n", argv[0], o->name);
                return 2;
            }
            *o->flag = 1;
        } else if (eq) {
            *o->value = eq + 1;
        } else if (i + 1 < argc) {
            *o->value = argv[++i];
        } else {
            fprintf(stderr, "lmq %s: %s needs a value\n%s", argv[0], o->name, usage);
            return 2;
        }
    }
    return -1;
}

int args_take(int *argc, char **argv, const char *name, arg_list *l)
{
    size_t len = strlen(name);
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, name, len) || (a[len] && a[len] != '=')) {
            argv[out++] = argv[i];
            continue;
        }
        const char *v = a[len] ? a + len + 1 : i + 1 < *argc ? argv[++i] : NULL;
        if (!v || l->n == l->max) {
            fprintf(stderr, v ? "lmq %s: %s given more than %d times\n" : "lmq %s: %s needs a value\n", argv[0], name,
                    l->max);
            return 2;
        }
        l->v[l->n++] = v;
    }
    *argc = out;
    return -1;
}

int args_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "lmq %s: %s must be an integer from %ld to %ld, not '%s'\n", cmd, opt, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int args_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "lmq %s: %s must be a number from %g to %g, not '%s'\n", cmd, opt, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int args_kv(const char *cmd, const char *opt, const char *s, const rt_kv_format **out)
{
    if (s && !(*out = rt_kv_find(s)))
        fprintf(stderr, "lmq %s: %s '%s' is not a KV cache format (%s)\n", cmd, opt, s, rt_kv_names());
    return !s || *out;
}

int args_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull would take a sign (and wrap "-1" around); only digits are a uint64. */
    if (errno || end == s || *end || s[0] < '0' || s[0] > '9') {
        fprintf(stderr, "lmq %s: %s must be an integer from 0 to %llu, not '%s'\n", cmd, opt,
                (unsigned long long)UINT64_MAX, s);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* K (and N, when *n is 0) from the environment of the engine running this task. */
static int env_shard(const char *cmd, long *k, long *n)
{
    const char *id = getenv("SLURM_ARRAY_TASK_ID"), *job = getenv("JOB_COMPLETION_INDEX");
    if (id) { /* an array's ids run from its MIN (--array=1-4 starts at 1) */
        const char *min = getenv("SLURM_ARRAY_TASK_MIN"), *count = getenv("SLURM_ARRAY_TASK_COUNT");
        long i, lo = 0, c;
        if (!args_int(cmd, "SLURM_ARRAY_TASK_ID", id, 0, LONG_MAX / 2, &i) ||
            (min && !args_int(cmd, "SLURM_ARRAY_TASK_MIN", min, 0, i, &lo)))
            return 0;
        *k = i - lo;
        if (!count) {
            if (!*n)
                fprintf(stderr, "lmq %s: --shard env: SLURM_ARRAY_TASK_COUNT is not set: give --shard env/N\n", cmd);
            return *n != 0;
        }
        if (!args_int(cmd, "SLURM_ARRAY_TASK_COUNT", count, 1, ARGS_MAX_SHARDS, &c))
            return 0;
        if (*n && c != *n) {
            fprintf(stderr, "lmq %s: --shard env/%ld: the Slurm array has %ld tasks\n", cmd, *n, c);
            return 0;
        }
        *n = c;
        return 1;
    }
    if (job) {
        if (!*n) {
            fprintf(stderr, "lmq %s: --shard env: JOB_COMPLETION_INDEX gives no count: give --shard env/N\n", cmd);
            return 0;
        }
        return args_int(cmd, "JOB_COMPLETION_INDEX", job, 0, LONG_MAX / 2, k);
    }
    fprintf(stderr, "lmq %s: --shard env: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set\n", cmd);
    return 0;
}

int args_shard(const char *cmd, const char *s, int *k, int *n)
{
    const char *slash = strchr(s, '/');
    const size_t klen = slash ? (size_t)(slash - s) : strlen(s);
    char ks[32];
    long K = 0, N = 0;
    if (klen == 0 || klen >= sizeof ks || (!slash && strcmp(s, "env"))) {
        fprintf(stderr, "lmq %s: --shard must be K/N, env or env/N, not '%s'\n", cmd, s);
        return 0;
    }
    memcpy(ks, s, klen);
    ks[klen] = 0;
    if (slash && !args_int(cmd, "--shard's N", slash + 1, 1, ARGS_MAX_SHARDS, &N))
        return 0;
    if (strcmp(ks, "env") ? !args_int(cmd, "--shard's K", ks, 0, ARGS_MAX_SHARDS - 1, &K) : !env_shard(cmd, &K, &N))
        return 0;
    if (K >= N) {
        fprintf(stderr, "lmq %s: --shard %ld/%ld: K must be below N (shards 0 to %ld)\n", cmd, K, N, N - 1);
        return 0;
    }
    *k = (int)K;
    *n = (int)N;
    return 1;
}
