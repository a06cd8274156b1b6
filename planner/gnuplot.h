/* Plots drawn by gnuplot without ever reading a user string as gnuplot code
 * (planner/gnuplot.c): plan --plot and the validator's --plot. */
#ifndef SEXTANT_GNUPLOT_H
#define SEXTANT_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

/* Renders the gnuplot `script` to `path` (through outfile_open): gnuplot runs
 * without a shell, reads the script on its standard input and writes the
 * image to its standard output, so no path ever appears in the script.
 * Returns 0 when written, 1 on failure (`err` holds gnuplot's own error line
 * when it gave one), 2 when gnuplot is not installed; nothing is left behind
 * on 1 or 2. */
int gnuplot_render(const char *script, const char *path, char *err, size_t errlen);
/* Writes `text` to `f` as a gnuplot single-quoted string: a quote doubled,
 * control characters (a newline would end the command) as '?'.  Inside single
 * quotes gnuplot expands neither backquotes nor macros. */
void gnuplot_quote(FILE *f, const char *text);

#endif
