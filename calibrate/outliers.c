#include "calibrate/outliers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/transform.h"
#include "formats/artefact.h"
#include "formats/container.h"
#include "formats/manifest.h"


static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int ascending(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static lmq_code check_opts(const cal_outlier_opts *o, int dim, lmq_err *err)
{
    if (o->channels < 1 || o->channels > dim)
        return lmq_fail(err, LMQ_E_ARG, "%d channels per block and input: the model's width is %d (1..%d)",
                        o->channels, dim, dim);
    if (!(o->factor > 0.0f) || !isfinite(o->factor))
        return lmq_fail(err, LMQ_E_ARG, "factor %g is not finite and positive", (double)o->factor);
    return LMQ_OK;
}

lmq_code cal_outlier_channels(const cal_outlier_opts *o, int dim, int n_layers, int *chosen, lmq_err *err)
{
    lmq_code c = check_opts(o, dim, err);
    int *perm = c ? NULL : malloc((size_t)dim * sizeof *perm);
    if (c || !perm)
        return c ? c : lmq_fail(err, LMQ_E_NOMEM, "outliers: out of memory");
    uint64_t state = o->seed;
    for (int set = 0; set < 2 * n_layers; set++) {
        /* The first `channels` steps of a Fisher-Yates shuffle: a uniform choice of distinct ones. */
        for (int j = 0; j < dim; j++)
            perm[j] = j;
        for (int k = 0; k < o->channels; k++) {
            const int r = k + (int)(splitmix64(&state) % (uint64_t)(dim - k)), t = perm[k];
            perm[k] = perm[r];
            perm[r] = t;
        }
        int *out = chosen + (size_t)set * (size_t)o->channels;
        memcpy(out, perm, (size_t)o->channels * sizeof *out);
        qsort(out, (size_t)o->channels, sizeof *out, ascending);
    }
    free(perm);
    return LMQ_OK;
}

/* "<notes>\n" + what was done, into a malloc'd string. */
static char *describe(const char *notes, const cal_outlier_opts *o, int n_layers, const int *chosen)
{
    size_t cap = strlen(notes) + 256 + (size_t)n_layers * 2 * ((size_t)o->channels * 12 + 24), n = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    n += (size_t)snprintf(s + n, cap - n,
                          "%s%slmq outliers: in every block, %d channel%s of each norm-fed input scaled by %g "
                          "(norm weight and bias times the factor, the columns of the layers reading it divided "
                          "by it: the function is unchanged), seed %llu; channels:",
                          notes, *notes ? "\n" : "", o->channels, o->channels == 1 ? "" : "s", (double)o->factor,
                          (unsigned long long)o->seed);
    for (int set = 0; set < 2 * n_layers; set++) {
        n += (size_t)snprintf(s + n, cap - n, "%s blk.%d.%s", set ? ";" : "", set / 2, lmq_input_names[set % 2 ? LMQ_IN_FFN : LMQ_IN_ATTN]);
        for (int k = 0; k < o->channels; k++)
            n += (size_t)snprintf(s + n, cap - n, " %d", chosen[(size_t)set * (size_t)o->channels + (size_t)k]);
    }
    return s;
}

/* Scales the chosen channels of every block's two inputs of m (fp32 throughout). */
static lmq_code apply(lmq_model *m, const cal_outlier_opts *o, const int *chosen, lmq_err *err)
{
    const int dim = m->arch.dim;
    float *s = malloc((size_t)dim * sizeof *s);
    if (!s)
        return lmq_fail(err, LMQ_E_NOMEM, "outliers: out of memory");
    lmq_code c = LMQ_OK;
    for (int set = 0; set < 2 * m->arch.n_layers && !c; set++) {
        for (int j = 0; j < dim; j++)
            s[j] = 1.0f;
        for (int k = 0; k < o->channels; k++)
            s[chosen[(size_t)set * (size_t)o->channels + (size_t)k]] = o->factor;
        c = cal_scale_norm_input(m, set / 2, set % 2 ? LMQ_IN_FFN : LMQ_IN_ATTN, s, err);
    }
    free(s);
    return c;
}

lmq_code cal_outliers_file(const char *in_path, const char *out_path, const cal_outlier_opts *o, lmq_err *err)
{
    lmq_model m;
    lmq_manifest man;
    lmq_manifest_init(&man);
    int *chosen = NULL;
    char *notes = NULL;
    /* Without a checker the reader takes fp32 tensors only, naming any other. */
    lmq_code c = lmq_container_read_model(in_path, NULL, &m, err);
    if (c)
        return c == LMQ_E_UNSUPPORTED ? lmq_err_prefix(err, "the input must be an fp32 artefact (as lmq convert writes): ") : c;
    if ((c = lmq_model_validate(&m, err)) || (c = check_opts(o, m.arch.dim, err)))
        goto done;
    if (!(chosen = malloc((size_t)m.arch.n_layers * 2 * (size_t)o->channels * sizeof *chosen))) {
        c = lmq_fail(err, LMQ_E_NOMEM, "outliers: out of memory");
        goto done;
    }
    if ((c = cal_outlier_channels(o, m.arch.dim, m.arch.n_layers, chosen, err)) || (c = apply(&m, o, chosen, err)) ||
        (c = lmq_manifest_from_model(&m, &man, err)))
        goto done;
    if (!(notes = describe(m.notes, o, m.arch.n_layers, chosen))) {
        c = lmq_fail(err, LMQ_E_NOMEM, "outliers: out of memory");
        goto done;
    }
    if (!(c = lmq_manifest_set(&man.source_notes, notes, err)))
        c = lmq_container_write_model(out_path, &m, &man, err);
done:
    free(notes);
    free(chosen);
    lmq_manifest_free(&man);
    lmq_model_free(&m);
    return c;
}
