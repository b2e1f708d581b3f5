/* Placeholder until the generate stage lands. */
#include <stdio.h>

#include "tools/cmd.h"

int cmd_generate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lmq generate: not built yet\n");
    return 2;
}
