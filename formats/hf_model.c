/* Hugging Face checkpoints' names (formats/hf_model.h). */
#include "formats/hf_model.h"

#include <stdio.h>
#include <string.h>

/* ---- tensor names --------------------------------------------------------------------------- */

static const lmq_hf_name_row GPT2_NAMES[] = {
    { "wte.weight", "tok_embd.weight", LMQ_HF_COPY },
    { "wpe.weight", "pos_embd.weight", LMQ_HF_COPY },
    { "h.{L}.ln_1.weight", "blk.{L}.attn_norm.weight", LMQ_HF_COPY },
    { "h.{L}.ln_1.bias", "blk.{L}.attn_norm.bias", LMQ_HF_COPY },
    { "h.{L}.attn.c_attn.weight", "blk.{L}.attn_qkv.weight", LMQ_HF_TRANSPOSE },
    { "h.{L}.attn.c_attn.bias", "blk.{L}.attn_qkv.bias", LMQ_HF_COPY },
    { "h.{L}.attn.c_proj.weight", "blk.{L}.attn_out.weight", LMQ_HF_TRANSPOSE },
    { "h.{L}.attn.c_proj.bias", "blk.{L}.attn_out.bias", LMQ_HF_COPY },
    { "h.{L}.ln_2.weight", "blk.{L}.ffn_norm.weight", LMQ_HF_COPY },
    { "h.{L}.ln_2.bias", "blk.{L}.ffn_norm.bias", LMQ_HF_COPY },
    { "h.{L}.mlp.c_fc.weight", "blk.{L}.ffn_up.weight", LMQ_HF_TRANSPOSE },
    { "h.{L}.mlp.c_fc.bias", "blk.{L}.ffn_up.bias", LMQ_HF_COPY },
    { "h.{L}.mlp.c_proj.weight", "blk.{L}.ffn_down.weight", LMQ_HF_TRANSPOSE },
    { "h.{L}.mlp.c_proj.bias", "blk.{L}.ffn_down.bias", LMQ_HF_COPY },
    { "ln_f.weight", "out_norm.weight", LMQ_HF_COPY },
    { "ln_f.bias", "out_norm.bias", LMQ_HF_COPY },
    { "lm_head.weight", "output.weight", LMQ_HF_CLASSIFIER },
    { "h.{L}.attn.bias", NULL, LMQ_HF_IGNORE },        /* causal mask */
    { "h.{L}.attn.masked_bias", NULL, LMQ_HF_IGNORE }, /* mask fill value */
};

/* Llama's, shared by Mistral, Qwen2 and Phi-3 (which add QWEN2_NAMES, PHI3_NAMES). */
static const lmq_hf_name_row LLAMA_NAMES[] = {
    { "embed_tokens.weight", "tok_embd.weight", LMQ_HF_COPY },
    { "layers.{L}.input_layernorm.weight", "blk.{L}.attn_norm.weight", LMQ_HF_COPY },
    { "layers.{L}.self_attn.q_proj.weight", "blk.{L}.attn_q.weight", LMQ_HF_COPY },
    { "layers.{L}.self_attn.k_proj.weight", "blk.{L}.attn_k.weight", LMQ_HF_COPY },
    { "layers.{L}.self_attn.v_proj.weight", "blk.{L}.attn_v.weight", LMQ_HF_COPY },
    { "layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_out.weight", LMQ_HF_COPY },
    { "layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight", LMQ_HF_COPY },
    { "layers.{L}.mlp.gate_proj.weight", "blk.{L}.ffn_gate.weight", LMQ_HF_COPY },
    { "layers.{L}.mlp.up_proj.weight", "blk.{L}.ffn_up.weight", LMQ_HF_COPY },
    { "layers.{L}.mlp.down_proj.weight", "blk.{L}.ffn_down.weight", LMQ_HF_COPY },
    { "norm.weight", "out_norm.weight", LMQ_HF_COPY },
    { "lm_head.weight", "output.weight", LMQ_HF_CLASSIFIER },
    { "layers.{L}.self_attn.rotary_emb.inv_freq", NULL, LMQ_HF_IGNORE }, /* recomputed from rope_theta */
};

static const lmq_hf_name_row QWEN2_NAMES[] = {
    { "layers.{L}.self_attn.q_proj.bias", "blk.{L}.attn_q.bias", LMQ_HF_COPY },
    { "layers.{L}.self_attn.k_proj.bias", "blk.{L}.attn_k.bias", LMQ_HF_COPY },
    { "layers.{L}.self_attn.v_proj.bias", "blk.{L}.attn_v.bias", LMQ_HF_COPY },
};

/* Phi-3: Llama's layout with q|k|v and gate|up each fused into one matrix. */
static const lmq_hf_name_row PHI3_NAMES[] = {
    { "layers.{L}.self_attn.qkv_proj.weight", "blk.{L}.attn_qkv.weight", LMQ_HF_COPY },
    { "layers.{L}.mlp.gate_up_proj.weight", "blk.{L}.ffn_gate_up.weight", LMQ_HF_COPY },
};

/* ---- config.json ---------------------------------------------------------------------------- */

static const lmq_hf_key GPT2_KEYS[] = {
    { LMQ_HK_VOCAB_SIZE, "vocab_size", NULL },
    { LMQ_HK_DIM, "n_embd", NULL },
    { LMQ_HK_N_LAYERS, "n_layer", NULL },
    { LMQ_HK_N_HEADS, "n_head", NULL },
    { LMQ_HK_HIDDEN_DIM, "n_inner", NULL },
    { LMQ_HK_MAX_SEQ, "n_positions", NULL },
    { LMQ_HK_MAX_SEQ_OLD, "n_ctx", NULL },
    { LMQ_HK_ACTIVATION, "activation_function", "gelu_new" },
    { LMQ_HK_NORM_EPS, "layer_norm_epsilon", NULL },
    { LMQ_HK_TIED, "tie_word_embeddings", NULL },
    { LMQ_HK_BOS, "bos_token_id", NULL },
    { LMQ_HK_EOS, "eos_token_id", NULL },
};

/* Llama's, shared by Mistral, Qwen2 and Phi-3. */
static const lmq_hf_key LLAMA_KEYS[] = {
    { LMQ_HK_VOCAB_SIZE, "vocab_size", NULL },
    { LMQ_HK_DIM, "hidden_size", NULL },
    { LMQ_HK_HIDDEN_DIM, "intermediate_size", NULL },
    { LMQ_HK_N_LAYERS, "num_hidden_layers", NULL },
    { LMQ_HK_N_HEADS, "num_attention_heads", NULL },
    { LMQ_HK_N_KV_HEADS, "num_key_value_heads", NULL },
    { LMQ_HK_MAX_SEQ, "max_position_embeddings", NULL },
    { LMQ_HK_NORM_EPS, "rms_norm_eps", NULL },
    { LMQ_HK_ROPE_THETA, "rope_theta", NULL },
    { LMQ_HK_ACTIVATION, "hidden_act", "silu" },
    { LMQ_HK_ATTN_BIAS, "attention_bias", NULL },
    { LMQ_HK_MLP_BIAS, "mlp_bias", NULL },
    { LMQ_HK_TIED, "tie_word_embeddings", NULL },
    { LMQ_HK_BOS, "bos_token_id", NULL },
    { LMQ_HK_EOS, "eos_token_id", NULL },
};

/* ---- the families --------------------------------------------------------------------------- */

#define N_OF(t) (sizeof t / sizeof t[0])
const lmq_hf_family lmq_hf_families[] = {
    { "gpt2", "GPT2LMHeadModel", "transformer.", LMQ_FAMILY_GPT2, { GPT2_NAMES }, { N_OF(GPT2_NAMES) }, GPT2_KEYS,
      N_OF(GPT2_KEYS), NULL, LMQ_HF_FUSED_ON_REQUEST,
      "gpt2 Conv1D weights (c_attn, attn.c_proj, c_fc, mlp.c_proj) transposed to [out, in]" },
    { "llama", "LlamaForCausalLM", "model.", LMQ_FAMILY_LLAMA, { LLAMA_NAMES }, { N_OF(LLAMA_NAMES) }, LLAMA_KEYS,
      N_OF(LLAMA_KEYS), NULL, LMQ_HF_FUSED_NONE, "rope: half (HF rotate_half), q/k rows kept as stored" },
    { "mistral", "MistralForCausalLM", "model.", LMQ_FAMILY_LLAMA, { LLAMA_NAMES }, { N_OF(LLAMA_NAMES) }, LLAMA_KEYS,
      N_OF(LLAMA_KEYS), "", LMQ_HF_FUSED_NONE,
      "mistral: Llama layout; rope: half (HF rotate_half), q/k rows kept as stored" },
    { "qwen2", "Qwen2ForCausalLM", "model.", LMQ_FAMILY_LLAMA, { LLAMA_NAMES, QWEN2_NAMES },
      { N_OF(LLAMA_NAMES), N_OF(QWEN2_NAMES) }, LLAMA_KEYS, N_OF(LLAMA_KEYS), "use_sliding_window", LMQ_HF_FUSED_NONE,
      "qwen2: Llama layout with q/k/v biases; rope: half (HF rotate_half)" },
    { "phi3", "Phi3ForCausalLM", "model.", LMQ_FAMILY_LLAMA, { LLAMA_NAMES, PHI3_NAMES },
      { N_OF(LLAMA_NAMES), N_OF(PHI3_NAMES) }, LLAMA_KEYS, N_OF(LLAMA_KEYS), "", LMQ_HF_FUSED_SPLIT,
      "phi3: fused qkv_proj split by rows into attn_q, attn_k, attn_v and gate_up_proj into ffn_gate, ffn_up; "
      "rope: half (HF rotate_half)" },
};
const size_t lmq_hf_n_families = N_OF(lmq_hf_families);
#undef N_OF

const lmq_hf_family *lmq_hf_family_of(lmq_family family)
{
    for (size_t i = 0; i < lmq_hf_n_families; i++)
        if (lmq_hf_families[i].family == family)
            return &lmq_hf_families[i];
    return NULL;
}

const lmq_hf_key *lmq_hf_key_of(const lmq_hf_family *f, lmq_hf_field field)
{
    for (size_t i = 0; i < f->n_keys; i++)
        if (f->keys[i].field == field)
            return &f->keys[i];
    return NULL;
}

/* ---- name patterns ------------------------------------------------------------------------- */

/* Matches name against pattern; *layer gets the "{L}" value (-1 when the pattern has none). */
static int pattern_match(const char *pat, const char *name, int *layer)
{
    const char *ph = strstr(pat, "{L}");
    *layer = -1;
    if (!ph)
        return !strcmp(pat, name);
    size_t pre = (size_t)(ph - pat);
    if (strncmp(pat, name, pre))
        return 0;
    const char *d = name + pre;
    long v = 0;
    int n = 0;
    while (d[n] >= '0' && d[n] <= '9' && n < 7)
        v = v * 10 + (d[n++] - '0');
    if (n == 0 || (n > 1 && d[0] == '0') || strcmp(d + n, ph + 3))
        return 0;
    *layer = (int)v;
    return 1;
}

void lmq_hf_expand(const char *pat, int layer, char *out, size_t cap)
{
    const char *ph = strstr(pat, "{L}");
    if (ph)
        snprintf(out, cap, "%.*s%d%s", (int)(ph - pat), pat, layer, ph + 3);
    else
        snprintf(out, cap, "%s", pat);
}

const lmq_hf_name_row *lmq_hf_lookup(const lmq_hf_family *f, const char *name, int *layer)
{
    size_t plen = strlen(f->prefix);
    const char *bare = strncmp(name, f->prefix, plen) ? name : name + plen;
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < f->n_names[t]; i++)
            if (pattern_match(f->names[t][i].hf, bare, layer))
                return &f->names[t][i];
    return NULL;
}

const lmq_hf_name_row *lmq_hf_reverse(const lmq_hf_family *f, const char *canon, int prefixed, char *out,
                                      size_t cap)
{
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < f->n_names[t]; i++) {
            int layer;
            const lmq_hf_name_row *r = &f->names[t][i];
            if (r->canon && pattern_match(r->canon, canon, &layer)) {
                char bare[LMQ_NAME_MAX];
                lmq_hf_expand(r->hf, layer, bare, sizeof bare);
                snprintf(out, cap, "%s%s", prefixed && r->kind != LMQ_HF_CLASSIFIER ? f->prefix : "", bare);
                return r;
            }
        }
    return NULL;
}

lmq_code lmq_hf_name(lmq_family family, const char *canon, char *out, size_t cap, int *transpose, lmq_err *err)
{
    const lmq_hf_family *f = lmq_hf_family_of(family);
    const lmq_hf_name_row *r = f ? lmq_hf_reverse(f, canon, 1, out, cap) : NULL;
    if (!r)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "tensor %s has no Hugging Face %s name", canon,
                        f ? f->architecture : "(unknown family)");
    *transpose = r->kind == LMQ_HF_TRANSPOSE;
    return LMQ_OK;
}

int lmq_hf_name_of(const char *canon, int family, int prefixed, char *out, size_t cap)
{
    if (family < 0 || (size_t)family >= lmq_hf_n_families)
        return -1;
    char name[2 * LMQ_NAME_MAX];
    return lmq_hf_reverse(&lmq_hf_families[family], canon, prefixed, name, sizeof name) &&
           snprintf(out, cap, "%s", name) < (int)cap;
}

/* ---- Hugging Face names in recipes ---------------------------------------------------------- */

/* The layer part of a recipe pattern: an index, or wildcards standing for one. */
static int layer_part_ok(const char *s, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '*' || s[i] == '?'))
            return 0;
    return 1;
}

int lmq_hf_canonical(const char *hf, char *out, size_t cap)
{
    for (size_t f = 0; f < lmq_hf_n_families; f++) {
        const lmq_hf_family *fam = &lmq_hf_families[f];
        const size_t plen = strlen(fam->prefix);
        const char *bare = strncmp(hf, fam->prefix, plen) ? hf : hf + plen;
        size_t n = strlen(bare);
        const int has_kind = (n > 7 && !strcmp(bare + n - 7, ".weight")) || (n > 5 && !strcmp(bare + n - 5, ".bias"));
        char name[2 * LMQ_NAME_MAX];
        if (snprintf(name, sizeof name, "%s%s", bare, has_kind ? "" : ".weight") >= (int)sizeof name)
            return 0;
        n = strlen(name);
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < fam->n_names[k]; i++) {
                const lmq_hf_name_row *r = &fam->names[k][i];
                const char *ph = strstr(r->hf, "{L}");
                if (!r->canon)
                    continue;
                if (!ph) {
                    if (!strcmp(r->hf, name))
                        return snprintf(out, cap, "%s", r->canon) < (int)cap;
                    continue;
                }
                const size_t pre = (size_t)(ph - r->hf), suf = strlen(ph + 3);
                if (n > pre + suf && !strncmp(name, r->hf, pre) && !strcmp(name + n - suf, ph + 3) &&
                    layer_part_ok(name + pre, n - pre - suf)) {
                    const char *cph = strstr(r->canon, "{L}");
                    return snprintf(out, cap, "%.*s%.*s%s", (int)(cph - r->canon), r->canon,
                                    (int)(n - pre - suf), name + pre, cph + 3) < (int)cap;
                }
            }
    }
    return 0;
}
