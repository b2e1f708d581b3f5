/* Placeholder until the quantize stage lands. */
#include <stdio.h>

#include "tools/cmd.h"

int cmd_quantize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lmq quantize: not built yet\n");
    return 2;
}
