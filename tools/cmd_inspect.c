/* Placeholder until the inspect stage lands. */
#include <stdio.h>

#include "tools/cmd.h"

int cmd_inspect(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lmq inspect: not built yet\n");
    return 2;
}
