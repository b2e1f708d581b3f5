/* Placeholder until the audit stage lands. */
#include <stdio.h>

#include "tools/cmd.h"

int cmd_audit(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lmq audit: not built yet\n");
    return 2;
}
