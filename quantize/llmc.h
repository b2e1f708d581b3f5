/* llm-compressor recipes, read as they are: a recipe whose top level is an llm-compressor stage
 * (`quant_stage: quant_modifiers: GPTQModifier: {...}`) is translated into lmq's rules
 * (README.md, "From llm-compressor", has the table). Every key or value lmq cannot honour is an
 * error naming the file, line and key, and what lmq would do instead. */
#ifndef LMQ_LLMC_H
#define LMQ_LLMC_H

#include <yaml.h>

#include "common/err.h"
#include "common/yaml_fields.h"
#include "quantize/recipe.h"

/* Whether the mapping root reads as an llm-compressor recipe: no lmq key "rules", and a top-level
 * key naming a stage ("..._stage", "stage"). */
int q_llmc_is_recipe(const yaml_node_t *root, yaml_document_t *doc);
/* Translates it into r (rules, ignore, smooth_alpha, name, translation); rd is the recipe reader's. */
lmq_code q_llmc_read(const lmq_yf_reader *rd, yaml_node_t *root, q_recipe *r);

/* An "re:" pattern (p->re set): whether the Hugging Face module name of canonical tensor name
 * (with its prefix; "lm_head" for the classifier) in a family that writes lmq_family family
 * (0: any supported family) matches it from its start, as Python's re.match does. */
int q_llmc_regex_match(const q_pattern *p, const char *name, int family);
void q_llmc_regex_free(q_pattern *p);

#endif
