/* Glob patterns over tensor names (recipes' rules, audit policies' scheme rules). */
#ifndef LMQ_GLOB_H
#define LMQ_GLOB_H

/* fnmatch-style glob without FNM_PATHNAME: '*' matches any run of characters (dots too),
 * '?' one character, everything else itself. */
int lmq_glob_match(const char *pattern, const char *name);

#endif
