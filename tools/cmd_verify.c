/* Placeholder until the verify stage lands. */
#include <stdio.h>

#include "tools/cmd.h"

int cmd_verify(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lmq verify: not built yet\n");
    return 2;
}
