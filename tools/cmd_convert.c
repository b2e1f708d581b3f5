/* Placeholder until the convert stage lands. */
#include <stdio.h>

#include "tools/cmd.h"

int cmd_convert(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lmq convert: not built yet\n");
    return 2;
}
