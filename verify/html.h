/* lmq verify --html: the side-by-side report as one self-contained HTML page (inline CSS and
 * SVG; no script, nothing fetched): the tables, quality (KL mean, ΔPPL) against bits per
 * weight, the KL distribution of each artefact, and each artefact's relative error per tensor
 * by layer, read from its manifest. Every string that comes from an artefact or a path is
 * escaped; bytes that are not UTF-8, and control characters, show as '?'. */
#ifndef LMQ_VF_HTML_H
#define LMQ_VF_HTML_H

#include <stdio.h>

#include "verify/report.h"

/* Writes the page. A manifest that cannot be read again, or memory that runs out, is said in
 * the page where its plot would be; the rest is written. */
void vf_report_html(FILE *f, const vf_report *r);

/* text with & < > " ' as character references and invalid UTF-8 or control bytes as '?'. */
void vf_html_escape(FILE *f, const char *text);

#endif
