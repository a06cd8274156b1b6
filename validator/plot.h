/* An SVG of predicted against measured time per op (validator/plot.c), drawn
 * by gnuplot: no CUDA, so the CPU tests exercise it. */
#ifndef SEXTANT_PLOT_H
#define SEXTANT_PLOT_H

/* Writes `path` (through outfile.c: a regular file or a new path, whole): one
 * labelled point per op with both times > 0, on log axes, and the diagonal.
 * Returns 0 when written, 1 on failure (one stderr line, no file left
 * behind), and 2 when gnuplot is not installed (one stderr line, no file). */
int plot_predicted_measured(const char *path, const char *title, const char *const *ops, const double *predicted_s,
                            const double *measured_s, int n);

#endif
