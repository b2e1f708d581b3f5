#include "common/yaml_doc.h"

static lmq_code syntax_error(const yaml_parser_t *p, const char *name, lmq_code code, lmq_err *err)
{
    if (p->error == YAML_MEMORY_ERROR)
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    if (p->context)
        return lmq_fail(err, code, "%s:%zu:%zu: malformed YAML: %s (%s at line %zu)", name, p->problem_mark.line + 1,
                        p->problem_mark.column + 1, p->problem ? p->problem : "parse error", p->context,
                        p->context_mark.line + 1);
    return lmq_fail(err, code, "%s:%zu:%zu: malformed YAML: %s", name, p->problem_mark.line + 1,
                    p->problem_mark.column + 1, p->problem ? p->problem : "parse error");
}

static lmq_code prescan(const char *text, size_t len, const char *name, int max_depth, lmq_code code,
                        lmq_err *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, docs = 0;
    lmq_code c = LMQ_OK;
    for (int done = 0; !done && !c;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            c = syntax_error(&p, name, code, err);
            break;
        }
        size_t line = ev.start_mark.line + 1, col = ev.start_mark.column + 1;
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                c = lmq_fail(err, code, "%s:%zu:%zu: a second YAML document; the file holds one", name, line, col);
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > max_depth)
                c = lmq_fail(err, code, "%s:%zu:%zu: nested deeper than %d levels", name, line, col, max_depth);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_ALIAS_EVENT: c = lmq_fail(err, code, "%s:%zu:%zu: YAML aliases are not allowed", name, line, col); break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return c;
}

lmq_code lmq_yaml_load(const char *text, size_t len, const char *name, int max_depth, lmq_code code,
                       yaml_document_t *doc, lmq_err *err)
{
    lmq_code c = prescan(text, len, name, max_depth, code, err);
    if (c)
        return c;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return lmq_fail(err, LMQ_E_NOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, doc))
        c = syntax_error(&p, name, code, err);
    yaml_parser_delete(&p);
    return c;
}
