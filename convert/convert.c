/* lmq_convert: picks the importer for what src is. */
#include "convert/convert.h"

#include <string.h>
#include <sys/stat.h>

#include "formats/llama2c.h"

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

lmq_code lmq_convert(const char *src, const lmq_convert_opts *opts, lmq_model *out, lmq_err *err)
{
    lmq_model_init(out);
    struct stat st;
    if (stat(src, &st) != 0)
        return lmq_fail(err, LMQ_E_IO, "%s: no such file or directory", src);
    const char *tokenizer = opts ? opts->tokenizer : NULL;
    if (S_ISDIR(st.st_mode) || has_suffix(src, ".safetensors") || has_suffix(src, ".index.json"))
        return lmq_convert_hf(src, opts, out, err);
    if (has_suffix(src, ".bin"))
        return l2c_load(src, tokenizer, out, err);
    return lmq_fail(err, LMQ_E_ARG,
                    "%s: cannot tell what checkpoint this is (expected a Hugging Face directory, a .safetensors "
                    "file, a .safetensors.index.json, or a llama2.c .bin)",
                    src);
}
