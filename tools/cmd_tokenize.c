/* lmq tokenize: the token ids an artefact's tokenizer gives for a text, to compare with other
 * tools' tokenizers. --documents applies P1's document split and boundary tokens (the stream
 * lmq verify scores); without it the whole text is encoded as one string. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "runtime/artefact.h"
#include "tokenizer/stream.h"
#include "tools/args.h"
#include "tools/cmd.h"

static const char usage[] =
    "usage: lmq tokenize A.lmq (--text FILE | --string S) [--json] [--documents]\n"
    "Prints the token ids the artefact's tokenizer gives for the text of FILE or for S: separated\n"
    "by spaces on one line, or with --documents one line per document, split and joined as\n"
    "verify's perplexity stream (protocol P1: separator lines, stripped documents, each one's\n"
    "BOS or the <|endoftext|> between them). --json prints {\"tokens\": [...], \"count\": N},\n"
    "with --documents also \"documents\": [[...], ...].\n";

static json_t *id_array(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(ids[i]))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

/* One JSON object for ids; with starts, the documents starting at starts[0..n_docs). */
static int print_json(const int32_t *ids, size_t n, const size_t *starts, int n_docs)
{
    json_t *doc = json_pack("{s:o,s:I}", "tokens", id_array(ids, n), "count", (json_int_t)n);
    json_t *docs = starts ? json_array() : NULL;
    for (int i = 0; docs && i < n_docs; i++) {
        size_t end = i + 1 < n_docs ? starts[i + 1] : n;
        json_t *d = id_array(ids + starts[i], end - starts[i]);
        if (!d || json_array_append_new(docs, d)) {
            json_decref(docs);
            docs = NULL;
        }
    }
    int ok = doc && (!starts || (docs && !json_object_set_new(doc, "documents", docs))) &&
             !json_dumpf(doc, stdout, JSON_COMPACT) && putchar('\n') != EOF;
    json_decref(doc);
    return ok;
}

/* ids separated by spaces, a line from each start (one line when starts is NULL). */
static int print_lines(const int32_t *ids, size_t n, const size_t *starts, int n_docs)
{
    int d = 1; /* the next document's index in starts */
    for (size_t i = 0; i < n; i++) {
        int new_line = starts && d < n_docs && i == starts[d];
        d += new_line;
        if (i > 0 && putchar(new_line ? '\n' : ' ') == EOF)
            return 0;
        if (printf("%d", (int)ids[i]) < 0)
            return 0;
    }
    return putchar('\n') != EOF;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *text_path = NULL, *str = NULL, *path = NULL;
    int json = 0, documents = 0, n_pos;
    const arg_opt opts[] = { { "--text", NULL, &text_path, NULL },
                             { "--string", NULL, &str, NULL },
                             { "--json", NULL, NULL, &json },
                             { "--documents", NULL, NULL, &documents },
                             { 0 } };
    int rc = args_parse(argc, argv, opts, &path, 1, &n_pos, usage);
    if (rc >= 0)
        return rc;
    if (n_pos != 1 || !text_path == !str) {
        fputs(usage, stderr);
        return 2;
    }

    lmq_model m;
    lmq_err err;
    if (rt_load_artefact(path, &m, &err)) {
        fprintf(stderr, "lmq tokenize: %s\n", err.msg);
        return 1;
    }
    tok_tokenizer *tok = NULL;
    lmq_blob text = { 0 };
    int32_t *ids = NULL;
    size_t n = 0, *starts = NULL;
    int n_docs = 0;
    lmq_code c = tok_open_model(&m, &tok, &err);
    if (c)
        lmq_err_prefix(&err, "%s: ", path);
    else if (text_path)
        c = lmq_blob_open(text_path, &text, &err); /* its errors name the file */
    if (!c) {
        const char *s = text_path ? (const char *)text.data : str;
        size_t len = text_path ? text.size : strlen(str);
        c = documents ? tok_stream_build_docs(tok, s, len, &ids, &n, &starts, &n_docs, &err)
                      : tok_encode(tok, s, len, &ids, &n, &err);
        if (c)
            lmq_err_prefix(&err, "%s: ", text_path ? text_path : "--string");
    }
    if (c)
        fprintf(stderr, "lmq tokenize: %s\n", err.msg);
    else if (!(json ? print_json : print_lines)(ids, n, starts, n_docs)) {
        fprintf(stderr, "lmq tokenize: writing the ids failed\n");
        c = LMQ_E_IO;
    }
    free(starts);
    free(ids);
    lmq_blob_close(&text);
    tok_free(tok);
    lmq_model_free(&m);
    return c ? 1 : 0;
}
