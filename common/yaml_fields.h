/* Reflective YAML: one table per mapping names its keys, their kind and where each value lives
 * in a struct. One walker reads a mapping into the struct (refusing unknown, duplicate and
 * missing keys) and one emitter writes it, so reader and writer cannot drift apart. */
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
} lmq_yf_kind;

enum {
    YF_OPTIONAL = 1, /* may be absent, and is left out when empty (see absent() in yaml_fields.c) */
    YF_LITERAL = 2,  /* YF_TEXT in YAML literal block style (multi-line text) */
};

typedef struct lmq_yf_table lmq_yf_table;
typedef struct {
    const char *key;
    lmq_yf_kind k;
    size_t off, size;
    int flags;
    const char *const *names; /* YF_ENUM: the name of value v is at names + v·stride bytes */
    unsigned n_names;
    size_t stride;            /* 0: an array of names; else a column of a table of structs */
    const lmq_yf_table *sub;
    size_t count_off, cap_off, present_off;
} lmq_yf_field;

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

typedef struct lmq_yf_reader lmq_yf_reader;
/* Reports an error in the reader's own style: at is the node at fault (libyaml's start_mark
 * gives its line; NULL when the document lacks the node), path the key path ("" at the top),
 * msg what is wrong. Returns code. */
typedef lmq_code (*lmq_yf_report)(const lmq_yf_reader *r, lmq_code code, const yaml_node_t *at, const char *path,
                                  const char *msg);

struct lmq_yf_reader {
    yaml_document_t *doc;
    lmq_code code; /* the code of a malformed value (out of memory is LMQ_E_NOMEM) */
    lmq_yf_report report;
    void *ctx; /* the reader's own, for report */
    lmq_err *err;
};

/* Reads mapping n into the struct at base by table t; path names n in messages. */
lmq_code lmq_yf_read_map(const lmq_yf_reader *r, const lmq_yf_table *t, void *base, yaml_node_t *n,
                         const char *path);

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
