/* Reflective YAML: one table per mapping names its keys, their kind and where each value lives
 * in a struct. One walker reads a mapping into the struct (refusing unknown, duplicate and
 * missing keys) and one emitter writes it, so reader and writer cannot drift apart. The
 * manifest uses the built-in kinds; the recipe gives every row its own parser (YF_CUSTOM). */
#ifndef LMQ_YAML_FIELDS_H
#define LMQ_YAML_FIELDS_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "common/err.h"

typedef enum {
    YF_STR,  /* char[size] */
    YF_TEXT, /* owned char * */
    YF_UINT, /* unsigned integer of size bytes */
    YF_INT,  /* int */
    YF_REAL, /* float (size 4) or double (size 8) */
    YF_BOOL, /* integer of size bytes, 0 or 1 */
    YF_HEX,  /* uint64_t checksum written as 16 hex digits */
    YF_ENUM, /* unsigned integer of size bytes, written as names[value] */
    YF_MAP,  /* fields of sub at base + off */
    YF_SEQ,  /* array pointer at off, int count at count_off and capacity at cap_off; size = element size */
    YF_CUSTOM, /* parse reads it */
} lmq_yf_kind;

enum {
    YF_OPTIONAL = 1, /* may be absent, and is left out when empty (see absent() in yaml_fields.c) */
    YF_LITERAL = 2,  /* YF_TEXT in YAML literal block style (multi-line text) */
    YF_ABSENT = 4,   /* YF_CUSTOM: parse is called also when the key is absent (key and value NULL) */
};

typedef struct lmq_yf_table lmq_yf_table;
typedef struct lmq_yf_reader lmq_yf_reader;
typedef struct lmq_yf_field lmq_yf_field;
/* A YF_CUSTOM value: map is the mapping holding it, key its key node (NULL when absent), base the
 * struct the table describes (rows before this one are read when the reader reads in order). */
typedef lmq_code (*lmq_yf_parse)(const lmq_yf_reader *r, const lmq_yf_field *f, const yaml_node_t *map,
                                 const yaml_node_t *key, yaml_node_t *value, void *base, const char *path);

struct lmq_yf_field {
    const char *key;
    lmq_yf_kind k;
    size_t off, size;
    int flags;
    const char *const *names; /* YF_ENUM: the name of value v is at names + v·stride bytes */
    unsigned n_names;
    size_t stride;            /* 0: an array of names; else a column of a table of structs */
    const lmq_yf_table *sub;
    size_t count_off, cap_off, present_off;
    lmq_yf_parse parse; /* YF_CUSTOM */
    const void *data;   /* YF_CUSTOM: the row's own data for parse */
    double lo, hi;      /* YF_CUSTOM: the accepted range, where parse checks one */
};

struct lmq_yf_table {
    const lmq_yf_field *f;
    int n;
};

#define YF_LEN(a) (sizeof a / sizeof a[0])
#define YF_TABLE(a) { a, (int)YF_LEN(a) }
/* A key stored in member m of struct s. */
#define YF_KEY(name, kind_, s, m, ...) \
    { .key = name, .k = kind_, .off = offsetof(s, m), .size = sizeof(((s *)0)->m), __VA_ARGS__ }
#define YF_NAMES(a) .names = a, .n_names = (unsigned)YF_LEN(a)

/* ---- reading ---- */

typedef enum { YF_KEY_NOT_STRING, YF_KEY_UNKNOWN, YF_KEY_TWICE, YF_KEY_MISSING } lmq_yf_key_error;

/* Reports an error in the reader's own style: at is the node at fault (libyaml's start_mark
 * gives its line; NULL when the document lacks the node), path the key path ("" at the top),
 * msg what is wrong. Returns code. */
typedef lmq_code (*lmq_yf_report)(const lmq_yf_reader *r, lmq_code code, const yaml_node_t *at, const char *path,
                                  const char *msg);

struct lmq_yf_reader {
    yaml_document_t *doc;
    lmq_code code; /* the code of a malformed value (out of memory is LMQ_E_NOMEM) */
    lmq_yf_report report;
    /* Words a key error, where the reader has its own wording (else report gets the walker's):
     * at is the key (YF_KEY_MISSING: the missing_at node), path the mapping's, key the missing
     * key's name, first the earlier key of a YF_KEY_TWICE. */
    lmq_code (*key_error)(const lmq_yf_reader *r, lmq_yf_key_error what, const lmq_yf_table *t,
                          const yaml_node_t *at, const char *path, const char *key, const yaml_node_t *first);
    /* 0: each value is read where it stands in the document; 1: all keys are matched first (an
     * unknown or repeated key is the first error), then rows are read in table order. */
    int in_order;
    void *ctx; /* the reader's own, for report, key_error and YF_CUSTOM rows */
    lmq_err *err;
};

/* Reads mapping n into the struct at base by table t; path names n in messages, a missing
 * required key is reported at missing_at. */
lmq_code lmq_yf_read_map(const lmq_yf_reader *r, const lmq_yf_table *t, void *base, yaml_node_t *n,
                         const char *path, const yaml_node_t *missing_at);

/* ---- writing ---- */

/* The mapping of table t over the struct at base as one YAML document, NUL-terminated in *text
 * (free it). Errors read "<name>: <key>: ...". */
lmq_code lmq_yf_emit(const lmq_yf_table *t, const void *base, const char *name, char **text, size_t *len,
                     lmq_err *err);

/* ---- the structs behind the tables ---- */

/* The row of t for key, or NULL. */
const lmq_yf_field *lmq_yf_find(const lmq_yf_table *t, const char *key);

/* Makes room for one more zeroed element of the array a YF_SEQ field f describes in the struct
 * at base; NULL when out of memory or full. */
void *lmq_yf_grow(void *base, const lmq_yf_field *f);

#endif
