/* lmq_convert_plan: picks the importer for what src is; lmq_convert_write: the whole import. */
#include "convert/convert.h"

#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "convert/gguf.h"
#include "convert/paths.h"
#include "formats/artefact.h"
#include "formats/llama2c.h"

lmq_code lmq_convert_plan(const char *src, const lmq_convert_opts *opts, lmq_plan *out, lmq_err *err)
{
    lmq_plan_init(out);
    struct stat st;
    if (stat(src, &st) != 0)
        return lmq_fail(err, LMQ_E_IO, "%s: no such file or directory", src);
    const char *tokenizer = opts ? opts->tokenizer : NULL;
    if (S_ISDIR(st.st_mode) || cv_ends_with(src, ".safetensors") || cv_ends_with(src, ".index.json"))
        return lmq_convert_hf(src, opts, out, err);
    if (cv_ends_with(src, ".bin")) {
        if (opts && opts->split_qkv) /* llama2.c checkpoints are Llama models */
            return lmq_fail(err, LMQ_E_ARG, "%s: --split-qkv: nothing to split: q, k, v are separate already", src);
        char dir[PATH_CAP];
        cv_dir_of(src, dir);
        lmq_code c = l2c_plan(src, out, err);
        if (!c && (c = cv_add_tokenizer(&out->model, dir, src, tokenizer, err)))
            lmq_plan_free(out);
        return c;
    }
    if (cv_ends_with(src, ".gguf"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "%s: a GGUF file keeps its encodings: lmq_convert (or "
                        "lmq_gguf_load) imports it, not an fp32 plan", src);
    return lmq_fail(err, LMQ_E_ARG,
                    "%s: cannot tell what checkpoint this is (expected a Hugging Face directory, a .safetensors "
                    "file, a .safetensors.index.json, or a llama2.c .bin)",
                    src);
}

lmq_code lmq_convert(const char *src, const lmq_convert_opts *opts, lmq_model *out, lmq_err *err)
{
    if (cv_ends_with(src, ".gguf"))
        return opts && (opts->tokenizer || opts->split_qkv)
                   ? lmq_fail(err, LMQ_E_ARG, "%s: --tokenizer and --split-qkv do not apply to a GGUF file", src)
                   : lmq_gguf_load(src, out, err);
    lmq_plan p;
    lmq_code c = lmq_convert_plan(src, opts, &p, err);
    if (c) {
        lmq_model_init(out);
        return c;
    }
    return lmq_plan_load(&p, out, err);
}

typedef struct {
    lmq_plan *plan;
    const lmq_convert_opts *o;
} write_run;

/* The plan's producer, reporting each tensor once it is produced. */
static lmq_code produce(void *ctx, int i, float *out, lmq_err *err)
{
    write_run *r = ctx;
    lmq_code c = lmq_plan_produce(r->plan, i, out, err);
    if (!c && r->o->progress)
        r->o->progress(r->o->progress_ctx, i + 1, r->plan->model.n_tensors, r->plan->model.tensors[i].name);
    return c;
}

lmq_code lmq_convert_write(const char *src, const char *out_path, const lmq_convert_opts *opts, lmq_plan *summary,
                           lmq_err *err)
{
    const lmq_convert_opts o = opts ? *opts : (lmq_convert_opts){ 0 };
    /* A directory source counts every file in it: config, weights, tokenizer. */
    const char *inputs[] = { src, o.tokenizer };
    lmq_plan_init(summary);
    lmq_code c = lmq_output_check(out_path, inputs, 2, err);
    if (c)
        return c;
    if (cv_ends_with(src, ".gguf")) /* quantised tensors kept: a model, not an fp32 plan */
        return o.tokenizer || o.split_qkv
                   ? lmq_fail(err, LMQ_E_ARG, "%s: --tokenizer and --split-qkv do not apply to a GGUF file (its "
                              "tokenizer is in its metadata)", src)
                   : lmq_gguf_convert(src, out_path, o.zstd, &summary->model, err);
    write_run run = { summary, &o };
    if (!(c = lmq_convert_plan(src, &o, summary, err)) &&
        (c = lmq_container_write_stream(out_path, &summary->model, produce, &run,
                                        o.zstd ? LMQ_CODEC_ZSTD : LMQ_CODEC_NONE, err)))
        lmq_plan_free(summary);
    return c;
}
