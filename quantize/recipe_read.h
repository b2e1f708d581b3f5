/* The recipe reader's pieces that the llm-compressor translation (quantize/llmc.c) reads with
 * too: the reader's context, its error form and its scalar readers. Internal to quantize/. */
#ifndef LMQ_RECIPE_READ_H
#define LMQ_RECIPE_READ_H

#include <yaml.h>

#include "common/err.h"
#include "common/yaml_fields.h"
#include "quantize/recipe.h"

typedef struct {
    yaml_document_t *doc;
    const char *path;
    lmq_err *err;
    int gran_line; /* of the rule being read: its granularity key, where a missing group is reported */
} pctx;

static inline int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }
static inline const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

/* "<path>:<line>: <key>: <message>" */
__attribute__((format(printf, 4, 5))) lmq_code perr(pctx *c, int line, const char *key, const char *fmt, ...);
/* "a list", "a mapping" or "a string". */
const char *type_name(const yaml_node_t *n);
lmq_code get_string(pctx *c, const yaml_node_t *n, const char *key, const char **out);
lmq_code get_bool(pctx *c, const yaml_node_t *n, const char *key, double *out);
/* A plain unsigned decimal integer up to 2^32 - 1. */
lmq_code get_uint(pctx *c, const yaml_node_t *n, const char *key, double *out);
lmq_code get_real(pctx *c, const yaml_node_t *n, const char *key, double *out);
/* A pattern or a list of patterns, appended to *arr. */
lmq_code get_patterns(pctx *c, const yaml_node_t *n, const char *key, q_pattern **arr, int *count);
/* A value named in names[0..n) (NULL entries are not names); *out its index. */
lmq_code get_name(pctx *c, const yaml_node_t *n, const char *key, const char *const *names, int n_names,
                  uint8_t *out);
/* The walker's callbacks (lmq_yf_reader's report and key_error) in the recipe's wording. */
lmq_code report(const lmq_yf_reader *rd, lmq_code code, const yaml_node_t *at, const char *path, const char *msg);
lmq_code key_error(const lmq_yf_reader *rd, lmq_yf_key_error what, const lmq_yf_table *t, const yaml_node_t *at,
                   const char *where, const char *key, const yaml_node_t *first);

/* A preset scheme (W4A16, W8A8, ...): its weights and activations. */
typedef struct {
    const char *name;
    lmq_qparams qp;
    lmq_act act;
} q_preset;
/* The preset named name, or NULL. */
const q_preset *q_preset_find(const char *name);

/* The arguments of a YF_CUSTOM row's parser (lmq_yf_parse); each row uses some. */
#define UNUSED __attribute__((unused))
#define ROW_ARGS                                                                                              \
    const lmq_yf_reader *rd, UNUSED const lmq_yf_field *f, UNUSED const yaml_node_t *map,                    \
        UNUSED const yaml_node_t *key, UNUSED yaml_node_t *v, UNUSED void *base, UNUSED const char *path
#define CTX ((pctx *)rd->ctx)
#define ROW(name, fn, s, m, ...) YF_KEY(name, YF_CUSTOM, s, m, .parse = fn, __VA_ARGS__)

/* A YF_CUSTOM row of a uint8_t named in f->names. */
lmq_code read_enum(ROW_ARGS);

#endif
