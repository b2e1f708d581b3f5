/* quantize/llmc: llm-compressor recipes (after the examples in llm-compressor's documentation)
 * resolve to the same plan, tensor by tensor, as the native lmq recipe that says the same; what
 * lmq cannot honour is refused naming the file, line and key, and what lmq would do instead. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "quantize/recipe.h"
#include "tests/testutil.h"

/* A llama's canonical tensors (formats/model.h), layers blocks of them. */
typedef struct {
    char names[64][LMQ_NAME_MAX];
    q_tensor_ref refs[64];
    int n;
} names_t;

static void llama_names(names_t *m, int layers)
{
    static const char *const kinds[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_out",
                                         "ffn_norm", "ffn_gate", "ffn_up", "ffn_down" };
    m->n = 0;
    for (int i = -1; i <= layers; i++)
        for (int k = 0; k < (i < 0 || i == layers ? 1 : 9); k++) {
            const char *name = i < 0 ? "tok_embd.weight" : i == layers ? "out_norm.weight" : NULL;
            if (name)
                snprintf(m->names[m->n], LMQ_NAME_MAX, "%s", name);
            else
                snprintf(m->names[m->n], LMQ_NAME_MAX, "blk.%d.%s.weight", i, kinds[k]);
            m->refs[m->n] = (q_tensor_ref){ m->names[m->n], i < 0 || !strstr(kinds[k], "norm") ? 2 : 1, 0, LMQ_FAMILY_LLAMA };
            if (i == layers)
                m->refs[m->n].ndim = 1;
            m->n++;
        }
    snprintf(m->names[m->n], LMQ_NAME_MAX, "output.weight");
    m->refs[m->n] = (q_tensor_ref){ m->names[m->n], 2, 0, LMQ_FAMILY_LLAMA };
    m->n++;
}

static void plan_of(const char *text, const names_t *m, q_recipe *r, q_plan *plan)
{
    lmq_err e = { 0 };
    ck_assert_msg(q_recipe_parse(text, strlen(text), "recipe.yaml", r, &e) == LMQ_OK, "%s", e.msg);
    ck_assert_msg(q_recipe_resolve(r, m->refs, m->n, 0, plan, &e) == LMQ_OK, "%s", e.msg);
}

/* The llm-compressor recipe and the native one give the same plan, tensor by tensor, and the same
 * smoothing; the translation says what the first rule became. */
static void same_plan(const char *llmc, const char *native, const char *said)
{
    names_t m;
    llama_names(&m, 2);
    q_recipe a, b;
    q_plan pa, pb;
    plan_of(llmc, &m, &a, &pa);
    plan_of(native, &m, &b, &pb);
    ck_assert_int_eq(pa.n, pb.n);
    ck_assert_double_eq(a.smooth_alpha, b.smooth_alpha);
    int quantised = 0;
    for (int i = 0; i < pa.n; i++) {
        const q_plan_entry *x = &pa.entries[i], *y = &pb.entries[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_msg(!memcmp(&x->qp, &y->qp, sizeof x->qp), "%s: scheme differs", x->name);
        ck_assert_msg(!memcmp(&x->act, &y->act, sizeof x->act), "%s: activations differ", x->name);
        ck_assert_msg(!memcmp(&x->method, &y->method, sizeof x->method), "%s: method differs", x->name);
        ck_assert_msg((x->keep_reason == NULL) == (y->keep_reason == NULL), "%s: kept on one side", x->name);
        quantised += !x->keep_reason;
    }
    ck_assert_int_gt(quantised, 0);
    ck_assert_str_eq(a.name, "recipe"); /* its file's name, "recipe.yaml" */
    ck_assert_ptr_null(b.translation);
    ck_assert_ptr_nonnull(a.translation);
    ck_assert_msg(strstr(a.translation, said), "translation:\n%s\nlacks: %s", a.translation, said);
    q_plan_free(&pa);
    q_plan_free(&pb);
    q_recipe_free(&a);
    q_recipe_free(&b);
}

#define LINEARS "[\"blk.*.attn_q.weight\", \"blk.*.attn_k.weight\", \"blk.*.attn_v.weight\", " \
                "\"blk.*.attn_out.weight\", \"blk.*.ffn_gate.weight\", \"blk.*.ffn_up.weight\", \"blk.*.ffn_down.weight\"]"

START_TEST(w4a16_gptq)
{
    same_plan("quant_stage:\n"
              "  quant_modifiers:\n"
              "    GPTQModifier:\n"
              "      targets: Linear\n"
              "      scheme: W4A16\n"
              "      ignore: [lm_head]\n"
              "      dampening_frac: 0.05\n",
              "name: x\nignore: output.weight\nrules:\n  - match: " LINEARS "\n    scheme: W4A16\n"
              "    method: {name: gptq, damp: 0.05}\n",
              "llm-compressor GPTQModifier scheme W4A16 -> rule: match blk.*.weight, output.weight, scheme int4 "
              "g128, method gptq");
}
END_TEST

START_TEST(w8a8_smoothquant)
{
    same_plan("quant_stage:\n"
              "  quant_modifiers:\n"
              "    SmoothQuantModifier:\n"
              "      smoothing_strength: 0.8\n"
              "    GPTQModifier:\n"
              "      targets: [\"Linear\"]\n"
              "      scheme: W8A8\n"
              "      ignore: [\"lm_head\"]\n",
              "name: x\nsmoothquant: {alpha: 0.8}\nignore: output.weight\nrules:\n  - match: " LINEARS "\n"
              "    scheme: int8\n    granularity: channel\n    method: gptq\n"
              "    activations: {scheme: int8, granularity: token}\n",
              "SmoothQuantModifier smoothing_strength 0.8 -> smoothquant: {alpha: 0.8}");
}
END_TEST

START_TEST(awq_w4a16_asym)
{
    same_plan("quant_stage:\n"
              "  quant_modifiers:\n"
              "    AWQModifier:\n"
              "      ignore: [lm_head]\n"
              "      scheme: W4A16_ASYM\n"
              "      targets: [Linear]\n",
              "name: x\nignore: output.weight\nrules:\n  - match: " LINEARS "\n    scheme: int4\n"
              "    granularity: group\n    group: 128\n    symmetric: false\n    method: awq\n",
              "scheme int4 g128 asym, method awq");
}
END_TEST

/* Two config groups: attention int8 per channel with int8 per-token activations, the MLP int4 g128
 * asymmetric by act-order GPTQ; regexes over Hugging Face module names; the classifier untouched. */
START_TEST(two_groups)
{
    same_plan("quant_stage:\n"
              "  quant_modifiers:\n"
              "    GPTQModifier:\n"
              "      ignore: [\"lm_head\"]\n"
              "      config_groups:\n"
              "        group_0:\n"
              "          targets: [\"re:.*self_attn\\\\.(q|k|v|o)_proj$\"]\n"
              "          weights: {num_bits: 8, type: int, symmetric: true, strategy: channel}\n"
              "          input_activations: {num_bits: 8, type: int, symmetric: true, strategy: token, "
              "dynamic: true}\n"
              "        group_1:\n"
              "          targets: [\"re:.*mlp.*\"]\n"
              "          weights:\n"
              "            num_bits: 4\n"
              "            type: int\n"
              "            symmetric: false\n"
              "            strategy: group\n"
              "            group_size: 128\n"
              "            actorder: weight\n",
              "name: x\nignore: output.weight\nrules:\n"
              "  - match: [\"blk.*.attn_q.weight\", \"blk.*.attn_k.weight\", \"blk.*.attn_v.weight\", "
              "\"blk.*.attn_out.weight\"]\n"
              "    scheme: int8\n    granularity: channel\n    method: gptq\n"
              "    activations: {scheme: int8, granularity: token}\n"
              "  - match: [\"blk.*.ffn_gate.weight\", \"blk.*.ffn_up.weight\", \"blk.*.ffn_down.weight\"]\n"
              "    scheme: int4\n    granularity: group\n    group: 128\n    symmetric: false\n"
              "    method: {name: gptq, act_order: true}\n",
              "llm-compressor GPTQModifier config_groups.group_1 -> rule: match re:.*mlp.*, scheme int4 g128 asym, "
              "method gptq (act-order)");
}
END_TEST

START_TEST(fp8)
{
    same_plan("quant_stage:\n  quant_modifiers:\n    QuantizationModifier:\n      targets: Linear\n"
              "      scheme: FP8\n      ignore: [lm_head]\n",
              "name: x\nignore: output.weight\nrules:\n  - match: " LINEARS "\n    scheme: FP8\n",
              "lmq's FP8 has a scale per row and is weight-only");
    /* FP8_DYNAMIC: fp8 weights per channel, fp8 activations per token, dynamic; the preset and its
     * config group spelt out give the native recipe's plan. */
    same_plan("quant_stage:\n  quant_modifiers:\n    QuantizationModifier:\n      targets: Linear\n"
              "      scheme: FP8_DYNAMIC\n      ignore: [lm_head]\n",
              "name: x\nignore: output.weight\nrules:\n  - match: " LINEARS "\n    scheme: fp8_e4m3\n"
              "    granularity: channel\n    activations: {scheme: fp8_e4m3, granularity: token}\n",
              "scheme fp8_e4m3 per-channel, activations fp8_e4m3 per token, dynamic");
    same_plan("quant_stage:\n  quant_modifiers:\n    QuantizationModifier:\n      config_groups:\n        g:\n"
              "          targets: [Linear]\n          weights: {num_bits: 8, type: float, strategy: channel, "
              "symmetric: true, dynamic: false}\n          input_activations: {num_bits: 8, type: float, strategy: "
              "token, symmetric: true, dynamic: true}\n      ignore: [lm_head]\n",
              "name: x\nignore: output.weight\nrules:\n  - match: " LINEARS "\n    scheme: FP8_DYNAMIC\n",
              "activations fp8_e4m3 per token, dynamic");
    /* Default targets (Linear), a preset per target list, plain module names. */
    same_plan("s_stage:\n  m_modifiers:\n    QuantizationModifier:\n      ignore: [lm_head]\n"
              "      scheme: {W8A16: [\"model.layers.0.mlp.down_proj\"], W4A16: [Linear]}\n",
              "name: x\nignore: output.weight\nrules:\n  - match: blk.0.ffn_down.weight\n    scheme: W8A16\n"
              "  - match: " LINEARS "\n    scheme: W4A16\n",
              "scheme W8A16 -> rule: match model.layers.0.mlp.down_proj (blk.0.ffn_down.weight), scheme int8 per-channel");
}
END_TEST

/* A regex matches the Hugging Face module name from its start, in the model's family: a Llama's
 * ffn_down is model.layers.N.mlp.down_proj, never GPT-2's transformer.h.N.mlp.c_proj. */
START_TEST(regex_targets)
{
    enum { ANY = 0, GPT2 = LMQ_FAMILY_GPT2, LLAMA = LMQ_FAMILY_LLAMA };
    static const struct {
        const char *re, *name;
        int family, match;
    } cases[] = {
        { ".*mlp\\.down_proj$", "blk.3.ffn_down.weight", LLAMA, 1 },
        { ".*mlp\\.down_proj$", "blk.3.ffn_down.weight", GPT2, 0 },
        { ".*mlp\\.down_proj$", "blk.3.ffn_up.weight", LLAMA, 0 },
        { "mlp", "blk.3.ffn_up.weight", LLAMA, 0 },               /* re.match: from the start */
        { "model\\.layers\\.\\d+\\.mlp", "blk.3.ffn_up.weight", LLAMA, 1 },
        { "model\\.layers\\.\\d+\\.mlp", "blk.3.ffn_up.weight", GPT2, 0 },
        { ".*c_proj", "blk.0.ffn_down.weight", GPT2, 1 },        /* GPT-2's transformer.h.0.mlp.c_proj */
        { ".*c_proj", "blk.0.ffn_down.weight", LLAMA, 0 },       /* a Llama has no c_proj */
        { ".*c_proj", "blk.0.ffn_down.weight", ANY, 1 },         /* no family known: any family's name */
        { "transformer\\.h\\.0\\.mlp\\.c_fc", "blk.0.ffn_up.weight", GPT2, 1 },
        { "lm_head", "output.weight", LLAMA, 1 },
        { "lm_head", "output.weight", GPT2, 1 },
        { ".*?self_attn.*", "blk.1.attn_k.weight", LLAMA, 1 },    /* lazy: the same set of names */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "q_stage:\n  q_modifiers:\n    QuantizationModifier:\n      targets: 're:%s'\n"
                 "      scheme: W8A16\n", cases[i].re);
        q_recipe r;
        lmq_err e;
        ck_assert_msg(q_recipe_parse(text, strlen(text), "recipe.yaml", &r, &e) == LMQ_OK, "%s", e.msg);
        const q_tensor_ref t = { cases[i].name, 2, 64, cases[i].family };
        ck_assert_msg(q_pattern_match(&r.rules[0].match[0], &t) == cases[i].match, "%s on %s (family %d)",
                      cases[i].re, cases[i].name, cases[i].family);
        q_recipe_free(&r);
    }
}
END_TEST

static void fails(const char *text, ...)
{
    q_recipe r;
    lmq_err e = { 0 };
    ck_assert_int_eq(q_recipe_parse(text, strlen(text), "recipe.yaml", &r, &e), LMQ_E_RECIPE);
    va_list ap;
    va_start(ap, text);
    for (const char *want; (want = va_arg(ap, const char *));)
        ck_assert_msg(strstr(e.msg, want), "error '%s' lacks '%s'", e.msg, want);
    va_end(ap);
}

#define HEAD "quant_stage:\n  quant_modifiers:\n"
START_TEST(errors)
{
    fails(HEAD "    QuantizationModifier:\n      scheme: FP8_BLOCK\n",
          "recipe.yaml:4: quant_stage.quant_modifiers.QuantizationModifier.scheme: preset FP8_BLOCK: lmq's fp8 has "
          "one scale per output row, not 128x128 blocks", "FP8_DYNAMIC gives", NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 8, type: float, strategy: channel}\n"
          "          input_activations: {num_bits: 4, type: float, strategy: token, dynamic: true}\n",
          "recipe.yaml:8:", "lmq's activations are int8 or fp8 e4m3", NULL);
    fails(HEAD "    QuantizationModifier:\n      scheme: W4A16\n      kv_cache_scheme: {num_bits: 8}\n",
          "recipe.yaml:5: quant_stage.quant_modifiers.QuantizationModifier.kv_cache_scheme: lmq keeps the KV cache "
          "in float", NULL);
    fails(HEAD "    SparseGPTModifier:\n      sparsity: 0.5\n", "recipe.yaml:3:", "SparseGPTModifier: unknown modifier",
          "GPTQModifier", NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 5}\n", "recipe.yaml:7:", "config_groups.g.weights: num_bits 5: lmq's integer "
          "weights have 8, 4, 3 or 2 bits", NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 4, strategy: group, group_size: 100}\n",
          "group_size 100: lmq's groups are powers of two", NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 8, strategy: block}\n", "strategy block", NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 8, strategy: channel}\n"
          "          input_activations: {num_bits: 8, strategy: token}\n",
          "recipe.yaml:8:", "dynamic: false: lmq computes activation scales at each call", NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 8, type: float, strategy: tensor}\n", "scheme FP8 gives", NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 8, strategy: channel}\n          output_activations: {num_bits: 8}\n",
          "recipe.yaml:8:", "output_activations: lmq quantises weights and the inputs of linear layers only", NULL);
    fails(HEAD "    GPTQModifier:\n      scheme: W4A16\n      actorder: group\n",
          "recipe.yaml:5: quant_stage.quant_modifiers.GPTQModifier.actorder: actorder 'group'", "actorder: weight",
          NULL);
    fails(HEAD "    QuantizationModifier:\n      config_groups:\n        g:\n          targets: Linear\n"
          "          weights: {num_bits: 4, strategy: group, group_size: 128, actorder: weight}\n",
          "recipe.yaml:7:", "act-order is GPTQ's", NULL);
    fails(HEAD "    AWQModifier:\n      scheme: W4A16\n      mappings: [x]\n", "recipe.yaml:5:",
          "mappings: lmq's AWQ scales each linear layer's input channels", NULL);
    fails(HEAD "    GPTQModifier:\n      scheme: FP8\n", "GPTQModifier chooses integer codes; fp8_e4m3", NULL);
    fails(HEAD "    GPTQModifier:\n      targets: [LlamaDecoderLayer]\n      scheme: W4A16\n",
          "recipe.yaml:4:", "module class 'LlamaDecoderLayer'", NULL);
    fails(HEAD "    GPTQModifier:\n      targets: \"re:(?=x)\"\n      scheme: W4A16\n", "'(?=' is not read by lmq",
          NULL);
    fails(HEAD "    GPTQModifier:\n      targets: Linear\n      scheme: W4A16\n      bogus: 1\n",
          "recipe.yaml:6: quant_stage.quant_modifiers.GPTQModifier.bogus: unknown key (known keys: targets", NULL);
    fails(HEAD "    SmoothQuantModifier:\n      smoothing_strength: 0.5\n", "no quantisation modifier", NULL);
    fails("quant_stage:\n  run_type: oneshot\n", "recipe.yaml:2: quant_stage.run_type: a stage holds groups of "
          "modifiers", NULL);
    fails(HEAD "    QuantizationModifier:\n      scheme: W4A16\n      config_groups: {}\n",
          "scheme and config_groups both given", NULL);
}
END_TEST

/* Resolution checks apply to the translated rules: GPTQ on lm_head is refused at its line. */
START_TEST(resolve_checks)
{
    names_t m;
    llama_names(&m, 1);
    const char *text = HEAD "    GPTQModifier:\n      targets: Linear\n      scheme: W4A16\n";
    q_recipe r;
    q_plan plan;
    lmq_err e;
    ck_assert_int_eq(q_recipe_parse(text, strlen(text), "recipe.yaml", &r, &e), LMQ_OK);
    ck_assert_int_eq(q_recipe_resolve(&r, m.refs, m.n, 0, &plan, &e), LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:5: gptq applies to the linear layers of blocks, not to 'output.weight'"),
                  "%s", e.msg);
    q_recipe_free(&r);
    text = HEAD "    QuantizationModifier:\n      targets: \"re:.*nothing.*\"\n      scheme: W4A16\n";
    ck_assert_int_eq(q_recipe_parse(text, strlen(text), "recipe.yaml", &r, &e), LMQ_OK);
    ck_assert_int_eq(q_recipe_resolve(&r, m.refs, m.n, 0, &plan, &e), LMQ_E_RECIPE);
    ck_assert_msg(strstr(e.msg, "recipe.yaml:4: pattern 're:.*nothing.*' matches no tensor"), "%s", e.msg);
    q_recipe_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("llmc");
    TCase *tc = tcase_create("translate");
    tcase_add_test(tc, w4a16_gptq);
    tcase_add_test(tc, w8a8_smoothquant);
    tcase_add_test(tc, awq_w4a16_asym);
    tcase_add_test(tc, two_groups);
    tcase_add_test(tc, fp8);
    tcase_add_test(tc, regex_targets);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, resolve_checks);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
