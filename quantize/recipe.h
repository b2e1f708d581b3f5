/* Recipes: which scheme applies to which tensor, by glob pattern over canonical names.
 * recipes/README.md documents the YAML format for users; this is its parser and resolver.
 *
 * q_recipe_load/q_recipe_parse check everything that can be checked without a model (keys,
 * types, values, combinations) and keep the raw text and its XXH3-64 checksum for the
 * manifest. q_recipe_resolve applies the recipe to a model's tensor names and checks what
 * needs the names (every pattern matches something, integer schemes only on matrices, a rule
 * with activations gives them to no 1-D tensor).
 * Every error names the recipe file, the line and the key. */
#ifndef LMQ_RECIPE_H
#define LMQ_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "formats/dtype.h"
#include "formats/manifest.h"
#include "formats/model.h"

#define Q_RECIPE_NAME_MAX 64
#define Q_RECIPE_MAX_BYTES (1u << 20) /* recipes are small; a larger file is refused */
#define Q_GROUP_MAX 65536u
#define Q_LAYERS_MAX 64  /* layer indexes one rule may list */
#define Q_FALLBACK_MAX 4 /* fallback schemes of one rule */
#define Q_CANDIDATES_MAX 16 /* target_bpw's candidate schemes */

/* One tensor of the model, as the resolver needs it. */
typedef struct {
    const char *name; /* canonical name (formats/model.h) */
    int ndim;         /* 1: norm weight or bias, which only float schemes may take */
    int64_t cols;     /* weights per row (the last dimension); 0 when unknown: no fallback is taken */
    int family;       /* the model's lmq_family, whose Hugging Face names re: patterns read; 0: any */
} q_tensor_ref;

typedef struct {
    char *text;  /* owned, as written (only * and ? are special) */
    char *canon; /* owned: the canonical pattern when text is a Hugging Face module name
                    (lmq_hf_canonical), else NULL */
    int line;    /* 1-based line in the recipe file */
    void *re;    /* owned: an llm-compressor "re:" pattern, compiled (quantize/llmc.h); text and canon
                    are then its text and NULL */
} q_pattern;

/* The pattern tensor names are matched against: canonical, whichever way it was written. */
const char *q_pattern_glob(const q_pattern *p);
/* Whether p matches canonical tensor name name. */
int q_pattern_match(const q_pattern *p, const q_tensor_ref *t);
/* How many of the tensors p matches. */
int q_pattern_count(const q_pattern *p, const q_tensor_ref *t, int n);
/* For a pattern that matches none of t but reads as a Hugging Face name with wildcards beyond the
 * layer index (which do not resolve): the first tensor whose HF name it matches (as written or
 * with ".weight"; with or without the family prefix). Writes that HF name to hf and returns the
 * tensor's canonical name, or NULL. */
const char *q_pattern_hf_hint(const q_pattern *p, const q_tensor_ref *t, int n, char *hf, size_t cap);

/* How a rule chooses codes (calibrate/ runs the calibrated methods), with its parameters. */
typedef struct {
    lmq_method method;
    double damp;      /* gptq: dampening, a fraction of mean(diag H) */
    uint32_t block;   /* gptq: columns per lazy block */
    int act_order;    /* gptq: columns in decreasing order of diag H (static groups) */
    uint32_t grid;    /* awq: candidate exponents r = 0, 1/grid, ..., (grid-1)/grid */
    int clip;         /* awq: search a clip ratio per group */
} q_method;

/* Each method's parameters when a recipe names it without any (llm-compressor's modifiers too). */
extern const q_method q_method_defaults[LMQ_METHOD_COUNT];

typedef struct {
    q_pattern *match;
    int n_match;
    lmq_qparams qp;
    q_method method;
    lmq_act act; /* activations: quantisation of the input of the linear layers it matches */
    int line;    /* line of the rule (its list item) */
    const char *preset; /* the llm-compressor preset scheme: wrote qp and act ("W4A16"), or NULL */
    /* layers: the rule takes only tensors of the blocks (blk.<i>.*) it lists, by index (negative:
     * counted from the end) or by named set (recipes/README.md); has_layers 0: every tensor */
    int has_layers;
    int layer_idx[Q_LAYERS_MAX];
    int n_layer_idx;
    unsigned layer_sets; /* bit k: the set q_layer_set(k) */
    /* fallback: for a block scheme, the schemes tried in order on a tensor whose rows are not
     * whole blocks of it (the first whose blocks divide the row wins) */
    uint16_t fallback[Q_FALLBACK_MAX]; /* lmq_dtype */
    int n_fallback;
} q_rule;

typedef struct {
    char *path; /* as given to q_recipe_load, or the label given to q_recipe_parse */
    char name[Q_RECIPE_NAME_MAX];
    char *description; /* NULL when absent */
    char *translation; /* an llm-compressor recipe's: one line per rule it became, "llm-compressor
                          GPTQModifier config_groups.group_0 -> rule: ..."; NULL for lmq's own */
    q_rule *rules;
    int n_rules;
    q_pattern *ignore;
    int n_ignore;
    double smooth_alpha; /* SmoothQuant's alpha before the per-tensor pass; 0: none */
    /* target_bpw: whole-model bits per weight that quantize/bpw_plan.h chooses the free tensors'
     * encodings for, among candidates (GGUF block schemes); 0: none */
    double target_bpw;
    int target_line, candidates_line;
    uint16_t candidates[Q_CANDIDATES_MAX]; /* lmq_dtype */
    int n_candidates;
    char *text; /* the raw recipe text, NUL-terminated; embedded in the manifest */
    size_t text_len;
    uint64_t checksum; /* XXH3_64bits over text[0..text_len) */
} q_recipe;

/* Reads and parses the recipe file at path. On failure *r is left empty (q_recipe_free is
 * harmless on it). */
lmq_code q_recipe_load(const char *path, q_recipe *r, lmq_err *err);
/* Parses recipe text held in memory; label stands for the file name in messages. */
lmq_code q_recipe_parse(const char *text, size_t len, const char *label, q_recipe *r, lmq_err *err);
void q_recipe_free(q_recipe *r);


/* Reasons a tensor keeps its source precision (keep_reason below). */
#define Q_KEEP_IGNORED "ignored by recipe"
#define Q_KEEP_NO_RULE "no rule matches"
#define Q_KEEP_ONLY_MATRICES "1-D tensor; the rules that match it apply to matrices only"

typedef struct {
    char name[LMQ_NAME_MAX];
    lmq_qparams qp;          /* f32 (source precision) when keep_reason is set */
    q_method method;
    lmq_act act;             /* the rule's activations (none when keep_reason is set) */
    const char *keep_reason; /* NULL: qp comes from a rule; else one of Q_KEEP_* */
    int rule_line;           /* the rule that decided (or, for Q_KEEP_ONLY_MATRICES, the first
                                one that passed the tensor over; for Q_KEEP_IGNORED, the ignore
                                pattern's line); 0 for none */
    int derived_from_tied;   /* 1: output.weight, the classifier use of the tied tok_embd.weight */
    int fell_back;           /* 1: qp is the rule's fallback; `asked`'s blocks do not divide a row */
    uint16_t asked;          /* when fell_back: the rule's scheme (lmq_dtype) */
} q_plan_entry;

typedef struct {
    q_plan_entry *entries; /* entries[i] is tensors[i] for i < n_tensors; a tied model adds
                              output.weight last */
    int n;
} q_plan;

/* Resolves the recipe against a model's tensors. tied: the classifier is tok_embd.weight;
 * then tok_embd.weight must be among the tensors and output.weight must not, and the plan
 * gets an entry for each use. On failure *plan is left empty. */
lmq_code q_recipe_resolve(const q_recipe *r, const q_tensor_ref *tensors, int n_tensors, int tied,
                          q_plan *plan, lmq_err *err);
/* The same without requiring every pattern to match a tensor (lmq quantize --explain reports
 * those with q_pattern_count instead); every other check is made. */
lmq_code q_recipe_plan(const q_recipe *r, const q_tensor_ref *tensors, int n_tensors, int tied, q_plan *plan,
                       lmq_err *err);
/* The same over a model in memory (its tensors in order, arch.tied_embedding). */
lmq_code q_recipe_resolve_model(const q_recipe *r, const lmq_model *m, q_plan *plan, lmq_err *err);
void q_plan_free(q_plan *plan);
/* Whether two entries store the same encoding (the two uses of a tied embedding then share one tensor). */
int q_plan_entry_same(const q_plan_entry *a, const q_plan_entry *b);

/* Whether applying r needs activation statistics (a calibrated method or SmoothQuant). */
int q_recipe_needs_stats(const q_recipe *r);
/* The error for running such a recipe without statistics, naming the first rule that needs them. */
lmq_code q_recipe_stats_error(const q_recipe *r, lmq_err *err);

#endif
