#include "common/glob.h"

#include <stddef.h>

int lmq_glob_match(const char *p, const char *s)
{
    /* Greedy with one backtrack point: on a mismatch after a '*', let that '*' eat one more
     * character. Linear in practice, never exponential. */
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = ++p;
            resume = s;
        } else if (*p == '?' || *p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}
