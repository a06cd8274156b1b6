/* Predicted against measured time per op on log axes, the diagonal drawn:
 * the worst-predicted op is the point farthest from it (plot.h). */
#include "plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* gnuplot reads single-quoted strings: a quote in a name or path would end them */
static int quotable(const char *s) { return strchr(s, '\'') == NULL && strchr(s, '\n') == NULL; }

int plot_predicted_measured(const char *path, const char *title, const char *const *ops, const double *predicted_s,
                            const double *measured_s, int n)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "sextant-gpu: --plot needs gnuplot (Debian: apt-get install gnuplot-nox); no plot written\n");
        return 2;
    }
    if (!quotable(path) || !quotable(title)) {
        fprintf(stderr, "sextant-gpu: --plot %s: a quote or newline in the path or title\n", path);
        return 1;
    }
    char script[4200], tmp[4200];
    snprintf(script, sizeof script, "%s.gp.tmp", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(script, "w");
    if (!f) { fprintf(stderr, "sextant-gpu: --plot %s: cannot write\n", path); return 1; }
    /* noenhanced: op names hold underscores, which enhanced text would turn into subscripts */
    fprintf(f, "set terminal svg size 900,700 dynamic noenhanced\nset output '%s'\nset logscale xy\n", tmp);
    fprintf(f, "set title '%s'\nset xlabel 'measured ms'\nset ylabel 'predicted ms'\nset key top left\n", title);
    fprintf(f, "$ops << EOD\n");
    int points = 0;
    for (int i = 0; i < n; i++)
        if (predicted_s[i] > 0 && measured_s[i] > 0 && quotable(ops[i]) && !strchr(ops[i], ' ')) {
            fprintf(f, "%.6f %.6f %s\n", measured_s[i] * 1e3, predicted_s[i] * 1e3, ops[i]);
            points++;
        }
    fprintf(f, "EOD\nplot $ops using 1:2 with points pt 7 title 'op', $ops using 1:2:3 with labels offset 1,0.5 font ',8' "
               "notitle, x title 'prediction = measurement' lc rgb 'gray'\n");
    if (fclose(f) != 0 || points == 0) {
        fprintf(stderr, "sextant-gpu: --plot %s: %s\n", path, points ? "cannot write the script" : "no op has both times");
        remove(script);
        return 1;
    }
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>/dev/null", script);
    int rc = system(cmd);
    remove(script);
    if (rc != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "sextant-gpu: --plot %s: gnuplot failed\n", path);
        remove(tmp);
        return 1;
    }
    return 0;
}
