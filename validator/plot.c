/* Predicted against measured time per op on log axes, the diagonal drawn:
 * the worst-predicted op is the point farthest from it (plot.h).  gnuplot
 * runs through planner/gnuplot.c: the path never enters the script and the
 * title is quoted by gnuplot's rules. */
#include "plot.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gnuplot.h"

/* an op name as a datablock label: letters, digits and _.:- only (a space would split the columns, a '#'
 * start a comment, and a line "EOD" end the block) */
static int plain_label(const char *s)
{
    if (!*s || !strcmp(s, "EOD")) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.:-", *s)) return 0;
    return 1;
}

int plot_predicted_measured(const char *path, const char *title, const char *const *ops, const double *predicted_s,
                            const double *measured_s, int n)
{
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    if (!f) { fprintf(stderr, "sextant-gpu: --plot %s: out of memory\n", path); return 1; }
    /* noenhanced: op names hold underscores, which enhanced text would turn into subscripts */
    fprintf(f, "set terminal svg size 900,700 dynamic noenhanced\nset logscale xy\nset title ");
    gnuplot_quote(f, title);
    fprintf(f, "\nset xlabel 'measured ms'\nset ylabel 'predicted ms'\nset key top left\n$ops << EOD\n");
    int points = 0;
    for (int i = 0; i < n; i++)
        if (predicted_s[i] > 0 && measured_s[i] > 0 && plain_label(ops[i])) {
            fprintf(f, "%.6f %.6f %s\n", measured_s[i] * 1e3, predicted_s[i] * 1e3, ops[i]);
            points++;
        }
    fprintf(f, "EOD\nplot $ops using 1:2 with points pt 7 title 'op', $ops using 1:2:3 with labels offset 1,0.5 font ',8' "
               "notitle, x title 'prediction = measurement' lc rgb 'gray'\n");
    if (fclose(f) != 0 || points == 0) {
        fprintf(stderr, "sextant-gpu: --plot %s: %s\n", path, points ? "out of memory" : "no op has both times");
        free(script);
        return 1;
    }
    char err[8600];
    int rc = gnuplot_render(script, path, err, sizeof err);
    free(script);
    if (rc) fprintf(stderr, "sextant-gpu: --plot: %s%s\n", err, rc == 2 ? "; no plot written" : "");
    return rc;
}
