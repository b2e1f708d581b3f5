/* lmq manifest: an artefact's manifest alone, as stored (YAML) or converted to JSON. Reads only
 * the header, index and manifest, as inspect does. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/yaml_json.h"
#include "formats/container.h"
#include "tools/args.h"
#include "tools/cmd.h"

int cmd_manifest(int argc, char **argv)
{
    static const char usage[] = "usage: lmq manifest A.lmq [--json]\n"
                                "Prints the artefact's manifest (models and statistics files alike): the\n"
                                "YAML text as stored, or with --json the same document as JSON (plain\n"
                                "numbers, booleans and nulls typed; .inf, .nan and quoted values strings).\n";
    int json = 0;
    const arg_opt opts[] = { { "--json", NULL, NULL, &json }, { 0 } };
    const char *path = NULL;
    int n_pos;
    int rc = args_parse(argc, argv, opts, &path, 1, &n_pos, usage);
    if (rc >= 0)
        return rc;
    if (n_pos != 1) {
        fputs(usage, stderr);
        return 2;
    }
    lmq_container c;
    lmq_err err = { 0 };
    if (lmq_container_open(&c, path, &err)) {
        fprintf(stderr, "lmq manifest: %s\n", err.msg);
        return 1;
    }
    rc = 0;
    if (!json) {
        fwrite(c.manifest, 1, c.manifest_size, stdout);
        if (c.manifest_size && c.manifest[c.manifest_size - 1] != '\n')
            putchar('\n');
    } else {
        json_t *doc;
        if (lmq_yaml_to_json(c.manifest, c.manifest_size, path, &doc, &err)) {
            fprintf(stderr, "lmq manifest: %s\n", err.msg);
            rc = 1;
        } else {
            json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
            putchar('\n');
            json_decref(doc);
        }
    }
    lmq_container_close(&c);
    return rc;
}
