#include "common/yaml_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/yaml_doc.h"

enum { MAX_DEPTH = 64 };

/* Only digits with an optional sign (integers), or that plus one '.' and/or an exponent
 * (floats): strtod alone would also take "inf", "nan" and hex. */
static int is_number(const char *s, int *is_float)
{
    const char *p = s + (*s == '-' || *s == '+');
    int digits = 0, dot = 0, exp = 0;
    *is_float = 0;
    for (; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits++;
        else if (*p == '.' && !dot && !exp)
            dot = *is_float = 1;
        else if ((*p == 'e' || *p == 'E') && digits && !exp) {
            exp = *is_float = 1;
            p += p[1] == '-' || p[1] == '+';
            if (p[1] < '0' || p[1] > '9')
                return 0;
        } else
            return 0;
    }
    return digits > 0;
}

static json_t *scalar(const yaml_node_t *n)
{
    const char *s = (const char *)n->data.scalar.value;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return json_stringn(s, n->data.scalar.length);
    static const struct {
        const char *word;
        json_type type;
    } words[] = { { "", JSON_NULL },        { "~", JSON_NULL },     { "null", JSON_NULL },   { "Null", JSON_NULL },
                  { "NULL", JSON_NULL },    { "true", JSON_TRUE },  { "True", JSON_TRUE },   { "TRUE", JSON_TRUE },
                  { "false", JSON_FALSE },  { "False", JSON_FALSE }, { "FALSE", JSON_FALSE } };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcmp(s, words[i].word))
            return words[i].type == JSON_NULL ? json_null() : json_boolean(words[i].type == JSON_TRUE);
    int is_float;
    if (is_number(s, &is_float)) {
        char *end;
        errno = 0;
        if (!is_float) {
            long long v = strtoll(s, &end, 10);
            if (!errno && !*end)
                return json_integer(v);
        } else {
            double v = strtod(s, &end);
            if (!errno && !*end)
                return json_real(v);
        }
    }
    return json_stringn(s, n->data.scalar.length);
}

static lmq_code convert(yaml_document_t *doc, const yaml_node_t *n, const char *name, json_t **out, lmq_err *err)
{
    lmq_code c = LMQ_OK;
    json_t *j = NULL;
    switch (n->type) {
    case YAML_SCALAR_NODE: j = scalar(n); break;
    case YAML_SEQUENCE_NODE:
        j = json_array();
        for (yaml_node_item_t *it = n->data.sequence.items.start; j && !c && it < n->data.sequence.items.top; it++) {
            json_t *v;
            if (!(c = convert(doc, yaml_document_get_node(doc, *it), name, &v, err)) && json_array_append_new(j, v))
                c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
        }
        break;
    case YAML_MAPPING_NODE:
        j = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; j && !c && p < n->data.mapping.pairs.top; p++) {
            const yaml_node_t *k = yaml_document_get_node(doc, p->key);
            size_t line = k->start_mark.line + 1;
            json_t *v;
            if (k->type != YAML_SCALAR_NODE)
                c = lmq_fail(err, LMQ_E_FORMAT, "%s:%zu: a key that is not a plain value", name, line);
            else if (strlen((const char *)k->data.scalar.value) != k->data.scalar.length)
                c = lmq_fail(err, LMQ_E_FORMAT, "%s:%zu: a key holding a NUL byte", name, line);
            else if (json_object_get(j, (const char *)k->data.scalar.value))
                c = lmq_fail(err, LMQ_E_FORMAT, "%s:%zu: key '%.200s' repeated", name, line, k->data.scalar.value);
            else if (!(c = convert(doc, yaml_document_get_node(doc, p->value), name, &v, err)) &&
                     json_object_set_new(j, (const char *)k->data.scalar.value, v))
                c = lmq_fail(err, LMQ_E_FORMAT, "%s:%zu: key '%.200s' is not UTF-8", name, line, k->data.scalar.value);
        }
        break;
    default: c = lmq_fail(err, LMQ_E_FORMAT, "%s: an empty YAML node", name); break;
    }
    if (!j && !c) /* (libyaml checked the text is UTF-8: what fails here is memory) */
        c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    if (c) {
        json_decref(j);
        return c;
    }
    *out = j;
    return LMQ_OK;
}

lmq_code lmq_yaml_to_json(const char *text, size_t len, const char *name, json_t **out, lmq_err *err)
{
    yaml_document_t doc;
    lmq_code c = lmq_yaml_load(text, len, name, MAX_DEPTH, LMQ_E_FORMAT, &doc, err);
    if (c)
        return c;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root)
        c = convert(&doc, root, name, out, err);
    else if (!(*out = json_null()))
        c = lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    yaml_document_delete(&doc);
    return c;
}
