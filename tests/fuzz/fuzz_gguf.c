/* GGUF: gf_open_mem on arbitrary bytes; every key read through the typed getters and every
 * string array walked inside the file; every tensor found by name, inside the data section, and
 * (block types lmq decodes) decoded; then the importer (lmq_gguf_load) on the same bytes, which
 * must succeed or fail with a message, and give a model that validates. */
#include "convert/gguf.h"
#include "formats/gguf.h"
#include "tests/fuzz/fuzz_util.h"
#include "schemes/gguf_blocks.h"

static const struct {
    uint32_t type;
    q_block_fn decode;
} decoders[] = {
    { GGML_Q8_0, q_gguf_q8_0 }, { GGML_Q4_0, q_gguf_q4_0 }, { GGML_Q4_1, q_gguf_q4_1 }, { GGML_Q5_0, q_gguf_q5_0 },
    { GGML_Q5_1, q_gguf_q5_1 }, { GGML_Q4_K, q_gguf_q4_k }, { GGML_Q5_K, q_gguf_q5_k }, { GGML_Q6_K, q_gguf_q6_k },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gf_file f;
    lmq_err err = { 0 };
    if (gf_open_mem(data, size, "fuzz.gguf", &f, &err)) {
        FZ_CHECK(err.msg[0] && !strncmp(err.msg, "fuzz.gguf: ", 11), "message '%s' does not name the file", err.msg);
        return 0;
    }
    const uint8_t *end = data + size;
    for (int64_t i = 0; i < f.n_kv; i++) {
        const gf_kv *kv = &f.kvs[i];
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 200 ? kv->key.len : 200), kv->key.p);
        FZ_CHECK(kv->val >= data && kv->val <= end, "key %s: value outside the file", key);
        if (kv->key.len < 200 && gf_find(&f, key) == kv) {
            int64_t iv;
            double fv;
            gf_str sv;
            (void)gf_get_int(&f, key, 0, &iv, &err);
            (void)gf_get_float(&f, key, 0, &fv, &err);
            (void)gf_get_str(&f, key, 0, &sv, &err);
        }
        if (kv->type == GGUF_ARRAY && kv->elem_type == GGUF_STRING) {
            const uint8_t *pos = kv->val;
            for (uint64_t k = 0; k < kv->n; k++) {
                gf_str s = gf_arr_next_str(&pos);
                FZ_CHECK((const uint8_t *)s.p >= data && pos <= end, "key %s: string %llu outside the file", key,
                         (unsigned long long)k);
            }
        } else if (kv->type == GGUF_ARRAY && kv->elem_type != GGUF_BOOL) {
            for (uint64_t k = 0; k < kv->n && k < 64; k++)
                (void)(kv->elem_type == GGUF_F32 || kv->elem_type == GGUF_F64 ? gf_arr_float(kv, k)
                                                                               : (double)gf_arr_int(kv, k));
        }
    }
    float block[256];
    for (int64_t i = 0; i < f.n_tensors; i++) {
        const gf_tensor *t = &f.tensors[i];
        FZ_CHECK(gf_find_tensor(&f, t->name) == t, "tensor %s found elsewhere", t->name);
        FZ_CHECK(t->data >= f.data && t->offset + t->size <= f.data_size && f.data + f.data_size <= end,
                 "tensor %s outside the data section", t->name);
        const gf_type_info ti = gf_type_of(t->type);
        for (size_t d = 0; d < sizeof decoders / sizeof decoders[0]; d++)
            if (decoders[d].type == t->type)
                for (uint64_t b = 0; b < t->size / ti.block_bytes && b < 4096; b++)
                    decoders[d].decode(t->data + b * ti.block_bytes, block);
    }
    gf_close(&f);
    lmq_model m;
    if (lmq_gguf_load(fz_scratch(data, size), &m, &err) == LMQ_OK) {
        FZ_CHECK(lmq_model_validate(&m, &err) == LMQ_OK, "imported model does not validate: %s", err.msg);
        lmq_model_free(&m);
    } else {
        FZ_CHECK(err.msg[0], "import failed without a message");
    }
    return 0;
}
